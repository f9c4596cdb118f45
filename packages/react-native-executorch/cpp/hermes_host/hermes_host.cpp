// rne_hermes_host: the package's JavaScript on Hermes, the engine React Native apps run, over the
// real JSI binding (cpp/jsi, installed by rne::jsi::install as on a phone) and the real runner.
// A bare Hermes runtime has no React Native around it, so this host supplies what React Native's
// native side would: the JS thread's event loop (the CallInvoker the binding delivers results
// through, timers) and `__rneHost`, the driver's window on the process (files, clock, memory,
// garbage collection). Run by tests/package/test_hermes_host.py; docs/distribution.md.
//
// usage: rne_hermes_host BUNDLE.hbc PTE TOKENIZER_DIR [TIMEOUT_S]
// Exit status: the driver's (finish(code)), 1 on an uncaught JS error, 2 on bad arguments,
// 124 when the driver has not finished within TIMEOUT_S (default 600).

#include <ReactCommon/CallInvoker.h>
#include <hermes/hermes.h>
#include <jsi/instrumentation.h>
#include <jsi/jsi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <future>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rne_jsi.h"

namespace {

namespace j = facebook::jsi;
using Clock = std::chrono::steady_clock;
using Task = std::function<void(j::Runtime&)>;

// The JS thread: tasks other threads post (the binding's results and tokens) and timers, each
// followed by the microtasks (promise reactions) it queued, as React Native's JS thread runs.
class EventLoop {
 public:
  explicit EventLoop(j::Runtime& rt) : rt_(rt), thread_(std::this_thread::get_id()) {}

  bool onLoopThread() const { return std::this_thread::get_id() == thread_; }

  void post(Task task) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    wake_.notify_one();
  }

  // Timers are created and fired on the loop thread only; no lock.
  double setTimeout(j::Function callback, double ms) {
    const double id = ++last_timer_;
    const auto due = Clock::now() + std::chrono::microseconds(static_cast<int64_t>(ms * 1000));
    timers_.emplace(id, Timer{due, std::make_shared<j::Function>(std::move(callback))});
    return id;
  }
  void clearTimeout(double id) { timers_.erase(id); }

  void finish(int code) {
    exit_code_ = code;
    finished_ = true;
  }

  // Runs tasks and timers until the driver calls finish(), or `deadline`: returns the exit code.
  int run(Clock::time_point deadline) {
    rt_.drainMicrotasks();
    while (!finished_) {
      if (Clock::now() >= deadline) {
        std::cerr << "rne_hermes_host: the driver did not finish in time\n";
        return 124;
      }
      Task task;
      std::shared_ptr<j::Function> timer;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        const auto next = nextTimer();
        const auto wake_at = next == timers_.end() ? deadline : std::min(deadline, next->second.due);
        wake_.wait_until(lock, wake_at, [&] { return !tasks_.empty(); });
        if (!tasks_.empty()) {
          task = std::move(tasks_.front());
          tasks_.pop_front();
        }
      }
      if (task) {
        task(rt_);
      } else if (auto next = nextTimer(); next != timers_.end() && next->second.due <= Clock::now()) {
        timer = std::move(next->second.callback);
        timers_.erase(next);
        timer->call(rt_);
      }
      rt_.drainMicrotasks();
    }
    // JS values must go before the runtime: the timers still pending hold functions.
    timers_.clear();
    return exit_code_;
  }

 private:
  struct Timer {
    Clock::time_point due;
    std::shared_ptr<j::Function> callback;
  };

  std::map<double, Timer>::iterator nextTimer() {
    auto best = timers_.end();
    for (auto it = timers_.begin(); it != timers_.end(); ++it) {
      if (best == timers_.end() || it->second.due < best->second.due) best = it;
    }
    return best;
  }

  j::Runtime& rt_;
  const std::thread::id thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Task> tasks_;
  std::map<double, Timer> timers_;  // by id, in creation order (equal due times fire in order)
  double last_timer_ = 0;
  bool finished_ = false;
  int exit_code_ = 0;
};

// React Native's CallInvoker over the loop: what the binding schedules its JS work through.
class LoopInvoker : public facebook::react::CallInvoker {
 public:
  explicit LoopInvoker(EventLoop& loop) : loop_(loop) {}

  void invokeAsync(facebook::react::CallFunc&& func) noexcept override { loop_.post(std::move(func)); }

  void invokeSync(facebook::react::CallFunc&& func) override {
    if (loop_.onLoopThread()) {
      throw std::logic_error("invokeSync on the JS thread: call the function directly");
    }
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> finished = done->get_future();
    loop_.post([func = std::move(func), done](j::Runtime& rt) {
      func(rt);
      done->set_value();
    });
    finished.wait();
  }

 private:
  EventLoop& loop_;
};

// The bytecode file, kept alive as long as the runtime runs code from it.
class FileBuffer : public j::Buffer {
 public:
  explicit FileBuffer(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  size_t size() const override { return bytes_.size(); }
  const uint8_t* data() const override { return bytes_.data(); }

 private:
  std::vector<uint8_t> bytes_;
};

bool readFile(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

double residentBytes() {
  std::ifstream statm("/proc/self/statm");
  double pages_total = 0, pages_resident = 0;
  statm >> pages_total >> pages_resident;
  return pages_resident * static_cast<double>(sysconf(_SC_PAGESIZE));
}

using HostFn = std::function<j::Value(j::Runtime&, const j::Value*, size_t)>;

void setFunction(j::Runtime& rt, j::Object& target, const char* name, unsigned arity, HostFn fn) {
  target.setProperty(
      rt, name,
      j::Function::createFromHostFunction(
          rt, j::PropNameID::forAscii(rt, name), arity,
          [fn = std::move(fn), name, arity](j::Runtime& rt, const j::Value&, const j::Value* args,
                                            size_t count) -> j::Value {
            if (count < arity) {
              throw j::JSError(rt, std::string(name) + " takes " + std::to_string(arity) +
                                       " argument(s), got " + std::to_string(count));
            }
            return fn(rt, args, count);
          }));
}

std::string stringArg(j::Runtime& rt, const j::Value* args, const char* what) {
  if (!args[0].isString()) throw j::JSError(rt, std::string(what) + " takes a string");
  return args[0].asString(rt).utf8(rt);
}

// globalThis.__rneHost (driver.ts's Host), setTimeout and clearTimeout.
void installHost(j::Runtime& rt, EventLoop& loop, const std::string& pte,
                 const std::string& tokenizer_dir) {
  j::Object host(rt);
  host.setProperty(rt, "engine", j::String::createFromAscii(rt, "hermes (" + rt.description() + ")"));
  j::Object args(rt);
  args.setProperty(rt, "pte", j::String::createFromUtf8(rt, pte));
  args.setProperty(rt, "tokenizerDir", j::String::createFromUtf8(rt, tokenizer_dir));
  host.setProperty(rt, "args", args);
  setFunction(rt, host, "print", 1, [](j::Runtime& rt, const j::Value* args, size_t) {
    std::cout << args[0].toString(rt).utf8(rt) << std::endl;
    return j::Value::undefined();
  });
  setFunction(rt, host, "now", 0, [](j::Runtime&, const j::Value*, size_t) {
    return j::Value(std::chrono::duration<double, std::milli>(Clock::now().time_since_epoch()).count());
  });
  setFunction(rt, host, "readText", 1, [](j::Runtime& rt, const j::Value* args, size_t) {
    const std::string path = stringArg(rt, args, "readText(path)");
    std::string text;
    if (!readFile(path, text)) throw j::JSError(rt, "cannot read " + path + ": " + std::strerror(errno));
    return j::Value(j::String::createFromUtf8(rt, text));
  });
  setFunction(rt, host, "stat", 1, [](j::Runtime& rt, const j::Value* args, size_t) {
    struct stat info {};
    if (::stat(stringArg(rt, args, "stat(path)").c_str(), &info) != 0) return j::Value::null();
    j::Object out(rt);
    out.setProperty(rt, "size", static_cast<double>(info.st_size));
    out.setProperty(rt, "isDirectory", S_ISDIR(info.st_mode));
    out.setProperty(rt, "mtimeMs", static_cast<double>(info.st_mtim.tv_sec) * 1000 +
                                       static_cast<double>(info.st_mtim.tv_nsec) / 1e6);
    return j::Value(std::move(out));
  });
  setFunction(rt, host, "collectGarbage", 0, [](j::Runtime& rt, const j::Value*, size_t) {
    rt.instrumentation().collectGarbage("rne_hermes_host");
    return j::Value::undefined();
  });
  setFunction(rt, host, "residentBytes", 0,
              [](j::Runtime&, const j::Value*, size_t) { return j::Value(residentBytes()); });
  setFunction(rt, host, "finish", 1, [&loop](j::Runtime& rt, const j::Value* args, size_t) {
    if (!args[0].isNumber()) throw j::JSError(rt, "finish(code) takes a number");
    loop.finish(static_cast<int>(args[0].getNumber()));
    return j::Value::undefined();
  });
  rt.global().setProperty(rt, "__rneHost", host);

  j::Object global = rt.global();
  setFunction(rt, global, "setTimeout", 1, [&loop](j::Runtime& rt, const j::Value* args, size_t count) {
    if (!args[0].isObject() || !args[0].asObject(rt).isFunction(rt)) {
      throw j::JSError(rt, "setTimeout(callback, ms): callback must be a function");
    }
    const double ms = count > 1 && args[1].isNumber() ? std::max(0.0, args[1].getNumber()) : 0;
    return j::Value(loop.setTimeout(args[0].asObject(rt).asFunction(rt), ms));
  });
  setFunction(rt, global, "clearTimeout", 0, [&loop](j::Runtime&, const j::Value* args, size_t count) {
    if (count > 0 && args[0].isNumber()) loop.clearTimeout(args[0].getNumber());
    return j::Value::undefined();
  });
}

int run(const std::string& bundle_path, const std::string& pte, const std::string& tokenizer_dir,
        double timeout_s) {
  std::string bytes;
  if (!readFile(bundle_path, bytes)) {
    std::cerr << "rne_hermes_host: cannot read " << bundle_path << ": " << std::strerror(errno) << "\n";
    return 2;
  }
  auto buffer = std::make_shared<FileBuffer>(std::vector<uint8_t>(bytes.begin(), bytes.end()));
  // Source text would be compiled here; the check is of what apps ship, bytecode from hermesc.
  auto* hermes = j::castInterface<facebook::hermes::IHermesRootAPI>(facebook::hermes::makeHermesRootAPI());
  std::string why;
  if (!hermes->hermesBytecodeSanityCheck(buffer->data(), buffer->size(), &why)) {
    std::cerr << "rne_hermes_host: " << bundle_path << " is not Hermes bytecode this VM (bytecode v"
              << hermes->getBytecodeVersion() << ") runs (" << why
              << "): compile it with this Hermes's hermesc, `-emit-binary`\n";
    return 2;
  }
  // React Native runs promise jobs as microtasks the host drains after each task.
  auto runtime = facebook::hermes::makeHermesRuntime(
      ::hermes::vm::RuntimeConfig::Builder().withMicrotaskQueue(true).build());
  EventLoop loop(*runtime);
  rne::jsi::install(*runtime, std::make_shared<LoopInvoker>(loop), {"android", false, "34"});
  installHost(*runtime, loop, pte, tokenizer_dir);
  int code = 0;
  try {
    runtime->evaluateJavaScript(buffer, bundle_path);
    code = loop.run(Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  } catch (const j::JSIException& error) {  // a JS error (with its stack) or a JSI failure
    std::cerr << "rne_hermes_host: uncaught: " << error.what() << std::endl;
    code = 1;
  }
  if (code != 0) {
    // A failed driver may leave a generation running on the binding's worker, which would
    // deliver into a runtime being torn down: exit without the teardown.
    std::cout.flush();
    std::_Exit(code);
  }
  // What the driver left reachable goes with the runtime; a last collection first, with no JS on
  // the stack, shows the binding's objects survive one. The runtime (and with it the binding and
  // its worker, idle now) goes before the loop its invoker posts to.
  runtime->instrumentation().collectGarbage("rne_hermes_host exit");
  runtime.reset();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 5) {
    std::cerr << "usage: rne_hermes_host BUNDLE.hbc PTE TOKENIZER_DIR [TIMEOUT_S]\n";
    return 2;
  }
  double timeout_s = 600;
  if (argc == 5) {
    char* end = nullptr;
    timeout_s = std::strtod(argv[4], &end);
    if (end == argv[4] || *end != '\0' || timeout_s <= 0) {
      std::cerr << "rne_hermes_host: TIMEOUT_S must be a positive number of seconds, got " << argv[4]
                << "\n";
      return 2;
    }
  }
  return run(argv[1], argv[2], argv[3], timeout_s);
}

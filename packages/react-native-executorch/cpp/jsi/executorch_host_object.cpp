#include "executorch_host_object.h"

#include <ReactCommon/CallInvoker.h>

#include <algorithm>
#include <array>
#include <functional>
#include <string_view>
#include <utility>

#include "rne/runner/backends.h"

namespace rne::jsi {
namespace j = facebook::jsi;
using facebook::react::CallInvoker;

namespace {

// TypeScript backend names and the ExecuTorch delegates that run them.
constexpr std::array<std::pair<std::string_view, const char*>, 3> kBackends{{
    {"mlx", "MLXBackend"},
    {"vulkan", "VulkanBackend"},
    {"xnnpack", "XnnpackBackend"},
}};

// A JS `Error` carrying `code` (one of the runner's error_code_name values), the form the
// TypeScript side (fromNativeError) turns into an ExecutorchError.
j::Value makeError(j::Runtime& rt, std::string_view code, const std::string& message) {
  j::Object error = rt.global()
                        .getPropertyAsFunction(rt, "Error")
                        .callAsConstructor(rt, j::String::createFromUtf8(rt, message))
                        .asObject(rt);
  error.setProperty(rt, "code", j::String::createFromUtf8(rt, std::string(code)));
  return error;
}

j::Value makeError(j::Runtime& rt, const runner::Error& error) {
  return makeError(rt, runner::error_code_name(error.code), error.message);
}

[[noreturn]] void throwInvalid(j::Runtime& rt, const std::string& message) {
  throw j::JSError(rt, makeError(rt, "invalid_argument", message));
}

// The resolve/reject pair (and token callback) of one pending promise. Created, called and
// destroyed on the JS thread only: worker code only moves the shared_ptr along.
struct PendingCall {
  j::Function resolve;
  j::Function reject;
  std::optional<j::Function> on_token;
};
using PendingPtr = std::shared_ptr<PendingCall>;

// `new Promise((resolve, reject) => start(pending))`.
j::Value makePromise(j::Runtime& rt, std::function<void(j::Runtime&, PendingPtr)> start) {
  auto executor = j::Function::createFromHostFunction(
      rt, j::PropNameID::forAscii(rt, "executor"), 2,
      [start = std::move(start)](j::Runtime& rt, const j::Value&, const j::Value* args,
                                 size_t) -> j::Value {
        auto pending = std::make_shared<PendingCall>(
            PendingCall{args[0].asObject(rt).asFunction(rt), args[1].asObject(rt).asFunction(rt),
                        std::nullopt});
        start(rt, std::move(pending));
        return j::Value::undefined();
      });
  return rt.global().getPropertyAsFunction(rt, "Promise").callAsConstructor(rt, executor);
}

j::Value rejected(j::Runtime& rt, std::string_view code, const std::string& message) {
  return makePromise(rt, [code = std::string(code), message](j::Runtime& rt, PendingPtr p) {
    p->reject.call(rt, makeError(rt, code, message));
  });
}

std::string stringArg(j::Runtime& rt, const j::Object& object, const char* name) {
  j::Value value = object.getProperty(rt, name);
  if (!value.isString()) throwInvalid(rt, std::string(name) + " must be a string");
  return value.asString(rt).utf8(rt);
}

double numberArg(j::Runtime& rt, const j::Object& object, const char* name) {
  j::Value value = object.getProperty(rt, name);
  if (!value.isNumber()) throwInvalid(rt, std::string("config.") + name + " must be a number");
  return value.asNumber();
}

runner::GenerationConfig parseConfig(j::Runtime& rt, const j::Value& value) {
  if (!value.isObject()) throwInvalid(rt, "generate(): config must be an object");
  j::Object object = value.asObject(rt);
  runner::GenerationConfig config;
  config.max_new_tokens = static_cast<int32_t>(numberArg(rt, object, "maxNewTokens"));
  config.sampling.temperature = static_cast<float>(numberArg(rt, object, "temperature"));
  config.sampling.top_k = static_cast<int32_t>(numberArg(rt, object, "topK"));
  config.sampling.top_p = static_cast<float>(numberArg(rt, object, "topP"));
  config.sampling.min_p = static_cast<float>(numberArg(rt, object, "minP"));
  config.sampling.repetition_penalty =
      static_cast<float>(numberArg(rt, object, "repetitionPenalty"));
  config.sampling.seed = static_cast<uint64_t>(numberArg(rt, object, "seed"));
  j::Value stops = object.getProperty(rt, "stopStrings");
  if (!stops.isObject() || !stops.asObject(rt).isArray(rt)) {
    throwInvalid(rt, "config.stopStrings must be an array of strings");
  }
  j::Array array = stops.asObject(rt).asArray(rt);
  for (size_t i = 0; i < array.size(rt); ++i) {
    j::Value stop = array.getValueAtIndex(rt, i);
    if (!stop.isString()) throwInvalid(rt, "config.stopStrings must be an array of strings");
    config.stop_strings.push_back(stop.asString(rt).utf8(rt));
  }
  if (auto valid = runner::validate(config.sampling); !valid.ok()) {
    throwInvalid(rt, valid.error().message);
  }
  return config;
}

j::Value statsToJs(j::Runtime& rt, const runner::Stats& stats) {
  j::Object object(rt);
  object.setProperty(rt, "promptTokens", static_cast<double>(stats.prompt_tokens));
  object.setProperty(rt, "generatedTokens", static_cast<double>(stats.generated_tokens));
  object.setProperty(rt, "cacheTokens", static_cast<double>(stats.cache_tokens));
  object.setProperty(rt, "timeToFirstTokenMs", stats.ttft_ms);
  object.setProperty(rt, "prefillMs", stats.prefill_ms);
  object.setProperty(rt, "decodeMs", stats.decode_ms);
  object.setProperty(rt, "prefillTokensPerSecond", stats.prefill_tokens_per_s());
  object.setProperty(rt, "tokensPerSecond", stats.decode_tokens_per_s());
  object.setProperty(rt, "stopReason",
                     j::String::createFromAscii(rt, runner::stop_reason_name(stats.stop_reason)));
  return object;
}

// Runs on the worker: the ids to feed for `prompt`, resetting the runner when the prompt does
// not extend the conversation it holds.
std::vector<int64_t> tokensToFeed(LoadedModel& model, const std::vector<int64_t>& prompt) {
  const auto& held = model.conversation;
  if (!held.empty() && prompt.size() > held.size() &&
      std::equal(held.begin(), held.end(), prompt.begin())) {
    return {prompt.begin() + static_cast<std::ptrdiff_t>(held.size()), prompt.end()};
  }
  model.runner->reset();
  return prompt;
}

}  // namespace

ExecutorchHostObject::ExecutorchHostObject(std::shared_ptr<CallInvoker> js_invoker,
                                           PlatformInfo platform)
    : js_invoker_(std::move(js_invoker)),
      platform_(std::move(platform)),
      worker_(std::make_unique<WorkQueue>()) {}

ExecutorchHostObject::~ExecutorchHostObject() {
  // The runtime is going away: stop generations so the worker drains quickly.
  for (auto& [handle, model] : models_) {
    if (model->runner) model->runner->interrupt();
  }
  worker_.reset();
}

std::vector<j::PropNameID> ExecutorchHostObject::getPropertyNames(j::Runtime& rt) {
  std::vector<j::PropNameID> names;
  for (const char* name : {"availableBackends", "platformInfo", "loadLLM", "generate",
                           "interrupt", "reset", "stats", "release"}) {
    names.push_back(j::PropNameID::forAscii(rt, name));
  }
  return names;
}

j::Value ExecutorchHostObject::get(j::Runtime& rt, const j::PropNameID& prop) {
  const std::string name = prop.utf8(rt);
  using Method = j::Value (ExecutorchHostObject::*)(j::Runtime&, const j::Value*, size_t);
  auto bind = [&](Method method, unsigned arity) {
    return j::Function::createFromHostFunction(
        rt, prop, arity,
        [this, method](j::Runtime& rt, const j::Value&, const j::Value* args, size_t count) {
          return (this->*method)(rt, args, count);
        });
  };
  if (name == "availableBackends" || name == "platformInfo") {
    const bool backends = name == "availableBackends";
    return j::Function::createFromHostFunction(
        rt, prop, 0, [this, backends](j::Runtime& rt, const j::Value&, const j::Value*, size_t) {
          return backends ? availableBackends(rt) : platformInfo(rt);
        });
  }
  if (name == "loadLLM") return bind(&ExecutorchHostObject::loadLLM, 1);
  if (name == "generate") return bind(&ExecutorchHostObject::generate, 4);
  if (name == "interrupt") return bind(&ExecutorchHostObject::interrupt, 1);
  if (name == "reset") return bind(&ExecutorchHostObject::reset, 1);
  if (name == "stats") return bind(&ExecutorchHostObject::stats, 1);
  if (name == "release") return bind(&ExecutorchHostObject::release, 1);
  return j::Value::undefined();
}

j::Value ExecutorchHostObject::availableBackends(j::Runtime& rt) {
  std::vector<std::string> names;
  for (const auto& [ts_name, delegate] : kBackends) {
    if (!runner::has_backend(delegate)) continue;
    // MLX needs a real Apple GPU; the simulator's Metal cannot run it.
    if (ts_name == "mlx" && platform_.is_simulator) continue;
    names.emplace_back(ts_name);
  }
  j::Array array(rt, names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    array.setValueAtIndex(rt, i, j::String::createFromAscii(rt, names[i]));
  }
  return array;
}

j::Value ExecutorchHostObject::platformInfo(j::Runtime& rt) {
  j::Object info(rt);
  info.setProperty(rt, "os", j::String::createFromUtf8(rt, platform_.os));
  info.setProperty(rt, "isSimulator", platform_.is_simulator);
  info.setProperty(rt, "osVersion", j::String::createFromUtf8(rt, platform_.os_version));
  return info;
}

j::Value ExecutorchHostObject::loadLLM(j::Runtime& rt, const j::Value* args, size_t count) {
  if (count < 1 || !args[0].isObject()) throwInvalid(rt, "loadLLM(options): options is required");
  j::Object options = args[0].asObject(rt);
  std::string model_path = stringArg(rt, options, "modelPath");
  std::string tokenizer_path = stringArg(rt, options, "tokenizerPath");
  std::string backend = stringArg(rt, options, "backend");
  auto known = std::find_if(kBackends.begin(), kBackends.end(),
                            [&](const auto& entry) { return entry.first == backend; });
  if (known == kBackends.end()) {
    return rejected(rt, "invalid_argument", "Unknown backend \"" + backend + "\"");
  }
  if (!runner::has_backend(known->second)) {
    return rejected(rt, "invalid_argument",
                    "This app's native binary was built without the " + backend + " backend (" +
                        known->second + ")");
  }
  return makePromise(rt, [this, model_path, tokenizer_path](j::Runtime&, PendingPtr pending) {
    worker_->post([this, model_path, tokenizer_path, pending = std::move(pending)]() mutable {
      auto loaded = runner::LlmRunner::load(model_path, tokenizer_path);
      std::shared_ptr<LoadedModel> model;
      std::optional<runner::Error> error;
      if (loaded.ok()) {
        model = std::make_shared<LoadedModel>();
        model->runner = std::move(loaded).value();
      } else {
        error = loaded.error();
      }
      js_invoker_->invokeAsync([self = weak_from_this(), model = std::move(model),
                                error = std::move(error),
                                pending = std::move(pending)](j::Runtime& rt) {
        auto host = self.lock();
        if (!host) return;  // the runtime is being torn down
        if (error) {
          pending->reject.call(rt, makeError(rt, *error));
          return;
        }
        const int64_t handle = host->next_handle_++;
        host->models_.emplace(handle, model);
        pending->resolve.call(rt, static_cast<double>(handle));
      });
    });
  });
}

std::shared_ptr<LoadedModel> ExecutorchHostObject::model(j::Runtime& rt, const j::Value* args,
                                                         size_t count) {
  if (count < 1 || !args[0].isNumber()) throwInvalid(rt, "The first argument must be a handle");
  auto found = models_.find(static_cast<int64_t>(args[0].asNumber()));
  if (found == models_.end()) {
    throwInvalid(rt, "Model handle " + std::to_string(static_cast<int64_t>(args[0].asNumber())) +
                         " is not loaded (released?)");
  }
  return found->second;
}

j::Value ExecutorchHostObject::generate(j::Runtime& rt, const j::Value* args, size_t count) {
  auto model = this->model(rt, args, count);
  if (count < 4 || !args[1].isString() || !args[3].isObject() ||
      !args[3].asObject(rt).isFunction(rt)) {
    throwInvalid(rt, "generate(handle, prompt: string, config, onToken: function)");
  }
  std::string prompt = args[1].asString(rt).utf8(rt);
  runner::GenerationConfig config = parseConfig(rt, args[2]);
  if (model->running.exchange(true)) {
    return rejected(rt, "busy", "generate() is already running on this model; await it or "
                                "call interrupt() first");
  }
  model->stop_requested.store(false);
  j::Function on_token = args[3].asObject(rt).asFunction(rt);
  return makePromise(rt, [this, model, prompt = std::move(prompt), config = std::move(config),
                          on_token = std::make_shared<j::Function>(std::move(on_token))](
                             j::Runtime&, PendingPtr pending) mutable {
    pending->on_token = std::move(*on_token);
    worker_->post([this, model, prompt = std::move(prompt), config = std::move(config),
                   pending = std::move(pending)]() mutable {
      const std::vector<int64_t> tokens = model->runner->encode(prompt, false);
      auto result = model->runner->generate(
          tokensToFeed(*model, tokens), config, [&](std::string_view text) {
            if (model->stop_requested.load()) model->runner->interrupt();
            js_invoker_->invokeAsync([model, pending, piece = std::string(text)](j::Runtime& rt) {
              if (!pending->on_token) return;
              try {
                pending->on_token->call(rt, j::String::createFromUtf8(rt, piece));
              } catch (const j::JSError&) {
                // A throwing callback stops the generation instead of tearing the app down.
                pending->on_token.reset();
                model->runner->interrupt();
              }
            });
          });
      std::optional<runner::Stats> stats;
      std::optional<runner::Error> error;
      if (result.ok()) {
        stats = result.value();
        model->conversation = tokens;
        const auto& generated = model->runner->last_tokens();
        model->conversation.insert(model->conversation.end(), generated.begin(), generated.end());
        std::lock_guard<std::mutex> lock(model->stats_mutex);
        model->last_stats = stats;
      } else {
        error = result.error();
        // The cache may hold a partial prefill: start the next call from scratch.
        model->conversation.clear();
        model->runner->reset();
      }
      model->running.store(false);
      js_invoker_->invokeAsync([stats, error = std::move(error),
                                pending = std::move(pending)](j::Runtime& rt) {
        if (error) {
          pending->reject.call(rt, makeError(rt, *error));
        } else {
          pending->resolve.call(rt, statsToJs(rt, *stats));
        }
      });
    });
  });
}

j::Value ExecutorchHostObject::interrupt(j::Runtime& rt, const j::Value* args, size_t count) {
  auto model = this->model(rt, args, count);
  model->stop_requested.store(true);
  model->runner->interrupt();
  return j::Value::undefined();
}

j::Value ExecutorchHostObject::reset(j::Runtime& rt, const j::Value* args, size_t count) {
  auto model = this->model(rt, args, count);
  if (model->running.load()) {
    throw j::JSError(rt, makeError(rt, "busy", "reset() while generating; interrupt() first"));
  }
  // Queued behind any work on this model, on the thread that owns the runner.
  worker_->post([model] {
    model->conversation.clear();
    model->runner->reset();
  });
  return j::Value::undefined();
}

j::Value ExecutorchHostObject::stats(j::Runtime& rt, const j::Value* args, size_t count) {
  auto model = this->model(rt, args, count);
  std::lock_guard<std::mutex> lock(model->stats_mutex);
  return model->last_stats ? statsToJs(rt, *model->last_stats) : j::Value::null();
}

j::Value ExecutorchHostObject::release(j::Runtime& rt, const j::Value* args, size_t count) {
  auto model = this->model(rt, args, count);
  models_.erase(static_cast<int64_t>(args[0].asNumber()));
  model->stop_requested.store(true);
  model->runner->interrupt();
  // Freed on the worker once a running generation (which holds the model) has returned.
  worker_->post([model]() mutable { model->runner.reset(); });
  return j::Value::undefined();
}

void install(j::Runtime& runtime, std::shared_ptr<CallInvoker> js_invoker, PlatformInfo platform) {
  auto host = std::make_shared<ExecutorchHostObject>(std::move(js_invoker), std::move(platform));
  runtime.global().setProperty(runtime, "__RNExecutorch",
                               j::Object::createFromHostObject(runtime, std::move(host)));
}

}  // namespace rne::jsi

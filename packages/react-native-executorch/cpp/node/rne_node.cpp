// The Node-API host of the native seam (src/native/seam.ts, interface NativeExecutorch), used by
// the end-to-end jest suites to run LLMModule and useLLM on the real runner. Like the JSI host
// (cpp/jsi/executorch_host_object.cpp) it only converts values and hops threads: every
// behaviour is SeamCore's. The module exports one function:
//
//   const seam = require('rne_node.node').create({ os: 'android', isSimulator: false, osVersion: '34' });
//
// and, outside the seam, tokenize(tokenizerPath, text): the ids the runner feeds for a prompt,
// so tests can compare TypeScript's chat templates with the reference token ids.
//
// Worker-thread results and tokens reach the JS thread through one threadsafe function (a FIFO
// queue, so tokens arrive in order and before their promise settles).
#include <node_api.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rne/tokenizer/tokenizer.h"
#include "chat_render.h"
#include "seam_core.h"

namespace rne::node {
namespace {

using seam::Error;
using seam::Handle;
using seam::Result;

// Schedules closures on the JS thread from any thread, in order. Keeps the event loop alive only
// while the host has calls in flight (hold / letGo, on the JS thread).
class JsThread {
 public:
  using Task = std::function<void(napi_env)>;

  explicit JsThread(napi_env env) {
    napi_value name;
    napi_create_string_utf8(env, "rne_node", NAPI_AUTO_LENGTH, &name);
    // When the environment shuts down, Node destroys the function before running our objects'
    // finalizers; its finalize callback tells us, so nothing touches it afterwards.
    napi_create_threadsafe_function(env, nullptr, nullptr, name, 0, 1,
                                    new std::shared_ptr<std::atomic<bool>>(alive_), &JsThread::finalized,
                                    nullptr, &JsThread::run, &tsfn_);
    napi_unref_threadsafe_function(env, tsfn_);
  }
  ~JsThread() {
    if (*alive_) napi_release_threadsafe_function(tsfn_, napi_tsfn_release);
  }
  JsThread(const JsThread&) = delete;
  JsThread& operator=(const JsThread&) = delete;

  void post(Task task) {
    if (!*alive_) return;  // the environment is gone: nobody is left to run it
    auto* owned = new Task(std::move(task));
    if (napi_call_threadsafe_function(tsfn_, owned, napi_tsfn_blocking) != napi_ok) delete owned;
  }
  void hold(napi_env env) {
    if (in_flight_++ == 0) napi_ref_threadsafe_function(env, tsfn_);
  }
  void letGo(napi_env env) {
    if (--in_flight_ == 0) napi_unref_threadsafe_function(env, tsfn_);
  }

 private:
  static void run(napi_env env, napi_value, void*, void* data) {
    std::unique_ptr<Task> task(static_cast<Task*>(data));
    if (env != nullptr) (*task)(env);  // null while the environment shuts down
  }

  static void finalized(napi_env, void* data, void*) {
    std::unique_ptr<std::shared_ptr<std::atomic<bool>>> alive(
        static_cast<std::shared_ptr<std::atomic<bool>>*>(data));
    **alive = false;
  }

  std::shared_ptr<std::atomic<bool>> alive_ = std::make_shared<std::atomic<bool>>(true);
  napi_threadsafe_function tsfn_ = nullptr;
  int in_flight_ = 0;  // JS thread only
};

// One seam object: the core and the queue back to the JS thread. Destroyed once the last of its
// methods is garbage-collected; the core first, so its worker drains while the queue exists.
struct Host {
  std::shared_ptr<JsThread> js;
  std::shared_ptr<seam::SeamCore> core;  // declared last: destroyed first
};

napi_value undefined(napi_env env) {
  napi_value value;
  napi_get_undefined(env, &value);
  return value;
}

napi_value jsString(napi_env env, const std::string& text) {
  napi_value value;
  napi_create_string_utf8(env, text.data(), text.size(), &value);
  return value;
}

napi_value jsNumber(napi_env env, double number) {
  napi_value value;
  napi_create_double(env, number, &value);
  return value;
}

// An `Error` with `code` (one of the runner's error_code_name values), what fromNativeError reads.
napi_value makeError(napi_env env, const Error& error) {
  napi_value value;
  napi_create_error(env, jsString(env, runner::error_code_name(error.code)),
                    jsString(env, error.message), &value);
  return value;
}

napi_value throwError(napi_env env, const Error& error) {
  napi_throw(env, makeError(env, error));
  return nullptr;
}

napi_valuetype typeOf(napi_env env, napi_value value) {
  napi_valuetype type = napi_undefined;
  napi_typeof(env, value, &type);
  return type;
}

std::optional<std::string> stringOf(napi_env env, napi_value value) {
  if (typeOf(env, value) != napi_string) return std::nullopt;
  size_t size = 0;
  napi_get_value_string_utf8(env, value, nullptr, 0, &size);
  std::string text(size, '\0');
  napi_get_value_string_utf8(env, value, text.data(), size + 1, &size);
  return text;
}

// The values of a Float32Array, or nullopt for anything else.
std::optional<std::vector<float>> float32sOf(napi_env env, napi_value value) {
  bool typed = false;
  napi_is_typedarray(env, value, &typed);
  if (!typed) return std::nullopt;
  napi_typedarray_type type;
  size_t length = 0;
  void* data = nullptr;
  napi_get_typedarray_info(env, value, &type, &length, &data, nullptr, nullptr);
  if (type != napi_float32_array) return std::nullopt;
  const auto* values = static_cast<const float*>(data);
  return std::vector<float>(values, values + length);
}

// A prompt argument: a string (all template text) or an array of {text, plain?} and
// {media, path | samples} parts.
std::optional<seam::Prompt> promptOf(napi_env env, napi_value value) {
  if (auto text = stringOf(env, value)) return seam::Prompt{{std::move(*text), false, "", "", {}}};
  bool is_array = false;
  napi_is_array(env, value, &is_array);
  if (!is_array) return std::nullopt;
  uint32_t length = 0;
  napi_get_array_length(env, value, &length);
  seam::Prompt prompt;
  for (uint32_t i = 0; i < length; ++i) {
    napi_value item, text, plain, media, path;
    napi_get_element(env, value, i, &item);
    if (typeOf(env, item) != napi_object) return std::nullopt;
    napi_get_named_property(env, item, "media", &media);
    if (typeOf(env, media) != napi_undefined) {
      napi_value samples;
      napi_get_named_property(env, item, "path", &path);
      napi_get_named_property(env, item, "samples", &samples);
      auto kind = stringOf(env, media);
      if (!kind) return std::nullopt;
      seam::PromptPart part{"", false, std::move(*kind), "", {}};
      if (auto file = stringOf(env, path)) {
        part.path = std::move(*file);
      } else if (auto clip = float32sOf(env, samples)) {
        part.samples = std::move(*clip);
      } else {
        return std::nullopt;
      }
      prompt.push_back(std::move(part));
      continue;
    }
    napi_get_named_property(env, item, "text", &text);
    napi_get_named_property(env, item, "plain", &plain);
    auto part_text = stringOf(env, text);
    bool part_plain = false;
    if (!part_text) return std::nullopt;
    if (typeOf(env, plain) != napi_undefined && napi_get_value_bool(env, plain, &part_plain) != napi_ok) {
      return std::nullopt;
    }
    prompt.push_back({std::move(*part_text), part_plain, "", "", {}});
  }
  return prompt;
}

// seam::ObjectReader over a Node-API object.
class NapiObjectReader : public seam::ObjectReader {
 public:
  NapiObjectReader(napi_env env, napi_value object) : env_(env), object_(object) {}

  bool has(const char* name) const override {
    return typeOf(env_, property(name)) != napi_undefined;
  }

  std::optional<double> number(const char* name) const override {
    napi_value value = property(name);
    double number = 0;
    if (typeOf(env_, value) != napi_number) return std::nullopt;
    napi_get_value_double(env_, value, &number);
    return number;
  }
  std::optional<bool> boolean(const char* name) const override {
    napi_value value = property(name);
    bool flag = false;
    if (typeOf(env_, value) != napi_boolean) return std::nullopt;
    napi_get_value_bool(env_, value, &flag);
    return flag;
  }
  std::optional<std::string> string(const char* name) const override {
    return stringOf(env_, property(name));
  }
  std::optional<std::vector<std::string>> strings(const char* name) const override {
    napi_value array = property(name);
    bool is_array = false;
    napi_is_array(env_, array, &is_array);
    if (!is_array) return std::nullopt;
    uint32_t length = 0;
    napi_get_array_length(env_, array, &length);
    std::vector<std::string> out;
    for (uint32_t i = 0; i < length; ++i) {
      napi_value item;
      napi_get_element(env_, array, i, &item);
      auto text = stringOf(env_, item);
      if (!text) return std::nullopt;
      out.push_back(std::move(*text));
    }
    return out;
  }

 private:
  napi_value property(const char* name) const {
    napi_value value;
    if (napi_get_named_property(env_, object_, name, &value) != napi_ok) return undefined(env_);
    return value;
  }

  napi_env env_;
  napi_value object_;
};

// The arguments of one call and the Host the method belongs to.
struct Call {
  Host* host;
  std::vector<napi_value> args;

  Call(napi_env env, napi_callback_info info) {
    size_t count = 4;
    args.resize(count);
    void* data = nullptr;
    napi_get_cb_info(env, info, &count, args.data(), nullptr, &data);
    args.resize(count);
    host = static_cast<std::shared_ptr<Host>*>(data)->get();
  }
  napi_value arg(napi_env env, size_t i) const { return i < args.size() ? args[i] : undefined(env); }
};

std::optional<NapiObjectReader> objectArg(napi_env env, const Call& call, size_t index) {
  napi_value value = call.arg(env, index);
  if (typeOf(env, value) != napi_object) return std::nullopt;
  return NapiObjectReader(env, value);
}

std::optional<Handle> handleArg(napi_env env, const Call& call) {
  napi_value value = call.arg(env, 0);
  if (typeOf(env, value) != napi_number) return std::nullopt;
  double number = 0;
  napi_get_value_double(env, value, &number);
  return static_cast<Handle>(number);
}

napi_value statsToJs(napi_env env, const runner::Stats& stats) {
  const seam::StatsFields fields = seam::statsFields(stats);
  napi_value object;
  napi_create_object(env, &object);
  for (const auto& [name, value] : fields.numbers) {
    napi_set_named_property(env, object, name, jsNumber(env, value));
  }
  napi_set_named_property(env, object, "stopReason", jsString(env, fields.stop_reason));
  return object;
}

// A promise settled later on the JS thread; `settle` must be called exactly once.
struct Pending {
  napi_deferred deferred = nullptr;
  napi_ref on_token = nullptr;  // generate only

  void settle(napi_env env, JsThread& js, bool ok, napi_value value) {
    if (ok) {
      napi_resolve_deferred(env, deferred, value);
    } else {
      napi_reject_deferred(env, deferred, value);
    }
    if (on_token != nullptr) napi_delete_reference(env, on_token);
    on_token = nullptr;
    js.letGo(env);
  }
};

napi_value AvailableBackends(napi_env env, napi_callback_info info) {
  Call call(env, info);
  const std::vector<std::string> names = call.host->core->availableBackends();
  napi_value array;
  napi_create_array_with_length(env, names.size(), &array);
  for (uint32_t i = 0; i < names.size(); ++i) napi_set_element(env, array, i, jsString(env, names[i]));
  return array;
}

napi_value PlatformInfo(napi_env env, napi_callback_info info) {
  Call call(env, info);
  const seam::PlatformInfo& platform = call.host->core->platformInfo();
  napi_value object, simulator;
  napi_create_object(env, &object);
  napi_get_boolean(env, platform.is_simulator, &simulator);
  napi_set_named_property(env, object, "os", jsString(env, platform.os));
  napi_set_named_property(env, object, "isSimulator", simulator);
  napi_set_named_property(env, object, "osVersion", jsString(env, platform.os_version));
  return object;
}

// A promise of the handle that `start` (loadLLM, createSession) hands to its LoadDone, settled
// on the JS thread; rejected at once when `start` refuses.
template <typename Start>
napi_value handlePromise(napi_env env, const Call& call, Start&& start) {
  auto pending = std::make_shared<Pending>();
  napi_value promise;
  napi_create_promise(env, &pending->deferred, &promise);
  std::shared_ptr<JsThread> js = call.host->js;
  auto started = start([js, pending](Result<Handle> loaded) {
    js->post([js, pending, loaded = std::move(loaded)](napi_env env) {
      pending->settle(env, *js, loaded.ok(),
                      loaded.ok() ? jsNumber(env, static_cast<double>(loaded.value()))
                                  : makeError(env, loaded.error()));
    });
  });
  if (!started.ok()) {
    napi_reject_deferred(env, pending->deferred, makeError(env, started.error()));
    return promise;
  }
  js->hold(env);
  return promise;
}

napi_value LoadLLM(napi_env env, napi_callback_info info) {
  Call call(env, info);
  auto reader = objectArg(env, call, 0);
  if (!reader) return throwError(env, seam::invalidArgument("loadLLM(options) must be an object"));
  auto options = seam::parseLoadOptions(*reader);
  if (!options.ok()) return throwError(env, options.error());

  return handlePromise(env, call, [&](seam::SeamCore::LoadDone done) {
    return call.host->core->loadLLM(std::move(options).value(), std::move(done));
  });
}

// checkMemory(need): undefined, or throws insufficient_memory with the numbers.
napi_value CheckMemory(napi_env env, napi_callback_info info) {
  Call call(env, info);
  auto reader = objectArg(env, call, 0);
  if (!reader) return throwError(env, seam::invalidArgument("checkMemory(need) must be an object"));
  auto need = seam::parseMemoryNeed(*reader);
  if (!need.ok()) return throwError(env, need.error());
  if (auto fits = seam::checkMemoryNeed(*need); !fits.ok()) return throwError(env, fits.error());
  napi_value undefined;
  napi_get_undefined(env, &undefined);
  return undefined;
}

// createSession(handle): a promise of the new session's handle.
napi_value CreateSession(napi_env env, napi_callback_info info) {
  Call call(env, info);
  auto handle = handleArg(env, call);
  if (!handle) {
    return throwError(env, seam::invalidArgument("createSession(handle) takes a model handle"));
  }
  return handlePromise(env, call, [&](seam::SeamCore::LoadDone done) {
    return call.host->core->createSession(*handle, std::move(done));
  });
}

napi_value Generate(napi_env env, napi_callback_info info) {
  Call call(env, info);
  auto handle = handleArg(env, call);
  if (!handle) return throwError(env, seam::invalidArgument("The first argument must be a handle"));
  auto prompt = promptOf(env, call.arg(env, 1));
  napi_value on_token = call.arg(env, 3);
  if (!prompt || typeOf(env, on_token) != napi_function) {
    return throwError(env, seam::invalidArgument(
                               std::string("generate(handle, prompt, config, onToken: function): "
                                           "prompt must be ") + seam::kPromptShape));
  }
  auto reader = objectArg(env, call, 2);
  if (!reader) return throwError(env, seam::invalidArgument("generate(): config must be an object"));
  auto config = seam::parseGenerationConfig(*reader);
  if (!config.ok()) return throwError(env, config.error());

  auto pending = std::make_shared<Pending>();
  napi_value promise;
  napi_create_promise(env, &pending->deferred, &promise);
  napi_create_reference(env, on_token, 1, &pending->on_token);
  std::shared_ptr<JsThread> js = call.host->js;
  std::weak_ptr<seam::SeamCore> core = call.host->core;
  const Handle id = *handle;
  auto on_piece = [js, pending, core, id](std::string piece, int64_t generated) {
    js->post([pending, core, id, generated, piece = std::move(piece)](napi_env env) {
      if (pending->on_token == nullptr) return;
      napi_value callback, global;
      napi_get_reference_value(env, pending->on_token, &callback);
      napi_get_global(env, &global);
      napi_value argv[2] = {jsString(env, piece), jsNumber(env, static_cast<double>(generated))};
      if (napi_call_function(env, global, callback, 2, argv, nullptr) != napi_ok) {
        // A throwing callback stops the generation instead of crashing the process.
        napi_value ignored;
        napi_get_and_clear_last_exception(env, &ignored);
        napi_delete_reference(env, pending->on_token);
        pending->on_token = nullptr;
        if (auto live = core.lock()) (void)live->interrupt(id);
      }
    });
  };
  auto done = [js, pending](Result<runner::Stats> result) {
    js->post([js, pending, result = std::move(result)](napi_env env) {
      pending->settle(env, *js, result.ok(),
                      result.ok() ? statsToJs(env, result.value()) : makeError(env, result.error()));
    });
  };
  auto started = call.host->core->generate(id, std::move(*prompt), std::move(config).value(),
                                           std::move(on_piece), std::move(done));
  if (!started.ok()) {
    napi_delete_reference(env, pending->on_token);
    napi_reject_deferred(env, pending->deferred, makeError(env, started.error()));
    return promise;
  }
  js->hold(env);
  return promise;
}

// A SessionInfo as {fileBytes, tokens, restored: 'cache' | 'prefill', ms, appData}.
napi_value sessionInfoToJs(napi_env env, const runner::SessionInfo& info) {
  napi_value object;
  napi_create_object(env, &object);
  napi_set_named_property(env, object, "fileBytes", jsNumber(env, static_cast<double>(info.file_bytes)));
  napi_set_named_property(env, object, "tokens", jsNumber(env, static_cast<double>(info.tokens)));
  napi_set_named_property(env, object, "restored",
                          jsString(env, runner::session_restore_name(info.restore)));
  napi_set_named_property(env, object, "ms", jsNumber(env, info.ms));
  napi_set_named_property(env, object, "appData", jsString(env, info.app_data));
  return object;
}

// saveSession(handle, path, tokensOnly, appData) / loadSession(handle, path): a promise of the
// session's facts (seam_core.h).
napi_value SessionCall(napi_env env, napi_callback_info info, bool save) {
  Call call(env, info);
  auto handle = handleArg(env, call);
  auto path = stringOf(env, call.arg(env, 1));
  bool tokens_only = false;
  std::optional<std::string> app_data = std::string();
  if (save) {
    app_data = stringOf(env, call.arg(env, 3));
    if (napi_get_value_bool(env, call.arg(env, 2), &tokens_only) != napi_ok) app_data.reset();
  }
  if (!handle || !path || !app_data) {
    return throwError(env, seam::invalidArgument(
                               save ? "saveSession(handle, path: string, tokensOnly: boolean, "
                                      "appData: string)"
                                    : "loadSession(handle, path: string)"));
  }
  auto pending = std::make_shared<Pending>();
  napi_value promise;
  napi_create_promise(env, &pending->deferred, &promise);
  std::shared_ptr<JsThread> js = call.host->js;
  auto done = [js, pending](Result<runner::SessionInfo> result) {
    js->post([js, pending, result = std::move(result)](napi_env env) {
      pending->settle(env, *js, result.ok(),
                      result.ok() ? sessionInfoToJs(env, result.value())
                                  : makeError(env, result.error()));
    });
  };
  auto started = save ? call.host->core->saveSession(*handle, std::move(*path), tokens_only,
                                                     std::move(*app_data), std::move(done))
                      : call.host->core->loadSession(*handle, std::move(*path), std::move(done));
  if (!started.ok()) {
    napi_reject_deferred(env, pending->deferred, makeError(env, started.error()));
    return promise;
  }
  js->hold(env);
  return promise;
}

napi_value SaveSession(napi_env env, napi_callback_info info) { return SessionCall(env, info, true); }
napi_value LoadSession(napi_env env, napi_callback_info info) { return SessionCall(env, info, false); }

// interrupt / reset / release: undefined, or a thrown coded error.
template <Result<void> (seam::SeamCore::*Method)(Handle)>
napi_value HandleCall(napi_env env, napi_callback_info info) {
  Call call(env, info);
  auto handle = handleArg(env, call);
  if (!handle) return throwError(env, seam::invalidArgument("The first argument must be a handle"));
  auto result = (call.host->core.get()->*Method)(*handle);
  if (!result.ok()) return throwError(env, result.error());
  return undefined(env);
}

napi_value Stats(napi_env env, napi_callback_info info) {
  Call call(env, info);
  auto handle = handleArg(env, call);
  if (!handle) return throwError(env, seam::invalidArgument("The first argument must be a handle"));
  auto stats = call.host->core->stats(*handle);
  if (!stats.ok()) return throwError(env, stats.error());
  if (!stats.value()) {
    napi_value null;
    napi_get_null(env, &null);
    return null;
  }
  return statsToJs(env, *stats.value());
}

napi_value CountTokens(napi_env env, napi_callback_info info) {
  Call call(env, info);
  auto handle = handleArg(env, call);
  auto prompt = promptOf(env, call.arg(env, 1));
  if (!handle || !prompt) {
    return throwError(env, seam::invalidArgument(
                               std::string("countTokens(handle, prompt): prompt must be ") +
                               seam::kPromptShape));
  }
  auto count = call.host->core->countTokens(*handle, *prompt);
  if (!count.ok()) return throwError(env, count.error());
  return jsNumber(env, static_cast<double>(count.value()));
}

napi_value MaxContextLength(napi_env env, napi_callback_info info) {
  Call call(env, info);
  auto handle = handleArg(env, call);
  if (!handle) return throwError(env, seam::invalidArgument("The first argument must be a handle"));
  auto length = call.host->core->maxContextLength(*handle);
  if (!length.ok()) return throwError(env, length.error());
  return jsNumber(env, static_cast<double>(length.value()));
}

// renderChatTemplate(request: string): string, synchronous (chat_render.h).
napi_value RenderChatTemplate(napi_env env, napi_callback_info info) {
  Call call(env, info);
  auto request = stringOf(env, call.arg(env, 0));
  if (!request) return throwError(env, seam::invalidArgument("renderChatTemplate(request) takes a JSON string"));
  return jsString(env, seam::renderChatTemplate(*request));
}

napi_callback methodFor(std::string_view name) {
  if (name == "availableBackends") return AvailableBackends;
  if (name == "platformInfo") return PlatformInfo;
  if (name == "checkMemory") return CheckMemory;
  if (name == "loadLLM") return LoadLLM;
  if (name == "generate") return Generate;
  if (name == "interrupt") return HandleCall<&seam::SeamCore::interrupt>;
  if (name == "reset") return HandleCall<&seam::SeamCore::reset>;
  if (name == "stats") return Stats;
  if (name == "countTokens") return CountTokens;
  if (name == "maxContextLength") return MaxContextLength;
  if (name == "renderChatTemplate") return RenderChatTemplate;
  if (name == "saveSession") return SaveSession;
  if (name == "loadSession") return LoadSession;
  if (name == "createSession") return CreateSession;
  return HandleCall<&seam::SeamCore::release>;
}

// create(platform): a new seam object with its own core (own model table and worker).
napi_value Create(napi_env env, napi_callback_info info) {
  size_t count = 1;
  napi_value arg = nullptr;
  napi_get_cb_info(env, info, &count, &arg, nullptr, nullptr);
  if (count < 1 || typeOf(env, arg) != napi_object) {
    return throwError(env, seam::invalidArgument("create(platform: {os, isSimulator, osVersion})"));
  }
  NapiObjectReader reader(env, arg);
  napi_value simulator_value;
  napi_get_named_property(env, arg, "isSimulator", &simulator_value);
  bool is_simulator = false;
  auto os = reader.string("os");
  auto os_version = reader.string("osVersion");
  if (!os || !os_version || napi_get_value_bool(env, simulator_value, &is_simulator) != napi_ok) {
    return throwError(env, seam::invalidArgument(
                               "create(platform): os and osVersion must be strings, isSimulator "
                               "a boolean"));
  }
  auto host = std::make_shared<Host>();
  host->js = std::make_shared<JsThread>(env);
  host->core = std::make_shared<seam::SeamCore>(
      seam::PlatformInfo{std::move(*os), is_simulator, std::move(*os_version)});

  napi_value object;
  napi_create_object(env, &object);
  for (const char* name : seam::kMethodNames) {
    // Each method owns a reference to the host, so no method outlives it.
    auto* owner = new std::shared_ptr<Host>(host);
    napi_value function;
    napi_create_function(env, name, NAPI_AUTO_LENGTH, methodFor(name), owner, &function);
    napi_add_finalizer(
        env, function, owner,
        [](napi_env, void* data, void*) { delete static_cast<std::shared_ptr<Host>*>(data); },
        nullptr, nullptr);
    napi_set_named_property(env, object, name, function);
  }
  return object;
}

// tokenize(tokenizerPath, prompt): the ids generate() prefills for `prompt` (seam::encodePrompt).
napi_value Tokenize(napi_env env, napi_callback_info info) {
  size_t count = 2;
  napi_value args[2] = {nullptr, nullptr};
  napi_get_cb_info(env, info, &count, args, nullptr, nullptr);
  auto path = count == 2 ? stringOf(env, args[0]) : std::nullopt;
  auto prompt = count == 2 ? promptOf(env, args[1]) : std::nullopt;
  if (!path || !prompt) {
    return throwError(env, seam::invalidArgument(
                               std::string("tokenize(tokenizerPath: string, prompt): prompt must be ") +
                               seam::kPromptShape));
  }
  auto tokenizer = tokenizer::Tokenizer::from_file(*path);
  if (!tokenizer.ok()) {
    return throwError(env, Error{runner::ErrorCode::kTokenizer, tokenizer.error().message});
  }
  const std::vector<int64_t> ids = seam::encodePrompt(tokenizer.value(), *prompt);
  napi_value array;
  napi_create_array_with_length(env, ids.size(), &array);
  for (uint32_t i = 0; i < ids.size(); ++i) {
    napi_set_element(env, array, i, jsNumber(env, static_cast<double>(ids[i])));
  }
  return array;
}

napi_value Init(napi_env env, napi_value exports) {
  for (auto [name, callback] : {std::pair{"create", Create}, std::pair{"tokenize", Tokenize}}) {
    napi_value function;
    napi_create_function(env, name, NAPI_AUTO_LENGTH, callback, nullptr, &function);
    napi_set_named_property(env, exports, name, function);
  }
  return exports;
}

}  // namespace
}  // namespace rne::node

NAPI_MODULE(rne_node, rne::node::Init)

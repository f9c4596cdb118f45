#include "executorch_host_object.h"

#include "chat_render.h"

#include <ReactCommon/CallInvoker.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace rne::jsi {
namespace j = facebook::jsi;
using facebook::react::CallInvoker;
using seam::Error;
using seam::Handle;

namespace {

// A JS `Error` carrying `code` (one of the runner's error_code_name values), the form the
// TypeScript side (fromNativeError) turns into an ExecutorchError.
j::Value makeError(j::Runtime& rt, const Error& error) {
  j::Object object = rt.global()
                         .getPropertyAsFunction(rt, "Error")
                         .callAsConstructor(rt, j::String::createFromUtf8(rt, error.message))
                         .asObject(rt);
  object.setProperty(rt, "code",
                     j::String::createFromAscii(rt, runner::error_code_name(error.code)));
  return object;
}

[[noreturn]] void throwError(j::Runtime& rt, const Error& error) {
  throw j::JSError(rt, makeError(rt, error));
}

template <typename T>
T valueOrThrow(j::Runtime& rt, seam::Result<T> result) {
  if (!result.ok()) throwError(rt, result.error());
  return std::move(result).value();
}

void throwIfError(j::Runtime& rt, const seam::Result<void>& result) {
  if (!result.ok()) throwError(rt, result.error());
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
j::Value makePromise(j::Runtime& rt, const std::function<void(j::Runtime&, PendingPtr)>& start) {
  auto executor = j::Function::createFromHostFunction(
      rt, j::PropNameID::forAscii(rt, "executor"), 2,
      [start](j::Runtime& rt, const j::Value&, const j::Value* args, size_t) -> j::Value {
        auto pending = std::make_shared<PendingCall>(
            PendingCall{args[0].asObject(rt).asFunction(rt), args[1].asObject(rt).asFunction(rt),
                        std::nullopt});
        start(rt, std::move(pending));
        return j::Value::undefined();
      });
  return rt.global().getPropertyAsFunction(rt, "Promise").callAsConstructor(rt, executor);
}

// seam::ObjectReader over a JSI object.
class JsiObjectReader : public seam::ObjectReader {
 public:
  JsiObjectReader(j::Runtime& rt, j::Object object) : rt_(rt), object_(std::move(object)) {}

  bool has(const char* name) const override {
    return !object_.getProperty(rt_, name).isUndefined();
  }

  std::optional<double> number(const char* name) const override {
    j::Value value = object_.getProperty(rt_, name);
    return value.isNumber() ? std::optional(value.asNumber()) : std::nullopt;
  }
  std::optional<bool> boolean(const char* name) const override {
    j::Value value = object_.getProperty(rt_, name);
    return value.isBool() ? std::optional(value.getBool()) : std::nullopt;
  }
  std::optional<std::string> string(const char* name) const override {
    j::Value value = object_.getProperty(rt_, name);
    return value.isString() ? std::optional(value.asString(rt_).utf8(rt_)) : std::nullopt;
  }
  std::optional<std::vector<std::string>> strings(const char* name) const override {
    j::Value value = object_.getProperty(rt_, name);
    if (!value.isObject() || !value.asObject(rt_).isArray(rt_)) return std::nullopt;
    j::Array array = value.asObject(rt_).asArray(rt_);
    std::vector<std::string> out;
    for (size_t i = 0; i < array.size(rt_); ++i) {
      j::Value item = array.getValueAtIndex(rt_, i);
      if (!item.isString()) return std::nullopt;
      out.push_back(item.asString(rt_).utf8(rt_));
    }
    return out;
  }

 private:
  j::Runtime& rt_;
  j::Object object_;
};

// The values of a Float32Array (its buffer, offset and length), or nullopt for anything else.
std::optional<std::vector<float>> float32s(j::Runtime& rt, const j::Value& value) {
  if (!value.isObject()) return std::nullopt;
  j::Object array = value.asObject(rt);
  j::Value bytes_per = array.getProperty(rt, "BYTES_PER_ELEMENT");
  j::Value buffer = array.getProperty(rt, "buffer");
  j::Value offset = array.getProperty(rt, "byteOffset");
  j::Value length = array.getProperty(rt, "length");
  if (!bytes_per.isNumber() || bytes_per.getNumber() != 4 || !buffer.isObject() ||
      !buffer.asObject(rt).isArrayBuffer(rt) || !offset.isNumber() || !length.isNumber()) {
    return std::nullopt;
  }
  // Float32Array's constructor name tells it from an Int32Array/Uint32Array of the same width.
  j::Value constructor = array.getProperty(rt, "constructor");
  if (!constructor.isObject() ||
      constructor.asObject(rt).getProperty(rt, "name").toString(rt).utf8(rt) != "Float32Array") {
    return std::nullopt;
  }
  j::ArrayBuffer data = buffer.asObject(rt).getArrayBuffer(rt);
  const size_t start = static_cast<size_t>(offset.getNumber());
  const size_t count = static_cast<size_t>(length.getNumber());
  if (start + count * sizeof(float) > data.size(rt)) return std::nullopt;
  const auto* values = reinterpret_cast<const float*>(data.data(rt) + start);
  return std::vector<float>(values, values + count);
}

// A prompt argument: a string (all template text) or an array of {text, plain?} and
// {media, path | samples} parts.
std::optional<seam::Prompt> promptArg(j::Runtime& rt, const j::Value* args, size_t count,
                                      size_t index) {
  if (count <= index) return std::nullopt;
  const j::Value& value = args[index];
  if (value.isString()) return seam::Prompt{{value.asString(rt).utf8(rt), false, "", "", {}}};
  if (!value.isObject() || !value.asObject(rt).isArray(rt)) return std::nullopt;
  j::Array array = value.asObject(rt).asArray(rt);
  seam::Prompt prompt;
  for (size_t i = 0; i < array.size(rt); ++i) {
    j::Value item = array.getValueAtIndex(rt, i);
    if (!item.isObject()) return std::nullopt;
    j::Object part = item.asObject(rt);
    j::Value media = part.getProperty(rt, "media");
    if (!media.isUndefined()) {
      j::Value path = part.getProperty(rt, "path");
      if (!media.isString()) return std::nullopt;
      seam::PromptPart item{"", false, media.asString(rt).utf8(rt), "", {}};
      if (path.isString()) {
        item.path = path.asString(rt).utf8(rt);
      } else if (auto clip = float32s(rt, part.getProperty(rt, "samples"))) {
        item.samples = std::move(*clip);
      } else {
        return std::nullopt;
      }
      prompt.push_back(std::move(item));
      continue;
    }
    j::Value text = part.getProperty(rt, "text");
    j::Value plain = part.getProperty(rt, "plain");
    if (!text.isString() || !(plain.isUndefined() || plain.isBool())) return std::nullopt;
    prompt.push_back({text.asString(rt).utf8(rt), plain.isBool() && plain.getBool(), "", "", {}});
  }
  return prompt;
}

JsiObjectReader objectArg(j::Runtime& rt, const j::Value* args, size_t count, size_t index,
                          const char* what) {
  if (count <= index || !args[index].isObject()) {
    throwError(rt, seam::invalidArgument(std::string(what) + " must be an object"));
  }
  return JsiObjectReader(rt, args[index].asObject(rt));
}

Handle handleArg(j::Runtime& rt, const j::Value* args, size_t count) {
  if (count < 1 || !args[0].isNumber()) {
    throwError(rt, seam::invalidArgument("The first argument must be a handle"));
  }
  return static_cast<Handle>(args[0].asNumber());
}

j::Value statsToJs(j::Runtime& rt, const runner::Stats& stats) {
  const seam::StatsFields fields = seam::statsFields(stats);
  j::Object object(rt);
  for (const auto& [name, value] : fields.numbers) object.setProperty(rt, name, value);
  object.setProperty(rt, "stopReason", j::String::createFromAscii(rt, fields.stop_reason));
  return object;
}

}  // namespace

ExecutorchHostObject::ExecutorchHostObject(std::shared_ptr<CallInvoker> js_invoker,
                                           PlatformInfo platform)
    : js_invoker_(std::move(js_invoker)),
      core_(std::make_shared<seam::SeamCore>(std::move(platform))) {}

std::vector<j::PropNameID> ExecutorchHostObject::getPropertyNames(j::Runtime& rt) {
  std::vector<j::PropNameID> names;
  for (const char* name : seam::kMethodNames) names.push_back(j::PropNameID::forAscii(rt, name));
  return names;
}

j::Value ExecutorchHostObject::get(j::Runtime& rt, const j::PropNameID& prop) {
  using Method = j::Value (ExecutorchHostObject::*)(j::Runtime&, const j::Value*, size_t);
  static const std::pair<std::string_view, Method> kMethods[] = {
      {"availableBackends", &ExecutorchHostObject::availableBackends},
      {"platformInfo", &ExecutorchHostObject::platformInfo},
      {"checkMemory", &ExecutorchHostObject::checkMemory},
      {"loadLLM", &ExecutorchHostObject::loadLLM},
      {"generate", &ExecutorchHostObject::generate},
      {"interrupt", &ExecutorchHostObject::interrupt},
      {"reset", &ExecutorchHostObject::reset},
      {"stats", &ExecutorchHostObject::stats},
      {"countTokens", &ExecutorchHostObject::countTokens},
      {"maxContextLength", &ExecutorchHostObject::maxContextLength},
      {"release", &ExecutorchHostObject::release},
      {"renderChatTemplate", &ExecutorchHostObject::renderChatTemplate},
      {"saveSession", &ExecutorchHostObject::saveSession},
      {"loadSession", &ExecutorchHostObject::loadSession},
      {"createSession", &ExecutorchHostObject::createSession},
  };
  const std::string name = prop.utf8(rt);
  for (const auto& [method_name, method] : kMethods) {
    if (method_name != name) continue;
    return j::Function::createFromHostFunction(
        rt, prop, 0,
        [this, method](j::Runtime& rt, const j::Value&, const j::Value* args, size_t count) {
          return (this->*method)(rt, args, count);
        });
  }
  return j::Value::undefined();
}

j::Value ExecutorchHostObject::availableBackends(j::Runtime& rt, const j::Value*, size_t) {
  const std::vector<std::string> names = core_->availableBackends();
  j::Array array(rt, names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    array.setValueAtIndex(rt, i, j::String::createFromAscii(rt, names[i]));
  }
  return array;
}

j::Value ExecutorchHostObject::platformInfo(j::Runtime& rt, const j::Value*, size_t) {
  const PlatformInfo& platform = core_->platformInfo();
  j::Object info(rt);
  info.setProperty(rt, "os", j::String::createFromUtf8(rt, platform.os));
  info.setProperty(rt, "isSimulator", platform.is_simulator);
  info.setProperty(rt, "osVersion", j::String::createFromUtf8(rt, platform.os_version));
  return info;
}

j::Value ExecutorchHostObject::checkMemory(j::Runtime& rt, const j::Value* args, size_t count) {
  const seam::MemoryNeed need =
      valueOrThrow(rt, seam::parseMemoryNeed(objectArg(rt, args, count, 0, "checkMemory(need)")));
  throwIfError(rt, seam::checkMemoryNeed(need));
  return j::Value::undefined();
}

j::Value ExecutorchHostObject::loadLLM(j::Runtime& rt, const j::Value* args, size_t count) {
  seam::LoadOptions options =
      valueOrThrow(rt, seam::parseLoadOptions(objectArg(rt, args, count, 0, "loadLLM(options)")));
  return handlePromise(rt, [&](seam::SeamCore::LoadDone done) {
    return core_->loadLLM(std::move(options), std::move(done));
  });
}

// createSession(handle): a promise of the new session's handle.
j::Value ExecutorchHostObject::createSession(j::Runtime& rt, const j::Value* args, size_t count) {
  const Handle handle = handleArg(rt, args, count);
  return handlePromise(rt, [&](seam::SeamCore::LoadDone done) {
    return core_->createSession(handle, std::move(done));
  });
}

j::Value ExecutorchHostObject::handlePromise(
    j::Runtime& rt, const std::function<seam::Result<void>(seam::SeamCore::LoadDone)>& start) {
  return makePromise(rt, [&](j::Runtime& rt, PendingPtr pending) {
    auto started = start([invoker = js_invoker_, pending](seam::Result<Handle> loaded) {
      invoker->invokeAsync([loaded = std::move(loaded), pending](j::Runtime& rt) {
        if (loaded.ok()) {
          pending->resolve.call(rt, static_cast<double>(loaded.value()));
        } else {
          pending->reject.call(rt, makeError(rt, loaded.error()));
        }
      });
    });
    if (!started.ok()) pending->reject.call(rt, makeError(rt, started.error()));
  });
}

j::Value ExecutorchHostObject::generate(j::Runtime& rt, const j::Value* args, size_t count) {
  const Handle handle = handleArg(rt, args, count);
  std::optional<seam::Prompt> prompt = promptArg(rt, args, count, 1);
  if (count < 4 || !prompt || !args[3].isObject() || !args[3].asObject(rt).isFunction(rt)) {
    throwError(rt, seam::invalidArgument(
                       std::string("generate(handle, prompt, config, onToken: function): prompt "
                                   "must be ") + seam::kPromptShape));
  }
  runner::GenerationConfig config = valueOrThrow(
      rt, seam::parseGenerationConfig(objectArg(rt, args, count, 2, "generate(): config")));
  auto on_token = std::make_shared<j::Function>(args[3].asObject(rt).asFunction(rt));
  return makePromise(rt, [&](j::Runtime& rt, PendingPtr pending) {
    pending->on_token = std::move(*on_token);
    std::weak_ptr<seam::SeamCore> core = core_;
    auto on_piece = [invoker = js_invoker_, pending, core, handle](std::string piece,
                                                                   int64_t generated) {
      invoker->invokeAsync([pending, core, handle, generated,
                            piece = std::move(piece)](j::Runtime& rt) {
        if (!pending->on_token) return;
        try {
          pending->on_token->call(rt, j::String::createFromUtf8(rt, piece),
                                  static_cast<double>(generated));
        } catch (const j::JSError&) {
          // A throwing callback stops the generation instead of tearing the app down.
          pending->on_token.reset();
          if (auto live = core.lock()) (void)live->interrupt(handle);
        }
      });
    };
    auto done = [invoker = js_invoker_, pending](seam::Result<runner::Stats> result) {
      invoker->invokeAsync([result = std::move(result), pending](j::Runtime& rt) {
        if (result.ok()) {
          pending->resolve.call(rt, statsToJs(rt, result.value()));
        } else {
          pending->reject.call(rt, makeError(rt, result.error()));
        }
      });
    };
    auto started = core_->generate(handle, std::move(*prompt), std::move(config),
                                   std::move(on_piece), std::move(done));
    if (!started.ok()) pending->reject.call(rt, makeError(rt, started.error()));
  });
}

j::Value ExecutorchHostObject::interrupt(j::Runtime& rt, const j::Value* args, size_t count) {
  throwIfError(rt, core_->interrupt(handleArg(rt, args, count)));
  return j::Value::undefined();
}

j::Value ExecutorchHostObject::reset(j::Runtime& rt, const j::Value* args, size_t count) {
  throwIfError(rt, core_->reset(handleArg(rt, args, count)));
  return j::Value::undefined();
}

j::Value ExecutorchHostObject::stats(j::Runtime& rt, const j::Value* args, size_t count) {
  auto stats = valueOrThrow(rt, core_->stats(handleArg(rt, args, count)));
  return stats ? statsToJs(rt, *stats) : j::Value::null();
}

j::Value ExecutorchHostObject::countTokens(j::Runtime& rt, const j::Value* args, size_t count) {
  const Handle handle = handleArg(rt, args, count);
  std::optional<seam::Prompt> prompt = promptArg(rt, args, count, 1);
  if (!prompt) {
    throwError(rt, seam::invalidArgument(std::string("countTokens(handle, prompt): prompt must be ") +
                                         seam::kPromptShape));
  }
  return static_cast<double>(valueOrThrow(rt, core_->countTokens(handle, *prompt)));
}

// Synchronous on the JS thread: a render takes about a millisecond (chat_render.h).
j::Value ExecutorchHostObject::renderChatTemplate(j::Runtime& rt, const j::Value* args, size_t count) {
  if (count < 1 || !args[0].isString()) {
    throwError(rt, seam::invalidArgument("renderChatTemplate(request) takes a JSON string"));
  }
  return j::String::createFromUtf8(rt, seam::renderChatTemplate(args[0].asString(rt).utf8(rt)));
}

j::Value ExecutorchHostObject::maxContextLength(j::Runtime& rt, const j::Value* args,
                                                size_t count) {
  return static_cast<double>(valueOrThrow(rt, core_->maxContextLength(handleArg(rt, args, count))));
}

j::Value ExecutorchHostObject::release(j::Runtime& rt, const j::Value* args, size_t count) {
  throwIfError(rt, core_->release(handleArg(rt, args, count)));
  return j::Value::undefined();
}

j::Value ExecutorchHostObject::sessionPromise(
    j::Runtime& rt, const std::function<seam::Result<void>(seam::SeamCore::SessionDone)>& start) {
  return makePromise(rt, [&](j::Runtime& rt, PendingPtr pending) {
    auto done = [invoker = js_invoker_, pending](seam::Result<runner::SessionInfo> result) {
      invoker->invokeAsync([result = std::move(result), pending](j::Runtime& rt) {
        if (!result.ok()) {
          pending->reject.call(rt, makeError(rt, result.error()));
          return;
        }
        const runner::SessionInfo& info = result.value();
        j::Object object(rt);
        object.setProperty(rt, "fileBytes", static_cast<double>(info.file_bytes));
        object.setProperty(rt, "tokens", static_cast<double>(info.tokens));
        object.setProperty(rt, "restored",
                           j::String::createFromAscii(rt, runner::session_restore_name(info.restore)));
        object.setProperty(rt, "ms", info.ms);
        object.setProperty(rt, "appData", j::String::createFromUtf8(rt, info.app_data));
        pending->resolve.call(rt, std::move(object));
      });
    };
    auto started = start(std::move(done));
    if (!started.ok()) pending->reject.call(rt, makeError(rt, started.error()));
  });
}

// saveSession(handle, path, tokensOnly, appData): a promise of the session's facts.
j::Value ExecutorchHostObject::saveSession(j::Runtime& rt, const j::Value* args, size_t count) {
  const Handle handle = handleArg(rt, args, count);
  if (count < 4 || !args[1].isString() || !args[2].isBool() || !args[3].isString()) {
    throwError(rt, seam::invalidArgument(
                       "saveSession(handle, path: string, tokensOnly: boolean, appData: string)"));
  }
  std::string path = args[1].asString(rt).utf8(rt);
  std::string app_data = args[3].asString(rt).utf8(rt);
  const bool tokens_only = args[2].getBool();
  return sessionPromise(rt, [&](seam::SeamCore::SessionDone done) {
    return core_->saveSession(handle, std::move(path), tokens_only, std::move(app_data),
                              std::move(done));
  });
}

// loadSession(handle, path): a promise of the session's facts (appData: what was saved).
j::Value ExecutorchHostObject::loadSession(j::Runtime& rt, const j::Value* args, size_t count) {
  const Handle handle = handleArg(rt, args, count);
  if (count < 2 || !args[1].isString()) {
    throwError(rt, seam::invalidArgument("loadSession(handle, path: string)"));
  }
  std::string path = args[1].asString(rt).utf8(rt);
  return sessionPromise(rt, [&](seam::SeamCore::SessionDone done) {
    return core_->loadSession(handle, std::move(path), std::move(done));
  });
}

void install(j::Runtime& runtime, std::shared_ptr<CallInvoker> js_invoker, PlatformInfo platform) {
  auto host = std::make_shared<ExecutorchHostObject>(std::move(js_invoker), std::move(platform));
  runtime.global().setProperty(runtime, "__RNExecutorch",
                               j::Object::createFromHostObject(runtime, std::move(host)));
}

}  // namespace rne::jsi

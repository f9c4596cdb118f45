#include "test_runtime.h"

#include <sstream>
#include <stdexcept>

namespace rne::jsi::testing {
namespace {

struct StringValue : j::Runtime::PointerValue {
  explicit StringValue(std::string s) : text(std::move(s)) {}
  void invalidate() noexcept override { delete this; }
  std::string text;
};

struct ObjectValue : j::Runtime::PointerValue {
  explicit ObjectValue(std::shared_ptr<ObjectData> d) : data(std::move(d)) {}
  void invalidate() noexcept override { delete this; }
  std::shared_ptr<ObjectData> data;
};

[[noreturn]] void unsupported(const char* what) {
  throw j::JSINativeException(std::string(what) + " is not supported by TestRuntime");
}

std::string numberToString(double n) {
  std::ostringstream out;
  out << n;
  return out.str();
}

}  // namespace

TestRuntime::TestRuntime() : global_(std::make_shared<ObjectData>()) {
  defineGlobal("Error", [](j::Runtime& rt, const j::Value&, const j::Value* args, size_t count) {
    j::Object error(rt);
    error.setProperty(rt, "name", j::String::createFromAscii(rt, "Error"));
    error.setProperty(rt, "message", count > 0 ? j::Value(rt, args[0]) : j::Value(j::String::createFromAscii(rt, "")));
    return j::Value(std::move(error));
  });
  defineGlobal("String", [](j::Runtime& rt, const j::Value&, const j::Value* args, size_t count) {
    if (count == 0) return j::Value(j::String::createFromAscii(rt, ""));
    const j::Value& v = args[0];
    if (v.isString()) return j::Value(rt, v);
    if (v.isNumber()) return j::Value(j::String::createFromUtf8(rt, numberToString(v.getNumber())));
    if (v.isBool()) return j::Value(j::String::createFromAscii(rt, v.getBool() ? "true" : "false"));
    if (v.isNull()) return j::Value(j::String::createFromAscii(rt, "null"));
    if (v.isUndefined()) return j::Value(j::String::createFromAscii(rt, "undefined"));
    return j::Value(j::String::createFromAscii(rt, "[object Object]"));
  });
  // new Promise(executor): calls executor(resolve, reject); settling records the outcome in
  // the promise's own properties (there is no microtask queue to run `then` callbacks).
  defineGlobal("Promise", [](j::Runtime& rt, const j::Value&, const j::Value* args, size_t count) {
    if (count < 1 || !args[0].isObject()) throw j::JSError(rt, "Promise needs an executor");
    auto promise = std::make_shared<j::Object>(rt);
    promise->setProperty(rt, "state", j::String::createFromAscii(rt, "pending"));
    auto settle = [promise](const char* state, const char* field) {
      return [promise, state, field](j::Runtime& rt, const j::Value&, const j::Value* a,
                                     size_t n) {
        if (promise->getProperty(rt, "state").getString(rt).utf8(rt) == "pending") {
          promise->setProperty(rt, "state", j::String::createFromAscii(rt, state));
          promise->setProperty(rt, field, n > 0 ? j::Value(rt, a[0]) : j::Value::undefined());
        }
        return j::Value::undefined();
      };
    };
    auto resolve = j::Function::createFromHostFunction(
        rt, j::PropNameID::forAscii(rt, "resolve"), 1, settle("fulfilled", "value"));
    auto reject = j::Function::createFromHostFunction(
        rt, j::PropNameID::forAscii(rt, "reject"), 1, settle("rejected", "reason"));
    args[0].getObject(rt).getFunction(rt).call(rt, resolve, reject);
    return j::Value(rt, *promise);
  });
}

void TestRuntime::defineGlobal(const std::string& name, j::HostFunctionType function) {
  auto data = std::make_shared<ObjectData>();
  data->function = std::move(function);
  Slot slot;
  slot.kind = Slot::Kind::kObject;
  slot.object = std::move(data);
  global_->properties[name] = std::move(slot);
}

std::string TestRuntime::promiseState(const j::Value& promise) {
  return promise.getObject(*this).getProperty(*this, "state").getString(*this).utf8(*this);
}

j::Value TestRuntime::promiseResult(const j::Value& promise) {
  j::Object object = promise.getObject(*this);
  const std::string state = promiseState(promise);
  if (state == "pending") throw std::logic_error("the promise is still pending");
  return object.getProperty(*this, state == "fulfilled" ? "value" : "reason");
}

std::shared_ptr<ObjectData> TestRuntime::dataOf(const j::Pointer& object) {
  return static_cast<const ObjectValue*>(getPointerValue(object))->data;
}

j::Object TestRuntime::wrap(std::shared_ptr<ObjectData> data) {
  return make<j::Object>(new ObjectValue(std::move(data)));
}

Slot TestRuntime::toSlot(const j::Value& value) const {
  Slot slot;
  if (value.isNull()) {
    slot.kind = Slot::Kind::kNull;
  } else if (value.isBool()) {
    slot.kind = Slot::Kind::kBool;
    slot.boolean = value.getBool();
  } else if (value.isNumber()) {
    slot.kind = Slot::Kind::kNumber;
    slot.number = value.getNumber();
  } else if (value.isString()) {
    slot.kind = Slot::Kind::kString;
    slot.string = static_cast<const StringValue*>(getPointerValue(value))->text;
  } else if (value.isObject()) {
    slot.kind = Slot::Kind::kObject;
    slot.object = static_cast<const ObjectValue*>(getPointerValue(value))->data;
  } else if (!value.isUndefined()) {
    unsupported("symbols and bigints");
  }
  return slot;
}

j::Value TestRuntime::fromSlot(const Slot& slot) {
  switch (slot.kind) {
    case Slot::Kind::kUndefined: return j::Value::undefined();
    case Slot::Kind::kNull: return j::Value::null();
    case Slot::Kind::kBool: return j::Value(slot.boolean);
    case Slot::Kind::kNumber: return j::Value(slot.number);
    case Slot::Kind::kString: return j::Value(make<j::String>(new StringValue(slot.string)));
    case Slot::Kind::kObject: return j::Value(wrap(slot.object));
  }
  return j::Value::undefined();
}

j::Value TestRuntime::evaluateJavaScript(const std::shared_ptr<const j::Buffer>&,
                                         const std::string&) {
  unsupported("evaluateJavaScript");
}
std::shared_ptr<const j::PreparedJavaScript> TestRuntime::prepareJavaScript(
    const std::shared_ptr<const j::Buffer>&, std::string) {
  unsupported("prepareJavaScript");
}
j::Value TestRuntime::evaluatePreparedJavaScript(
    const std::shared_ptr<const j::PreparedJavaScript>&) {
  unsupported("evaluatePreparedJavaScript");
}
void TestRuntime::queueMicrotask(const j::Function&) { unsupported("queueMicrotask"); }
bool TestRuntime::drainMicrotasks(int) { return true; }
j::Object TestRuntime::global() { return wrap(global_); }
std::string TestRuntime::description() { return "TestRuntime"; }
bool TestRuntime::isInspectable() { return false; }

j::Runtime::PointerValue* TestRuntime::cloneSymbol(const PointerValue*) { unsupported("symbols"); }
j::Runtime::PointerValue* TestRuntime::cloneBigInt(const PointerValue*) { unsupported("bigints"); }
j::Runtime::PointerValue* TestRuntime::cloneString(const PointerValue* pv) {
  return new StringValue(static_cast<const StringValue*>(pv)->text);
}
j::Runtime::PointerValue* TestRuntime::cloneObject(const PointerValue* pv) {
  return new ObjectValue(static_cast<const ObjectValue*>(pv)->data);
}
j::Runtime::PointerValue* TestRuntime::clonePropNameID(const PointerValue* pv) {
  return cloneString(pv);
}

j::PropNameID TestRuntime::createPropNameIDFromAscii(const char* str, size_t length) {
  return make<j::PropNameID>(new StringValue(std::string(str, length)));
}
j::PropNameID TestRuntime::createPropNameIDFromUtf8(const uint8_t* utf8, size_t length) {
  return make<j::PropNameID>(
      new StringValue(std::string(reinterpret_cast<const char*>(utf8), length)));
}
j::PropNameID TestRuntime::createPropNameIDFromString(const j::String& str) {
  return make<j::PropNameID>(new StringValue(utf8(str)));
}
j::PropNameID TestRuntime::createPropNameIDFromSymbol(const j::Symbol&) { unsupported("symbols"); }
std::string TestRuntime::utf8(const j::PropNameID& name) {
  return static_cast<const StringValue*>(getPointerValue(name))->text;
}
bool TestRuntime::compare(const j::PropNameID& a, const j::PropNameID& b) {
  return utf8(a) == utf8(b);
}
std::string TestRuntime::symbolToString(const j::Symbol&) { unsupported("symbols"); }

j::BigInt TestRuntime::createBigIntFromInt64(int64_t) { unsupported("bigints"); }
j::BigInt TestRuntime::createBigIntFromUint64(uint64_t) { unsupported("bigints"); }
bool TestRuntime::bigintIsInt64(const j::BigInt&) { unsupported("bigints"); }
bool TestRuntime::bigintIsUint64(const j::BigInt&) { unsupported("bigints"); }
uint64_t TestRuntime::truncate(const j::BigInt&) { unsupported("bigints"); }
j::String TestRuntime::bigintToString(const j::BigInt&, int) { unsupported("bigints"); }

j::String TestRuntime::createStringFromAscii(const char* str, size_t length) {
  return make<j::String>(new StringValue(std::string(str, length)));
}
j::String TestRuntime::createStringFromUtf8(const uint8_t* utf8, size_t length) {
  return make<j::String>(new StringValue(std::string(reinterpret_cast<const char*>(utf8), length)));
}
std::string TestRuntime::utf8(const j::String& str) {
  return static_cast<const StringValue*>(getPointerValue(str))->text;
}

j::Object TestRuntime::createObject() { return wrap(std::make_shared<ObjectData>()); }
j::Object TestRuntime::createObject(std::shared_ptr<j::HostObject> ho) {
  auto data = std::make_shared<ObjectData>();
  data->host = std::move(ho);
  return wrap(std::move(data));
}
std::shared_ptr<j::HostObject> TestRuntime::getHostObject(const j::Object& object) {
  return dataOf(object)->host;
}
j::HostFunctionType& TestRuntime::getHostFunction(const j::Function& function) {
  return *dataOf(function)->function;
}
bool TestRuntime::hasNativeState(const j::Object&) { return false; }
std::shared_ptr<j::NativeState> TestRuntime::getNativeState(const j::Object&) {
  unsupported("native state");
}
void TestRuntime::setNativeState(const j::Object&, std::shared_ptr<j::NativeState>) {
  unsupported("native state");
}

j::Value TestRuntime::getProperty(const j::Object& object, const j::PropNameID& name) {
  auto data = dataOf(object);
  if (data->host) return data->host->get(*this, name);
  auto found = data->properties.find(utf8(name));
  return found == data->properties.end() ? j::Value::undefined() : fromSlot(found->second);
}
j::Value TestRuntime::getProperty(const j::Object& object, const j::String& name) {
  return getProperty(object, createPropNameIDFromString(name));
}
bool TestRuntime::hasProperty(const j::Object& object, const j::PropNameID& name) {
  return dataOf(object)->properties.count(utf8(name)) > 0;
}
bool TestRuntime::hasProperty(const j::Object& object, const j::String& name) {
  return hasProperty(object, createPropNameIDFromString(name));
}
void TestRuntime::setPropertyValue(const j::Object& object, const j::PropNameID& name,
                                   const j::Value& value) {
  auto data = dataOf(object);
  if (data->host) {
    data->host->set(*this, name, value);
    return;
  }
  data->properties[utf8(name)] = toSlot(value);
}
void TestRuntime::setPropertyValue(const j::Object& object, const j::String& name,
                                   const j::Value& value) {
  setPropertyValue(object, createPropNameIDFromString(name), value);
}

bool TestRuntime::isArray(const j::Object& object) const { return dataOf(object)->is_array; }
bool TestRuntime::isArrayBuffer(const j::Object&) const { return false; }
bool TestRuntime::isFunction(const j::Object& object) const {
  return dataOf(object)->function.has_value();
}
bool TestRuntime::isHostObject(const j::Object& object) const {
  return dataOf(object)->host != nullptr;
}
bool TestRuntime::isHostFunction(const j::Function& function) const {
  return dataOf(function)->function.has_value();
}
j::Array TestRuntime::getPropertyNames(const j::Object& object) {
  auto data = dataOf(object);
  std::vector<std::string> names;
  if (data->host) {
    for (auto& name : data->host->getPropertyNames(*this)) names.push_back(name.utf8(*this));
  } else {
    for (auto& [name, slot] : data->properties) names.push_back(name);
  }
  j::Array array = createArray(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    array.setValueAtIndex(*this, i, j::String::createFromUtf8(*this, names[i]));
  }
  return array;
}

j::WeakObject TestRuntime::createWeakObject(const j::Object&) { unsupported("weak objects"); }
j::Value TestRuntime::lockWeakObject(const j::WeakObject&) { unsupported("weak objects"); }

j::Array TestRuntime::createArray(size_t length) {
  auto data = std::make_shared<ObjectData>();
  data->is_array = true;
  data->elements.resize(length);
  return make<j::Array>(new ObjectValue(std::move(data)));
}
j::ArrayBuffer TestRuntime::createArrayBuffer(std::shared_ptr<j::MutableBuffer>) {
  unsupported("array buffers");
}
size_t TestRuntime::size(const j::Array& array) { return dataOf(array)->elements.size(); }
size_t TestRuntime::size(const j::ArrayBuffer&) { unsupported("array buffers"); }
uint8_t* TestRuntime::data(const j::ArrayBuffer&) { unsupported("array buffers"); }
j::Value TestRuntime::getValueAtIndex(const j::Array& array, size_t i) {
  auto data = dataOf(array);
  return i < data->elements.size() ? fromSlot(data->elements[i]) : j::Value::undefined();
}
void TestRuntime::setValueAtIndexImpl(const j::Array& array, size_t i, const j::Value& value) {
  auto data = dataOf(array);
  if (i >= data->elements.size()) data->elements.resize(i + 1);
  data->elements[i] = toSlot(value);
}

j::Function TestRuntime::createFunctionFromHostFunction(const j::PropNameID&, unsigned int,
                                                        j::HostFunctionType func) {
  auto data = std::make_shared<ObjectData>();
  data->function = std::move(func);
  return make<j::Function>(new ObjectValue(std::move(data)));
}
j::Value TestRuntime::call(const j::Function& function, const j::Value& jsThis,
                           const j::Value* args, size_t count) {
  auto data = dataOf(function);  // keeps the function alive while it runs
  return (*data->function)(*this, jsThis, args, count);
}
j::Value TestRuntime::callAsConstructor(const j::Function& function, const j::Value* args,
                                        size_t count) {
  return call(function, j::Value::undefined(), args, count);
}

bool TestRuntime::strictEquals(const j::Symbol&, const j::Symbol&) const { unsupported("symbols"); }
bool TestRuntime::strictEquals(const j::BigInt&, const j::BigInt&) const { unsupported("bigints"); }
bool TestRuntime::strictEquals(const j::String& a, const j::String& b) const {
  return static_cast<const StringValue*>(getPointerValue(a))->text ==
         static_cast<const StringValue*>(getPointerValue(b))->text;
}
bool TestRuntime::strictEquals(const j::Object& a, const j::Object& b) const {
  return dataOf(a) == dataOf(b);
}
bool TestRuntime::instanceOf(const j::Object&, const j::Function&) { unsupported("instanceof"); }

}  // namespace rne::jsi::testing

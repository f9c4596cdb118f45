// A small in-memory jsi::Runtime for testing the binding on the host, where no JS engine with
// JSI exists. It models what the binding touches: objects with properties, host objects, host
// functions, arrays, strings, numbers, and the globals `Promise`, `Error` and `String` (a
// Promise records its settlement in plain properties: state, value, reason). Everything else
// throws "not supported by TestRuntime". Single-threaded, like a JS thread.
#pragma once

#include <jsi/jsi.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace rne::jsi::testing {

namespace j = facebook::jsi;

struct ObjectData;

// A JS value stored inside the runtime (jsi::Value needs a runtime to copy, this does not).
struct Slot {
  enum class Kind { kUndefined, kNull, kBool, kNumber, kString, kObject } kind = Kind::kUndefined;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::shared_ptr<ObjectData> object;
};

struct ObjectData {
  std::map<std::string, Slot> properties;
  std::shared_ptr<j::HostObject> host;
  std::optional<j::HostFunctionType> function;
  bool is_array = false;
  std::vector<Slot> elements;
};

class TestRuntime : public j::Runtime {
 public:
  TestRuntime();

  // Promise helpers for tests: "pending", "fulfilled" or "rejected", and the settled value.
  std::string promiseState(const j::Value& promise);
  j::Value promiseResult(const j::Value& promise);

  // Runtime interface.
  j::Value evaluateJavaScript(const std::shared_ptr<const j::Buffer>&, const std::string&) override;
  std::shared_ptr<const j::PreparedJavaScript> prepareJavaScript(
      const std::shared_ptr<const j::Buffer>&, std::string) override;
  j::Value evaluatePreparedJavaScript(const std::shared_ptr<const j::PreparedJavaScript>&) override;
  void queueMicrotask(const j::Function&) override;
  bool drainMicrotasks(int) override;
  j::Object global() override;
  std::string description() override;
  bool isInspectable() override;

 protected:
  PointerValue* cloneSymbol(const PointerValue*) override;
  PointerValue* cloneBigInt(const PointerValue*) override;
  PointerValue* cloneString(const PointerValue* pv) override;
  PointerValue* cloneObject(const PointerValue* pv) override;
  PointerValue* clonePropNameID(const PointerValue* pv) override;

  j::PropNameID createPropNameIDFromAscii(const char* str, size_t length) override;
  j::PropNameID createPropNameIDFromUtf8(const uint8_t* utf8, size_t length) override;
  j::PropNameID createPropNameIDFromString(const j::String& str) override;
  j::PropNameID createPropNameIDFromSymbol(const j::Symbol&) override;
  std::string utf8(const j::PropNameID&) override;
  bool compare(const j::PropNameID&, const j::PropNameID&) override;
  std::string symbolToString(const j::Symbol&) override;

  j::BigInt createBigIntFromInt64(int64_t) override;
  j::BigInt createBigIntFromUint64(uint64_t) override;
  bool bigintIsInt64(const j::BigInt&) override;
  bool bigintIsUint64(const j::BigInt&) override;
  uint64_t truncate(const j::BigInt&) override;
  j::String bigintToString(const j::BigInt&, int) override;

  j::String createStringFromAscii(const char* str, size_t length) override;
  j::String createStringFromUtf8(const uint8_t* utf8, size_t length) override;
  std::string utf8(const j::String&) override;

  j::Object createObject() override;
  j::Object createObject(std::shared_ptr<j::HostObject> ho) override;
  std::shared_ptr<j::HostObject> getHostObject(const j::Object&) override;
  j::HostFunctionType& getHostFunction(const j::Function&) override;
  bool hasNativeState(const j::Object&) override;
  std::shared_ptr<j::NativeState> getNativeState(const j::Object&) override;
  void setNativeState(const j::Object&, std::shared_ptr<j::NativeState>) override;

  j::Value getProperty(const j::Object&, const j::PropNameID& name) override;
  j::Value getProperty(const j::Object&, const j::String& name) override;
  bool hasProperty(const j::Object&, const j::PropNameID& name) override;
  bool hasProperty(const j::Object&, const j::String& name) override;
  void setPropertyValue(const j::Object&, const j::PropNameID& name, const j::Value& value) override;
  void setPropertyValue(const j::Object&, const j::String& name, const j::Value& value) override;

  bool isArray(const j::Object&) const override;
  bool isArrayBuffer(const j::Object&) const override;
  bool isFunction(const j::Object&) const override;
  bool isHostObject(const j::Object&) const override;
  bool isHostFunction(const j::Function&) const override;
  j::Array getPropertyNames(const j::Object&) override;

  j::WeakObject createWeakObject(const j::Object&) override;
  j::Value lockWeakObject(const j::WeakObject&) override;

  j::Array createArray(size_t length) override;
  j::ArrayBuffer createArrayBuffer(std::shared_ptr<j::MutableBuffer>) override;
  size_t size(const j::Array&) override;
  size_t size(const j::ArrayBuffer&) override;
  uint8_t* data(const j::ArrayBuffer&) override;
  j::Value getValueAtIndex(const j::Array&, size_t i) override;
  void setValueAtIndexImpl(const j::Array&, size_t i, const j::Value& value) override;

  j::Function createFunctionFromHostFunction(const j::PropNameID& name, unsigned int paramCount,
                                             j::HostFunctionType func) override;
  j::Value call(const j::Function&, const j::Value& jsThis, const j::Value* args,
                size_t count) override;
  j::Value callAsConstructor(const j::Function&, const j::Value* args, size_t count) override;

  bool strictEquals(const j::Symbol&, const j::Symbol&) const override;
  bool strictEquals(const j::BigInt&, const j::BigInt&) const override;
  bool strictEquals(const j::String& a, const j::String& b) const override;
  bool strictEquals(const j::Object& a, const j::Object& b) const override;
  bool instanceOf(const j::Object&, const j::Function&) override;
  void setExternalMemoryPressure(const j::Object&, size_t) override {}

 private:
  Slot toSlot(const j::Value& value) const;
  j::Value fromSlot(const Slot& slot);
  j::Object wrap(std::shared_ptr<ObjectData> data);
  static std::shared_ptr<ObjectData> dataOf(const j::Pointer& object);
  void defineGlobal(const std::string& name, j::HostFunctionType function);

  std::shared_ptr<ObjectData> global_;
};

}  // namespace rne::jsi::testing

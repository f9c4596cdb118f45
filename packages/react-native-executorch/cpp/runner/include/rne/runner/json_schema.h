// A JSON Schema compiled into the graph the JSON grammar (json_grammar.h) walks.
//
// Supported keywords: type (one type or a list), enum, const, properties, required,
// additionalProperties, items, minItems, maxItems; nested to any depth. Annotations (title,
// description, default, examples, $schema, $id, $comment, deprecated, readOnly, writeOnly) are
// ignored. Every other keyword (pattern, format, minimum, anyOf, $ref, ...) is an error that
// names it and where it is: the grammar could not guarantee it, so it is refused rather than
// silently dropped.
//
// What the generated JSON looks like (every output validates against the schema):
// - objects hold only their declared properties, in the schema's order; optional ones may be
//   left out, required ones never are. additionalProperties is accepted whatever its value, but
//   no undeclared property is generated (as if it were false). An object schema without
//   `properties` generates `{}`.
// - whitespace: none, except at most one space after ':' and ',' (so it cannot run forever).
// - numbers: at most 15 integer digits, 15 fraction digits and 3 exponent digits; "integer"
//   generates no fraction or exponent.
// - a schema without `type` (or `true`, `{}`) allows any of the types above.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rne/runner/result.h"

namespace rne::runner {

// Bit per JSON type a schema node allows.
enum JsonType : uint8_t {
  kJsonString = 1 << 0,
  kJsonNumber = 1 << 1,
  kJsonInteger = 1 << 2,
  kJsonBoolean = 1 << 3,
  kJsonNull = 1 << 4,
  kJsonObject = 1 << 5,
  kJsonArray = 1 << 6,
  kJsonAnyType = 0x7F,
};

struct SchemaProperty {
  std::string key;  // the key as a JSON string literal, quotes included: "\"name\""
  uint32_t node;    // schema of the value
  bool required;
};

struct SchemaNode {
  uint8_t types = kJsonAnyType;
  // enum / const values written as compact JSON; when non-empty the value is one of these.
  std::vector<std::string> literals;
  std::vector<SchemaProperty> properties;  // objects: in the schema's order
  uint32_t items = 0;                      // arrays: schema of the items
  uint32_t min_items = 0;
  uint32_t max_items = UINT32_MAX;
};

// The compiled schema: nodes[root] is the top-level value. Immutable once compiled.
struct JsonSchema {
  std::vector<SchemaNode> nodes;
  uint32_t root = 0;
  uint32_t boolean_node = 0;  // literals {true, false}
  uint32_t null_node = 0;     // literal {null}
};

// Limits that keep the grammar's state small (per-frame candidate sets are 64-bit masks).
constexpr size_t kMaxEnumValues = 64;
constexpr size_t kMaxProperties = 64;

// Parses `schema_json` (a JSON Schema document) and compiles it. kInvalidArgument errors name the
// JSON pointer of the offending part and say what to change.
Result<std::shared_ptr<const JsonSchema>> compile_json_schema(std::string_view schema_json);

}  // namespace rne::runner

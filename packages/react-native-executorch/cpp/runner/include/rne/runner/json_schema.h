// A JSON Schema compiled into the graph the JSON grammar (json_grammar.h) walks.
//
// Supported keywords: type (one type or a list), nullable, enum, const (values of any JSON
// type), properties, required, additionalProperties, items, minItems, maxItems, minLength,
// maxLength, pattern, format (see below), minimum/maximum/exclusiveMinimum/exclusiveMaximum
// (integers), $ref (to "#", or any
// JSON pointer into the document such as "#/$defs/Name" or "#/definitions/Name"; recursion
// allowed), $defs/definitions, allOf (merged), anyOf and oneOf (see below); nested to any
// depth. Annotations (title, description, default, examples, $schema, $id, $comment,
// deprecated, readOnly, writeOnly, x-*) are ignored. patternProperties and propertyNames are
// supported as below. Every other keyword (multipleOf, not, if, ...) is an error that names it and
// where it is: the grammar could not guarantee it, so it is refused rather than silently
// dropped.
//
// What the generated JSON looks like (every output validates against the schema):
// - objects hold only their declared properties, in the schema's order; optional ones may be
//   left out, required ones never are. additionalProperties is accepted whatever its value, but
//   no undeclared property is generated (as if it were false). An object schema without
//   `properties` generates `{}`. patternProperties and propertyNames apply to the declared
//   properties: one whose name a patternProperties regex matches is generated valid against
//   that schema too (merged as with allOf); one whose name propertyNames refuses is never
//   generated (refused if required).
// - whitespace: none, except at most one space after ':' and ',' (so it cannot run forever).
// - numbers: at most 15 integer digits, 15 fraction digits and 3 exponent digits; "integer"
//   generates no fraction or exponent. A number with minimum/maximum/exclusive* generates
//   integers in that range (exact, and refused when the range holds none).
// - strings with minLength/maxLength count code points (as JSON Schema does) and use no \u
//   escapes (a surrogate pair would be two escapes for one code point).
// - pattern: the regex subset of regex.h, matched anywhere in the string unless anchored (as
//   JSON Schema says); the generated strings match under ECMA-262 and Python's re alike.
//   format: date, time, date-time, uuid, email, uri, ipv4, ipv6, hostname, each a regex of a
//   strict subset of its RFC (date: days valid for the month, Feb 29 left out; time and
//   date-time: RFC 3339 with 'T', 'Z' or an offset, seconds 00-59; email: dot-atoms; uri:
//   scheme://host[/path][?query][#fragment]; ipv6: the full eight-group form; hostname: at most
//   12 labels of at most 20 characters, so within 253 bytes). Other formats are refused. A
//   string's pattern, format and length bounds compile into one automaton (regex.h limits);
//   such strings use no \u escapes either, and control characters other than \b \f \n \r \t
//   are not generated. In allOf, two different patterns (or formats) are refused.
// - a schema without `type` (or `true`, `{}`) allows any of the types above.
// - nullable (OpenAPI 3.0: null allowed too; JSON Schema ignores it): null is not generated,
//   so the output validates under both readings; write "type": [..., "null"] or anyOf for null.
// - anyOf/oneOf: the alternatives are told apart by the first byte of the value (its JSON type;
//   enum/const alternatives are merged into one set of values). oneOf alternatives must not
//   overlap (differing types, distinct constants), which makes them exclusive: overlapping ones
//   are refused. For anyOf, where two alternatives allow the same type (two object shapes), the
//   first one is generated for that type: a narrower but valid language.
// - allOf: the subschemas are merged into one (types intersected, properties merged, required
//   united, bounds tightened, enums intersected); keywords that cannot be merged are refused.
// - siblings of $ref, anyOf and oneOf apply too (merged into the referenced schema or each
//   alternative).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rne/runner/regex.h"
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

// A string's pattern/format and length bounds as one automaton over the string's characters.
struct StringPattern {
  RegexDfa dfa;
  RegexPaths paths;  // shortest continuations, in bytes of the JSON string (escapes count 2)
  // With a maxLength the automaton counts code points, so a long string visits a new state per
  // character. Far below maxLength (and at or past minLength) a state acts as the same pattern
  // without bounds: far_node (a node with that pattern; 0: none) in state base_state[s]. "Far":
  // length[s] + far_margin + the bytes looked ahead <= maxLength, where far_margin bounds every
  // shortest continuation of the unbounded pattern. The mask cache shares one walk for them.
  uint32_t far_node = 0;
  uint32_t far_margin = 0;
  std::vector<uint16_t> base_state;  // per state (when far_node != 0)
  std::vector<uint32_t> length;      // per state: code points read (when far_node != 0)
  // A maxLength too large to fold in (the automaton would pass kMaxRegexStates): the frame
  // counts code points and a character may come only if the shortest continuation after it,
  // path_length[state] code points, still fits (a narrower language: the rare longer-in-bytes
  // but shorter-in-characters continuation is not used). far_margin: the largest path_length.
  uint32_t max_length = UINT32_MAX;  // UINT32_MAX: folded in (or none)
  std::vector<uint32_t> path_length;
};

struct SchemaProperty {
  std::string key;  // the key as a JSON string literal, quotes included: "\"name\""
  uint32_t node;    // schema of the value
  bool required;
};

struct SchemaNode {
  uint8_t types = kJsonAnyType;
  // anyOf/oneOf: the alternatives, whose sets of first bytes are disjoint. When non-empty the
  // node is only this union (the other fields are unused).
  std::vector<uint32_t> alternatives;
  // enum / const values written as compact JSON; when non-empty the value is one of these.
  std::vector<std::string> literals;
  std::vector<SchemaProperty> properties;  // objects: in the schema's order
  uint32_t items = 0;                      // arrays: schema of the items
  uint32_t min_items = 0;
  uint32_t max_items = UINT32_MAX;
  uint32_t min_length = 0;  // strings, in code points
  uint32_t max_length = UINT32_MAX;
  uint32_t pattern = 0;  // strings: 1 + index into JsonSchema::patterns (which then holds the
                         // length bounds too); 0: none
  bool integer_range = false;  // numbers are integers in [minimum, maximum]
  int64_t minimum = 0;
  int64_t maximum = 0;

  // Computed by the compiler: the shortest value (ties: the first alternative, property, enum
  // value) and how many nested values (grammar frames) writing it takes; for objects and arrays,
  // how many frames finishing one started by the model takes at least (required properties or
  // minItems written with their shortest values).
  std::string minimal;
  uint32_t minimal_depth = 1;
  uint32_t object_depth = 1;
  uint32_t array_depth = 1;

  bool bounded_string() const {
    return min_length > 0 || max_length != UINT32_MAX || pattern != 0;
  }
};

// The compiled schema: nodes[root] is the top-level value. Immutable once compiled.
struct JsonSchema {
  std::vector<SchemaNode> nodes;
  uint32_t root = 0;
  uint32_t boolean_node = 0;  // literals {true, false}
  uint32_t null_node = 0;     // literal {null}
  std::vector<StringPattern> patterns;
  // A whole answer constrained by a regex (compile_regex_format), not JSON: the text is
  // nodes[root]'s pattern, raw (no quotes or escapes).
  bool whole_text = false;
};

// Limits that keep the grammar's state small (per-frame candidate sets are 64-bit masks) and
// every allocation a schema asks for bounded; a schema beyond one is refused with an error that
// names the limit.
constexpr size_t kMaxEnumValues = 64;
constexpr size_t kMaxProperties = 64;
constexpr uint32_t kMaxMinItems = 4096;
constexpr uint32_t kMaxMinLength = 4096;
constexpr size_t kMaxMinimalValueBytes = 65536;  // the shortest value of any subschema
constexpr size_t kMaxSchemaNodes = 10000;        // compiled subschemas (allOf/anyOf expand)
constexpr size_t kMaxSchemaNesting = 64;         // nested subschemas, $ref and allOf included

// Parses `schema_json` (a JSON Schema document) and compiles it. kInvalidArgument errors name the
// JSON pointer of the offending part and say what to change.
Result<std::shared_ptr<const JsonSchema>> compile_json_schema(std::string_view schema_json);

// A whole answer that matches `regex` (regex.h's subset, matched against the whole text: ^ and
// $ are implied), compiled into the same form so the JSON constraint's masks, cache and token
// budget serve it too. kInvalidArgument errors quote the regex and the offset.
Result<std::shared_ptr<const JsonSchema>> compile_regex_format(std::string_view regex);

}  // namespace rne::runner

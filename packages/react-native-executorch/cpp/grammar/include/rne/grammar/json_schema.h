// A JSON Schema compiled into the graph the JSON grammar (json_grammar.h) walks.
//
// Supported keywords: type (one type or a list), nullable, enum, const (values of any JSON
// type), properties, required, additionalProperties, items, prefixItems, additionalItems,
// unevaluatedItems, minItems, maxItems, uniqueItems, contains, minContains, maxContains,
// minProperties, maxProperties, minLength, maxLength, pattern, format (see below),
// minimum/maximum/exclusiveMinimum/exclusiveMaximum and multipleOf (integers), $ref,
// $defs/definitions, allOf (merged), anyOf and oneOf (see below), not (see below),
// if/then/else, dependentRequired, dependentSchemas, dependencies, unevaluatedProperties;
// nested to any depth. Annotations (title, description, default, examples, $schema, $id and
// draft 4's id, $anchor, $comment, deprecated, readOnly, writeOnly, content*, editor
// annotations such as markdownDescription, x-*) are ignored. patternProperties and
// propertyNames are supported as below. Keywords it does not know (vendor keys, typos,
// `example`, ...) are annotations as JSON Schema says, and ignored, as are `format` values
// outside the list below; with `strict` they are refused instead. Known assertions it cannot
// enforce ($dynamicRef, $recursiveRef, draft 3's divisibleBy, disallow, extends) are an error
// that names the keyword and where it is, strict or not.
//
// $ref is resolved as JSON Schema says: against the base URI of the enclosing $ids (RFC 3986),
// to a schema with that $id, an $anchor/$dynamicAnchor (draft 7: "$id": "#name") or a JSON
// pointer (percent-decoded) inside one; recursion allowed. References to other documents
// (remote ones are not fetched) are refused, and so is a $ref beside a $id when the document
// does not say its draft ($schema) and draft 7 (which ignores that $id) and later drafts would
// resolve it differently.
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
//   integers in that range (exact, and refused when the range holds none). multipleOf m
//   generates the integers that are multiples of the least positive integer multiple of m
//   (1.5: 3k), such that instance / m is an exact integer in floating point too (refused for a
//   decimal m whose double is too far from it, such as 0.7: |m's double / m - 1| must be at
//   most 2^-54, which 0.1, 0.2, 0.05 and 0.01 meet); allOf of two: their lcm.
// - strings with minLength/maxLength count code points (as JSON Schema does) and use no \u
//   escapes (a surrogate pair would be two escapes for one code point).
// - pattern: the regex subset of regex.h, matched anywhere in the string unless anchored (as
//   JSON Schema says); the generated strings match under ECMA-262 and Python's re alike.
//   format: date, time, date-time, uuid, email, uri, ipv4, ipv6, hostname, each a regex of a
//   strict subset of its RFC (date: days valid for the month, Feb 29 left out; time and
//   date-time: RFC 3339 with 'T', 'Z' or an offset, seconds 00-59; email: dot-atoms; uri:
//   scheme://host[/path][?query][#fragment]; ipv6: the full eight-group form; hostname: at most
//   12 labels of at most 20 characters, so within 253 bytes), and their ASCII forms for
//   idn-email, iri, idn-hostname (labels without hyphens: IDNA reserves "--"); uri-reference
//   and iri-reference: a uri or a relative path whose segments hold no ':'; uri-template:
//   literals only; json-pointer, relative-json-pointer; duration: days (with hours), weeks or
//   hours; regex: letters, digits and spaces. Other formats are ignored (refused when strict). A
//   string's pattern, format and length bounds compile into one automaton (regex.h limits);
//   such strings use no \u escapes either, and control characters other than \b \f \n \r \t
//   are not generated. In allOf, all patterns and formats must match (one automaton).
// - a schema without `type` (or `true`, `{}`) allows any of the types above.
// - nullable (OpenAPI 3.0: null allowed too; JSON Schema ignores it): null is not generated,
//   so the output validates under both readings; write "type": [..., "null"] or anyOf for null.
// - anyOf/oneOf: the alternatives are told apart by the first byte of the value (its JSON type;
//   enum/const alternatives are merged into one set of values). Object shapes are told apart by
//   a tag: a property every shape declares as required with constant string values (const or
//   enum) that no two shapes share, such as Zod's discriminated unions; that property is then
//   generated first and its value picks the shape (in Gemma 4's syntax it must already sort
//   first in every shape). oneOf alternatives kept apart that way (differing types, distinct
//   constants, distinct tags) are exclusive: every value generated for one fails the others.
//   For anyOf, where two alternatives allow the same type and no tag tells them apart, the
//   first one is generated for that type: a narrower but valid language; an anyOf alternative
//   that cannot be compiled (unsupported or unsatisfiable) is left out the same way (refused
//   only when every one is). Two oneOf object shapes without a tag: the first one is generated
//   for objects when some property the other's `required` lists can be kept out of it (it
//   never generates it), so each of its objects fails the other. oneOf alternatives that still
//   overlap (two string shapes, a string and a constant, object shapes alike in what they
//   require): each alternative is compiled as itself and `not` every other one (below), and
//   those are combined as anyOf: every value generated matches exactly one; an alternative
//   that cannot be kept apart is left out, refused when all are. A oneOf alternative that no
//   value satisfies together with the oneOf's siblings is left out too (no value generated
//   can match it).
// - not: X holds for the values X rejects, and X rejects a value when any one of its keywords
//   does. Each keyword of X that the grammar can negate gives a candidate: type (the other
//   types), enum/const (every other value: literals filtered, strings excluded by an
//   automaton, integers from the widest stretch without them, null/booleans/objects/arrays by
//   leaving out their type), pattern (the strings it does not match: automaton complement,
//   read as widely as any engine reads it), minLength/maxLength, minItems/maxItems,
//   minProperties/maxProperties and minimum/maximum/exclusive* (the far side of the bound),
//   required (objects without one of the names: the last optional one left out), properties
//   (one of the first 8 properties present with a value that fails its schema), items (a first
//   item that fails it), anyOf (one negation of every alternative at once), not (X itself,
//   refused beside unevaluated*, since not drops X's annotations). The candidate is merged with
//   the schema around `not` and the first that compiles is generated: a valid, narrower
//   language. X's $ref, allOf and if/then/else are resolved first. Refused when no keyword of X
//   can be negated (multipleOf, format, uniqueItems, ...), naming them; not: {} and not: true
//   allow nothing. At most kMaxNegationAttempts candidates are compiled per schema.
// - an optional property whose schema no value satisfies (false, not: {}, allOf branches with
//   nothing in common) or that refers to another document (not fetched) is never generated
//   (never judged, so its schema does not matter); of more than kMaxOptionalRun (63) optional
//   properties in a row (before a required one, or at the end) the rest are left out (any number
//   of required ones is fine), and past 64 enum values the first 64 are generated.
// - a required property that properties does not declare takes any value when nothing judges
//   undeclared names (additionalProperties, unevaluatedProperties, patternProperties,
//   propertyNames); else it is refused. minProperties above the declared properties declares
//   made-up names where the schema allows them (each patternProperties regex's shortest match,
//   then "a", "b", ... under additionalProperties; propertyNames checked), else it is refused.
// - contains with maxContains: arrays of at most maxContains items.
// - unevaluatedItems: the items after prefixItems when nothing in the same schema object
//   evaluates them (no items/additionalItems); refused when another allOf branch, $ref target,
//   alternative or then/else speaks of items too (which of their annotations count would
//   depend on the value).
// - arrays: prefixItems (or draft 7's array of items, then additionalItems) give the schemas of
//   the first items, items (additionalItems) of the rest; false ends the array there.
//   uniqueItems: true generates arrays of at most one item (exact: they have no duplicates;
//   refused with minItems above 1).
// - allOf: the subschemas are merged into one (types intersected, properties merged, required
//   united, bounds tightened, enums intersected, patterns and formats compiled into one
//   automaton, nots united, two oneOfs into their product of at most kMaxOneOfProduct pairs,
//   anyOf beside oneOf kept beside each alternative); a property one branch requires and another
//   does not declare takes that branch's patternProperties or additionalProperties schema
//   (refused, as unsatisfiable, only under additionalProperties: false); keywords that cannot be
//   merged (two different minContains, ...) are refused.
// - siblings of $ref, anyOf and oneOf apply too (merged into the referenced schema or each
//   alternative).
//
// JsonSyntax::kGemma4 writes the same values in Gemma 4's tool-call argument syntax (its chat
// template's format_argument macro) instead of JSON:
//   {city:<|"|>Kraków<|"|>,days:3,opts:{metric:true},tags:[<|"|>a<|"|>,<|"|>b<|"|>]}
// - keys are bare, followed by ':'; a property name must be non-empty, hold none of
//   : { } [ ] , < and not start with '"' or start or end with whitespace (Gemma 4's parser could
//   not read it back);
// - properties come in the template's order, Jinja's `dictsort`: by the name lowercased (ASCII),
//   ties by the name itself; an object with two or more properties whose names are not ASCII
//   is refused (Python lowercases those by Unicode rules);
// - strings are delimited by the text <|"|> (one special token in Gemma 4's vocabulary) and
//   their content is raw: no escapes, any UTF-8, control characters included, except the two
//   bytes "<|" (they always start the closing delimiter; a '<' followed by anything else is
//   content). pattern/format/length bounds apply to the raw content; a pattern or enum/const
//   value that cannot avoid "<|" is refused;
// - numbers, true, false, null and arrays as in JSON; no whitespace anywhere. (The template
//   re-renders null as None and floats as Python prints them: only keys' order and strings are
//   byte-exact on re-rendering.)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rne/grammar/regex.h"
#include "rne/grammar/result.h"

namespace rne::grammar {

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

// How values are written: JSON, or Gemma 4's tool-call argument syntax (see above).
enum class JsonSyntax : uint8_t { kJson, kGemma4 };

struct SchemaProperty {
  std::string key;  // JSON: the key as a string literal, quotes included ("\"name\""); Gemma 4:
                    // the bare name and its colon ("name:")
  uint32_t node;    // schema of the value
  bool required;
};

struct SchemaNode {
  uint8_t types = kJsonAnyType;
  // anyOf/oneOf: the alternatives, whose sets of first bytes are disjoint. When non-empty the
  // node is only this union (the other fields are unused).
  std::vector<uint32_t> alternatives;
  // enum / const values written compactly in the schema's syntax; when non-empty the value is
  // one of these.
  std::vector<std::string> literals;
  std::vector<SchemaProperty> properties;  // objects: in the schema's order
  // Keys (as in SchemaProperty::key) that the schema's `required` lists: every valid object
  // has them (properties may be marked required beyond these, e.g. for minProperties).
  std::vector<std::string> schema_required;
  // An anyOf/oneOf of object shapes told apart by a tag (a required property whose constant
  // string values differ between them): `properties` then holds one entry per tag value, its
  // key the tag's key and value together ("\"kind\":\"text\""), its node the object shape
  // that value selects (a copy whose properties start with the tag). Reading one whole entry
  // after '{' continues as that shape.
  bool tagged = false;
  uint32_t items = 0;                      // arrays: schema of the items (after prefix_items)
  std::vector<uint32_t> prefix_items;      // arrays: schemas of the first items, in order
  uint32_t min_items = 0;
  uint32_t max_items = UINT32_MAX;
  uint32_t min_length = 0;  // strings, in code points
  uint32_t max_length = UINT32_MAX;
  uint32_t pattern = 0;  // strings: 1 + index into JsonSchema::patterns (which then holds the
                         // length bounds too); 0: none
  bool integer_range = false;  // numbers are integers in [minimum, maximum]
  int64_t minimum = 0;
  int64_t maximum = 0;
  int64_t multiple_of = 1;  // with integer_range: the integers are multiples of this (>= 1)

  // Computed by the compiler: the shortest value (ties: the first alternative, property, enum
  // value) and how many nested values (grammar frames) writing it takes; for objects and arrays,
  // how many frames finishing one started by the model takes at least (required properties or
  // minItems written with their shortest values).
  std::string minimal;
  uint32_t minimal_depth = 1;
  uint32_t object_depth = 1;
  uint32_t array_depth = 1;

  // The schema of item `index` of an array.
  uint32_t item(uint32_t index) const {
    return index < prefix_items.size() ? prefix_items[index] : items;
  }

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
  JsonSyntax syntax = JsonSyntax::kJson;  // how the grammar writes values
};

// Limits that keep the grammar's state small (per-frame candidate sets are 64-bit masks) and
// every allocation a schema asks for bounded; a schema beyond one is refused with an error that
// names the limit (kMaxEnumValues and kMaxProperties: the rest are left out, see above).
constexpr size_t kMaxEnumValues = 64;
constexpr size_t kMaxProperties = 64;     // minProperties, tag values (64-bit sets)
constexpr size_t kMaxOptionalRun = 63;    // optional properties in a row before a required one
constexpr uint32_t kMaxMinItems = 4096;
constexpr uint32_t kMaxMinLength = 4096;
constexpr size_t kMaxMinimalValueBytes = 65536;  // the shortest value of any subschema
constexpr size_t kMaxSchemaBytes = size_t{16} << 20;  // the schema's JSON text
constexpr size_t kMaxSchemaNodes = 100000;       // compiled subschemas (allOf/anyOf expand)
constexpr size_t kMaxSchemaNesting = 128;        // nested subschemas, $ref and allOf included
// not: X compiles one candidate per keyword of X it can negate, each with the schema around it
// (which may hold more nots, as overlapping oneOfs do): bounded in total, and per `properties`.
constexpr size_t kMaxNegationAttempts = 2000;
constexpr size_t kMaxNegatedProperties = 8;
constexpr size_t kMaxOneOfProduct = 64;       // two merged oneOfs' alternatives, multiplied
constexpr size_t kMaxFlattenSteps = 200000;   // allOf/$ref merges (fan-out multiplies them)

// Parses `schema_json` (a JSON Schema document) and compiles it. kInvalidArgument errors name the
// JSON pointer of the offending part and say what to change.
// With JsonSyntax::kGemma4 the values (and enum/const literals, shortest values) are written in
// Gemma 4's syntax; schemas it cannot write are refused the same way.
// Keywords the engine does not know and `format` values outside its list are annotations, as
// JSON Schema says, and ignored; `strict` refuses them instead (nothing in the schema goes
// unenforced). Known assertions it cannot enforce ($dynamicRef, $recursiveRef, draft 3's
// divisibleBy/disallow/extends) are refused either way, named.
Result<std::shared_ptr<const JsonSchema>> compile_json_schema(
    std::string_view schema_json, JsonSyntax syntax = JsonSyntax::kJson, bool strict = false);

// A whole answer that matches `regex` (regex.h's subset, matched against the whole text: ^ and
// $ are implied), compiled into the same form so the JSON constraint's masks, cache and token
// budget serve it too. kInvalidArgument errors quote the regex and the offset.
Result<std::shared_ptr<const JsonSchema>> compile_regex_format(std::string_view regex);

}  // namespace rne::grammar

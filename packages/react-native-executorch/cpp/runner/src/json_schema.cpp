#include "rne/runner/json_schema.h"

#include <cmath>
#include <cstdio>
#include <set>

#include "rne/json/json.h"

namespace rne::runner {

namespace json = rne::json;

namespace {

Error invalid(const std::string& pointer, const std::string& what) {
  return Error{ErrorCode::kInvalidArgument,
               "JSON schema at '" + (pointer.empty() ? std::string("#") : "#" + pointer) +
                   "': " + what};
}

// Compact JSON text of a value: the exact text an enum/const value is generated as.
void write_compact(const json::Value& value, std::string& out) {
  if (value.is_null()) {
    out += "null";
  } else if (value.is_bool()) {
    out += value.as_bool() ? "true" : "false";
  } else if (value.is_number()) {
    const double x = value.as_number();
    char text[32];
    if (std::floor(x) == x && std::fabs(x) < 1e15) {
      std::snprintf(text, sizeof(text), "%lld", static_cast<long long>(x));
    } else {
      std::snprintf(text, sizeof(text), "%.17g", x);
    }
    out += text;
  } else if (value.is_string()) {
    json::write_string(value.as_string(), out);
  } else if (value.is_array()) {
    out += '[';
    for (size_t i = 0; i < value.as_array().size(); ++i) {
      if (i > 0) out += ',';
      write_compact(value.as_array()[i], out);
    }
    out += ']';
  } else {
    out += '{';
    bool first = true;
    for (const auto& [key, member] : value.as_object()) {
      if (!first) out += ',';
      first = false;
      json::write_string(key, out);
      out += ':';
      write_compact(member, out);
    }
    out += '}';
  }
}

uint8_t type_bit(const json::Value& value) {
  if (value.is_null()) return kJsonNull;
  if (value.is_bool()) return kJsonBoolean;
  if (value.is_number()) {
    const double x = value.as_number();
    return std::floor(x) == x ? (kJsonNumber | kJsonInteger) : kJsonNumber;
  }
  if (value.is_string()) return kJsonString;
  if (value.is_array()) return kJsonArray;
  return kJsonObject;
}

Result<uint8_t> parse_type_name(const json::Value& name, const std::string& pointer) {
  if (!name.is_string()) return invalid(pointer, "a type must be a string");
  static const std::pair<const char*, uint8_t> kNames[] = {
      {"string", kJsonString},   {"number", kJsonNumber}, {"integer", kJsonInteger},
      {"boolean", kJsonBoolean}, {"null", kJsonNull},     {"object", kJsonObject},
      {"array", kJsonArray}};
  for (const auto& [text, bit] : kNames) {
    if (name.as_string() == text) return bit;
  }
  return invalid(pointer, "unknown type '" + name.as_string() +
                              "' (use string, number, integer, boolean, null, object or array)");
}

Result<uint32_t> parse_count(const json::Value& value, const std::string& pointer) {
  if (!value.is_integer() || value.as_integer() < 0 || value.as_integer() > UINT32_MAX) {
    return invalid(pointer, "must be a non-negative integer");
  }
  return static_cast<uint32_t>(value.as_integer());
}

bool is_annotation(const std::string& key) {
  static const std::set<std::string> kAnnotations = {
      "title",   "description", "default",    "examples", "$schema",
      "$id",     "$comment",    "deprecated", "readOnly", "writeOnly"};
  return kAnnotations.count(key) > 0;
}

class Compiler {
 public:
  Compiler() {
    schema_.nodes.resize(2);
    schema_.boolean_node = 0;
    schema_.nodes[0].literals = {"true", "false"};
    schema_.null_node = 1;
    schema_.nodes[1].literals = {"null"};
  }

  Result<std::shared_ptr<const JsonSchema>> run(const json::Value& root) {
    auto node = compile(root, "");
    if (!node.ok()) return node.error();
    schema_.root = *node;
    return std::make_shared<const JsonSchema>(std::move(schema_));
  }

 private:
  uint32_t add_node() {
    schema_.nodes.emplace_back();
    return static_cast<uint32_t>(schema_.nodes.size() - 1);
  }

  // The schema `true`: any value (arrays of any values).
  uint32_t any_node() {
    if (any_ == 0) {
      any_ = add_node();
      schema_.nodes[any_].items = any_;
    }
    return any_;
  }

  Result<uint32_t> compile(const json::Value& value, const std::string& pointer) {
    if (value.is_bool()) {
      if (!value.as_bool()) return invalid(pointer, "the schema 'false' allows no value at all");
      return any_node();
    }
    if (!value.is_object()) {
      return invalid(pointer, "a schema must be an object or a boolean, got " +
                                  std::string(value.type_name()));
    }
    if (++depth_ > 64) return invalid(pointer, "schemas nest deeper than 64 levels");
    const uint32_t id = add_node();
    auto done = compile_keywords(value, pointer, id);
    --depth_;
    if (!done.ok()) return done.error();
    return id;
  }

  Result<void> compile_keywords(const json::Value& value, const std::string& pointer,
                                uint32_t id) {
    SchemaNode node;
    node.items = 0;  // 0 is the boolean node, never an items schema: "not given"
    std::vector<uint8_t> literal_types;  // JSON type of each enum/const value
    for (const auto& [key, member] : value.as_object()) {
      const std::string at = pointer + "/" + key;
      if (is_annotation(key) || key == "additionalProperties") continue;
      if (key == "type") {
        auto types = parse_types(member, at);
        if (!types.ok()) return types.error();
        node.types = *types;
      } else if (key == "enum" || key == "const") {
        if (key == "enum" && (!member.is_array() || member.as_array().empty())) {
          return invalid(at, "enum must be a non-empty array");
        }
        if (!node.literals.empty()) return invalid(at, "give either enum or const, not both");
        const json::Array values =
            key == "enum" ? member.as_array() : json::Array{member};
        for (const json::Value& v : values) {
          std::string text;
          write_compact(v, text);
          node.literals.push_back(std::move(text));
          literal_types.push_back(type_bit(v));
        }
        if (node.literals.size() > kMaxEnumValues) {
          return invalid(at, "more than " + std::to_string(kMaxEnumValues) +
                                 " enum values are not supported");
        }
      } else if (key == "properties") {
        if (!member.is_object()) return invalid(at, "properties must be an object");
        if (member.as_object().size() > kMaxProperties) {
          return invalid(at, "more than " + std::to_string(kMaxProperties) +
                                 " properties in one object are not supported");
        }
        for (const auto& [name, sub] : member.as_object()) {
          auto child = compile(sub, at + "/" + name);
          if (!child.ok()) return child.error();
          std::string literal;
          json::write_string(name, literal);
          node.properties.push_back({literal, *child, false});
        }
      } else if (key == "items") {
        if (member.is_array()) {
          return invalid(at, "tuple-style items (an array) are not supported; give one schema");
        }
        auto child = compile(member, at);
        if (!child.ok()) return child.error();
        node.items = *child;
      } else if (key == "minItems" || key == "maxItems") {
        auto count = parse_count(member, at);
        if (!count.ok()) return count.error();
        (key == "minItems" ? node.min_items : node.max_items) = *count;
      } else if (key != "required") {
        return invalid(at, "keyword '" + key +
                               "' is not supported by constrained generation (supported: type, "
                               "enum, const, properties, required, additionalProperties, items, "
                               "minItems, maxItems); remove it or check it after generation");
      }
    }
    if (const json::Value* required = value.find("required")) {
      auto marked = mark_required(*required, pointer + "/required", node);
      if (!marked.ok()) return marked.error();
    }
    if (node.items == 0) node.items = any_node();
    if (node.min_items > node.max_items) {
      return invalid(pointer, "minItems is larger than maxItems");
    }
    if (!node.literals.empty()) {
      auto kept = keep_literals_of_type(node, literal_types, pointer);
      if (!kept.ok()) return kept.error();
    }
    schema_.nodes[id] = std::move(node);
    return {};
  }

  Result<uint8_t> parse_types(const json::Value& member, const std::string& at) {
    if (member.is_string()) return parse_type_name(member, at);
    if (!member.is_array() || member.as_array().empty()) {
      return invalid(at, "type must be a type name or a non-empty array of them");
    }
    uint8_t types = 0;
    for (size_t i = 0; i < member.as_array().size(); ++i) {
      auto bit = parse_type_name(member.as_array()[i], at + "/" + std::to_string(i));
      if (!bit.ok()) return bit.error();
      types |= *bit;
    }
    return types;
  }

  Result<void> mark_required(const json::Value& required, const std::string& at,
                             SchemaNode& node) {
    if (!required.is_array()) return invalid(at, "required must be an array of property names");
    for (const auto& name : required.as_array()) {
      if (!name.is_string()) return invalid(at, "required must list property names (strings)");
      std::string literal;
      json::write_string(name.as_string(), literal);
      bool found = false;
      for (auto& property : node.properties) {
        if (property.key == literal) property.required = found = true;
      }
      if (!found) {
        return invalid(at, "required property '" + name.as_string() +
                               "' is not declared in properties; declare its schema there");
      }
    }
    return {};
  }

  // enum/const together with type: only the values of an allowed type can validate.
  static Result<void> keep_literals_of_type(SchemaNode& node, const std::vector<uint8_t>& types,
                                            const std::string& pointer) {
    std::vector<std::string> kept;
    for (size_t i = 0; i < node.literals.size(); ++i) {
      if (types[i] & node.types) kept.push_back(node.literals[i]);
    }
    if (kept.empty()) return invalid(pointer, "no enum/const value has one of the allowed types");
    node.literals = std::move(kept);
    return {};
  }

  JsonSchema schema_;
  int depth_ = 0;
  uint32_t any_ = 0;  // 0: not created yet
};

}  // namespace

Result<std::shared_ptr<const JsonSchema>> compile_json_schema(std::string_view schema_json) {
  json::Value root;
  json::ParseError error;
  if (!json::parse(schema_json, root, error)) {
    return Error{ErrorCode::kInvalidArgument, "the JSON schema is not valid JSON (offset " +
                                                  std::to_string(error.offset) +
                                                  "): " + error.message};
  }
  return Compiler().run(root);
}

}  // namespace rne::runner

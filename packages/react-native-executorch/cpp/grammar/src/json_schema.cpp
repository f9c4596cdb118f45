#include "rne/grammar/json_schema.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "rne/json/json.h"
#include "rne/grammar/json_grammar.h"

namespace rne::grammar {

namespace json = rne::json;

namespace {

constexpr size_t kUnknown = SIZE_MAX;         // no finite shortest value (yet)
constexpr int64_t kMaxInteger = 999999999999999;  // 15 digits: what the grammar writes

Error invalid(const std::string& pointer, const std::string& what) {
  return Error{ErrorCode::kInvalidArgument,
               "JSON schema at '" + (pointer.empty() ? std::string("#") : "#" + pointer) +
                   "': " + what};
}

// The shortest decimal text that reads back as `x` (what a JSON parser gets back).
std::string number_text(double x) {
  char text[32];
  if (std::floor(x) == x && std::fabs(x) < 1e15) {
    std::snprintf(text, sizeof(text), "%lld", static_cast<long long>(x));
    return text;
  }
  for (int digits = 15; digits <= 17; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, x);
    if (std::strtod(text, nullptr) == x) break;
  }
  return text;
}

constexpr std::string_view kGemmaQuote = "<|\"|>";

// Why Gemma 4's syntax cannot write `name` as a bare key (empty: it can). Gemma 4's parser reads a
// key up to ':' and stops at { } [ ] , <, trimming whitespace; one that starts with '"' it reads
// as a JSON string.
std::string gemma_key_problem(const std::string& name) {
  if (name.empty()) return "an empty property name cannot be written as a bare key";
  if (name.find_first_of(":{}[],<") != std::string::npos) {
    return "property name '" + name + "' holds one of : { } [ ] , < which a bare key cannot";
  }
  if (name.front() == '"') {
    return "property name '" + name + "' starts with '\"', which reads as a JSON string key";
  }
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  if (space(name.front()) || space(name.back())) {
    return "property name '" + name + "' starts or ends with whitespace, which a bare key loses";
  }
  return "";
}

// Jinja's dictsort (case-insensitive, what Gemma 4's template orders keys by): the name
// lowercased, ties by the name itself.
bool dictsort_less(const std::string& a, const std::string& b) {
  auto lower = [](std::string t) {
    for (char& c : t) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return t;
  };
  const std::string la = lower(a), lb = lower(b);
  return la != lb ? la < lb : a < b;
}

bool is_ascii(const std::string& text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return (c & 0x80) == 0; });
}

// Compact text of a value in `syntax`: the exact text an enum/const value is generated as.
// Numbers a double cannot hold (1e400, integers beyond 2^53) would be written as a different
// value (or as "inf", not JSON at all): refused. In Gemma 4's syntax, strings holding "<|" and
// keys it cannot write bare are refused too.
Result<void> write_compact(const json::Value& value, std::string& out, const std::string& pointer,
                           JsonSyntax syntax = JsonSyntax::kJson) {
  const bool gemma = syntax == JsonSyntax::kGemma4;
  if (value.is_null()) {
    out += "null";
  } else if (value.is_bool()) {
    out += value.as_bool() ? "true" : "false";
  } else if (value.is_number()) {
    const double x = value.as_number();
    if (!std::isfinite(x) || (std::floor(x) == x && std::fabs(x) >= 9007199254740992.0)) {
      return invalid(pointer, "the number is not exactly representable (finite numbers, "
                              "integers below 2^53 in magnitude); write it as a string");
    }
    out += number_text(x);
  } else if (value.is_string() && gemma) {
    if (value.as_string().find("<|") != std::string::npos) {
      return invalid(pointer, "the string holds \"<|\", which Gemma 4's syntax cannot write "
                              "(it would end the <|\"|> string)");
    }
    out += kGemmaQuote;
    out += value.as_string();
    out += kGemmaQuote;
  } else if (value.is_string()) {
    json::write_string(value.as_string(), out);
  } else if (value.is_array()) {
    out += '[';
    for (size_t i = 0; i < value.as_array().size(); ++i) {
      if (i > 0) out += ',';
      auto done = write_compact(value.as_array()[i], out, pointer, syntax);
      if (!done.ok()) return done;
    }
    out += ']';
  } else {
    std::vector<const json::Member*> members;
    for (const auto& member : value.as_object()) members.push_back(&member);
    if (gemma) {
      for (const json::Member* member : members) {
        const std::string problem = gemma_key_problem(member->first);
        if (!problem.empty()) return invalid(pointer, problem);
        if (members.size() > 1 && !is_ascii(member->first)) {
          return invalid(pointer, "property name '" + member->first +
                                      "' is not ASCII: Gemma 4's key order (case-insensitive "
                                      "dictsort) is not defined for it here");
        }
      }
      std::stable_sort(members.begin(), members.end(),
                       [](const json::Member* a, const json::Member* b) {
                         return dictsort_less(a->first, b->first);
                       });
    }
    out += '{';
    bool first = true;
    for (const json::Member* member : members) {
      if (!first) out += ',';
      first = false;
      if (gemma) {
        out += member->first;
      } else {
        json::write_string(member->first, out);
      }
      out += ':';
      auto done = write_compact(member->second, out, pointer, syntax);
      if (!done.ok()) return done;
    }
    out += '}';
  }
  return {};
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

Result<uint32_t> parse_count(const json::Value& value, const std::string& pointer,
                             uint32_t limit, const char* limit_name) {
  if (!value.is_number() || value.as_number() < 0 ||
      std::floor(value.as_number()) != value.as_number()) {
    return invalid(pointer, "must be a non-negative integer");
  }
  if (value.as_number() > limit) {
    return invalid(pointer, "is larger than the supported " + std::to_string(limit) + " (" +
                                limit_name + ")");
  }
  return static_cast<uint32_t>(value.as_number());
}

bool is_annotation(const std::string& key) {
  static const std::set<std::string> kAnnotations = {
      "title",   "description", "default",    "examples", "$schema",     "$id",
      "$comment", "deprecated", "readOnly",   "writeOnly", "$defs",      "definitions",
      // Draft 4's $id, anchors (a $ref to one is still refused: only JSON pointers resolve),
      // and the content* annotations (2019-09 on: annotations only).
      "id", "$anchor", "$dynamicAnchor", "$recursiveAnchor", "$vocabulary", "contentMediaType",
      "contentEncoding", "contentSchema",
      // Editor annotations common in SchemaStore schemas (VS Code's JSON language service).
      "markdownDescription", "markdownEnumDescriptions", "enumDescriptions",
      "deprecationMessage", "errorMessage", "defaultSnippets", "allowTrailingCommas",
      "allowComments"};
  // x-* are vendor extensions (OpenAPI); validators ignore unknown keywords.
  return kAnnotations.count(key) > 0 || key.rfind("x-", 0) == 0;
}

// Keywords of the JSON Schema vocabularies (drafts 3 to 2020-12) and OpenAPI's `nullable` that
// assert something about a value (or apply subschemas that do). A key outside these and the
// annotations is unknown, and JSON Schema makes an unknown keyword an annotation: ignored
// (refused under `strict`).
bool is_assertion_keyword(const std::string& key) {
  static const std::set<std::string> kKeywords = {
      "type", "nullable", "enum", "const", "properties", "required", "additionalProperties",
      "patternProperties", "propertyNames", "minProperties", "maxProperties", "items",
      "prefixItems", "additionalItems", "unevaluatedItems", "unevaluatedProperties", "minItems",
      "maxItems", "uniqueItems", "contains", "minContains", "maxContains", "minLength",
      "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
      "exclusiveMaximum", "multipleOf", "$ref", "allOf", "anyOf", "oneOf", "not", "if", "then",
      "else", "dependentRequired", "dependentSchemas", "dependencies",
      // Known, and not enforced: refused even when not strict (see unenforced_keyword).
      "$dynamicRef", "$recursiveRef", "divisibleBy", "disallow", "extends"};
  return kKeywords.count(key) > 0;
}

// Assertions the grammar cannot enforce, with what to do instead; nullptr for the others.
const char* unenforced_keyword(const std::string& key) {
  if (key == "$dynamicRef" || key == "$recursiveRef") {
    return "its target depends on the dynamic scope; use $ref";
  }
  if (key == "divisibleBy") return "it is draft 3's; write multipleOf";
  if (key == "disallow") return "it is draft 3's; write not: {\"type\": ...}";
  if (key == "extends") return "it is draft 3's; write allOf";
  return nullptr;
}

// Keywords the compiler writes for itself when it turns `not` into what values failing it look
// like (they only narrow: a schema that spelled them would still get valid output).
const std::string kNotValues = "\x01not-values";      // values never generated (array)
const std::string kNotPatterns = "\x01not-patterns";  // regexes no string matches (array)
const std::string kNotRequired = "\x01not-required";  // name lists never all present (array)
const std::string kMoreNots = "\x01more-nots";  // schemas to negate after `not` (array)
const std::string kMorePatterns = "\x01more-patterns";  // regexes that must match too (array)

bool is_internal(const std::string& key) {
  return key == kNotValues || key == kNotPatterns || key == kNotRequired || key == kMoreNots ||
         key == kMorePatterns;
}

// A regex matching exactly `text` (ASCII letters and digits as themselves, every other ASCII
// character as \u{HEX}, the rest raw UTF-8).
std::string literal_regex(const std::string& text) {
  std::string out = "^";
  char escape[16];
  for (unsigned char c : text) {
    if (c >= 0x80 || std::isalnum(c)) {
      out += static_cast<char>(c);
    } else {
      std::snprintf(escape, sizeof(escape), "\\u{%X}", c);
      out += escape;
    }
  }
  return out + "$";
}

// ---- $ref resolution: URIs, $id and anchors ----
//
// Before compiling, every $ref is rewritten to the JSON pointer (in the whole document) of the
// schema it names, resolved as JSON Schema does: against the base URI its enclosing $ids give
// (RFC 3986), to a schema with that $id, an anchor ($anchor, $dynamicAnchor, draft 7's "$id":
// "#name") or a JSON pointer fragment inside one. The compiler then only follows pointers.
// Rewritten references start with kResolvedRef; references that cannot be resolved carry their
// error (kRefError + index), reported only if the compiler reaches them.
constexpr char kResolvedRef = '\x01';
constexpr char kRefError = '\x02';

struct UriParts {
  std::string scheme, authority, path, query, fragment;
  bool has_scheme = false, has_authority = false, has_query = false, has_fragment = false;
};

UriParts parse_uri(const std::string& text) {
  UriParts u;
  size_t at = 0;
  const size_t colon = text.find(':');
  if (colon != std::string::npos && colon > 0 &&
      std::isalpha(static_cast<unsigned char>(text[0])) && text.find_first_of("/?#") > colon &&
      std::all_of(text.begin(), text.begin() + colon, [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
      })) {
    u.has_scheme = true;
    u.scheme = text.substr(0, colon);
    at = colon + 1;
  }
  if (text.compare(at, 2, "//") == 0) {
    const size_t end = std::min(text.find_first_of("/?#", at + 2), text.size());
    u.has_authority = true;
    u.authority = text.substr(at + 2, end - at - 2);
    at = end;
  }
  const size_t path_end = std::min(text.find_first_of("?#", at), text.size());
  u.path = text.substr(at, path_end - at);
  at = path_end;
  if (at < text.size() && text[at] == '?') {
    const size_t end = std::min(text.find('#', at), text.size());
    u.has_query = true;
    u.query = text.substr(at + 1, end - at - 1);
    at = end;
  }
  if (at < text.size() && text[at] == '#') {
    u.has_fragment = true;
    u.fragment = text.substr(at + 1);
  }
  return u;
}

// RFC 3986 section 5.2.4.
std::string remove_dot_segments(std::string in) {
  std::string out;
  while (!in.empty()) {
    if (in.rfind("../", 0) == 0) {
      in.erase(0, 3);
    } else if (in.rfind("./", 0) == 0) {
      in.erase(0, 2);
    } else if (in.rfind("/./", 0) == 0) {
      in.erase(0, 2);
    } else if (in == "/.") {
      in = "/";
    } else if (in.rfind("/../", 0) == 0 || in == "/..") {
      in = in.size() == 3 ? "/" : in.substr(3);
      const size_t cut = out.rfind('/');
      out.erase(cut == std::string::npos ? 0 : cut);
    } else if (in == "." || in == "..") {
      in.clear();
    } else {
      const size_t next = in.find('/', in[0] == '/' ? 1 : 0);
      out += in.substr(0, next);
      in.erase(0, next == std::string::npos ? in.size() : next);
    }
  }
  return out;
}

std::string join_uri(const UriParts& u) {
  std::string text;
  if (u.has_scheme) text += u.scheme + ":";
  if (u.has_authority) text += "//" + u.authority;
  text += u.path;
  if (u.has_query) text += "?" + u.query;
  if (u.has_fragment) text += "#" + u.fragment;
  return text;
}

// `reference` resolved against `base` (RFC 3986 section 5.2.2); empty when the result would
// depend on the resolver (a relative path against a base without an authority, such as urn:,
// which Python's urljoin and RFC 3986 resolve differently).
std::optional<std::string> resolve_uri(const std::string& base, const std::string& reference) {
  if (!reference.empty() && reference[0] == '#') {  // same document: base + fragment
    return base.substr(0, base.find('#')) + reference;
  }
  const UriParts r = parse_uri(reference);
  const UriParts b = parse_uri(base);
  UriParts t;
  if (r.has_scheme) {
    t = r;
    t.path = remove_dot_segments(r.path);
  } else {
    if (!r.has_authority && !b.has_authority && !base.empty()) return std::nullopt;
    t.has_scheme = b.has_scheme;
    t.scheme = b.scheme;
    if (r.has_authority) {
      t.has_authority = true;
      t.authority = r.authority;
      t.path = remove_dot_segments(r.path);
      t.has_query = r.has_query;
      t.query = r.query;
    } else {
      t.has_authority = b.has_authority;
      t.authority = b.authority;
      if (r.path.empty()) {
        t.path = b.path;
        t.has_query = r.has_query || b.has_query;
        t.query = r.has_query ? r.query : b.query;
      } else {
        if (r.path[0] == '/') {
          t.path = remove_dot_segments(r.path);
        } else {
          const size_t slash = b.path.rfind('/');
          const std::string merged =
              b.has_authority && b.path.empty()
                  ? "/" + r.path
                  : b.path.substr(0, slash == std::string::npos ? 0 : slash + 1) + r.path;
          t.path = remove_dot_segments(merged);
        }
        t.has_query = r.has_query;
        t.query = r.query;
      }
    }
  }
  t.has_fragment = r.has_fragment;
  t.fragment = r.fragment;
  return join_uri(t);
}

std::string percent_decoded(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() &&
        std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out += static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string pointer_token(const std::string& name) {
  std::string token;
  for (char c : name) {
    if (c == '~') {
      token += "~0";
    } else if (c == '/') {
      token += "~1";
    } else {
      token += c;
    }
  }
  return token;
}

class RefResolver {
 public:
  explicit RefResolver(const json::Value& document) {
    draft_ = kUnknownDraft;
    if (document.is_object()) {
      if (const json::Value* dialect = document.find("$schema"); dialect && dialect->is_string()) {
        const std::string& d = dialect->as_string();
        if (d.find("draft-0") != std::string::npos) draft_ = kLegacyDraft;
        if (d.find("2019-09") != std::string::npos || d.find("2020-12") != std::string::npos) {
          draft_ = kModernDraft;
        }
      }
    }
  }

  // The document with every $ref rewritten (see kResolvedRef), and the errors they refer to.
  json::Value run(const json::Value& document, std::vector<std::string>& errors) {
    index(document, "", "", true);
    return rewrite(document, "", "", errors);
  }

 private:
  enum Draft { kLegacyDraft, kModernDraft, kUnknownDraft };

  // Where a schema object's $id puts its base; nullopt when it has none that applies. Under
  // `legacy` rules (draft 7 and earlier) a $id beside $ref is ignored, as all $ref's siblings.
  static std::optional<std::string> own_base(const json::Value& schema, const std::string& base,
                                             bool legacy) {
    const json::Value* id = schema.find("$id");
    if (id == nullptr || !id->is_string() || id->as_string().empty() || id->as_string()[0] == '#') {
      return std::nullopt;
    }
    if (legacy && schema.find("$ref") != nullptr) return std::nullopt;
    auto resolved = resolve_uri(base, id->as_string());
    if (!resolved) return std::nullopt;
    return resolved->substr(0, resolved->find('#'));
  }

  // Keywords whose value is a schema, an array of schemas, or an object of schemas.
  static int schema_keyword(const std::string& key) {
    static const std::set<std::string> kOne = {
        "additionalProperties", "additionalItems", "unevaluatedItems", "unevaluatedProperties",
        "contains", "propertyNames", "not", "if", "then", "else", "contentSchema", "items"};
    static const std::set<std::string> kList = {"allOf", "anyOf", "oneOf", "prefixItems", "items"};
    static const std::set<std::string> kMap = {"properties", "patternProperties", "$defs",
                                               "definitions", "dependentSchemas", "dependencies"};
    return (kOne.count(key) ? 1 : 0) | (kList.count(key) ? 2 : 0) | (kMap.count(key) ? 4 : 0);
  }

  template <class Visit>
  static void each_subschema(const json::Value& schema, const std::string& pointer, Visit visit) {
    for (const auto& [key, member] : schema.as_object()) {
      const int kind = schema_keyword(key);
      const std::string at = pointer + "/" + pointer_token(key);
      if ((kind & 1) && (member.is_object() || member.is_bool())) visit(member, at);
      if ((kind & 2) && member.is_array()) {
        for (size_t i = 0; i < member.as_array().size(); ++i) {
          visit(member.as_array()[i], at + "/" + std::to_string(i));
        }
      }
      if ((kind & 4) && member.is_object()) {
        for (const auto& [name, sub] : member.as_object()) {
          if (sub.is_object()) visit(sub, at + "/" + pointer_token(name));
        }
      }
    }
  }

  void index(const json::Value& schema, const std::string& base_in, const std::string& pointer,
             bool root) {
    if (!schema.is_object()) return;
    std::string base = base_in;
    if (auto own = own_base(schema, base, draft_ == kLegacyDraft)) {
      base = *own;
      // Without $schema, a $id beside $ref applies only under draft 2019-09 and later.
      const bool ambiguous = draft_ == kUnknownDraft && schema.find("$ref") != nullptr;
      (ambiguous ? ambiguous_resources_ : resources_)[base] = pointer;
    }
    if (root) resources_.emplace(base, pointer);
    auto add_anchor = [&](const std::string& name) {
      anchors_.emplace(base + "#" + name, pointer);
    };
    const bool legacy_ref = draft_ == kLegacyDraft && schema.find("$ref") != nullptr;
    if (const json::Value* id = schema.find("$id"); id && id->is_string() && !legacy_ref &&
                                                     draft_ != kModernDraft) {
      const std::string& text = id->as_string();  // draft 7's "#name" or "uri#name"
      const size_t hash = text.find('#');
      if (hash != std::string::npos && hash + 1 < text.size()) add_anchor(text.substr(hash + 1));
    }
    if (draft_ != kLegacyDraft) {
      for (const char* keyword : {"$anchor", "$dynamicAnchor"}) {
        const json::Value* name = schema.find(keyword);
        if (name != nullptr && name->is_string()) add_anchor(name->as_string());
      }
    }
    each_subschema(schema, pointer, [&](const json::Value& sub, const std::string& at) {
      index(sub, base, at, false);
    });
  }

  // The document pointer `reference` names from `base`, or an error.
  std::string locate(const std::string& base, const std::string& reference,
                     std::string& error) const {
    auto absolute = resolve_uri(base, reference);
    if (!absolute) {
      error = "the reference '" + reference + "' is relative to a base URI without an "
              "authority ('" + base + "'), which resolvers read differently; write it absolute";
      return "";
    }
    const size_t hash = absolute->find('#');
    const std::string uri = absolute->substr(0, hash);
    const std::string fragment = hash == std::string::npos ? "" : absolute->substr(hash + 1);
    auto resource = resources_.find(uri);
    if (resource == resources_.end()) {
      error = ambiguous_resources_.count(uri)
                  ? "the reference '" + reference + "' names a $id beside a $ref, which only "
                    "applies from draft 2019-09 on; add \"$schema\" to say the draft"
                  : "the reference '" + reference + "' names '" + uri +
                        "', which is not this document (remote references are not fetched); "
                        "inline the schema";
      return "";
    }
    if (fragment.empty() || fragment[0] == '/') return resource->second + percent_decoded(fragment);
    auto anchor = anchors_.find(uri + "#" + fragment);
    if (anchor == anchors_.end()) {
      error = "the reference '" + reference + "' names an anchor that is not in the document";
      return "";
    }
    return anchor->second;
  }

  // `base`: the base URI by the rules of the document's draft (2019-09's when it does not say);
  // `legacy_base`: by draft 7's, when the draft is unknown. A reference the two resolve
  // differently is refused.
  json::Value rewrite(const json::Value& schema, const std::string& base_in,
                      const std::string& legacy_base_in, std::vector<std::string>& errors) {
    if (!schema.is_object()) return schema;
    std::string base = base_in;
    std::string legacy_base = legacy_base_in;
    if (auto own = own_base(schema, base, draft_ == kLegacyDraft)) base = *own;
    if (auto own = own_base(schema, legacy_base, draft_ != kModernDraft)) legacy_base = *own;
    json::Object out;
    for (const auto& [key, member] : schema.as_object()) {
      if (key == "$ref" && member.is_string()) {
        std::string error;
        std::string target;
        if (!member.as_string().empty() && member.as_string()[0] < ' ') {
          error = "a $ref here (a subschema compiled on its own, such as propertyNames) is not "
                  "supported; inline the schema";
        } else {
          target = locate(base, member.as_string(), error);
          if (error.empty() && legacy_base != base) {
            std::string other_error;
            const std::string other = locate(legacy_base, member.as_string(), other_error);
            if (!other_error.empty() || other != target) {
              error = "the reference '" + member.as_string() + "' resolves differently in draft "
                      "7 (a $id beside $ref is ignored) and in later drafts; add \"$schema\" to "
                      "say the draft";
            }
          }
        }
        if (!error.empty()) {
          errors.push_back(error);
          out.emplace_back(key, json::Value(std::string(1, kRefError) +
                                            std::to_string(errors.size() - 1)));
        } else {
          out.emplace_back(key, json::Value(std::string(1, kResolvedRef) + "#" + target));
        }
        continue;
      }
      const int kind = schema_keyword(key);
      if (kind == 0) {
        // An unknown keyword holding objects (OpenAPI's components/schemas, a vendor's
        // definitions) may be the target of a $ref: its $refs are rewritten too. Values
        // (enum, const, default, ...) are left as they are.
        const bool container = member.is_object() && !is_annotation(key) &&
                               !is_assertion_keyword(key);
        out.emplace_back(key, container ? rewrite(member, base, legacy_base, errors) : member);
        continue;
      }
      if ((kind & 1) && member.is_object()) {
        out.emplace_back(key, rewrite(member, base, legacy_base, errors));
      } else if ((kind & 2) && member.is_array()) {
        json::Array list;
        for (const auto& sub : member.as_array()) {
          list.push_back(rewrite(sub, base, legacy_base, errors));
        }
        out.emplace_back(key, json::Value(std::move(list)));
      } else if ((kind & 4) && member.is_object()) {
        json::Object map;
        for (const auto& [name, sub] : member.as_object()) {
          map.emplace_back(name, rewrite(sub, base, legacy_base, errors));
        }
        out.emplace_back(key, json::Value(std::move(map)));
      } else {
        out.emplace_back(key, member);
      }
    }
    return json::Value(std::move(out));
  }

  Draft draft_;
  std::map<std::string, std::string> resources_;            // base URI -> pointer
  std::map<std::string, std::string> ambiguous_resources_;  // $ids only later drafts apply
  std::map<std::string, std::string> anchors_;              // URI#name -> pointer
};

// The first bytes a value can start with, as classes: one bit per JSON type's opening byte(s).
enum FirstByte : uint8_t {
  kFirstString = 1, kFirstNumber = 2, kFirstBoolean = 4, kFirstNull = 8, kFirstObject = 16,
  kFirstArray = 32
};

uint8_t first_bytes_of_types(uint8_t types) {
  uint8_t classes = 0;
  if (types & kJsonString) classes |= kFirstString;
  if (types & (kJsonNumber | kJsonInteger)) classes |= kFirstNumber;
  if (types & kJsonBoolean) classes |= kFirstBoolean;
  if (types & kJsonNull) classes |= kFirstNull;
  if (types & kJsonObject) classes |= kFirstObject;
  if (types & kJsonArray) classes |= kFirstArray;
  return classes;
}

uint8_t types_of_first_bytes(uint8_t classes) {
  uint8_t types = 0;
  if (classes & kFirstString) types |= kJsonString;
  if (classes & kFirstNumber) types |= kJsonNumber | kJsonInteger;
  if (classes & kFirstBoolean) types |= kJsonBoolean;
  if (classes & kFirstNull) types |= kJsonNull;
  if (classes & kFirstObject) types |= kJsonObject;
  if (classes & kFirstArray) types |= kJsonArray;
  return types;
}

const char* first_byte_name(uint8_t cls) {
  switch (cls) {
    case kFirstString: return "strings";
    case kFirstNumber: return "numbers";
    case kFirstBoolean: return "booleans";
    case kFirstNull: return "null";
    case kFirstObject: return "objects";
    default: return "arrays";
  }
}

size_t code_points(const std::string& utf8) {
  size_t n = 0;
  for (unsigned char c : utf8) n += (c & 0xC0) != 0x80;
  return n;
}

// A JSON pointer's tokens ("/a~1b/0" -> "a/b", "0").
std::vector<std::string> pointer_tokens(const std::string& pointer) {
  std::vector<std::string> tokens;
  size_t at = 0;
  while (at < pointer.size()) {
    const size_t next = pointer.find('/', at + 1);
    std::string token = pointer.substr(at + 1, next == std::string::npos ? std::string::npos
                                                                          : next - at - 1);
    std::string unescaped;
    for (size_t i = 0; i < token.size(); ++i) {
      if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
        unescaped += token[i + 1] == '0' ? '~' : '/';
        ++i;
      } else {
        unescaped += token[i];
      }
    }
    tokens.push_back(std::move(unescaped));
    at = next == std::string::npos ? pointer.size() : next;
  }
  return tokens;
}

json::Value object_without(const json::Value& value, std::initializer_list<const char*> keys) {
  json::Object rest;
  for (const auto& member : value.as_object()) {
    if (std::find_if(keys.begin(), keys.end(), [&](const char* k) { return member.first == k; }) ==
        keys.end()) {
      rest.push_back(member);
    }
  }
  return json::Value(std::move(rest));
}

// The least multiple of `step` (>= 1) that is >= x.
int64_t multiple_at_least(int64_t x, int64_t step) {
  const int64_t r = ((x % step) + step) % step;
  return r == 0 ? x : x + (step - r);
}

// multipleOf `m` as the step of the integers generated for it: the least positive integer that
// is a multiple of m, such that every multiple of that integer passes both an exact decimal check
// and the floating-point one validators do (instance / m is an integer). Integers above the
// grammar's 15 digits: 10^15, so that only 0 is generated. Refused when m is not positive, or
// when m is fractional and its double is too far from the decimal it was written as for the
// floating-point quotient to come out exact.
Result<int64_t> integer_step(const json::Value& multiple, const std::string& at) {
  if (!multiple.is_number() || !(multiple.as_number() > 0)) {
    return invalid(at, "multipleOf must be a number above 0");
  }
  const double m = multiple.as_number();
  constexpr double kOnlyZero = kMaxInteger + 1.0;
  if (std::floor(m) == m) return static_cast<int64_t>(std::min(m, kOnlyZero));
  // m as a decimal a / 10^d, the fewest fraction digits that read back as m.
  double scale = 1;
  for (int d = 1; d <= 15; ++d) {
    scale *= 10;
    const double a = std::round(m * scale);
    if (a < 1 || a > kMaxInteger || a / scale != m) continue;
    // The relative error of m's double against a / 10^d, exactly: m * scale = p + err.
    const double p = m * scale;
    const double err = std::fma(m, scale, -p);
    const double delta = ((p - a) + err) / a;  // m's double = m * (1 + delta)
    // integer N / (1 + delta) rounds back to N for every N exactly when N * |delta| / (1 +
    // delta) stays within half the gap around N: |delta| <= 2^-54 (1 + delta). 0.1's double
    // is 0.1 (1 + 2^-54): exact; 0.7's is 0.7 (1 - 6.3e-17): 7 / 0.7 = 10.000000000000002.
    if (std::fabs(delta) > std::ldexp(1.0, -54) * (1 + delta)) break;
    auto whole = static_cast<int64_t>(a);
    auto ten = static_cast<int64_t>(scale);
    const int64_t g = std::gcd(whole, ten);
    return whole / g;  // k * a / 10^d is an integer exactly when k is a multiple of 10^d / g
  }
  return invalid(at, "multipleOf " + number_text(m) +
                         " cannot be enforced: validators divide by its binary value, which is "
                         "far enough from " + number_text(m) + " that whole multiples of it fail "
                         "their check (integers and decimals such as 0.1, 0.5 or 0.25 work); "
                         "remove it or check it after generation");
}

// format -> a regex of a strict subset of what the format's RFC allows (json_schema.h).
const char* format_regex(const std::string& format) {
  // Dates: days valid for their month (Feb 29 left out, so no leap-year arithmetic).
#define RNE_DATE                                                                             \
  "[1-9]\\d{3}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|" \
  "02-(?:0[1-9]|1\\d|2[0-8]))"
#define RNE_TIME \
  "(?:[01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(?:\\.\\d{1,6})?(?:Z|[+-](?:[01]\\d|2[0-3]):[0-5]\\d)"
#define RNE_LABEL "[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
#define RNE_PCHAR "(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})"
#define RNE_QCHAR "(?:[A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2})"
#define RNE_OCTET "(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)"
#define RNE_SHORT_LABEL "[A-Za-z0-9](?:[A-Za-z0-9-]{0,18}[A-Za-z0-9])?"
#define RNE_URI                                                                               \
  "[A-Za-z][A-Za-z0-9+.-]*://" RNE_LABEL "(?:\\." RNE_LABEL ")*(?::\\d{1,5})?(?:/" RNE_PCHAR   \
  "*)*(?:\\?" RNE_QCHAR "*)?(?:#" RNE_QCHAR "*)?"
#define RNE_SEGMENT "(?:[A-Za-z0-9._~-]|%[0-9A-Fa-f]{2})+"
  static const std::pair<const char*, const char*> kFormats[] = {
      {"date", "^" RNE_DATE "$"},
      {"time", "^" RNE_TIME "$"},
      {"date-time", "^" RNE_DATE "T" RNE_TIME "$"},
      {"uuid", "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"},
      {"email", "^[A-Za-z0-9_+-]+(?:\\.[A-Za-z0-9_+-]+)*@" RNE_LABEL "(?:\\." RNE_LABEL ")+$"},
      {"uri", "^" RNE_URI "$"},
      {"ipv4", "^" RNE_OCTET "(?:\\." RNE_OCTET "){3}$"},
      {"ipv6", "^[0-9a-f]{1,4}(?::[0-9a-f]{1,4}){7}$"},
      // At most 12 labels of at most 20 characters: within the 253 bytes a name may have.
      {"hostname", "^" RNE_SHORT_LABEL "(?:\\." RNE_SHORT_LABEL "){0,11}$"},
      // The ASCII forms are valid internationalized ones too. IDNA reserves a "--" in a label's
      // third and fourth characters (A-labels), so these labels have no hyphen at all.
      {"idn-hostname", "^[A-Za-z0-9]{1,20}(?:\\.[A-Za-z0-9]{1,20}){0,11}$"},
      {"idn-email", "^[A-Za-z0-9_+-]+(?:\\.[A-Za-z0-9_+-]+)*@" RNE_LABEL "(?:\\." RNE_LABEL ")+$"},
      {"iri", "^" RNE_URI "$"},
      // A URI, or a relative path whose segments hold no ':' (which would read as a scheme).
      {"uri-reference", "^(?:" RNE_URI "|/?" RNE_SEGMENT "(?:/" RNE_SEGMENT ")*)$"},
      {"iri-reference", "^(?:" RNE_URI "|/?" RNE_SEGMENT "(?:/" RNE_SEGMENT ")*)$"},
      // RFC 6570: a template of literals only (no expressions).
      {"uri-template", "^[A-Za-z0-9._~/:?#@!$&()*+,;=-]*$"},
      {"json-pointer", "^(?:/(?:[A-Za-z0-9_.-]|~[01])*)*$"},
      {"relative-json-pointer", "^(?:0|[1-9]\\d{0,8})(?:#|(?:/(?:[A-Za-z0-9_.-]|~[01])*)*)$"},
      // RFC 3339 appendix A: days with an optional hour part, weeks, or hours.
      {"duration", "^P(?:\\d{1,4}D(?:T\\d{1,4}H)?|\\d{1,4}W|T\\d{1,4}H)$"},
      // Letters, digits and spaces: a regex (of literals) under ECMA-262 and Python alike.
      {"regex", "^[A-Za-z0-9 ]*$"},
  };
#undef RNE_DATE
#undef RNE_TIME
#undef RNE_LABEL
#undef RNE_PCHAR
#undef RNE_QCHAR
#undef RNE_OCTET
#undef RNE_SHORT_LABEL
#undef RNE_URI
#undef RNE_SEGMENT
  for (const auto& [name, regex] : kFormats) {
    if (format == name) return regex;
  }
  return nullptr;
}

// What writing each character inside a JSON string costs in bytes: 2 for the escaped ones, 0
// for control characters that only \u can write (not generated, see json_schema.h).
const std::array<uint8_t, 256>& json_string_costs() {
  static const std::array<uint8_t, 256> costs = [] {
    std::array<uint8_t, 256> c{};
    for (int b = 0x20; b < 256; ++b) c[b] = 1;
    c['"'] = c['\\'] = 2;
    for (char e : {'\b', '\f', '\n', '\r', '\t'}) c[static_cast<uint8_t>(e)] = 2;
    return c;
  }();
  return costs;
}

// Gemma 4's string content is raw: every byte is written as itself.
const std::array<uint8_t, 256>& raw_costs() {
  static const std::array<uint8_t, 256> costs = [] {
    std::array<uint8_t, 256> c{};
    c.fill(1);
    return c;
  }();
  return costs;
}

// The shortest string a pattern accepts, as a string literal of `syntax`.
std::string shortest_pattern_string(const StringPattern& p, JsonSyntax syntax) {
  if (syntax == JsonSyntax::kGemma4) {
    std::string text(kGemmaQuote);
    for (uint16_t s = p.dfa.start; !p.dfa.accepting[s]; s = p.dfa.step(s, p.paths.first_byte[s])) {
      text += static_cast<char>(p.paths.first_byte[s]);
    }
    return text + std::string(kGemmaQuote);
  }
  std::string text = "\"";
  for (uint16_t s = p.dfa.start; !p.dfa.accepting[s];) {
    const uint8_t c = p.paths.first_byte[s];
    // The escapes the grammar takes (json::write_string writes \b and \f as \u00XX).
    const char* escaped = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\b' ? "\\b"
                          : c == '\f' ? "\\f" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                          : c == '\t' ? "\\t" : nullptr;
    if (escaped != nullptr) {
      text += escaped;
    } else {
      text += static_cast<char>(c);
    }
    s = p.dfa.step(s, c);
  }
  return text + "\"";
}

std::string compact(const json::Value& value) {
  std::string text;
  (void)write_compact(value, text, "");
  return text;
}

class Compiler {
 public:
  Compiler(const json::Value& document, std::vector<std::string> ref_errors, JsonSyntax syntax,
           bool strict)
      : document_(document), ref_errors_(std::move(ref_errors)), syntax_(syntax),
        gemma_(syntax == JsonSyntax::kGemma4), strict_(strict) {
    schema_.syntax = syntax;
    schema_.nodes.resize(2);
    pointers_.resize(2);
    filled_.assign(2, true);
    schema_.boolean_node = 0;
    schema_.nodes[0].literals = {"true", "false"};
    schema_.null_node = 1;
    schema_.nodes[1].literals = {"null"};
  }

  Result<std::shared_ptr<const JsonSchema>> run() {
    auto node = compile(document_, "");
    if (!node.ok()) return node.error();
    schema_.root = *node;
    auto unions = resolve_unions();
    if (!unions.ok()) return unions.error();
    if (gemma_) {
      auto ordered = order_keys_for_gemma();
      if (!ordered.ok()) return ordered.error();
    }
    trim_optional_runs();
    auto sized = compute_minimal_values();
    if (!sized.ok()) return sized.error();
    if (schema_.nodes[schema_.root].minimal_depth > JsonGrammar::kMaxDepth) {
      return invalid("", "its shortest document nests deeper than " +
                             std::to_string(JsonGrammar::kMaxDepth) +
                             " values (JsonGrammar::kMaxDepth)");
    }
    return std::make_shared<const JsonSchema>(std::move(schema_));
  }

 private:
  // A keyword that asserts nothing here: an annotation, or (unless strict) an unknown keyword.
  bool ignored(const std::string& key) const {
    return is_annotation(key) || (!strict_ && !is_assertion_keyword(key) && !is_internal(key));
  }

  bool only_annotations(const json::Value& object) const {
    for (const auto& member : object.as_object()) {
      if (!ignored(member.first)) return false;
    }
    return true;
  }

  // The key literal of a property in this syntax (see SchemaProperty::key).
  std::string key_literal(const std::string& name) const {
    if (gemma_) return name + ":";
    std::string literal;
    json::write_string(name, literal);
    return literal;
  }

  // Gemma 4's template writes properties in dictsort order: so are they generated (the
  // shortest values, computed after this, follow it too).
  Result<void> order_keys_for_gemma() {
    for (size_t id = 0; id < schema_.nodes.size(); ++id) {
      if (schema_.nodes[id].tagged) continue;  // its entries are tag values, not names
      auto& properties = schema_.nodes[id].properties;
      auto name = [](const SchemaProperty& p) { return p.key.substr(0, p.key.size() - 1); };
      if (properties.size() > 1) {
        for (const SchemaProperty& p : properties) {
          if (!is_ascii(p.key)) {
            return invalid(pointers_[id] + "/properties",
                           "property name '" + name(p) +
                               "' is not ASCII: Gemma 4's key order (case-insensitive dictsort) "
                               "is not defined for it here");
          }
        }
      }
      std::stable_sort(properties.begin(), properties.end(),
                       [&](const SchemaProperty& a, const SchemaProperty& b) {
                         return dictsort_less(name(a), name(b));
                       });
    }
    return {};
  }

  // The grammar reads the properties that may come next (up to the next required one) as a
  // 64-bit set: of kMaxOptionalRun + 1 optional ones in a row, the last are left out (never
  // generated: a narrower language). Required ones always stay, any number of them.
  void trim_optional_runs() {
    for (SchemaNode& node : schema_.nodes) {
      if (node.tagged || node.properties.size() <= kMaxOptionalRun) continue;
      size_t run = 0;
      auto& properties = node.properties;
      properties.erase(std::remove_if(properties.begin(), properties.end(),
                                      [&](const SchemaProperty& p) {
                                        if (p.required) {
                                          run = 0;
                                          return false;
                                        }
                                        return ++run > kMaxOptionalRun;
                                      }),
                       properties.end());
    }
  }

  Result<uint32_t> add_node(const std::string& pointer) {
    if (schema_.nodes.size() >= kMaxSchemaNodes) {
      return invalid(pointer, "the schema compiles to more than " +
                                  std::to_string(kMaxSchemaNodes) +
                                  " subschemas (kMaxSchemaNodes); simplify its allOf/anyOf");
    }
    schema_.nodes.emplace_back();
    pointers_.push_back(pointer);
    filled_.push_back(false);
    return static_cast<uint32_t>(schema_.nodes.size() - 1);
  }

  // An error for a schema that no value satisfies (not one that uses what is not supported):
  // an optional property with such a schema is left out instead (see compile_keywords).
  Error unsatisfiable(const std::string& pointer, const std::string& what) {
    Error error = invalid(pointer, what);
    unsatisfiable_ = error.message;
    return error;
  }

  // The schema `true`: any value (arrays of any values).
  uint32_t any_node() {
    if (any_ == 0) {
      schema_.nodes.emplace_back();
      pointers_.push_back("");
      filled_.push_back(true);
      any_ = static_cast<uint32_t>(schema_.nodes.size() - 1);
      schema_.nodes[any_].items = any_;
    }
    return any_;
  }

  // RAII nesting counter: subschemas, $ref hops and allOf merges all count.
  struct Nest {
    explicit Nest(size_t& depth) : depth_(depth) { ++depth_; }
    ~Nest() { --depth_; }
    size_t& depth_;
  };

  Result<const json::Value*> resolve(const json::Value& ref, const std::string& at,
                                     std::string& target) {
    // RefResolver rewrote every $ref it found (kResolvedRef) or left its error (kRefError).
    const std::string text = ref.is_string() ? ref.as_string() : "";
    if (!text.empty() && text[0] == kRefError) {
      Error error = invalid(at, ref_errors_[std::stoul(text.substr(1))]);
      if (error.message.find("remote references are not fetched") != std::string::npos) {
        remote_ = error.message;
      }
      return error;
    }
    if (text.size() < 2 || text[0] != kResolvedRef) {
      return invalid(at, "$ref must be a string in a subschema (a $ref inside an unknown keyword "
                         "or a value is not followed); inline the schema");
    }
    target = text.substr(2);
    const json::Value* value = &document_;
    for (const std::string& token : pointer_tokens(target)) {
      const json::Value* next = nullptr;
      if (value->is_object()) {
        next = value->find(token);
      } else if (value->is_array() && !token.empty() &&
                 token.find_first_not_of("0123456789") == std::string::npos &&
                 token.size() < 10 && std::stoul(token) < value->as_array().size()) {
        next = &value->as_array()[std::stoul(token)];
      }
      if (next == nullptr) {
        return invalid(at, "the reference '#" + target + "' points at nothing");
      }
      value = next;
    }
    return value;
  }

  static bool has_conditional(const json::Value& value) {
    return value.find("if") != nullptr || value.find("then") != nullptr ||
           value.find("else") != nullptr;
  }

  // if/then/else: values valid against both then and else satisfy it whichever way `if` goes,
  // so both are merged as allOf (exact, if narrower); without `if` neither applies.
  static Result<json::Value> conditional_as_all_of(const json::Value& value,
                                                   const std::string& pointer) {
    json::Array parts = {object_without(value, {"if", "then", "else"})};
    if (value.find("if") != nullptr) {
      for (const char* keyword : {"then", "else"}) {
        const json::Value* branch = value.find(keyword);
        if (branch == nullptr || (branch->is_bool() && branch->as_bool())) continue;
        if (branch->is_bool()) {
          return invalid(pointer + "/" + keyword,
                         std::string(keyword) + ": false is not supported by constrained "
                                                "generation (it would need the negation of "
                                                "if); remove it or check it after generation");
        }
        parts.push_back(*branch);
      }
    }
    if (parts.size() == 1) return parts[0];
    return json::Value(json::Object{{"allOf", json::Value(std::move(parts))}});
  }

  // What compile and flatten refuse at any schema: nesting past kMaxSchemaNesting (checked once
  // the caller's Nest counts this level), `false`, and a value that is no schema.
  std::optional<Error> refused(const json::Value& value, const std::string& pointer) {
    if (depth_ > kMaxSchemaNesting) {
      return invalid(pointer, "schemas nest deeper than " + std::to_string(kMaxSchemaNesting) +
                                  " levels (kMaxSchemaNesting), $ref and allOf included");
    }
    if (value.is_bool()) {
      if (value.as_bool()) return std::nullopt;
      return unsatisfiable(pointer, "the schema 'false' allows no value at all");
    }
    if (!value.is_object()) {
      return invalid(pointer, "a schema must be an object or a boolean, got " +
                                  std::string(value.type_name()));
    }
    return std::nullopt;
  }

  Result<uint32_t> compile(const json::Value& value, const std::string& pointer) {
    Nest nest(depth_);
    if (auto refusal = refused(value, pointer)) return *refusal;
    if (value.is_bool()) return any_node();
    if (const json::Value* ref = value.find("$ref")) {
      const json::Value rest = object_without(value, {"$ref"});
      std::string target;
      auto resolved = resolve(*ref, pointer + "/$ref", target);
      if (!resolved.ok()) return resolved.error();
      if (!only_annotations(rest)) {  // siblings apply too: merge them into the target
        auto merged = merge(**resolved, rest, pointer);
        if (!merged.ok()) return merged.error();
        return compile(*merged, pointer);
      }
      auto known = refs_.find(target);
      if (known != refs_.end()) return known->second;  // recursion lands here
      auto id = add_node(target);
      if (!id.ok()) return id.error();
      refs_[target] = *id;
      auto done = compile_into(**resolved, target, *id);
      if (!done.ok()) return done.error();
      return *id;
    }
    if (has_conditional(value)) {
      auto parts = conditional_as_all_of(value, pointer);
      if (!parts.ok()) return parts.error();
      return compile(*parts, pointer);
    }
    if (value.find("allOf") != nullptr) {
      auto merged = merge_all_of(value, pointer);
      if (!merged.ok()) return merged.error();
      return compile(*merged, pointer);
    }
    auto id = add_node(pointer);
    if (!id.ok()) return id.error();
    auto done = fill(value, pointer, *id);
    if (!done.ok()) return done.error();
    return *id;
  }

  // A schema object without $ref or allOf, into the allocated node `id`.
  Result<void> fill(const json::Value& value, const std::string& pointer, uint32_t id) {
    if (value.find("anyOf") != nullptr || value.find("oneOf") != nullptr) {
      auto done = compile_union(value, pointer, id);
      if (!done.ok()) return done.error();
    } else {
      auto done = compile_keywords(value, pointer, id);
      if (!done.ok()) return done;
    }
    filled_[id] = true;
    return {};
  }

  // Compiles a $ref target into the node `id` its referrers already hold.
  Result<void> compile_into(const json::Value& value, const std::string& pointer, uint32_t id) {
    if (value.is_object() && value.find("$ref") == nullptr && value.find("allOf") == nullptr &&
        value.find("if") == nullptr && value.find("then") == nullptr &&
        value.find("else") == nullptr) {
      return fill(value, pointer, id);
    }
    auto compiled = compile(value, pointer);
    if (!compiled.ok()) return compiled.error();
    if (!filled_[*compiled]) {
      return invalid(pointer, "a $ref cycle with no schema in it (it only refers to itself)");
    }
    if (*compiled != id) {  // an alias: copy (a node does not move once referenced)
      SchemaNode copy = schema_.nodes[*compiled];
      schema_.nodes[id] = std::move(copy);
      auto pending = pending_.find(*compiled);
      if (pending != pending_.end()) {
        Pending alias = pending->second;
        pending_[id] = std::move(alias);
      }
    }
    filled_[id] = true;
    return {};
  }

  // ---- allOf: merged into one schema ----

  Result<json::Value> merge_all_of(const json::Value& value, const std::string& pointer) {
    const json::Value& parts = *value.find("allOf");
    if (!parts.is_array() || parts.as_array().empty()) {
      return invalid(pointer + "/allOf", "allOf must be a non-empty array of schemas");
    }
    json::Value merged = object_without(value, {"allOf"});
    // unevaluatedProperties beside allOf sees the properties its branches evaluate: when no
    // branch has one of its own, it is set aside while they merge (merge() would read it as
    // closing the object to the branches' properties) and put back after.
    const json::Value* unevaluated = merged.find("unevaluatedProperties");
    std::optional<json::Value> set_aside;
    if (unevaluated != nullptr) {
      bool branch_has_one = false;
      for (const auto& part : parts.as_array()) {
        auto flat = flatten(part, pointer + "/allOf");
        if (!flat.ok()) return flat.error();
        branch_has_one = branch_has_one || flat->find("unevaluatedProperties") != nullptr;
      }
      if (!branch_has_one) {
        set_aside = *unevaluated;
        merged = object_without(merged, {"unevaluatedProperties"});
      }
    }
    for (size_t i = 0; i < parts.as_array().size(); ++i) {
      auto next = merge(merged, parts.as_array()[i], pointer + "/allOf/" + std::to_string(i));
      if (!next.ok()) return next.error();
      merged = std::move(*next);
    }
    if (set_aside) merged.as_object().emplace_back("unevaluatedProperties", std::move(*set_aside));
    return merged;
  }

  // A schema without $ref or allOf at its top (resolved or merged), for merging.
  Result<json::Value> flatten(const json::Value& value, const std::string& pointer) {
    Nest nest(depth_);
    if (++flattened_ > kMaxFlattenSteps) {  // allOf/$ref fan-out multiplies: bounded
      return invalid(pointer, "merging its allOf branches and $ref targets takes more than " +
                                  std::to_string(kMaxFlattenSteps) +
                                  " steps (kMaxFlattenSteps); simplify them");
    }
    if (auto refusal = refused(value, pointer)) return *refusal;
    if (value.is_bool()) return json::Value(json::Object{});
    if (const json::Value* ref = value.find("$ref")) {
      std::string target;
      auto resolved = resolve(*ref, pointer + "/$ref", target);
      if (!resolved.ok()) return resolved.error();
      return merge(**resolved, object_without(value, {"$ref"}), pointer);
    }
    if (has_conditional(value)) {  // so two branches' if/then/else merge, not clash
      auto parts = conditional_as_all_of(value, pointer);
      if (!parts.ok()) return parts.error();
      return flatten(*parts, pointer);
    }
    if (value.find("allOf") != nullptr) return merge_all_of(value, pointer);
    return value;
  }

  // allOf of `a` and `b` as one schema. Keywords in one of them are kept; in both, combined
  // where JSON Schema's meaning allows (intersection of the values each accepts), else refused.
  Result<json::Value> merge(const json::Value& a_in, const json::Value& b_in,
                            const std::string& pointer) {
    auto a_flat = flatten(a_in, pointer);
    if (!a_flat.ok()) return a_flat.error();
    auto b_flat = flatten(b_in, pointer);
    if (!b_flat.ok()) return b_flat.error();
    const json::Value& a = *a_flat;
    const json::Value& b = *b_flat;
    if (auto refusal = items_judged_across(a, b, pointer)) return *refusal;
    json::Object out = a.as_object();
    for (const auto& [key, theirs] : b.as_object()) {
      if (auto kept = merge_keyword(a, key, theirs, pointer + "/" + key, out); !kept.ok()) {
        return kept.error();
      }
    }
    spread_items_over_prefix(a, b, out);
    json::Value merged(std::move(out));
    if (auto closed = close_properties(a, b, merged, pointer); !closed.ok()) return closed.error();
    return merged;
  }

  // unevaluatedItems judges the items its own schema object does not evaluate. Once merged,
  // the other side's prefixItems/items would look evaluated to it, which they are not when
  // that side is a conditional branch or an alternative: refused unless only one side says
  // anything about items.
  std::optional<Error> items_judged_across(const json::Value& a, const json::Value& b,
                                           const std::string& pointer) {
    auto judges_items = [](const json::Value& side) {
      const json::Value* u = side.find("unevaluatedItems");
      return u != nullptr && !(u->is_bool() && u->as_bool());
    };
    auto evaluates_items = [](const json::Value& side) {
      for (const char* keyword : {"prefixItems", "items", "additionalItems", "contains",
                                  "unevaluatedItems"}) {
        if (side.find(keyword) != nullptr) return true;
      }
      return false;
    };
    if ((judges_items(a) && evaluates_items(b)) || (judges_items(b) && evaluates_items(a))) {
      return invalid(pointer + "/unevaluatedItems",
                     "unevaluatedItems with items evaluated by another allOf branch, $ref, "
                     "alternative or conditional is not supported by constrained generation; "
                     "write the items in the same schema object");
    }
    return std::nullopt;
  }

  // One keyword of the second side, `theirs` at `at`, into `out` (the first side `a`, merged so
  // far): taken where `a` lacks it, else combined as the keyword's meaning allows.
  Result<void> merge_keyword(const json::Value& a, const std::string& key,
                             const json::Value& theirs, const std::string& at, json::Object& out) {
    const json::Value* ours = a.find(key);
    if (ours == nullptr) {
      json::set(out, key, theirs);
      return {};
    }
    if (ignored(key) || compact(*ours) == compact(theirs)) return {};
    if (is_internal(key)) {  // every exclusion (pattern) holds: both lists
      json::Array both = ours->as_array();
      both.insert(both.end(), theirs.as_array().begin(), theirs.as_array().end());
      json::set(out, key, json::Value(std::move(both)));
      return {};
    }
    if (key == "type") {
      return merge_types(*ours, theirs, at, out);
    } else if (key == "required") {
      if (!ours->is_array() || !theirs.is_array()) {
        return invalid(at, "required must be an array of property names");
      }
      json::Array names = ours->as_array();
      for (const auto& name : theirs.as_array()) {
        bool seen = false;
        for (const auto& n : names) seen = seen || compact(n) == compact(name);
        if (!seen) names.push_back(name);
      }
      json::set(out, key, json::Value(std::move(names)));
    } else if (key == "properties") {
      if (!ours->is_object() || !theirs.is_object()) {
        return invalid(at, "properties must be an object");
      }
      json::Object properties = ours->as_object();
      for (const auto& [name, schema] : theirs.as_object()) {
        bool found = false;
        for (auto& [n, s] : properties) {
          if (n == name) {
            s = json::Value(json::Object{{"allOf", json::Value(json::Array{s, schema})}});
            found = true;
          }
        }
        if (!found) properties.emplace_back(name, schema);
      }
      json::set(out, key, json::Value(std::move(properties)));
    } else if (key == "items" || key == "additionalProperties" ||
               key == "unevaluatedProperties") {
      json::set(out, key,
                json::Value(json::Object{{"allOf", json::Value(json::Array{*ours, theirs})}}));
    } else if (key == "enum" || key == "const") {
      const json::Array x = key == "enum" && ours->is_array() ? ours->as_array()
                                                              : json::Array{*ours};
      const json::Array y = key == "enum" && theirs.is_array() ? theirs.as_array()
                                                               : json::Array{theirs};
      json::Array both;
      for (const auto& v : x) {
        for (const auto& w : y) {
          if (compact(v) == compact(w)) both.push_back(v);
        }
      }
      if (both.empty()) {
        return unsatisfiable(at, "allOf branches allow no " + key + " value in common");
      }
      json::set(out, key, key == "enum" ? json::Value(std::move(both)) : both[0]);
    } else if ((key == "pattern" || key == "format") && ours->is_string() &&
               theirs.is_string()) {
      return merge_patterns(a, key, *ours, theirs, at, out);
    } else if (key == "uniqueItems" && ours->is_bool() && theirs.is_bool()) {
      json::set(out, key, json::Value(ours->as_bool() || theirs.as_bool()));
    } else if (key == "minItems" || key == "minLength" || key == "minimum" ||
               key == "maxItems" || key == "maxLength" || key == "maximum" ||
               key == "minProperties" || key == "maxProperties" ||
               ((key == "exclusiveMinimum" || key == "exclusiveMaximum") &&
                ours->is_number() && theirs.is_number())) {
      if (!ours->is_number() || !theirs.is_number()) return invalid(at, "must be a number");
      const bool lower = key.find("min") != std::string::npos ||
                         key.find("Min") != std::string::npos;
      const double x = ours->as_number();
      const double y = theirs.as_number();
      json::set(out, key, json::Value(lower ? std::max(x, y) : std::min(x, y)));
    } else if (key == "not") {
      // Neither: apply_not reads not: {anyOf: [...]} as every negation at once.
      json::set(out, key,
                json::Value(json::Object{{"anyOf", json::Value(json::Array{*ours, theirs})}}));
    } else if (key == "patternProperties") {
      // Every matching pattern applies: the union of both, a regex in both with both schemas.
      if (!ours->is_object() || !theirs.is_object()) {
        return invalid(at, "patternProperties must be an object");
      }
      json::Object rules = ours->as_object();
      for (const auto& [regex, schema] : theirs.as_object()) {
        auto same = std::find_if(rules.begin(), rules.end(),
                                 [&](const json::Member& m) { return m.first == regex; });
        if (same == rules.end()) {
          rules.emplace_back(regex, schema);
        } else {
          same->second = json::Value(
              json::Object{{"allOf", json::Value(json::Array{same->second, schema})}});
        }
      }
      json::set(out, key, json::Value(std::move(rules)));
    } else if (key == "multipleOf") {
      // Multiples of both: multiples of the least common multiple of their integer steps
      // (each step keeps its own keyword's checks exact, so a multiple of both does too).
      auto x = integer_step(*ours, at);
      if (!x.ok()) return x.error();
      auto y = integer_step(theirs, at);
      if (!y.ok()) return y.error();
      const int64_t part = *x / std::gcd(*x, *y);  // lcm = part * y, capped (only 0 fits)
      const int64_t step = part > (kMaxInteger + 1) / *y ? kMaxInteger + 1 : part * *y;
      json::set(out, key, json::Value(static_cast<double>(std::min(step, kMaxInteger + 1))));
    } else if (key == "anyOf" || key == "oneOf") {
      return merge_alternatives(key, *ours, theirs, at, out);
    } else {
      return invalid(at, "allOf branches give different values for '" + key +
                             "', which cannot be merged; merge them by hand");
    }
    return {};
  }

  // type in both: the types both allow (an integer is a number too).
  Result<void> merge_types(const json::Value& ours, const json::Value& theirs,
                           const std::string& at, json::Object& out) {
    auto x = parse_types(ours, at);
    if (!x.ok()) return x.error();
    auto y = parse_types(theirs, at);
    if (!y.ok()) return y.error();
    uint8_t both = *x & *y;
    if ((*x & kJsonNumber) && (*y & kJsonInteger)) both |= kJsonInteger;
    if ((*y & kJsonNumber) && (*x & kJsonInteger)) both |= kJsonInteger;
    if (both == 0) return unsatisfiable(at, "allOf branches have no type in common");
    json::Array names;
    for (const auto& [name, bit] : {std::pair<const char*, uint8_t>{"string", kJsonString},
                                    {"number", kJsonNumber}, {"integer", kJsonInteger},
                                    {"boolean", kJsonBoolean}, {"null", kJsonNull},
                                    {"object", kJsonObject}, {"array", kJsonArray}}) {
      if ((both & bit) && !(bit == kJsonInteger && (both & kJsonNumber))) {
        names.emplace_back(std::string(name));
      }
    }
    json::set(out, "type", json::Value(std::move(names)));
    return {};
  }

  // pattern or format in both: both must match. The other regex joins (one automaton for all
  // of them); an unknown format is an annotation: the known one stays.
  Result<void> merge_patterns(const json::Value& a, const std::string& key,
                              const json::Value& ours, const json::Value& theirs,
                              const std::string& at, json::Object& out) {
    const char* regex = key == "pattern" ? theirs.as_string().c_str()
                                         : format_regex(theirs.as_string());
    if (key == "format" && format_regex(ours.as_string()) == nullptr && !strict_) {
      json::set(out, key, theirs);
      return {};
    }
    if (regex == nullptr && !strict_) return {};
    if (regex == nullptr) {
      return invalid(at, "format '" + theirs.as_string() + "' is not supported by "
                         "constrained generation; compile without strict to ignore it");
    }
    json::Array more;
    if (const json::Value* had = a.find(kMorePatterns)) more = had->as_array();
    more.emplace_back(key == "pattern" ? theirs.as_string() : std::string(regex));
    json::set(out, kMorePatterns, json::Value(std::move(more)));
    return {};
  }

  // anyOf or oneOf in both: (A1|A2) & (B1|B2) is every pair, each merged.
  Result<void> merge_alternatives(const std::string& key, const json::Value& ours,
                                  const json::Value& theirs, const std::string& at,
                                  json::Object& out) {
    json::Array pairs;
    if (!ours.is_array() || !theirs.is_array()) {
      return invalid(at, key + " must be a non-empty array of schemas");
    }
    if (key == "oneOf" && ours.as_array().size() * theirs.as_array().size() >
                              kMaxOneOfProduct) {
      return invalid(at, "two allOf branches have oneOfs of " +
                             std::to_string(ours.as_array().size()) + " and " +
                             std::to_string(theirs.as_array().size()) +
                             " alternatives: their product is over " +
                             std::to_string(kMaxOneOfProduct) +
                             " (kMaxOneOfProduct); merge them by hand");
    }
    // oneOf: exactly one pair matches exactly when exactly one of each side does.
    for (const auto& x : ours.as_array()) {
      for (const auto& y : theirs.as_array()) {
        pairs.emplace_back(json::Object{{"allOf", json::Value(json::Array{x, y})}});
      }
    }
    json::set(out, key, json::Value(std::move(pairs)));
    return {};
  }

  // items (a schema) on one side applies to every item, prefixItems on the other only to
  // the first ones: merged, the prefix schemas hold the items schema too (else `items`
  // would no longer reach the prefix positions).
  static void spread_items_over_prefix(const json::Value& a, const json::Value& b,
                                       json::Object& out) {
    for (const auto& [side, other] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
      const json::Value* items = side->find("items");
      const json::Value* prefix = other->find("prefixItems");
      if (items == nullptr || items->is_array() || side->find("prefixItems") != nullptr ||
          prefix == nullptr || !prefix->is_array()) {
        continue;
      }
      json::Array both;
      for (const auto& first : prefix->as_array()) {
        both.emplace_back(json::Object{{"allOf", json::Value(json::Array{first, *items})}});
      }
      json::set(out, "prefixItems", json::Value(std::move(both)));
    }
  }

  // additionalProperties in one branch also judges the properties the other declares (in
  // `merged`); unevaluatedProperties in a branch sees only what that branch (flattened)
  // declares: the same rule.
  Result<void> close_properties(const json::Value& a, const json::Value& b, json::Value& merged,
                                const std::string& pointer) {
    auto closes = [](const json::Value& side) {
      for (const char* keyword : {"additionalProperties", "unevaluatedProperties"}) {
        const json::Value* extra = side.find(keyword);
        if (extra != nullptr && !(extra->is_bool() && extra->as_bool())) return true;
      }
      return false;
    };
    for (const json::Value* side : {&a, &b}) {
      if (!closes(*side)) continue;
      const json::Value* own = side->find("properties");
      // What that side says of a name it does not declare: its patternProperties' schemas
      // where a regex matches, else additionalProperties (unevaluatedProperties) as a schema;
      // false leaves the name out.
      const json::Value* extra = side->find("additionalProperties");
      if (extra == nullptr) extra = side->find("unevaluatedProperties");
      const json::Value* patterns = side->find("patternProperties");
      json::Object kept;
      if (const json::Value* all = merged.find("properties")) {
        for (const auto& [name, schema] : all->as_object()) {
          if (own != nullptr && own->find(name) != nullptr) {
            kept.emplace_back(name, schema);
            continue;
          }
          json::Array parts = {schema};
          if (patterns != nullptr && patterns->is_object()) {
            for (const auto& [regex, rule] : patterns->as_object()) {
              auto dfa = compile_regex({regex}, /*search=*/true);
              if (dfa.ok() && dfa->matches(name)) parts.push_back(rule);
            }
          }
          if (parts.size() == 1 && extra != nullptr && !extra->is_bool()) parts.push_back(*extra);
          if (parts.size() > 1) {
            kept.emplace_back(name, json::Value(json::Object{{"allOf", json::Value(parts)}}));
            continue;
          }
          bool required = false;
          if (const json::Value* names = merged.find("required"); names && names->is_array()) {
            for (const auto& n : names->as_array()) {
              required = required || (n.is_string() && n.as_string() == name);
            }
          }
          if (required) {
            return unsatisfiable(pointer, "required property '" + name +
                                              "' of one allOf branch is not allowed by "
                                              "another's additionalProperties: false, so no "
                                              "object satisfies both");
          }
          // Optional and refused by the other branch's additionalProperties: not generated.
        }
        merged.as_object().erase(
            std::remove_if(merged.as_object().begin(), merged.as_object().end(),
                           [](const json::Member& m) { return m.first == "properties"; }),
            merged.as_object().end());
        merged.as_object().emplace_back("properties", json::Value(std::move(kept)));
      }
    }
    return {};
  }

  // ---- anyOf / oneOf ----

  Result<uint32_t> compile_union(const json::Value& value, const std::string& pointer,
                                 uint32_t id) {
    const bool one_of = value.find("oneOf") != nullptr;
    const char* keyword = one_of ? "oneOf" : "anyOf";
    const json::Value& list = *value.find(keyword);
    const std::string at = pointer + "/" + keyword;
    if (!list.is_array() || list.as_array().empty()) {
      return invalid(at, std::string(keyword) + " must be a non-empty array of schemas");
    }
    // With both, anyOf stays beside each oneOf alternative: exactly one alternative together
    // with anyOf holds exactly when anyOf holds and exactly one alternative does.
    const json::Value rest = object_without(value, {keyword});
    const bool plain = only_annotations(rest);
    // The alternatives are compiled now and combined once every node is (an alternative may be
    // a $ref still being compiled: a recursive type).
    Pending pending{one_of, at, {}, {}};
    std::optional<Error> first_error;  // anyOf: of an alternative left out
    for (size_t i = 0; i < list.as_array().size(); ++i) {
      const std::string where = at + "/" + std::to_string(i);
      const json::Value& member = list.as_array()[i];
      if (member.is_bool() && !member.as_bool()) continue;  // matches nothing: never generated
      // The siblings as a branch beside the alternative: their unevaluatedProperties (which
      // may have come from an allOf branch merged in) judges the alternative's properties.
      const json::Value with_rest(json::Object{{"allOf", json::Value(json::Array{rest, member})}});
      const Snapshot before = snapshot();
      auto alt = plain ? compile(member, where) : compile(with_rest, where);
      if (!alt.ok()) {
        // anyOf: a value valid against any one alternative is valid, so an alternative that
        // cannot be compiled is left out (a narrower language). Not for oneOf, where a value of
        // another alternative might match the one left out too, unless no value satisfies it
        // with the siblings (every value generated satisfies them, so none matches it).
        if (one_of && alt.error().message != unsatisfiable_) return alt.error();
        restore(before);
        if (!first_error) first_error = alt.error();
        continue;
      }
      pending.alternatives.emplace_back(*alt, where);
      if (one_of) {
        pending.sources.push_back(plain ? member : with_rest);
      }
    }
    if (pending.alternatives.empty()) {
      if (first_error) return *first_error;
      return invalid(at, std::string("every ") + keyword + " alternative is the schema 'false'");
    }
    pending_[id] = std::move(pending);
    return id;
  }

  struct Pending {
    bool one_of;
    std::string at;
    std::vector<std::pair<uint32_t, std::string>> alternatives;  // node, where
    std::vector<json::Value> sources;  // oneOf: each alternative's schema (siblings merged in)
  };

  // What compiling a subschema adds, to take it back when that subschema is left out: it only
  // appends nodes and patterns and adds map entries for those.
  struct Snapshot {
    size_t nodes, patterns;
    uint32_t any;
  };

  Snapshot snapshot() const { return {schema_.nodes.size(), schema_.patterns.size(), any_}; }

  void restore(const Snapshot& s) {
    schema_.nodes.resize(s.nodes);
    pointers_.resize(s.nodes);
    filled_.resize(s.nodes);
    schema_.patterns.resize(s.patterns);
    any_ = s.any;
    auto erase_if = [](auto& map, auto added) {
      for (auto it = map.begin(); it != map.end();) it = added(*it) ? map.erase(it) : std::next(it);
    };
    erase_if(refs_, [&](const auto& entry) { return entry.second >= s.nodes; });
    erase_if(pattern_ids_, [&](const auto& entry) { return entry.second > s.patterns; });
    erase_if(pending_, [&](const auto& entry) { return entry.first >= s.nodes; });
  }

  Result<void> resolve_unions() {
    for (auto it = pending_.begin(); it != pending_.end(); ++it) {
      auto done = resolve_union(it->first);
      if (!done.ok()) return done;
    }
    return {};
  }

  Result<void> resolve_union(uint32_t id) {
    auto found = pending_.find(id);
    if (found == pending_.end() || found->second.at.empty()) return {};  // not one, or resolved
    if (resolving_.count(id)) {
      return invalid(found->second.at, "an alternative is this union itself before any value "
                                       "is written (left recursion); nest it in an object or "
                                       "array");
    }
    resolving_.insert(id);
    const Pending pending = found->second;
    for (const auto& alt : pending.alternatives) {
      auto done = resolve_union(alt.first);
      if (!done.ok()) return done;
    }
    auto done = combine(id, pending.one_of, pending.at, pending.alternatives);
    if (!done.ok() && pending.one_of && done.error().message.find("overlaps") != std::string::npos) {
      done = exclusive_alternatives(id, pending, done.error());
    }
    if (!done.ok()) return done;
    resolving_.erase(id);
    pending_[id].at.clear();
    return {};
  }

  Result<void> combine(uint32_t id, bool one_of, const std::string& at,
                       const std::vector<std::pair<uint32_t, std::string>>& listed) {
    std::vector<std::pair<uint32_t, std::string>> alternatives;
    for (const auto& [alt, where] : listed) {
      if (!schema_.nodes[alt].alternatives.empty()) {
        for (uint32_t inner : schema_.nodes[alt].alternatives) alternatives.emplace_back(inner, where);
      } else {
        alternatives.emplace_back(alt, where);
      }
    }
    auto tagged = tag_object_shapes(alternatives, at);
    if (!tagged.ok()) return tagged.error();
    // Literal alternatives become one literal node; type alternatives claim first-byte classes.
    std::vector<std::string> literals;
    std::vector<uint8_t> literal_classes;
    std::vector<std::string> literal_owner;
    std::vector<std::string> dropped;  // oneOf: literals in two alternatives match both
    std::vector<std::pair<uint32_t, uint8_t>> kept;  // type alternative, its classes
    std::string owner[6];
    size_t owner_slot[6] = {};  // index into kept of each class's first claimant
    auto class_index = [](uint8_t cls) { return __builtin_ctz(cls); };
    int literal_slot = -1;
    for (const auto& [alt, where] : alternatives) {
      const SchemaNode& node = schema_.nodes[alt];
      if (!node.literals.empty()) {
        if (literal_slot < 0) {
          literal_slot = static_cast<int>(kept.size());
          kept.emplace_back(0, 0);
        }
        for (const std::string& literal : node.literals) {
          auto seen = std::find(literals.begin(), literals.end(), literal);
          if (seen != literals.end()) {
            if (one_of) dropped.push_back(literal);
            continue;
          }
          literals.push_back(literal);
          literal_classes.push_back(first_byte_class(literal));
          literal_owner.push_back(where);
        }
        continue;
      }
      kept.emplace_back(alt, first_bytes_of_types(node.types));
      // Claim classes in order; a class already claimed goes to the first claimant.
      uint8_t& classes = kept.back().second;
      for (uint8_t cls = 1; cls <= kFirstArray; cls <<= 1) {
        if (!(classes & cls)) continue;
        std::string& first = owner[class_index(cls)];
        if (first.empty()) {
          first = where;
          owner_slot[class_index(cls)] = kept.size() - 1;
        } else if (one_of && cls == kFirstObject) {
          // Two object shapes: the first one alone is generated for objects, if none of its
          // objects can match this one.
          uint32_t& first_alt = kept[owner_slot[class_index(cls)]].first;
          auto narrowed = exclusive_against(first_alt, alt);
          if (!narrowed.ok()) return narrowed.error();
          if (*narrowed == 0) {
            return invalid(where, std::string("overlaps '#") + first +
                                      "': both allow objects, and no property this one requires "
                                      "can be kept out of the other's; oneOf alternatives must "
                                      "not overlap (use anyOf if either may match)");
          }
          first_alt = *narrowed;
          kept.back().second &= static_cast<uint8_t>(~cls);
        } else if (one_of) {
          return invalid(where, std::string("overlaps '#") + first + "': both allow " +
                                    first_byte_name(cls) +
                                    "; oneOf alternatives must differ in type or be distinct "
                                    "constants (use anyOf if either may match)");
        } else {
          classes &= ~cls;
        }
      }
    }
    // Literals whose type a type alternative also allows: oneOf refuses, anyOf keeps the type
    // alternative unless the literals came first.
    std::vector<std::string> final_literals;
    for (size_t i = 0; i < literals.size(); ++i) {
      if (std::find(dropped.begin(), dropped.end(), literals[i]) != dropped.end()) continue;
      const std::string& first = owner[class_index(literal_classes[i])];
      if (!first.empty()) {
        if (one_of) {
          return invalid(literal_owner[i], std::string("overlaps '#") + first +
                                               "': a constant of a type that alternative also "
                                               "allows; oneOf alternatives must not overlap");
        }
        continue;
      }
      final_literals.push_back(literals[i]);
    }
    if (final_literals.size() > kMaxEnumValues) final_literals.resize(kMaxEnumValues);
    std::vector<uint32_t> result;
    for (size_t slot = 0; slot < kept.size(); ++slot) {
      if (static_cast<int>(slot) == literal_slot) {
        if (final_literals.empty()) continue;
        auto literal_node = add_node(at);
        if (!literal_node.ok()) return literal_node.error();
        schema_.nodes[*literal_node].literals = final_literals;
        result.push_back(*literal_node);
        continue;
      }
      auto [alt, classes] = kept[slot];
      if (classes == 0) continue;  // anyOf: every type it allows came earlier
      const uint8_t types = types_of_first_bytes(classes);
      if ((first_bytes_of_types(schema_.nodes[alt].types) & ~classes) != 0) {
        // Narrowed to the classes it kept: a copy, the original may be referenced elsewhere.
        auto copy = add_node(at);
        if (!copy.ok()) return copy.error();
        SchemaNode narrowed = schema_.nodes[alt];
        narrowed.types &= types;
        schema_.nodes[*copy] = std::move(narrowed);
        alt = *copy;
      }
      result.push_back(alt);
    }
    if (result.empty()) return invalid(at, "no alternative is left that can be generated");
    if (result.size() == 1) {
      SchemaNode only = schema_.nodes[result[0]];
      schema_.nodes[id] = std::move(only);
    } else {
      SchemaNode& node = schema_.nodes[id];
      node.alternatives = std::move(result);
      node.types = 0;
    }
    return {};
  }

  // oneOf whose alternatives overlap: alternative i is generated as i and not any other (not:
  // as in apply_not, each negation narrowed to what the grammar writes), so every value fails
  // every other alternative; the disjoint results are then combined as anyOf. An alternative
  // that cannot be kept apart this way is left out; `overlap` is reported when all are.
  Result<void> exclusive_alternatives(uint32_t id, const Pending& pending, const Error& overlap) {
    std::vector<std::pair<uint32_t, std::string>> kept;
    std::optional<Error> first;
    const size_t n = pending.sources.size();
    for (size_t i = 0; i < n; ++i) {
      json::Object apart{{"allOf", json::Value(json::Array{pending.sources[i]})}};
      json::Array others;
      for (size_t j = 0; j < n; ++j) {
        if (j != i) others.push_back(pending.sources[j]);
      }
      if (!others.empty()) {
        apart.emplace_back("not", others[0]);
        others.erase(others.begin());
        if (!others.empty()) apart.emplace_back(kMoreNots, json::Value(std::move(others)));
      }
      const Snapshot before = snapshot();
      const std::string& where = pending.alternatives[i].second;
      auto node = compile(json::Value(std::move(apart)), where);
      Result<void> done = node.ok() ? resolve_union(*node) : Result<void>(node.error());
      if (done.ok()) {
        kept.emplace_back(*node, where);
        continue;
      }
      restore(before);
      if (!first) first = done.error();
    }
    if (kept.empty()) {
      return Error{ErrorCode::kInvalidArgument,
                   overlap.message + "; no alternative could be generated apart from the "
                                     "others either (" + first->message + ")"};
    }
    return combine(id, /*one_of=*/false, pending.at, kept);
  }

  // oneOf: `first` (an object shape), narrowed so that every object it generates fails `other`:
  // it never holds some property `other`'s schema requires (left out of a copy of `first` when
  // optional there). 0 when no such property exists.
  Result<uint32_t> exclusive_against(uint32_t first, uint32_t other) {
    const SchemaNode& b = schema_.nodes[other];
    if (!b.alternatives.empty() || b.tagged || !b.literals.empty() ||
        !schema_.nodes[first].alternatives.empty() || schema_.nodes[first].tagged) {
      return uint32_t{0};
    }
    const std::vector<std::string> names = b.schema_required;
    int best = -1;  // a required name `first` never generates, else one optional there
    for (const std::string& name : names) {
      const auto& props = schema_.nodes[first].properties;
      auto it = std::find_if(props.begin(), props.end(),
                             [&](const SchemaProperty& p) { return p.key == name; });
      if (it == props.end()) return first;
      if (!it->required && best < 0) best = static_cast<int>(it - props.begin());
    }
    if (best < 0) return uint32_t{0};
    auto copy = add_node(pointers_[first]);
    if (!copy.ok()) return copy.error();
    SchemaNode narrowed = schema_.nodes[first];
    narrowed.properties.erase(narrowed.properties.begin() + best);
    schema_.nodes[*copy] = std::move(narrowed);
    return *copy;
  }

  // Two or more object shapes among `alternatives` that a tag tells apart (SchemaNode::tagged)
  // become one tagged node in place of the first of them. Left as they are when no tag does.
  Result<void> tag_object_shapes(std::vector<std::pair<uint32_t, std::string>>& alternatives,
                                 const std::string& at) {
    std::vector<uint32_t> shapes;
    std::vector<size_t> slots;
    for (size_t i = 0; i < alternatives.size(); ++i) {
      const SchemaNode& node = schema_.nodes[alternatives[i].first];
      if (node.types != kJsonObject || !node.literals.empty() || !node.alternatives.empty()) {
        continue;
      }
      slots.push_back(i);
      if (node.tagged) {  // a nested tagged union: its shapes join this one
        for (const SchemaProperty& p : node.properties) {
          if (std::find(shapes.begin(), shapes.end(), p.node) == shapes.end()) {
            shapes.push_back(p.node);
          }
        }
      } else {
        shapes.push_back(alternatives[i].first);
      }
    }
    if (slots.size() < 2) return {};
    // The tag: the first property of the first shape that every shape requires, with constant
    // strings as its values, no value shared by two shapes.
    const char quote = gemma_ ? '<' : '"';
    auto tag_values = [&](const SchemaNode& shape, const std::string& key) -> const SchemaNode* {
      for (const SchemaProperty& p : shape.properties) {
        if (p.key != key) continue;
        const SchemaNode& value = schema_.nodes[p.node];
        if (!p.required || value.literals.empty() || !value.alternatives.empty()) return nullptr;
        for (const std::string& literal : value.literals) {
          if (literal[0] != quote) return nullptr;
        }
        return &value;
      }
      return nullptr;
    };
    auto first_in_gemma_order = [&](const SchemaNode& shape, const std::string& key) {
      for (const SchemaProperty& p : shape.properties) {
        if (dictsort_less(p.key.substr(0, p.key.size() - 1), key.substr(0, key.size() - 1))) {
          return false;
        }
      }
      return true;
    };
    const std::string* tag = nullptr;
    for (const SchemaProperty& candidate : schema_.nodes[shapes[0]].properties) {
      std::set<std::string> seen;
      size_t values = 0;
      bool ok = true;
      for (uint32_t shape : shapes) {
        const SchemaNode* literals = tag_values(schema_.nodes[shape], candidate.key);
        ok = literals != nullptr &&
             (!gemma_ || first_in_gemma_order(schema_.nodes[shape], candidate.key));
        if (!ok) break;
        for (const std::string& literal : literals->literals) seen.insert(literal);
        values += literals->literals.size();
      }
      if (ok && seen.size() == values && values <= kMaxProperties) {
        tag = &candidate.key;
        break;
      }
    }
    if (tag == nullptr) return {};
    const std::string tag_key = *tag;  // the shapes' nodes may move as nodes are added
    auto union_id = add_node(at);
    if (!union_id.ok()) return union_id.error();
    std::vector<SchemaProperty> entries;
    for (uint32_t shape : shapes) {
      // A copy with the tag first (the original may be referenced elsewhere).
      auto copy = add_node(at);
      if (!copy.ok()) return copy.error();
      SchemaNode moved = schema_.nodes[shape];
      std::stable_partition(moved.properties.begin(), moved.properties.end(),
                            [&](const SchemaProperty& p) { return p.key == tag_key; });
      const std::vector<std::string> values = schema_.nodes[moved.properties[0].node].literals;
      schema_.nodes[*copy] = std::move(moved);
      for (const std::string& literal : values) {
        entries.push_back({tag_key + std::string(key_separator()) + literal, *copy, false});
      }
    }
    SchemaNode& node = schema_.nodes[*union_id];
    node.types = kJsonObject;
    node.tagged = true;
    node.properties = std::move(entries);
    node.items = any_node();
    alternatives[slots[0]].first = *union_id;
    for (size_t k = slots.size(); k-- > 1;) alternatives.erase(alternatives.begin() + slots[k]);
    return {};
  }

  static uint8_t first_byte_class(const std::string& literal) {
    switch (literal[0]) {
      case '"': case '<': return kFirstString;  // '<': Gemma 4's <|"|>
      case 't': case 'f': return kFirstBoolean;
      case 'n': return kFirstNull;
      case '{': return kFirstObject;
      case '[': return kFirstArray;
      default: return kFirstNumber;
    }
  }

  // ---- one schema object ----

  // patternProperties and propertyNames judge property names. Only declared properties are
  // generated, so they are applied to those: a declared property whose name a
  // patternProperties regex matches must also be valid against that schema (merged as allOf);
  // one whose name propertyNames refuses is left out (an error if it is required).
  // additionalProperties then judges nothing that is generated.
  Result<json::Value> apply_name_rules(const json::Value& value, const std::string& pointer) {
    json::Value out = object_without(value, {"patternProperties", "propertyNames"});
    const json::Value* patterns = value.find("patternProperties");
    if (patterns != nullptr && !patterns->is_object()) {
      return invalid(pointer + "/patternProperties", "patternProperties must be an object");
    }
    std::vector<std::pair<RegexDfa, const json::Value*>> rules;
    if (patterns != nullptr) {
      for (const auto& [regex, schema] : patterns->as_object()) {
        auto dfa = compile_regex({regex}, /*search=*/true);
        if (!dfa.ok()) return invalid(pointer + "/patternProperties", dfa.error().message);
        rules.emplace_back(std::move(*dfa), &schema);
      }
    }
    std::shared_ptr<const JsonSchema> names;  // null: every name is allowed
    bool no_names = false;                    // propertyNames: false
    if (const json::Value* rule = value.find("propertyNames")) {
      if (rule->is_bool()) {
        no_names = !rule->as_bool();
      } else {
        auto compiled = compile_json_schema(compact(*rule), JsonSyntax::kJson, strict_);
        if (!compiled.ok()) return invalid(pointer + "/propertyNames", compiled.error().message);
        names = *compiled;
      }
    }
    const json::Value* properties = value.find("properties");
    if (properties == nullptr || !properties->is_object()) return out;
    auto required = [&](const std::string& name) {
      const json::Value* list = value.find("required");
      if (list == nullptr || !list->is_array()) return false;
      for (const auto& n : list->as_array()) {
        if (n.is_string() && n.as_string() == name) return true;
      }
      return false;
    };
    json::Object kept;
    for (const auto& [name, schema] : properties->as_object()) {
      bool allowed = !no_names;
      if (allowed && names != nullptr) {
        std::string literal;
        json::write_string(name, literal);
        allowed = JsonGrammar(*names).matches(literal);
      }
      if (!allowed) {
        if (required(name)) {
          return invalid(pointer + "/propertyNames",
                         "the required property '" + name + "' does not satisfy propertyNames");
        }
        continue;  // optional: never generated
      }
      json::Array parts = {schema};
      for (const auto& [dfa, rule_schema] : rules) {
        if (dfa.matches(name)) parts.push_back(*rule_schema);
      }
      kept.emplace_back(name, parts.size() == 1
                                  ? schema
                                  : json::Value(json::Object{{"allOf", json::Value(parts)}}));
    }
    for (auto& member : out.as_object()) {
      if (member.first == "properties") member.second = json::Value(std::move(kept));
    }
    return out;
  }

  // A required property that `properties` does not declare may hold any value when nothing
  // judges undeclared names (additionalProperties, unevaluatedProperties, patternProperties,
  // propertyNames): declared with the schema true. Nullopt when there is none, or something
  // does judge it (then it stays an error).
  static std::optional<json::Value> declare_required(const json::Value& value) {
    const json::Value* required = value.find("required");
    if (required == nullptr || !required->is_array()) return std::nullopt;
    for (const char* keyword : {"additionalProperties", "unevaluatedProperties"}) {
      const json::Value* extra = value.find(keyword);
      if (extra != nullptr && !(extra->is_bool() && extra->as_bool())) return std::nullopt;
    }
    if (value.find("patternProperties") != nullptr || value.find("propertyNames") != nullptr) {
      return std::nullopt;
    }
    const json::Value* declared = value.find("properties");
    if (declared != nullptr && !declared->is_object()) return std::nullopt;
    json::Object properties = declared != nullptr ? declared->as_object() : json::Object{};
    bool added = false;
    for (const auto& name : required->as_array()) {
      if (!name.is_string()) return std::nullopt;
      if (std::none_of(properties.begin(), properties.end(),
                       [&](const json::Member& m) { return m.first == name.as_string(); })) {
        properties.emplace_back(name.as_string(), json::Value(true));
        added = true;
      }
    }
    if (!added) return std::nullopt;
    json::Value out = object_without(value, {"properties"});
    out.as_object().emplace_back("properties", json::Value(std::move(properties)));
    return out;
  }

  // minProperties above the declared properties: made-up names are declared to reach it, each
  // with the schema the original gives an undeclared name (additionalProperties unless a
  // patternProperties regex matches it; apply_name_rules then merges the regexes' schemas and
  // applies propertyNames). The names: each regex's shortest match, then "a", "b", ... where
  // additionalProperties allows other names. Nullopt when nothing is to add or can be added.
  static Result<std::optional<json::Value>> declare_for_min_properties(const json::Value& value,
                                                                        const std::string& at) {
    const json::Value* least = value.find("minProperties");
    if (least == nullptr || !least->is_number()) return std::optional<json::Value>();
    const json::Value* unevaluated = value.find("unevaluatedProperties");
    if (unevaluated != nullptr && !(unevaluated->is_bool() && unevaluated->as_bool())) {
      return std::optional<json::Value>();
    }
    const json::Value* declared = value.find("properties");
    if (declared != nullptr && !declared->is_object()) return std::optional<json::Value>();
    json::Object properties = declared != nullptr ? declared->as_object() : json::Object{};
    auto taken = [&](const std::string& name) {
      return std::any_of(properties.begin(), properties.end(),
                         [&](const json::Member& m) { return m.first == name; });
    };
    size_t usable = 0;
    for (const auto& [name, schema] : properties) usable += schema.is_bool() && !schema.as_bool() ? 0 : 1;
    if (usable >= least->as_number() || least->as_number() > kMaxProperties) {
      return std::optional<json::Value>();
    }
    std::vector<RegexDfa> rules;
    std::vector<std::string> names;
    if (const json::Value* patterns = value.find("patternProperties"); patterns && patterns->is_object()) {
      for (const auto& [regex, schema] : patterns->as_object()) {
        auto dfa = compile_regex({regex}, /*search=*/true);
        if (!dfa.ok()) return invalid(at + "/patternProperties", dfa.error().message);
        if (!(schema.is_bool() && !schema.as_bool())) {
          const RegexPaths paths = shortest_paths(*dfa, raw_costs());
          std::string name;
          for (uint16_t q = dfa->start; !dfa->accepting[q]; q = dfa->step(q, paths.first_byte[q])) {
            name += static_cast<char>(paths.first_byte[q]);
          }
          names.push_back(name);
        }
        rules.push_back(std::move(*dfa));
      }
    }
    const json::Value* extra = value.find("additionalProperties");
    const bool others = extra == nullptr || !(extra->is_bool() && !extra->as_bool());
    for (char c = 'a'; others && c <= 'z'; ++c) names.emplace_back(1, c);
    std::shared_ptr<const JsonSchema> name_rule;  // propertyNames (apply_name_rules checks too)
    if (const json::Value* rule = value.find("propertyNames"); rule && !rule->is_bool()) {
      auto compiled = compile_json_schema(compact(*rule));
      if (!compiled.ok()) return invalid(at + "/propertyNames", compiled.error().message);
      name_rule = *compiled;
    }
    bool added = false;
    for (const std::string& name : names) {
      if (usable >= least->as_number()) break;
      std::string literal;
      json::write_string(name, literal);
      if (taken(name) || (name_rule && !JsonGrammar(*name_rule).matches(literal))) continue;
      const bool patterned = std::any_of(rules.begin(), rules.end(),
                                         [&](const RegexDfa& dfa) { return dfa.matches(name); });
      if (!patterned && !others) continue;
      properties.emplace_back(name, patterned || extra == nullptr ? json::Value(true) : *extra);
      ++usable;
      added = true;
    }
    if (!added) return std::optional<json::Value>();
    json::Value out = object_without(value, {"properties"});
    out.as_object().emplace_back("properties", json::Value(std::move(properties)));
    return std::optional<json::Value>(std::move(out));
  }

  Result<void> compile_keywords(const json::Value& value, const std::string& pointer,
                                uint32_t id) {
    // After apply_name_rules the object no longer says which names its regexes and
    // propertyNames allow: no names are declared then.
    const bool names_applied = names_applied_;
    names_applied_ = false;
    if (!names_applied) {
      if (auto declared = declare_required(value)) return compile_keywords(*declared, pointer, id);
      auto named = declare_for_min_properties(value, pointer);
      if (!named.ok()) return named.error();
      if (*named) return compile_keywords(**named, pointer, id);
    }
    if (value.find("dependentRequired") != nullptr || value.find("dependentSchemas") != nullptr ||
        value.find("dependencies") != nullptr) {
      return apply_dependencies(value, pointer, id);
    }
    if (const json::Value* inner = value.find("not")) return apply_not(value, *inner, pointer, id);
    if (value.find("contains") != nullptr) {
      auto rewritten = apply_contains(value, pointer);
      if (!rewritten.ok()) return rewritten.error();
      return compile_keywords(*rewritten, pointer, id);
    }
    if (value.find("patternProperties") != nullptr || value.find("propertyNames") != nullptr) {
      auto rewritten = apply_name_rules(value, pointer);
      if (!rewritten.ok()) return rewritten.error();
      names_applied_ = true;
      return compile_keywords(*rewritten, pointer, id);
    }
    return compile_node(value, pointer, id);
  }

  // ---- one schema object, its keywords read one by one ----
  //
  // What the keywords say beyond the node's own fields, kept until every keyword is read:
  // several checks need two keywords at once (enum against minimum, required against
  // properties, not's leftovers against type).
  using Bounds = std::vector<std::pair<double, bool>>;  // (bound, exclusive)
  struct KeywordFacts {
    std::vector<json::Value> literal_values;
    Bounds exact_min, exact_max;  // as written, for checking enum values
    double minimum = -INFINITY, maximum = INFINITY;
    bool has_range = false;
    double multiple_value = 0;  // multipleOf as written (0: none), for checking enum values
    std::vector<std::string> regexes;  // pattern and format: all must match
    std::string regex_at;
    bool unique_items = false;
    std::vector<std::string> forbidden;  // properties whose schema is false
    std::vector<std::vector<std::string>> not_together;  // by not: {required: [...]}
    json::Array excluded_values;           // by not: {enum/const}
    std::vector<std::string> not_regexes;  // by not: {pattern}
    const json::Value* min_properties = nullptr;
    const json::Value* max_properties = nullptr;
  };

  // The schema object once no rewrite applies (compile_keywords): each keyword read into the
  // node, then the checks per family, in this order (later ones see the earlier results).
  Result<void> compile_node(const json::Value& value, const std::string& pointer, uint32_t id) {
    SchemaNode node;
    node.items = 0;  // 0 is the boolean node, never an items schema: "not given"
    KeywordFacts facts;
    for (const auto& [key, member] : value.as_object()) {
      auto read = read_keyword(value, key, member, pointer, node, facts);
      if (!read.ok()) return read.error();
    }
    auto objects = finish_object_keywords(value, pointer, node, facts);
    if (!objects.ok()) return objects.error();
    std::vector<double> excluded_numbers;
    if (!facts.excluded_values.empty()) {
      auto excluded = exclude_values(facts.excluded_values, pointer, node, facts.literal_values,
                                     facts.not_regexes, excluded_numbers);
      if (!excluded.ok()) return excluded;
      if (!excluded_numbers.empty() && (node.types & (kJsonNumber | kJsonInteger))) {
        facts.has_range = true;  // integers, in a stretch without the excluded ones (below)
      }
    }
    auto arrays = finish_array_keywords(value, pointer, node, facts);
    if (!arrays.ok()) return arrays.error();
    auto strings = finish_string_keywords(pointer, node, facts);
    if (!strings.ok()) return strings.error();
    if (facts.has_range) {
      auto numbers = finish_numeric_keywords(pointer, node, facts, excluded_numbers);
      if (!numbers.ok()) return numbers.error();
    }
    if (!facts.literal_values.empty()) {
      const RegexDfa* dfa = node.pattern != 0 ? &schema_.patterns[node.pattern - 1].dfa : nullptr;
      auto kept = keep_valid_literals(node, facts.literal_values, facts.exact_min,
                                      facts.exact_max, facts.multiple_value, dfa, pointer);
      if (!kept.ok()) return kept.error();
    }
    schema_.nodes[id] = std::move(node);
    return {};
  }

  // One keyword of `value`, by family; the keywords that need others are only noted in `facts`.
  Result<void> read_keyword(const json::Value& value, const std::string& key,
                            const json::Value& member, const std::string& pointer,
                            SchemaNode& node, KeywordFacts& facts) {
    const std::string at = pointer + "/" + key;
    // Only declared properties are generated, each declared by a (sub)schema that applies:
    // additionalProperties and unevaluatedProperties judge none of them (see merge()).
    if (ignored(key) || key == "additionalProperties" || key == "unevaluatedProperties") {
      return {};
    }
    if (key == "type") {
      auto types = parse_types(member, at);
      if (!types.ok()) return types.error();
      node.types = *types;
    } else if (key == "nullable") {
      // OpenAPI's "null allowed too"; JSON Schema ignores it. Values of the other types
      // validate under both readings, so null is not generated (use a type list for it).
      if (!member.is_bool()) return invalid(at, "nullable must be true or false");
    } else if (key == "enum" || key == "const") {
      return read_literals(key, member, at, node, facts);
    } else if (key == "properties") {
      return read_properties(value, member, at, node, facts);
    } else if (key == "items" || key == "prefixItems" || key == "additionalItems" ||
               key == "unevaluatedItems") {
      return {};  // read by compile_item_keywords: which one applies depends on the others
    } else if (key == "minContains" || key == "maxContains") {
      return {};  // without contains (read by apply_contains) they constrain nothing
    } else if (key == kNotValues || key == kMorePatterns || key == kNotPatterns ||
               key == kNotRequired) {
      read_not_leftovers(key, member, pointer, facts);
    } else if (key == "minProperties") {
      facts.min_properties = &member;
    } else if (key == "maxProperties") {
      facts.max_properties = &member;
    } else if (key == "uniqueItems" || key == "minItems" || key == "maxItems") {
      return read_array_keyword(key, member, at, node, facts);
    } else if (key == "minLength" || key == "maxLength" || key == "pattern" || key == "format") {
      return read_string_keyword(key, member, at, pointer, node, facts);
    } else if (key == "multipleOf" || key == "minimum" || key == "maximum" ||
               key == "exclusiveMinimum" || key == "exclusiveMaximum") {
      return read_numeric_keyword(value, key, member, at, node, facts);
    } else if (const char* instead = unenforced_keyword(key)) {
      return invalid(at, "keyword '" + key + "' is not supported by constrained generation: " +
                             instead);
    } else if (key != "required") {
      // Only under strict: otherwise ignored() skipped it above.
      return invalid(at, "keyword '" + key +
                             "' is not supported by constrained generation (supported: type, "
                             "nullable, enum, const, properties, required, "
                             "additionalProperties, items, prefixItems, additionalItems, "
                             "minItems, maxItems, uniqueItems, contains, minContains, "
                             "minProperties, maxProperties, not, "
                             "dependentRequired, dependentSchemas, dependencies, "
                             "if/then/else, "
                             "minLength, "
                             "maxLength, pattern, format, patternProperties, propertyNames, "
                             "minimum, maximum, "
                             "exclusiveMinimum, exclusiveMaximum, "
                             "$ref, $defs, allOf, anyOf, oneOf); strict mode refuses unknown "
                             "keywords: remove it, or compile without strict to ignore it");
    }
    return {};
  }

  // enum and const: the literal values, both written out for the grammar and kept for the
  // checks against the other keywords (keep_valid_literals).
  Result<void> read_literals(const std::string& key, const json::Value& member,
                             const std::string& at, SchemaNode& node, KeywordFacts& facts) {
    if (key == "enum" && (!member.is_array() || member.as_array().empty())) {
      return invalid(at, "enum must be a non-empty array");
    }
    json::Array given = key == "enum" ? member.as_array() : json::Array{member};
    if (!facts.literal_values.empty()) {  // enum and const: the values in both
      std::set<std::string> before;
      for (const json::Value& v : facts.literal_values) before.insert(compact(v));
      given.erase(std::remove_if(given.begin(), given.end(),
                                 [&](const json::Value& v) { return !before.count(compact(v)); }),
                  given.end());
      if (given.empty()) return unsatisfiable(at, "no value is in both enum and const");
      node.literals.clear();
    }
    facts.literal_values = std::move(given);
    for (size_t i = 0; i < facts.literal_values.size(); ++i) {
      std::string text;
      auto written = write_compact(facts.literal_values[i], text,
                                   key == "enum" ? at + "/" + std::to_string(i) : at, syntax_);
      if (!written.ok()) return written.error();
      node.literals.push_back(std::move(text));
    }
    return {};
  }

  Result<void> read_properties(const json::Value& value, const json::Value& member,
                               const std::string& at, SchemaNode& node, KeywordFacts& facts) {
    if (!member.is_object()) return invalid(at, "properties must be an object");
    // Any number of properties, but of more than kMaxOptionalRun optional ones in a row
    // the rest are left out (the grammar's 64-bit key window; trim_optional_runs() again
    // after Gemma 4's reordering).
    std::set<std::string> required_names;
    if (const json::Value* list = value.find("required"); list && list->is_array()) {
      for (const auto& n : list->as_array()) {
        if (n.is_string()) required_names.insert(n.as_string());
      }
    }
    auto is_required = [&](const std::string& name) { return required_names.count(name) > 0; };
    std::set<std::string> declared;
    size_t run = 0;
    for (const auto& [name, sub] : member.as_object()) {
      if (sub.is_bool() && !sub.as_bool()) {  // no value fits: never generated
        facts.forbidden.push_back(name);
        continue;
      }
      if (is_required(name)) {
        run = 0;
      } else if (++run > kMaxOptionalRun && !gemma_) {
        continue;
      }
      if (gemma_) {
        const std::string problem = gemma_key_problem(name);
        if (!problem.empty()) return invalid(at + "/" + name, problem);
      }
      const std::string literal = key_literal(name);
      if (!declared.insert(literal).second) {
        return invalid(at, "property '" + name + "' is declared twice");
      }
      const Snapshot before = snapshot();
      auto child = compile(sub, at + "/" + name);
      if (!child.ok() && !is_required(name) &&
          (child.error().message == unsatisfiable_ || child.error().message == remote_)) {
        // No value fits it (as with the schema false), or it refers to another document
        // (not fetched): an optional property never generated, so never judged.
        restore(before);
        facts.forbidden.push_back(name);
        continue;
      }
      if (!child.ok()) return child.error();
      node.properties.push_back({literal, *child, false});
    }
    return {};
  }

  // The keywords apply_not leaves behind (kNotValues and the others): what not excludes.
  void read_not_leftovers(const std::string& key, const json::Value& member,
                          const std::string& pointer, KeywordFacts& facts) {
    if (key == kNotValues) {
      facts.excluded_values = member.as_array();
    } else if (key == kMorePatterns) {
      for (const auto& regex : member.as_array()) facts.regexes.push_back(regex.as_string());
      facts.regex_at = pointer;
    } else if (key == kNotPatterns) {
      for (const auto& regex : member.as_array()) facts.not_regexes.push_back(regex.as_string());
      if (facts.regex_at.empty()) facts.regex_at = pointer + "/not";
    } else {  // kNotRequired
      for (const auto& list : member.as_array()) {
        std::vector<std::string> names;
        for (const auto& name : list.as_array()) names.push_back(name.as_string());
        facts.not_together.push_back(std::move(names));
      }
    }
  }

  Result<void> read_array_keyword(const std::string& key, const json::Value& member,
                                  const std::string& at, SchemaNode& node, KeywordFacts& facts) {
    if (key == "uniqueItems") {
      if (!member.is_bool()) return invalid(at, "uniqueItems must be true or false");
      facts.unique_items = member.as_bool();
      return {};
    }
    auto count = key == "minItems" ? parse_count(member, at, kMaxMinItems, "kMaxMinItems")
                                   : parse_count(member, at, UINT32_MAX, "2^32 - 1");
    if (!count.ok()) return count.error();
    (key == "minItems" ? node.min_items : node.max_items) = *count;
    return {};
  }

  Result<void> read_string_keyword(const std::string& key, const json::Value& member,
                                   const std::string& at, const std::string& pointer,
                                   SchemaNode& node, KeywordFacts& facts) {
    if (key == "minLength" || key == "maxLength") {
      auto count = key == "minLength" ? parse_count(member, at, kMaxMinLength, "kMaxMinLength")
                                      : parse_count(member, at, UINT32_MAX, "2^32 - 1");
      if (!count.ok()) return count.error();
      (key == "minLength" ? node.min_length : node.max_length) = *count;
      return {};
    }
    // pattern or format
    if (!member.is_string()) return invalid(at, key + " must be a string");
    // The pattern as a std::string: it may hold U+0000.
    const char* format = key == "format" ? format_regex(member.as_string()) : nullptr;
    if (key == "format" && format == nullptr && !strict_) {
      return {};  // an unknown format is an annotation (2019-09 on; jsonschema's default)
    }
    if (key == "format" && format == nullptr) {
      return invalid(at, "format '" + member.as_string() +
                             "' is not supported by constrained generation (supported: "
                             "date, time, date-time, duration, uuid, email, idn-email, "
                             "uri, uri-reference, uri-template, iri, iri-reference, ipv4, "
                             "ipv6, hostname, idn-hostname, json-pointer, "
                             "relative-json-pointer, regex); remove it, use a pattern, or "
                             "check it after generation");
    }
    facts.regexes.emplace_back(key == "pattern" ? member.as_string() : std::string(format));
    facts.regex_at = facts.regex_at.empty() ? at : pointer;
    return {};
  }

  // Numbers with bounds or a step generate integers: the bounds are kept both rounded to
  // integers (the range) and as written (for checking enum values).
  Result<void> read_numeric_keyword(const json::Value& value, const std::string& key,
                                    const json::Value& member, const std::string& at,
                                    SchemaNode& node, KeywordFacts& facts) {
    if (key == "multipleOf") {
      auto step = integer_step(member, at);
      if (!step.ok()) return step.error();
      node.multiple_of = *step;
      facts.multiple_value = member.as_number();
      facts.has_range = true;  // numbers become integers, multiples of the step
      return {};
    }
    if (member.is_bool()) return {};  // draft 4's flag form: read with minimum/maximum below
    if (!member.is_number()) return invalid(at, key + " must be a number");
    const double x = member.as_number();
    const bool exclusive_flag = [&] {
      const json::Value* flag = value.find(key == "minimum" ? "exclusiveMinimum"
                                                            : "exclusiveMaximum");
      return flag != nullptr && flag->is_bool() && flag->as_bool();
    }();
    facts.has_range = true;
    if (key == "minimum" || key == "exclusiveMinimum") {
      const bool strict = key == "exclusiveMinimum" || exclusive_flag;
      facts.minimum = std::max(facts.minimum, strict ? std::floor(x) + 1 : std::ceil(x));
    } else {
      const bool strict = key == "exclusiveMaximum" || exclusive_flag;
      facts.maximum = std::min(facts.maximum, strict ? std::ceil(x) - 1 : std::floor(x));
    }
    // The literal check needs the exact bound, not the integer one.
    (key.find("inimum") != std::string::npos ? facts.exact_min : facts.exact_max)
        .push_back({x, key.rfind("exclusive", 0) == 0 || exclusive_flag});
    return {};
  }

  // required (against the properties read), not: {required: [...]}, and the property counts.
  Result<void> finish_object_keywords(const json::Value& value, const std::string& pointer,
                                      SchemaNode& node, const KeywordFacts& facts) {
    if (const json::Value* required = value.find("required")) {
      if (required->is_array()) {
        for (const auto& name : required->as_array()) {
          if (name.is_string() && std::find(facts.forbidden.begin(), facts.forbidden.end(),
                                            name.as_string()) != facts.forbidden.end()) {
            return invalid(pointer + "/required", "required property '" + name.as_string() +
                                                      "' has the schema false: no value fits");
          }
        }
      }
      auto marked = mark_required(*required, pointer + "/required", node);
      if (!marked.ok()) return marked.error();
      for (const SchemaProperty& p : node.properties) {
        if (p.required) node.schema_required.push_back(p.key);
      }
    }
    for (const auto& names : facts.not_together) {
      // One of the names is never generated: the last optional one (none needed when one is
      // not declared, or the list is empty: then every object has "all" of them, refused).
      auto declared = [&](const std::string& name) {
        return std::find_if(node.properties.begin(), node.properties.end(),
                            [&](const SchemaProperty& p) { return p.key == key_literal(name); });
      };
      if (std::any_of(names.begin(), names.end(),
                      [&](const std::string& n) { return declared(n) == node.properties.end(); })) {
        if (!names.empty()) continue;
      }
      bool dropped = false;
      for (size_t i = names.size(); i-- > 0 && !dropped;) {
        auto it = declared(names[i]);
        if (!it->required) {
          node.properties.erase(it);
          dropped = true;
        }
      }
      if (!dropped) {
        node.types &= static_cast<uint8_t>(~kJsonObject);
        if (node.types != 0) continue;
        return unsatisfiable(pointer + "/not", "not: {required: [...]} names only required "
                                               "properties: no object fits");
      }
    }
    return apply_property_counts(facts.min_properties, facts.max_properties, pointer, node);
  }

  // The item schemas, then uniqueItems and the item counts.
  Result<void> finish_array_keywords(const json::Value& value, const std::string& pointer,
                                     SchemaNode& node, const KeywordFacts& facts) {
    auto arrays = compile_item_keywords(value, pointer, node);
    if (!arrays.ok()) return arrays.error();
    if (node.items == 0) node.items = any_node();
    if (facts.unique_items && (node.types & kJsonArray)) {
      // Arrays of at most one item have no duplicates: exact, if narrower than the keyword.
      if (node.min_items > 1) {
        return invalid(pointer + "/uniqueItems",
                       "uniqueItems with minItems above 1 is not supported by constrained "
                       "generation (arrays with uniqueItems hold at most one item); remove one "
                       "or check it after generation");
      }
      node.max_items = std::min(node.max_items, 1u);
    }
    if (node.min_items > node.max_items) {
      return invalid(pointer, "minItems is larger than maxItems");
    }
    return {};
  }

  // The lengths, then pattern, format and not: {pattern} as one regex.
  Result<void> finish_string_keywords(const std::string& pointer, SchemaNode& node,
                                      const KeywordFacts& facts) {
    if (node.min_length > node.max_length) {
      return invalid(pointer, "minLength is larger than maxLength");
    }
    if (!facts.regexes.empty() || (!facts.not_regexes.empty() && (node.types & kJsonString))) {
      auto added = add_pattern(facts.regexes, facts.not_regexes, node, facts.regex_at);
      if (!added.ok()) {
        if (facts.regexes.empty() && node.types != kJsonString) {
          // Only not: {pattern}'s exclusion failed to compile: strings are left out instead.
          node.types &= static_cast<uint8_t>(~kJsonString);
        } else {
          return added.error();
        }
      }
    }
    return {};
  }

  // The integer range from the bounds, the step and the values not excludes; numbers leave
  // the node's types when no integer fits but another type still validates.
  Result<void> finish_numeric_keywords(const std::string& pointer, SchemaNode& node,
                                       const KeywordFacts& facts,
                                       const std::vector<double>& excluded_numbers) {
    double minimum = std::max(facts.minimum, static_cast<double>(-kMaxInteger));
    double maximum = std::min(facts.maximum, static_cast<double>(kMaxInteger));
    if (!excluded_numbers.empty()) widest_gap(excluded_numbers, minimum, maximum, node.multiple_of);
    node.integer_range = true;
    node.minimum = static_cast<int64_t>(minimum);
    node.maximum = static_cast<int64_t>(maximum);
    if (minimum <= maximum && multiple_at_least(node.minimum, node.multiple_of) > node.maximum) {
      maximum = minimum - 1;  // no multiple in the range: as if it were empty
    }
    if ((node.types & (kJsonNumber | kJsonInteger)) && minimum > maximum) {
      if (node.types == (node.types & (kJsonNumber | kJsonInteger)) &&
          facts.literal_values.empty()) {
        return invalid(pointer, "no integer of at most 15 digits lies in [minimum, maximum] "
                                "(a multiple of multipleOf, if given); numbers with bounds "
                                "generate integers");
      }
      node.types &= ~(kJsonNumber | kJsonInteger);  // the other types still validate
    }
    return {};
  }

  // dependentRequired, dependentSchemas and draft 7's dependencies, for the declared properties
  // (the only ones generated): a required property's dependencies apply always (its dependent
  // properties become required, its schema is merged as allOf); an optional property with
  // dependencies is not generated; an undeclared one never appears. Exact, if narrower.
  Result<void> apply_dependencies(const json::Value& value, const std::string& pointer,
                                  uint32_t id) {
    json::Value out =
        object_without(value, {"dependentRequired", "dependentSchemas", "dependencies"});
    const json::Value* properties = value.find("properties");
    const json::Value* required = value.find("required");
    auto is_required = [&](const std::string& name) {
      if (required == nullptr || !required->is_array()) return false;
      for (const auto& n : required->as_array()) {
        if (n.is_string() && n.as_string() == name) return true;
      }
      return false;
    };
    json::Array required_names = required != nullptr && required->is_array()
                                     ? required->as_array() : json::Array{};
    std::vector<std::string> dropped;
    std::vector<json::Value> schemas;
    for (const char* keyword : {"dependentRequired", "dependentSchemas", "dependencies"}) {
      const json::Value* rules = value.find(keyword);
      if (rules == nullptr) continue;
      const std::string at = pointer + "/" + keyword;
      if (!rules->is_object()) return invalid(at, std::string(keyword) + " must be an object");
      for (const auto& [name, rule] : rules->as_object()) {
        const bool list = rule.is_array() && std::string(keyword) != "dependentSchemas";
        if (!list && std::string(keyword) == "dependentRequired") {
          return invalid(at + "/" + name, "dependentRequired values must be arrays of names");
        }
        if (properties == nullptr || !properties->is_object() ||
            properties->find(name) == nullptr) {
          continue;  // never generated: the rule never applies
        }
        if (!is_required(name)) {
          dropped.push_back(name);
          continue;
        }
        if (list) {
          for (const auto& n : rule.as_array()) required_names.push_back(n);
        } else if (rule.is_bool() && !rule.as_bool()) {
          return invalid(at + "/" + name, "required property '" + name +
                                              "' has the dependent schema false: no object fits");
        } else if (!rule.is_bool()) {
          schemas.push_back(rule);
        }
      }
    }
    for (auto& member : out.as_object()) {
      if (member.first == "required") member.second = json::Value(required_names);
      if (member.first != "properties" || !member.second.is_object()) continue;
      auto& kept = member.second.as_object();
      kept.erase(std::remove_if(kept.begin(), kept.end(),
                                [&](const json::Member& m) {
                                  return std::find(dropped.begin(), dropped.end(), m.first) !=
                                         dropped.end();
                                }),
                 kept.end());
    }
    if (out.find("required") == nullptr && !required_names.empty()) {
      out.as_object().emplace_back("required", json::Value(required_names));
    }
    if (schemas.empty()) return compile_keywords(out, pointer, id);
    for (const json::Value& schema : schemas) {
      auto merged = merge(out, schema, pointer);
      if (!merged.ok()) return merged.error();
      out = std::move(*merged);
    }
    return fill(out, pointer, id);
  }

  // ---- not ----
  //
  // not: X holds for the values X rejects. X rejects a value when one of its keywords does, so
  // the values one keyword rejects are a valid (if narrower) language for `not`: each keyword
  // that has such a negation gives a candidate schema (not: {type} other types; enum/const every
  // other value; pattern the strings it does not match; minLength n the strings shorter than n,
  // and likewise for the other bounds; required objects without one of the names; anyOf every
  // negation at once; not: X X itself), merged with the schema around `not`. The first
  // candidate that compiles is generated.
  Result<void> apply_not(const json::Value& value, const json::Value& inner,
                         const std::string& pointer, uint32_t id) {
    const std::string at = pointer + "/not";
    if (inner.is_object() && inner.find("not") != nullptr &&
        (value.find("unevaluatedProperties") != nullptr ||
         value.find("unevaluatedItems") != nullptr)) {
      // not: {not: X} is X without its annotations: X's properties or items would count as
      // evaluated when they do not.
      return invalid(at, "not: {not: ...} beside unevaluatedProperties or unevaluatedItems is "
                         "not supported; merge it by hand");
    }
    auto candidates = negations(inner, at);
    if (!candidates.ok()) return candidates.error();
    json::Value rest = object_without(value, {"not", kMoreNots.c_str()});
    if (const json::Value* more = value.find(kMoreNots); more && !more->as_array().empty()) {
      // The next negation, compiled with this one's candidate in place (so it picks a candidate
      // that fits it, and a failure there tries this one's next candidate).
      json::Array next = more->as_array();
      rest.as_object().emplace_back("not", next[0]);
      next.erase(next.begin());
      if (!next.empty()) rest.as_object().emplace_back(kMoreNots, json::Value(std::move(next)));
    }
    std::optional<Error> first;
    bool all_unsatisfiable = true;
    for (const json::Value& candidate : *candidates) {
      if (++negation_attempts_ > kMaxNegationAttempts) {
        return invalid(at, "its not/oneOf exclusions take more than " +
                               std::to_string(kMaxNegationAttempts) +
                               " attempts to compile (kMaxNegationAttempts); simplify them");
      }
      const Snapshot before = snapshot();
      unsatisfiable_.clear();
      auto merged = merge(rest, candidate, at);
      Result<void> done = merged.ok() ? fill(*merged, pointer, id) : Result<void>(merged.error());
      if (done.ok()) return done;
      all_unsatisfiable = all_unsatisfiable && done.error().message == unsatisfiable_;
      restore(before);
      if (!first) first = done.error();
    }
    if (all_unsatisfiable) return unsatisfiable(at, first->message.substr(first->message.find(": ") + 2));
    return *first;
  }

  // Candidate schemas for not: `inner` (see apply_not), in order of preference.
  Result<std::vector<json::Value>> negations(const json::Value& inner_in, const std::string& at) {
    if (inner_in.is_bool()) {
      if (inner_in.as_bool()) return unsatisfiable(at, "not: true allows no value at all");
      return std::vector<json::Value>{json::Value(json::Object{})};
    }
    auto flat = flatten(inner_in, at);  // $ref, allOf and if/then/else resolved and merged
    if (!flat.ok()) return flat.error();
    const json::Value& inner = *flat;
    std::vector<json::Value> out;
    std::vector<std::string> keywords;
    auto schema = [](std::initializer_list<json::Member> members) {
      return json::Value(json::Object(members));
    };
    auto count = [&](const char* key) -> std::optional<double> {
      const json::Value* v = inner.find(key);
      if (v == nullptr || !v->is_number() || v->as_number() < 0) return std::nullopt;
      return std::floor(v->as_number());
    };
    auto flag = [&](const char* key) {
      const json::Value* v = inner.find(key);
      return v != nullptr && v->is_bool() && v->as_bool();
    };
    for (const auto& [key, member] : inner.as_object()) {
      if (ignored(key)) continue;
      keywords.push_back(key);
      if (key == "not") {
        out.push_back(member);
      } else if (key == "type") {
        auto types = parse_types(member, at + "/type");
        if (!types.ok()) return types.error();
        uint8_t excluded = *types;
        if (excluded & (kJsonNumber | kJsonInteger)) excluded |= kJsonNumber | kJsonInteger;
        json::Array names;
        for (const auto& [name, bit] : {std::pair<const char*, uint8_t>{"string", kJsonString},
                                        {"number", kJsonNumber}, {"boolean", kJsonBoolean},
                                        {"null", kJsonNull}, {"object", kJsonObject},
                                        {"array", kJsonArray}}) {
          if (!(excluded & bit)) names.emplace_back(std::string(name));
        }
        if (!names.empty()) out.push_back(schema({{"type", json::Value(std::move(names))}}));
      } else if (key == "enum" || key == "const") {
        const json::Array values = key == "const" ? json::Array{member}
                                   : member.is_array() ? member.as_array() : json::Array{};
        out.push_back(schema({{kNotValues, json::Value(values)}}));
      } else if (key == "pattern" && member.is_string()) {
        out.push_back(schema({{"type", json::Value(std::string("string"))},
                              {kNotPatterns, json::Value(json::Array{member})}}));
      } else if (key == "minLength" || key == "minItems" || key == "minProperties") {
        const char* type = key == "minLength" ? "string" : key == "minItems" ? "array" : "object";
        const char* upper = key == "minLength" ? "maxLength" : key == "minItems" ? "maxItems"
                                                                                  : "maxProperties";
        if (auto n = count(key.c_str()); n && *n >= 1) {
          out.push_back(schema({{"type", json::Value(std::string(type))}, {upper, json::Value(*n - 1)}}));
        }
      } else if (key == "maxLength" || key == "maxItems" || key == "maxProperties") {
        const char* type = key == "maxLength" ? "string" : key == "maxItems" ? "array" : "object";
        const char* lower = key == "maxLength" ? "minLength" : key == "maxItems" ? "minItems"
                                                                                  : "minProperties";
        if (auto n = count(key.c_str())) {
          out.push_back(schema({{"type", json::Value(std::string(type))}, {lower, json::Value(*n + 1)}}));
        }
      } else if ((key == "minimum" || key == "maximum" || key == "exclusiveMinimum" ||
                  key == "exclusiveMaximum") && member.is_number()) {
        // The numbers on the other side of the bound (draft 4's boolean exclusive* included).
        const bool lower = key == "minimum" || key == "exclusiveMinimum";
        const bool exclusive = key.rfind("exclusive", 0) == 0 ||
                               flag(lower ? "exclusiveMinimum" : "exclusiveMaximum");
        const char* other = lower ? (exclusive ? "maximum" : "exclusiveMaximum")
                                  : (exclusive ? "minimum" : "exclusiveMinimum");
        out.push_back(schema({{"type", json::Value(std::string("number"))}, {other, member}}));
      } else if (key == "required" && member.is_array() && !member.as_array().empty() &&
                 std::all_of(member.as_array().begin(), member.as_array().end(),
                             [](const json::Value& n) { return n.is_string(); })) {
        out.push_back(schema({{"type", json::Value(std::string("object"))},
                              {kNotRequired, json::Value(json::Array{member})}}));
      } else if (key == "properties" && member.is_object()) {
        // An object whose property fails its schema (the first few properties, each a
        // candidate).
        size_t tried = 0;
        for (const auto& [name, sub] : member.as_object()) {
          if ((sub.is_bool() && sub.as_bool()) || tried++ == kMaxNegatedProperties) continue;
          out.push_back(schema({{"type", json::Value(std::string("object"))},
                                {"required", json::Value(json::Array{json::Value(name)})},
                                {"properties", json::Value(json::Object{
                                                   {name, schema({{"not", sub}})}})}}));
        }
      } else if (key == "items" && member.is_object() && inner.find("prefixItems") == nullptr) {
        // An array whose first item fails the items schema.
        out.push_back(schema({{"type", json::Value(std::string("array"))},
                              {"minItems", json::Value(1.0)},
                              {"prefixItems", json::Value(json::Array{schema({{"not", member}})})}}));
      } else if (key == "anyOf" && member.is_array()) {
        // Every alternative rejected: one negation of each, all together.
        json::Value all(json::Object{});
        bool ok = true;
        for (size_t i = 0; i < member.as_array().size() && ok; ++i) {
          auto each = negations(member.as_array()[i], at + "/anyOf/" + std::to_string(i));
          if (!each.ok() && each.error().message.find("allows no value") != std::string::npos) {
            return each.error();  // an alternative accepts everything: so does anyOf
          }
          ok = each.ok();
          if (!ok) break;
          unsatisfiable_.clear();
          auto merged = merge(all, (*each)[0], at);
          if (!merged.ok() && merged.error().message == unsatisfiable_) {
            return unsatisfiable(at + "/anyOf", "no value fails every alternative (" +
                                                    merged.error().message + ")");
          }
          ok = merged.ok();
          if (ok) all = std::move(*merged);
        }
        if (ok) out.push_back(std::move(all));
      }
    }
    if (keywords.empty()) return unsatisfiable(at, "not: {} allows no value at all");
    if (out.empty()) {
      std::string names;
      for (const std::string& k : keywords) names += (names.empty() ? "" : ", ") + k;
      return invalid(at, "not: {" + names + "} cannot be enforced by constrained generation: "
                         "none of its keywords has a negation the grammar can write (type, "
                         "enum, const, pattern, minLength/maxLength, minItems/maxItems, "
                         "minProperties/maxProperties, minimum/maximum/exclusive*, required, "
                         "anyOf and not of those); remove it or check it after generation");
    }
    return out;
  }

  // not: {enum/const}: the values never generated. Literals are filtered; without them, each
  // excluded value narrows its type: a string is excluded by a regex, null and booleans leave
  // their type (the other boolean stays when booleans are all there is), numbers are collected
  // for widest_gap, objects and arrays leave their type (a narrower language).
  Result<void> exclude_values(const json::Array& values, const std::string& pointer,
                              SchemaNode& node, std::vector<json::Value>& literal_values,
                              std::vector<std::string>& not_regexes,
                              std::vector<double>& numbers) {
    std::set<std::string> texts;
    for (const json::Value& v : values) texts.insert(compact(v));
    if (!literal_values.empty()) {
      std::vector<json::Value> kept_values;
      std::vector<std::string> kept_literals;
      for (size_t i = 0; i < literal_values.size(); ++i) {
        if (texts.count(compact(literal_values[i]))) continue;
        kept_values.push_back(literal_values[i]);
        kept_literals.push_back(node.literals[i]);
      }
      if (kept_values.empty()) {
        return unsatisfiable(pointer + "/not", "not excludes every enum/const value");
      }
      literal_values = std::move(kept_values);
      node.literals = std::move(kept_literals);
      return {};
    }
    bool no_true = false, no_false = false;
    for (const json::Value& v : values) {
      if (v.is_string()) {
        not_regexes.push_back(literal_regex(v.as_string()));
      } else if (v.is_null()) {
        node.types &= static_cast<uint8_t>(~kJsonNull);
      } else if (v.is_bool()) {
        (v.as_bool() ? no_true : no_false) = true;
      } else if (v.is_number()) {
        numbers.push_back(v.as_number());
      } else {
        node.types &= static_cast<uint8_t>(~(v.is_array() ? kJsonArray : kJsonObject));
      }
    }
    if ((no_true || no_false) && (node.types & kJsonBoolean)) {
      if (node.types == kJsonBoolean && !(no_true && no_false)) {
        literal_values = {json::Value(no_false)};
        node.literals = {no_false ? "true" : "false"};
      } else {
        node.types &= static_cast<uint8_t>(~kJsonBoolean);
      }
    }
    if (node.types == 0) {
      return unsatisfiable(pointer + "/not", "not excludes every value of the allowed types");
    }
    return {};
  }

  // Narrows the integers [minimum, maximum] to the widest stretch holding none of `excluded`
  // (and a multiple of `step`); an empty range (minimum > maximum) when there is none.
  static void widest_gap(std::vector<double> excluded, double& minimum, double& maximum,
                         int64_t step) {
    std::sort(excluded.begin(), excluded.end());
    double best_lo = 1, best_hi = 0, lo = minimum;
    auto consider = [&](double from, double to) {
      if (from > to) return;
      const auto first = multiple_at_least(static_cast<int64_t>(from), step);
      if (static_cast<double>(first) > to) return;
      if (best_lo > best_hi || to - from > best_hi - best_lo) {
        best_lo = from;
        best_hi = to;
      }
    };
    for (double x : excluded) {
      if (x < lo || x > maximum) continue;
      // An integer x is excluded itself; a fraction splits nothing (only integers are written).
      if (std::floor(x) != x) continue;
      consider(lo, x - 1);
      lo = x + 1;
    }
    consider(lo, maximum);
    minimum = best_lo;
    maximum = best_hi;
  }

  // minProperties / maxProperties, with only declared properties generated: optional properties
  // in schema order become required until there are minProperties, and past maxProperties
  // the optional ones are left out.
  Result<void> apply_property_counts(const json::Value* min_value, const json::Value* max_value,
                                     const std::string& pointer, SchemaNode& node) {
    if (!(node.types & kJsonObject)) return {};
    auto required_count = [&]() {
      uint32_t n = 0;
      for (const SchemaProperty& p : node.properties) n += p.required ? 1 : 0;
      return n;
    };
    if (max_value != nullptr) {
      auto limit = parse_count(*max_value, pointer + "/maxProperties", UINT32_MAX, "2^32 - 1");
      if (!limit.ok()) return limit.error();
      uint32_t optional_left = *limit >= required_count() ? *limit - required_count() : 0;
      if (required_count() > *limit) {
        return invalid(pointer + "/maxProperties",
                       "more properties are required than maxProperties allows");
      }
      auto& properties = node.properties;
      properties.erase(std::remove_if(properties.begin(), properties.end(),
                                      [&](const SchemaProperty& p) {
                                        if (p.required) return false;
                                        if (optional_left == 0) return true;
                                        --optional_left;
                                        return false;
                                      }),
                       properties.end());
    }
    if (min_value != nullptr) {
      auto least = parse_count(*min_value, pointer + "/minProperties", kMaxProperties,
                               "kMaxProperties");
      if (!least.ok()) return least.error();
      for (SchemaProperty& p : node.properties) {
        if (required_count() >= *least) break;
        p.required = true;
      }
      if (required_count() < *least) {
        return invalid(pointer + "/minProperties",
                       "fewer properties are declared than minProperties asks for (only "
                       "declared properties are generated); declare them in properties");
      }
    }
    return {};
  }

  // contains (minContains, default 1): the first minContains items are generated valid against
  // it too (merged with their own schema as allOf), so at least that many match: exact, if
  // narrower. maxContains caps the array's length (maxItems): no more items than that can
  // match.
  Result<json::Value> apply_contains(const json::Value& value, const std::string& pointer) {
    json::Value out = object_without(value, {"contains", "minContains", "maxContains"});
    const json::Value& contains = *value.find("contains");
    auto set = [&](const std::string& key, json::Value v) {
      json::set(out.as_object(), key, std::move(v));
    };
    uint32_t least = 1;
    if (const json::Value* min = value.find("minContains")) {
      auto n = parse_count(*min, pointer + "/minContains", 64, "64");
      if (!n.ok()) return n.error();
      least = *n;
    }
    if (const json::Value* max = value.find("maxContains")) {
      auto most = parse_count(*max, pointer + "/maxContains", UINT32_MAX, "2^32 - 1");
      if (!most.ok()) return most.error();
      if (*most < least) {
        return invalid(pointer + "/maxContains", "maxContains is below minContains: no array fits");
      }
      double max_items = *most;
      if (const json::Value* m = value.find("maxItems"); m != nullptr && m->is_number()) {
        max_items = std::min(max_items, m->as_number());
      }
      set("maxItems", json::Value(max_items));
    }
    if (least == 0) return out;
    if (contains.is_bool() && !contains.as_bool()) {
      return invalid(pointer + "/contains", "contains: false matches no item");
    }
    const json::Value* items = value.find("items");
    const bool tuple_items = items != nullptr && items->is_array();
    const json::Value* prefix = tuple_items ? items : value.find("prefixItems");
    const json::Value* rest = tuple_items ? value.find("additionalItems") : items;
    json::Array first = prefix != nullptr && prefix->is_array() ? prefix->as_array() : json::Array{};
    for (size_t i = 0; i < std::max<size_t>(first.size(), least); ++i) {
      if (i >= first.size()) first.push_back(rest != nullptr ? *rest : json::Value(true));
      if (i >= least || (contains.is_bool() && contains.as_bool())) continue;
      json::Value& base = first[i];
      if (base.is_bool()) {
        if (base.as_bool()) base = contains;  // false stays: the array ends before it
      } else {
        base = json::Value(json::Object{{"allOf", json::Value(json::Array{base, contains})}});
      }
    }
    uint32_t min_items = least;
    if (const json::Value* m = value.find("minItems"); m != nullptr && m->is_number()) {
      min_items = std::max(min_items, static_cast<uint32_t>(std::min(m->as_number(), 4294967295.0)));
    }
    set(tuple_items ? "items" : "prefixItems", json::Value(std::move(first)));
    set("minItems", json::Value(static_cast<double>(min_items)));
    return out;
  }

  // items, prefixItems (2020-12) and the array form of items with additionalItems (draft 7):
  // the schemas of the first items, then of the rest (false: no more items).
  Result<void> compile_item_keywords(const json::Value& value, const std::string& pointer,
                                     SchemaNode& node) {
    const json::Value* prefix = value.find("prefixItems");
    const json::Value* items = value.find("items");
    if (prefix != nullptr && !prefix->is_array()) {
      return invalid(pointer + "/prefixItems", "prefixItems must be an array of schemas");
    }
    const bool tuple_items = items != nullptr && items->is_array();
    if (prefix != nullptr && tuple_items) {
      return invalid(pointer + "/items", "give prefixItems or an array of items, not both");
    }
    const json::Value* tuple = prefix != nullptr ? prefix : tuple_items ? items : nullptr;
    const std::string tuple_at = pointer + (prefix != nullptr ? "/prefixItems" : "/items");
    // additionalItems applies only after an array of items; otherwise items is the rest.
    const json::Value* rest = tuple_items ? value.find("additionalItems") : items;
    std::string rest_at = pointer + (tuple_items ? "/additionalItems" : "/items");
    if (rest == nullptr && value.find("unevaluatedItems") != nullptr) {
      // Items past the tuple that nothing here evaluates (merge() keeps other schemas' items
      // out): unevaluatedItems judges them. Items matching `contains` would count as
      // evaluated; they are judged too, which is narrower.
      rest = value.find("unevaluatedItems");
      rest_at = pointer + "/unevaluatedItems";
    }
    if (tuple != nullptr) {
      for (size_t i = 0; i < tuple->as_array().size(); ++i) {
        const json::Value& member = tuple->as_array()[i];
        const std::string at = tuple_at + "/" + std::to_string(i);
        if (member.is_bool() && !member.as_bool()) {
          // No value fits: the array stops before this item.
          node.max_items = std::min(node.max_items, static_cast<uint32_t>(i));
          break;
        }
        auto child = compile(member, at);
        if (!child.ok()) return child.error();
        node.prefix_items.push_back(*child);
      }
    }
    if (rest != nullptr && rest->is_bool() && !rest->as_bool()) {
      node.max_items = std::min(node.max_items, static_cast<uint32_t>(node.prefix_items.size()));
    } else if (rest != nullptr) {
      auto child = compile(*rest, rest_at);
      if (!child.ok()) return child.error();
      node.items = *child;
    }
    return {};
  }

  // Compiles a string's patterns and length bounds into one automaton (shared by every node
  // with the same ones).
  Result<void> add_pattern(const std::vector<std::string>& regexes,
                           const std::vector<std::string>& excluded, SchemaNode& node,
                           const std::string& at) {
    std::string key = std::to_string(node.min_length) + "," + std::to_string(node.max_length);
    for (const std::string& r : regexes) key += "," + std::to_string(r.size()) + ":" + r;
    key += "|";
    for (const std::string& r : excluded) key += "," + std::to_string(r.size()) + ":" + r;
    auto known = pattern_ids_.find(key);
    if (known != pattern_ids_.end()) {
      node.pattern = known->second;
      return {};
    }
    auto dfa = compile_regex(regexes, /*search=*/true, node.min_length, node.max_length, excluded);
    // A maxLength too large to fold into the automaton: counted in the grammar's frame instead.
    const bool counted = !dfa.ok() && node.max_length != UINT32_MAX &&
                         dfa.error().message.find("kMaxRegexStates") != std::string::npos;
    if (counted) dfa = compile_regex(regexes, /*search=*/true, node.min_length, UINT32_MAX, excluded);
    if (dfa.ok() && gemma_) dfa = without_pair(*dfa, '<', '|');  // "<|" ends Gemma 4's string
    if (!dfa.ok()) return invalid(at, dfa.error().message);
    StringPattern p;
    p.dfa = std::move(*dfa);
    p.paths = shortest_paths(p.dfa, string_costs());
    if (p.paths.cost[p.dfa.start] == RegexPaths::kNone) {
      return invalid(at, "every string the pattern matches needs a control character that only "
                         "a \\u escape can write, which is not generated");
    }
    if (counted) {
      count_path_lengths(p);
      p.max_length = node.max_length;
      if (p.path_length[p.dfa.start] > p.max_length) {
        return invalid(at, "the pattern's shortest match is longer than maxLength");
      }
    } else if (node.max_length != UINT32_MAX) {
      add_far_twin(regexes, excluded, p);
    }
    schema_.patterns.push_back(std::move(p));
    node.pattern = static_cast<uint32_t>(schema_.patterns.size());
    pattern_ids_[key] = node.pattern;
    return {};
  }

  // Per state, the code points of its shortest continuation, and their maximum (far_margin).
  static void count_path_lengths(StringPattern& p) {
    const size_t n = p.dfa.size();
    std::vector<uint32_t> order;
    for (uint32_t s = 0; s < n; ++s) {
      if (p.paths.cost[s] != RegexPaths::kNone) order.push_back(s);
    }
    // A continuation's rest is cheaper than itself: by cost, each state's next is done first.
    std::sort(order.begin(), order.end(),
              [&](uint32_t a, uint32_t b) { return p.paths.cost[a] < p.paths.cost[b]; });
    p.path_length.assign(n, 0);
    for (uint32_t s : order) {
      if (p.dfa.accepting[s]) continue;
      const uint8_t c = p.paths.first_byte[s];
      p.path_length[s] = ((c & 0xC0) != 0x80 ? 1 : 0) +
                         p.path_length[p.dfa.step(static_cast<uint16_t>(s), c)];
      p.far_margin = std::max(p.far_margin, p.path_length[s]);
    }
  }

  // The same patterns without length bounds, and how each bounded state maps onto them (see
  // StringPattern). Left out when the unbounded automaton is over the limits: no sharing then.
  void add_far_twin(const std::vector<std::string>& regexes,
                    const std::vector<std::string>& excluded, StringPattern& bounded) {
    auto dfa = compile_regex(regexes, /*search=*/true, 0, UINT32_MAX, excluded);
    if (dfa.ok() && gemma_) dfa = without_pair(*dfa, '<', '|');
    if (!dfa.ok()) return;
    StringPattern base;
    base.dfa = std::move(*dfa);
    base.paths = shortest_paths(base.dfa, string_costs());
    for (uint32_t cost : base.paths.cost) {
      if (cost != RegexPaths::kNone) bounded.far_margin = std::max(bounded.far_margin, cost);
    }
    // Both automata come from the same expressions (same byte classes): walk them in step.
    const RegexDfa& b = bounded.dfa;
    bounded.base_state.assign(b.size(), RegexDfa::kDead);
    bounded.length.assign(b.size(), 0);
    std::vector<uint16_t> work = {b.start};
    bounded.base_state[b.start] = base.dfa.start;
    while (!work.empty()) {
      const uint16_t s = work.back();
      work.pop_back();
      for (int byte = 0; byte < 256; ++byte) {
        const uint16_t t = b.step(s, static_cast<uint8_t>(byte));
        if (t == RegexDfa::kDead || bounded.base_state[t] != RegexDfa::kDead) continue;
        bounded.base_state[t] = base.dfa.step(bounded.base_state[s], static_cast<uint8_t>(byte));
        bounded.length[t] = bounded.length[s] + ((byte & 0xC0) != 0x80 ? 1 : 0);
        work.push_back(t);
      }
    }
    schema_.patterns.push_back(std::move(base));
    schema_.nodes.emplace_back();
    pointers_.push_back("");
    filled_.push_back(true);
    SchemaNode& twin = schema_.nodes.back();
    twin.types = kJsonString;
    twin.pattern = static_cast<uint32_t>(schema_.patterns.size());
    bounded.far_node = static_cast<uint32_t>(schema_.nodes.size() - 1);
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
      const std::string literal = key_literal(name.as_string());
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

  // enum/const with other keywords: only the values those keywords accept can validate.
  Result<void> keep_valid_literals(SchemaNode& node, const std::vector<json::Value>& values,
                                          const Bounds& exact_min, const Bounds& exact_max,
                                          double multiple, const RegexDfa* pattern,
                                          const std::string& pointer) {
    std::vector<std::string> kept;
    for (size_t i = 0; i < values.size(); ++i) {
      const json::Value& v = values[i];
      bool ok = (type_bit(v) & node.types) != 0;
      if (v.is_string()) {
        const size_t n = code_points(v.as_string());
        ok = ok && n >= node.min_length && n <= node.max_length;
        ok = ok && (pattern == nullptr || pattern->matches(v.as_string()));
      }
      if (v.is_number()) {
        for (const auto& [bound, strict] : exact_min) {
          ok = ok && (strict ? v.as_number() > bound : v.as_number() >= bound);
        }
        for (const auto& [bound, strict] : exact_max) {
          ok = ok && (strict ? v.as_number() < bound : v.as_number() <= bound);
        }
        if (multiple > 0) {  // an integer multiple of the step, and the validators' float check
          const double x = v.as_number();
          const double quotient = x / multiple;
          ok = ok && std::floor(x) == x &&
               std::fmod(x, static_cast<double>(node.multiple_of)) == 0 &&
               std::isfinite(quotient) && std::floor(quotient) == quotient;
        }
      }
      if (ok) kept.push_back(node.literals[i]);
    }
    if (kept.empty()) {
      return unsatisfiable(pointer, "no enum/const value has one of the allowed types, bounds and "
                              "patterns");
    }
    // Past kMaxEnumValues (the grammar's 64-bit candidate sets) the first ones are generated:
    // a subset of the values, so still valid.
    if (kept.size() > kMaxEnumValues) kept.resize(kMaxEnumValues);
    node.literals = std::move(kept);
    return {};
  }

  // ---- shortest values ----

  // Per node the shortest value's size and depth, by fixed point (recursive schemas refer to
  // themselves); then the text. Sizes past kMaxMinimalValueBytes count as unknown: refused.
  Result<void> compute_minimal_values() {
    auto& nodes = schema_.nodes;
    std::vector<size_t> size(nodes.size(), kUnknown);
    std::vector<uint32_t> depth(nodes.size(), 1);
    std::vector<int> choice(nodes.size(), -1);  // which candidate: see candidate() below
    std::vector<bool> too_big(nodes.size(), false);
    // Candidates: 0..n-1 literal i, 100+k type k (number, string, true, null, object, array),
    // 200+i alternative i.
    auto object_size = [&](const SchemaNode& node, uint32_t& d) -> size_t {
      size_t total = 2;
      d = 1;
      bool first = true;
      for (const SchemaProperty& p : node.properties) {
        if (!p.required) continue;
        if (size[p.node] == kUnknown) return kUnknown;
        total += (first ? 0 : 1) + p.key.size() + key_separator().size() + size[p.node];
        first = false;
        d = std::max(d, depth[p.node] + 1);
      }
      return total;
    };
    auto array_size = [&](const SchemaNode& node, uint32_t& d) -> size_t {
      d = 1;
      if (node.min_items == 0) return 2;
      size_t total = 2 + (node.min_items - 1);
      for (uint32_t i = 0; i < node.min_items; ++i) {
        const uint32_t item = node.item(i);
        if (size[item] == kUnknown) return kUnknown;
        total += size[item];
        d = std::max(d, depth[item] + 1);
        if (i >= node.prefix_items.size()) {  // the rest are all `items`
          total += size_t{node.min_items - 1 - i} * size[item];
          break;
        }
      }
      return total;
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t id = 0; id < nodes.size(); ++id) {
        const SchemaNode& node = nodes[id];
        size_t best = kUnknown;
        uint32_t best_depth = 1;
        int best_choice = -1;
        auto consider = [&](size_t s, uint32_t d, int c) {
          if (s > kMaxMinimalValueBytes) {
            if (s != kUnknown) too_big[id] = true;
            return;
          }
          if (s < best) {
            best = s;
            best_depth = d;
            best_choice = c;
          }
        };
        if (!node.alternatives.empty()) {
          for (size_t i = 0; i < node.alternatives.size(); ++i) {
            consider(size[node.alternatives[i]], depth[node.alternatives[i]],
                     200 + static_cast<int>(i));
          }
        } else if (node.tagged) {
          for (size_t i = 0; i < node.properties.size(); ++i) {
            const uint32_t shape = node.properties[i].node;
            consider(size[shape], depth[shape], 300 + static_cast<int>(i));
          }
        } else if (!node.literals.empty()) {
          for (size_t i = 0; i < node.literals.size(); ++i) {
            consider(node.literals[i].size(), 1, static_cast<int>(i));
          }
        } else {
          if (node.types & (kJsonNumber | kJsonInteger)) {
            consider(integer_text(node).size(), 1, 100);
          }
          if (node.types & kJsonString) {
            const StringPattern* p =
                node.pattern != 0 ? &schema_.patterns[node.pattern - 1] : nullptr;
            const size_t quotes = 2 * quote().size();
            consider(p != nullptr ? quotes + size_t{p->paths.cost[p->dfa.start]}
                                  : quotes + node.min_length,
                     1, 101);
          }
          if (node.types & kJsonBoolean) consider(4, 1, 102);
          if (node.types & kJsonNull) consider(4, 1, 103);
          uint32_t d = 1;
          if (node.types & kJsonObject) {
            const size_t s = object_size(node, d);
            consider(s, d, 104);
          }
          if (node.types & kJsonArray) {
            const size_t s = array_size(node, d);
            consider(s, d, 105);
          }
        }
        if (best < size[id]) {
          size[id] = best;
          depth[id] = best_depth;
          choice[id] = best_choice;
          changed = true;
        }
      }
    }
    for (size_t id = 0; id < nodes.size(); ++id) {
      if (size[id] != kUnknown || !too_big[id]) continue;
      return invalid(pointers_[id], "its shortest value is longer than " +
                                        std::to_string(kMaxMinimalValueBytes) +
                                        " bytes (kMaxMinimalValueBytes); lower minItems/minLength");
    }
    for (size_t id = 0; id < nodes.size(); ++id) {
      if (size[id] != kUnknown) continue;
      const std::string& where = pointers_[id];
      return invalid(where, "no finite value exists: every value contains another one "
                            "(a required property or minItems leads back to this schema)");
    }
    std::vector<bool> built(nodes.size(), false);
    for (size_t id = 0; id < nodes.size(); ++id) {
      build_minimal(static_cast<uint32_t>(id), choice, built);
      SchemaNode& node = nodes[id];
      node.minimal_depth = depth[id];
      uint32_t d = 1;
      object_size(node, d);
      node.object_depth = d;
      array_size(node, d);
      node.array_depth = d;
    }
    // A tagged union's object may turn into any of its shapes: room for the deepest.
    for (SchemaNode& node : nodes) {
      if (!node.tagged) continue;
      for (const SchemaProperty& p : node.properties) {
        node.object_depth = std::max(node.object_depth, nodes[p.node].object_depth);
      }
    }
    return {};
  }

  // The text of an integer-range node's shortest number (or "0").
  static std::string integer_text(const SchemaNode& node) {
    if (!node.integer_range || (node.minimum <= 0 && node.maximum >= 0)) return "0";
    return std::to_string(node.minimum > 0
                              ? multiple_at_least(node.minimum, node.multiple_of)
                              : -multiple_at_least(-node.maximum, node.multiple_of));
  }

  // Children's shortest values are strictly shorter than their parent's: the recursion ends.
  void build_minimal(uint32_t id, const std::vector<int>& choice, std::vector<bool>& built) {
    if (built[id]) return;
    built[id] = true;
    SchemaNode& node = schema_.nodes[id];
    const int c = choice[id];
    std::string text;
    if (c >= 300) {
      const uint32_t shape = node.properties[c - 300].node;
      build_minimal(shape, choice, built);
      text = schema_.nodes[shape].minimal;
    } else if (c >= 200) {
      const uint32_t alt = node.alternatives[c - 200];
      build_minimal(alt, choice, built);
      text = schema_.nodes[alt].minimal;
    } else if (c < 100) {
      text = node.literals[c];
    } else if (c == 100) {
      text = integer_text(node);
    } else if (c == 101) {
      text = node.pattern != 0
                 ? shortest_pattern_string(schema_.patterns[node.pattern - 1], syntax_)
                 : std::string(quote()) + std::string(node.min_length, 'a') + std::string(quote());
    } else if (c == 102) {
      text = "true";
    } else if (c == 103) {
      text = "null";
    } else if (c == 104) {
      text = "{";
      for (const SchemaProperty& p : node.properties) {
        if (!p.required) continue;
        build_minimal(p.node, choice, built);
        if (text.size() > 1) text += ',';
        text += p.key + std::string(key_separator()) + schema_.nodes[p.node].minimal;
      }
      text += "}";
    } else {
      text = "[";
      for (uint32_t i = 0; i < node.min_items; ++i) {
        build_minimal(node.item(i), choice, built);
        if (i > 0) text += ',';
        text += schema_.nodes[node.item(i)].minimal;
      }
      text += "]";
    }
    schema_.nodes[id].minimal = std::move(text);
  }

  // What a string opens and closes with, and what follows a key literal.
  std::string_view quote() const { return gemma_ ? kGemmaQuote : std::string_view("\""); }
  std::string_view key_separator() const { return gemma_ ? "" : ":"; }
  const std::array<uint8_t, 256>& string_costs() const {
    return gemma_ ? raw_costs() : json_string_costs();
  }

  const json::Value& document_;        // with its $refs rewritten by RefResolver
  const std::vector<std::string> ref_errors_;  // RefResolver's, by index
  const JsonSyntax syntax_;
  const bool gemma_;
  const bool strict_;  // unknown keywords and formats refused, not ignored
  JsonSchema schema_;
  std::vector<std::string> pointers_;  // per node, for errors
  std::vector<bool> filled_;           // per node: compiled (not a $ref still being compiled)
  std::map<std::string, uint32_t> refs_;  // $ref target pointer -> node
  std::map<std::string, uint32_t> pattern_ids_;  // length bounds + regexes -> node.pattern
  std::map<uint32_t, Pending> pending_;   // anyOf/oneOf nodes, combined after compiling
  std::set<uint32_t> resolving_;
  size_t depth_ = 0;
  uint32_t any_ = 0;  // 0: not created yet
  std::string unsatisfiable_;  // the message of the last unsatisfiable() error
  std::string remote_;         // the message of the last reference to another document
  size_t negation_attempts_ = 0;
  size_t flattened_ = 0;  // flatten() calls (see kMaxFlattenSteps)  // candidates apply_not compiled (bounded: each may recurse)
  bool names_applied_ = false;  // the next compile_keywords gets apply_name_rules' output
};

}  // namespace

Result<std::shared_ptr<const JsonSchema>> compile_regex_format(std::string_view regex) {
  auto dfa = compile_regex({std::string(regex)}, /*search=*/false);
  if (!dfa.ok()) return dfa.error();
  std::array<uint8_t, 256> raw;
  raw.fill(1);  // every byte is written as itself
  StringPattern p;
  p.dfa = std::move(*dfa);
  p.paths = shortest_paths(p.dfa, raw);
  auto schema = std::make_shared<JsonSchema>();
  schema->whole_text = true;
  schema->nodes.resize(1);
  SchemaNode& node = schema->nodes[0];
  node.types = 0;
  node.pattern = 1;
  for (uint16_t s = p.dfa.start; !p.dfa.accepting[s]; s = p.dfa.step(s, p.paths.first_byte[s])) {
    node.minimal += static_cast<char>(p.paths.first_byte[s]);
  }
  schema->patterns.push_back(std::move(p));
  return std::shared_ptr<const JsonSchema>(std::move(schema));
}

Result<std::shared_ptr<const JsonSchema>> compile_json_schema(std::string_view schema_json,
                                                              JsonSyntax syntax, bool strict) {
  if (schema_json.size() > kMaxSchemaBytes) {
    return Error{ErrorCode::kInvalidArgument,
                 "the JSON schema is " + std::to_string(schema_json.size()) +
                     " bytes, more than the " + std::to_string(kMaxSchemaBytes) +
                     " supported (kMaxSchemaBytes)"};
  }
  auto parsed = json::parse(schema_json);
  if (!parsed.ok()) {
    return Error{ErrorCode::kInvalidArgument, "the JSON schema is not valid JSON (offset " +
                                                  std::to_string(parsed.error().offset) +
                                                  "): " + parsed.error().message};
  }
  const json::Value& root = *parsed;
  std::vector<std::string> ref_errors;
  const json::Value resolved = RefResolver(root).run(root, ref_errors);
  return Compiler(resolved, std::move(ref_errors), syntax, strict).run();
}

}  // namespace rne::grammar

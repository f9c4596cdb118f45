#include <gtest/gtest.h>

#include "rne/json/json.h"

namespace json = rne::json;

namespace {

json::Value parse_ok(std::string_view text) {
  auto parsed = json::parse(text);
  EXPECT_TRUE(parsed.ok()) << parsed.error().message << " at " << parsed.error().offset;
  return parsed.ok() ? std::move(parsed).value() : json::Value();
}

json::ParseError parse_fail(std::string_view text) {
  auto parsed = json::parse(text);
  EXPECT_FALSE(parsed.ok()) << text;
  return parsed.ok() ? json::ParseError{} : parsed.error();
}

}  // namespace

TEST(Json, ParsesNestedDocumentKeepingKeyOrder) {
  const json::Value v = parse_ok(R"( {"b": [1, -2.5e-1, true, false, null], "a": {"x": "y"}} )");
  ASSERT_TRUE(v.is_object());
  ASSERT_EQ(v.as_object().size(), 2u);
  EXPECT_EQ(v.as_object()[0].first, "b");
  EXPECT_EQ(v.as_object()[1].first, "a");
  const json::Array& b = v.find("b")->as_array();
  ASSERT_EQ(b.size(), 5u);
  EXPECT_TRUE(b[0].is_integer());
  EXPECT_EQ(b[0].as_integer(), 1);
  EXPECT_DOUBLE_EQ(b[1].as_number(), -0.25);
  EXPECT_FALSE(b[1].is_integer());
  EXPECT_TRUE(b[2].as_bool());
  EXPECT_FALSE(b[3].as_bool());
  EXPECT_TRUE(b[4].is_null());
  EXPECT_EQ(v.find("a")->find("x")->as_string(), "y");
  EXPECT_EQ(v.find("missing"), nullptr);
}

TEST(Json, DecodesEscapesToUtf8) {
  const json::Value v = parse_ok(R"("q\"b\\s\/n\nt\tu\u00e9\u2581\ud83d\ude00")");
  EXPECT_EQ(v.as_string(), "q\"b\\s/n\nt\tu\xC3\xA9\xE2\x96\x81\xF0\x9F\x98\x80");
}

TEST(Json, RejectsMalformedInputWithOffset) {
  EXPECT_EQ(parse_fail(R"({"a": 1} x)").offset, 9u);
  EXPECT_NE(parse_fail(R"("unterminated)").message.find("unterminated"), std::string::npos);
  EXPECT_NE(parse_fail(R"("\ud83d")").message.find("surrogate"), std::string::npos);
  EXPECT_NE(parse_fail(R"("\ude00")").message.find("surrogate"), std::string::npos);
  parse_fail("[1, 2");
  parse_fail("{\"a\" 1}");
  parse_fail("tru");
  parse_fail("01x");
  parse_fail("\"tab\tinside\"");
  EXPECT_EQ(parse_fail("").code, json::ErrorCode::kSyntax);
  // The nesting limit, not a stack overflow.
  EXPECT_EQ(parse_fail(std::string(1000, '[')).code, json::ErrorCode::kTooDeep);
}

TEST(Json, WriteStringEscapesAndRoundTrips) {
  const std::string original = "a\"b\\c\n\t\x01 \xC3\xA9";
  std::string out;
  json::write_string(original, out);
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\t\\u0001 \xC3\xA9\"");
  EXPECT_EQ(parse_ok(out).as_string(), original);
}

// The styles of the one writer: the core's (\b and \f as \u00XX: the grammar's key literals
// take those) and Python's json.dumps (the chat templates' tojson), with and without
// ensure_ascii, as Python 3.11 writes "\b\f\x7f é 😀".
TEST(Json, WriteStringStyles) {
  const std::string text = "\b\f\x7F \xC3\xA9 \xF0\x9F\x98\x80";
  std::string core, python, ascii;
  json::write_string(text, core);
  json::write_string(text, python, {true, false});
  json::write_string(text, ascii, {true, true});
  EXPECT_EQ(core, "\"\\u0008\\u000c\x7F \xC3\xA9 \xF0\x9F\x98\x80\"");
  EXPECT_EQ(python, "\"\\b\\f\x7F \xC3\xA9 \xF0\x9F\x98\x80\"");
  EXPECT_EQ(ascii, "\"\\b\\f\\u007f \\u00e9 \\ud83d\\ude00\"");
  // A byte that starts no whole UTF-8 sequence: copied by the core's style, U+FFFD by Python's.
  std::string broken_core, broken_python;
  json::write_string("\xC3", broken_core);
  json::write_string("\xC3", broken_python, {true, false});
  EXPECT_EQ(broken_core, "\"\xC3\"");
  EXPECT_EQ(broken_python, "\"\xEF\xBF\xBD\"");
}

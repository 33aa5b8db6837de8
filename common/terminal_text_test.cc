#include "common/terminal_text.h"

#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace gpuprof {
namespace {

// An OSC sequence that sets the window title, then "clear the screen, cursor home".
constexpr char kTitleAndClear[] = "\x1b]0;owned\x07\x1b[2J\x1b[H";

TEST(TerminalTextTest, FindsTheFirstUnsafeCharacter) {
  EXPECT_FALSE(FindUnsafeCharacter("plain text, µs and 日本語 are fine").has_value());
  const auto escape = FindUnsafeCharacter(absl::StrCat("ab", kTitleAndClear));
  ASSERT_TRUE(escape.has_value());
  EXPECT_EQ(escape->byte_offset, 2u);
  EXPECT_EQ(escape->code_point, 0x1Bu);
  EXPECT_FALSE(escape->invalid_utf8);
  EXPECT_EQ(DescribeUnsafeCharacter(*escape), "U+001B (escape)");

  const auto del = FindUnsafeCharacter("x\x7f");
  ASSERT_TRUE(del.has_value());
  EXPECT_EQ(del->byte_offset, 1u);
  EXPECT_EQ(DescribeUnsafeCharacter(*del), "U+007F (delete)");
}

TEST(TerminalTextTest, FindsC1AndBidiCharactersByCodePoint) {
  // U+009B (CSI in one character) is C2 9B in UTF-8.
  const auto csi = FindUnsafeCharacter(
      "ok \xc2\x9b"
      "2J");
  ASSERT_TRUE(csi.has_value());
  EXPECT_EQ(csi->byte_offset, 3u);
  EXPECT_EQ(DescribeUnsafeCharacter(*csi), "U+009B (control sequence introducer)");
  // U+202E RIGHT-TO-LEFT OVERRIDE, U+2066 LEFT-TO-RIGHT ISOLATE.
  const auto rlo = FindUnsafeCharacter("name\xe2\x80\xaetxt.exe");
  ASSERT_TRUE(rlo.has_value());
  EXPECT_EQ(rlo->byte_offset, 4u);
  EXPECT_EQ(DescribeUnsafeCharacter(*rlo), "U+202E (right-to-left override)");
  const auto isolate = FindUnsafeCharacter("\xe2\x81\xa6");
  ASSERT_TRUE(isolate.has_value());
  EXPECT_EQ(isolate->code_point, 0x2066u);
  // Their neighbours are ordinary: U+00A0 (no-break space), U+2030 (per mille), U+206A.
  EXPECT_FALSE(FindUnsafeCharacter("\xc2\xa0\xe2\x80\xb0\xe2\x81\xaa").has_value());
}

TEST(TerminalTextTest, InvalidUtf8IsUnsafeByte) {
  // A lone C1 byte, an overlong ESC (C0 9B), a surrogate (ED A0 80), a truncated sequence.
  for (const std::string& text : {std::string("a\x9b"), std::string("a\xc0\x9b"),
                                  std::string("a\xed\xa0\x80"), std::string("a\xe2\x80")}) {
    const auto found = FindUnsafeCharacter(text);
    ASSERT_TRUE(found.has_value()) << EscapeForTerminal(text);
    EXPECT_EQ(found->byte_offset, 1u);
    EXPECT_TRUE(found->invalid_utf8);
  }
  EXPECT_EQ(DescribeUnsafeCharacter(*FindUnsafeCharacter("\xff")), "byte 0xFF (not UTF-8)");
}

TEST(TerminalTextTest, EscapeMakesEveryUnsafeCharacterVisible) {
  EXPECT_EQ(EscapeForTerminal(kTitleAndClear), "\\x1b]0;owned\\x07\\x1b[2J\\x1b[H");
  EXPECT_EQ(EscapeForTerminal("a\nb\tc\rd\x7f"), "a\\nb\\tc\\rd\\x7f");
  EXPECT_EQ(EscapeForTerminal("\xc2\x9b"
                              "2J \xe2\x80\xae \xe2\x81\xa9"),
            "\\u009b2J \\u202e \\u2069");
  EXPECT_EQ(EscapeForTerminal("bad \xff\xc0\x9b"), "bad \\xff\\xc0\\x9b");
  // Ordinary text, backslashes included, is unchanged.
  for (const char* text : {"", "2512 GB/s (89% of copy)", "µs 日本語 ×", "C:\\path"}) {
    EXPECT_EQ(EscapeForTerminal(text), text);
  }
}

TEST(TerminalTextTest, EscapedTextHasNoUnsafeCharacter) {
  std::string every_byte;
  for (int byte = 0; byte < 256; ++byte) every_byte.push_back(static_cast<char>(byte));
  every_byte += "\xc2\x85\xe2\x80\xae\xe2\x81\xa6\xe2\x80\xa8";
  EXPECT_FALSE(FindUnsafeCharacter(EscapeForTerminal(every_byte)).has_value());
  const std::string lines = EscapeLinesForTerminal(every_byte);
  // Only the newline stays.
  const auto found = FindUnsafeCharacter(lines);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->code_point, static_cast<char32_t>('\n'));
  EXPECT_FALSE(FindUnsafeCharacter(lines.substr(found->byte_offset + 1)).has_value());
}

TEST(TerminalTextTest, EscapeLinesKeepsNewlinesOnly) {
  EXPECT_EQ(EscapeLinesForTerminal("line 1\nline\x1b[2J 2\r\n"), "line 1\nline\\x1b[2J 2\\r\n");
}

TEST(TerminalTextTest, JsonQuotedIsPrintableJson) {
  EXPECT_EQ(JsonQuoted("a \"b\" \\ c"), "\"a \\\"b\\\" \\\\ c\"");
  EXPECT_EQ(JsonQuoted(kTitleAndClear), "\"\\u001b]0;owned\\u0007\\u001b[2J\\u001b[H\"");
  EXPECT_EQ(JsonQuoted("x\ny\t\x7f\xc2\x9b\xe2\x81\xa6"), "\"x\\ny\\t\\u007f\\u009b\\u2066\"");
  EXPECT_EQ(JsonQuoted("\xff µ"), "\"\\ufffd µ\"");
}

TEST(TerminalTextTest, EscapeUnsafeInJsonKeepsTheValue) {
  // Protobuf leaves U+2066-U+2069 raw in its JSON strings.
  EXPECT_EQ(EscapeUnsafeInJson("{\"d\":\"a\xe2\x81\xa6z \xc2\xb5\"}"), "{\"d\":\"a\\u2066z µ\"}");
  EXPECT_EQ(EscapeUnsafeInJson("{\"d\":\"\x7f\xc2\x85\"}"), "{\"d\":\"\\u007f\\u0085\"}");
  // Whitespace between tokens and escapes already there are left alone.
  EXPECT_EQ(EscapeUnsafeInJson("{\n  \"a\": \"\\u001b\"\n}"), "{\n  \"a\": \"\\u001b\"\n}");
}

TEST(TerminalTextTest, FindsTheFirstByteThatIsNotUtf8) {
  EXPECT_EQ(FirstInvalidUtf8Byte(""), std::nullopt);
  EXPECT_EQ(FirstInvalidUtf8Byte("jos\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), std::nullopt);
  // Control characters are UTF-8 (refused elsewhere, with their own message).
  EXPECT_EQ(FirstInvalidUtf8Byte("a\x1b[2Jb\n\xc2\x85"), std::nullopt);
  EXPECT_EQ(FirstInvalidUtf8Byte("ab\xff"), 2u);
  EXPECT_EQ(FirstInvalidUtf8Byte("\x1b\xc3"), 1u);      // a truncated sequence
  EXPECT_EQ(FirstInvalidUtf8Byte("x\xc0\xaf"), 1u);     // an overlong '/'
  EXPECT_EQ(FirstInvalidUtf8Byte("\xed\xa0\x80"), 0u);  // a surrogate
}

}  // namespace
}  // namespace gpuprof

#include "common/terminal_text.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpuprof {
namespace {

// One step of UTF-8 decoding: the code point at a position and its length in bytes; an invalid
// sequence (a stray continuation byte, a truncated sequence, an overlong form, a surrogate,
// beyond U+10FFFF) is its first byte alone, marked invalid.
struct Decoded {
  char32_t code_point = 0;
  size_t length = 1;
  bool valid = true;
};

Decoded DecodeAt(absl::string_view text, size_t i) {
  const auto byte = [&text](size_t at) { return static_cast<uint8_t>(text[at]); };
  const uint8_t lead = byte(i);
  if (lead < 0x80) return {lead, 1, true};
  size_t length = 0;
  char32_t code_point = 0;
  // The first continuation byte's range rules out overlong forms, surrogates and > U+10FFFF.
  uint8_t low = 0x80, high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    code_point = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    code_point = lead & 0x0F;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    code_point = lead & 0x07;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return {lead, 1, false};
  }
  if (i + length > text.size()) return {lead, 1, false};
  for (size_t k = 1; k < length; ++k) {
    const uint8_t next = byte(i + k);
    const uint8_t min = k == 1 ? low : 0x80;
    const uint8_t max = k == 1 ? high : 0xBF;
    if (next < min || next > max) return {lead, 1, false};
    code_point = (code_point << 6) | (next & 0x3F);
  }
  return {code_point, length, true};
}

// How `Escape` shows a C0 control or DEL.
void AppendAsciiControl(std::string& out, char32_t code_point) {
  switch (code_point) {
    case '\n':
      out += "\\n";
      return;
    case '\r':
      out += "\\r";
      return;
    case '\t':
      out += "\\t";
      return;
    default:
      absl::StrAppendFormat(&out, "\\x%02x", static_cast<unsigned>(code_point));
  }
}

std::string Escape(absl::string_view text, bool keep_newlines) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const Decoded decoded = DecodeAt(text, i);
    if (!decoded.valid) {
      absl::StrAppendFormat(&out, "\\x%02x", static_cast<unsigned>(decoded.code_point));
    } else if (!IsUnsafeCodePoint(decoded.code_point) ||
               (keep_newlines && decoded.code_point == '\n')) {
      out.append(text.data() + i, decoded.length);
    } else if (decoded.code_point < 0x80) {
      AppendAsciiControl(out, decoded.code_point);
    } else {
      absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned>(decoded.code_point));
    }
    i += decoded.length;
  }
  return out;
}

}  // namespace

bool IsUnsafeCodePoint(char32_t c) {
  return c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0x061C || c == 0x200E || c == 0x200F ||
         c == 0x2028 || c == 0x2029 || (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069);
}

std::optional<size_t> FirstInvalidUtf8Byte(absl::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const Decoded decoded = DecodeAt(text, i);
    if (!decoded.valid) return i;
    i += decoded.length;
  }
  return std::nullopt;
}

std::optional<UnsafeCharacter> FindUnsafeCharacter(absl::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const Decoded decoded = DecodeAt(text, i);
    if (!decoded.valid || IsUnsafeCodePoint(decoded.code_point)) {
      return UnsafeCharacter{i, decoded.code_point, !decoded.valid};
    }
    i += decoded.length;
  }
  return std::nullopt;
}

std::string DescribeUnsafeCharacter(const UnsafeCharacter& character) {
  if (character.invalid_utf8) {
    return absl::StrFormat("byte 0x%02X (not UTF-8)", static_cast<unsigned>(character.code_point));
  }
  static constexpr struct {
    char32_t code_point;
    const char* name;
  } kNames[] = {{0x00, "NUL"},
                {0x07, "bell"},
                {0x08, "backspace"},
                {0x09, "tab"},
                {0x0A, "newline"},
                {0x0D, "carriage return"},
                {0x1B, "escape"},
                {0x7F, "delete"},
                {0x85, "next line"},
                {0x9B, "control sequence introducer"},
                {0x9D, "operating system command"},
                {0x061C, "Arabic letter mark"},
                {0x200E, "left-to-right mark"},
                {0x200F, "right-to-left mark"},
                {0x2028, "line separator"},
                {0x2029, "paragraph separator"},
                {0x202A, "left-to-right embedding"},
                {0x202B, "right-to-left embedding"},
                {0x202C, "pop directional formatting"},
                {0x202D, "left-to-right override"},
                {0x202E, "right-to-left override"},
                {0x2066, "left-to-right isolate"},
                {0x2067, "right-to-left isolate"},
                {0x2068, "first strong isolate"},
                {0x2069, "pop directional isolate"}};
  const char* name = "control character";
  for (const auto& known : kNames) {
    if (known.code_point == character.code_point) name = known.name;
  }
  return absl::StrFormat("U+%04X (%s)", static_cast<unsigned>(character.code_point), name);
}

std::string EscapeForTerminal(absl::string_view text) { return Escape(text, false); }

std::string EscapeLinesForTerminal(absl::string_view text) { return Escape(text, true); }

std::string JsonQuoted(absl::string_view text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size();) {
    const Decoded decoded = DecodeAt(text, i);
    if (!decoded.valid) {
      out += "\\ufffd";
    } else if (decoded.code_point == '"' || decoded.code_point == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(decoded.code_point));
    } else if (decoded.code_point == '\n') {
      out += "\\n";
    } else if (decoded.code_point == '\t') {
      out += "\\t";
    } else if (IsUnsafeCodePoint(decoded.code_point)) {
      absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned>(decoded.code_point));
    } else {
      out.append(text.data() + i, decoded.length);
    }
    i += decoded.length;
  }
  out.push_back('"');
  return out;
}

std::string EscapeUnsafeInJson(absl::string_view json) {
  std::string out;
  out.reserve(json.size());
  for (size_t i = 0; i < json.size();) {
    const Decoded decoded = DecodeAt(json, i);
    if (!decoded.valid) {
      // Only inside a string can a JSON text hold a byte >= 0x80.
      out += "\\ufffd";
    } else if (decoded.code_point >= 0x7F && IsUnsafeCodePoint(decoded.code_point)) {
      // C0 characters stay: JSON never holds them raw inside a string, and outside one they are
      // the whitespace between tokens.
      absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned>(decoded.code_point));
    } else {
      out.append(json.data() + i, decoded.length);
    }
    i += decoded.length;
  }
  return out;
}

}  // namespace gpuprof

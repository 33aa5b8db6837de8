// Text from other people on a shared box (labels, descriptions, reasons, user names, a worker's
// stderr, error messages that echo a request) is shown on someone else's terminal. A terminal
// acts on control characters instead of showing them: ESC starts sequences that set the window
// title, clear the screen, move the cursor or (on some terminals) write files; C1 characters do
// the same in one byte; bidirectional overrides reorder what is shown. These helpers find such
// characters (to refuse them at validation) and make them visible (to print text safely).
#ifndef GPUPROF_COMMON_TERMINAL_TEXT_H_
#define GPUPROF_COMMON_TERMINAL_TEXT_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace gpuprof {

// C0 controls (U+0000-U+001F), DEL (U+007F), C1 controls (U+0080-U+009F), the line and
// paragraph separators (U+2028, U+2029) and the bidirectional formatting characters (U+061C,
// U+200E, U+200F, U+202A-U+202E, U+2066-U+2069).
bool IsUnsafeCodePoint(char32_t code_point);

// One unsafe character of a text: where it starts and what it is.
struct UnsafeCharacter {
  size_t byte_offset = 0;
  // The code point; for a byte that is not part of valid UTF-8, the byte's value.
  char32_t code_point = 0;
  bool invalid_utf8 = false;
};

// The first unsafe code point or invalid UTF-8 byte (overlong forms and surrogates included)
// in `text`, if any.
std::optional<UnsafeCharacter> FindUnsafeCharacter(absl::string_view text);

// The offset of the first byte of `text` that is not part of valid UTF-8 (control characters
// are valid UTF-8), if any.
std::optional<size_t> FirstInvalidUtf8Byte(absl::string_view text);

// "U+001B (escape)", "U+202E (right-to-left override)", "byte 0xFF (not UTF-8)".
std::string DescribeUnsafeCharacter(const UnsafeCharacter& character);

// `text` with every unsafe character made visible: \n, \r, \t, other C0 and DEL as \x1b,
// C1 and the Unicode ones as \u0085 / \u202e, bytes that are not UTF-8 as \xff. Everything else
// (printable ASCII, other UTF-8, backslashes) is kept, so ordinary text reads as before.
std::string EscapeForTerminal(absl::string_view text);
// The same, but newlines stay: for text of several lines (a worker's stderr, an error message).
std::string EscapeLinesForTerminal(absl::string_view text);

// A JSON string literal (with the quotes) for `text`: '"' and '\' escaped, and every unsafe
// character as \uXXXX (bytes that are not UTF-8 as U+FFFD), so the literal is pure printable
// text.
std::string JsonQuoted(absl::string_view text);
// Valid JSON (as protobuf's printer writes it) with the unsafe characters it left raw inside its
// strings (protobuf escapes C0, DEL, C1 and some Unicode, but not U+2066-U+2069) written as
// \uXXXX: the same JSON value, now pure printable text.
std::string EscapeUnsafeInJson(absl::string_view json);

}  // namespace gpuprof

#endif  // GPUPROF_COMMON_TERMINAL_TEXT_H_

#include "client/terminal_output.h"

#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace gpuprof::client {
namespace {

// What reaches the terminal when `write` prints through the filter.
template <typename Write>
std::string Filtered(Write write) {
  std::ostringstream terminal;
  {
    TerminalSafeStreambuf filter(terminal.rdbuf());
    std::ostream out(&filter);
    write(out);
    filter.Finish();
  }
  return terminal.str();
}

TEST(TerminalSafeStreambufTest, EscapesControlsButKeepsNewlinesAndTabs) {
  EXPECT_EQ(Filtered([](std::ostream& out) {
              out << "description:\t"
                  << "\x1b]0;owned\x07\x1b[2J"
                  << "\n"
                  << "ok\r\n";
            }),
            "description:\t\\x1b]0;owned\\x07\\x1b[2J\nok\\r\n");
  EXPECT_EQ(Filtered([](std::ostream& out) { out << "a\x7f" << 'b' << '\x9b' << "\n"; }),
            "a\\x7fb\\x9b\n");
}

TEST(TerminalSafeStreambufTest, KeepsUtf8AndEscapesC1AndBidiCodePoints) {
  EXPECT_EQ(Filtered([](std::ostream& out) { out << "12 µs, 日本語 ×2\n"; }), "12 µs, 日本語 ×2\n");
  EXPECT_EQ(Filtered([](std::ostream& out) {
              out << "x\xc2\x9b"
                     "2J \xe2\x80\xae"
                     "abc\n";
            }),
            "x\\u009b2J \\u202eabc\n");
}

TEST(TerminalSafeStreambufTest, ACharacterSplitAcrossWritesIsOneCharacter) {
  // "µ" (C2 B5) and U+202E (E2 80 AE) written a byte at a time, with flushes between.
  EXPECT_EQ(Filtered([](std::ostream& out) {
              out << "\xc2" << std::flush << "\xb5s ";
              out << "\xe2"
                  << "\x80" << std::flush << "\xae!";
            }),
            "µs \\u202e!");
  // A sequence nothing completes comes out escaped at the end.
  EXPECT_EQ(Filtered([](std::ostream& out) { out << "cut \xe2\x80"; }), "cut \\xe2\\x80");
  EXPECT_EQ(Filtered([](std::ostream& out) {
              out << "\xe2\x80"
                  << "x";
            }),
            "\\xe2\\x80x");
}

TEST(TerminalSafeStreambufTest, TheCliOwnControlSequencesPass) {
  EXPECT_EQ(Filtered([](std::ostream& out) {
              WriteTerminalControl(out, "\r");
              out << "exp-000001 running \x1b[2J";
              WriteTerminalControl(out, "\x1b[K");
            }),
            "\rexp-000001 running \\x1b[2J\x1b[K");
  // Without the filter (a string stream in a test), the sequence is written as is.
  std::ostringstream plain;
  WriteTerminalControl(plain, "\r\x1b[K");
  EXPECT_EQ(plain.str(), "\r\x1b[K");
}

TEST(ScopedTerminalSafeOutputTest, FiltersAStreamAndRestoresIt) {
  std::ostringstream terminal;
  std::ostream out(terminal.rdbuf());
  {
    ScopedTerminalSafeOutput safe(out);
    out << "title \x1b]0;x\x07\n";
  }
  out << "after \x1b\n";
  EXPECT_EQ(terminal.str(), "title \\x1b]0;x\\x07\nafter \x1b\n");
}

}  // namespace
}  // namespace gpuprof::client

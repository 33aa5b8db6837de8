#include "client/table.h"

#include <gtest/gtest.h>

namespace gpuprof::client {
namespace {

TEST(TextTableTest, AlignsColumnsAndTrimsTrailingSpaces) {
  TextTable table({"ID", "NAME", "GB/s"});
  table.SetAlign(2, TextTable::Align::kRight);
  table.AddRow({"0", "H100", "3350.0"});
  table.AddRow({"12", "A100-SXM4-80GB", "2039"});
  EXPECT_EQ(table.Render(),
            "ID  NAME              GB/s\n"
            "0   H100            3350.0\n"
            "12  A100-SXM4-80GB    2039\n");
}

TEST(TextTableTest, LastLeftAlignedColumnHasNoTrailingSpaces) {
  TextTable table({"A", "B"});
  table.AddRow({"long value", "x"});
  table.AddRow({"y", ""});
  EXPECT_EQ(table.Render(), "A           B\nlong value  x\ny\n");
}

TEST(TextTableTest, ControlCharactersInCellsAreShownEscapedAndMeasuredAsShown) {
  // Another user's description: a title-setting OSC sequence, a screen clear and a forged line.
  TextTable table({"ID", "DESCRIPTION", "N"});
  table.SetAlign(2, TextTable::Align::kRight);
  table.AddRow({"exp-1", "\x1b]0;owned\x07\x1b[2J\nFINISHED", "1"});
  table.AddRow({"exp-2",
                "rtl \xe2\x80\xae"
                "gnp.exe",
                "22"});
  EXPECT_EQ(table.Render(),
            "ID     DESCRIPTION                         N\n"
            "exp-1  \\x1b]0;owned\\x07\\x1b[2J\\nFINISHED   1\n"
            "exp-2  rtl \\u202egnp.exe                  22\n");
}

TEST(TextTableTest, IndentsEveryLine) {
  TextTable table({"K", "V"});
  table.AddRow({"a", "1"});
  EXPECT_EQ(table.Render("  "), "  K  V\n  a  1\n");
}

TEST(TextTableTest, NoHeaderRendersRowsOnly) {
  TextTable table;
  table.AddRow({"requests:", "1000"});
  table.AddRow({"hit rate:", "83.2%"});
  EXPECT_EQ(table.Render(), "requests:  1000\nhit rate:  83.2%\n");
}

TEST(TextTableTest, ShortAndLongRowsAreAllowed) {
  TextTable table({"A", "B"});
  table.AddRow({"1"});
  table.AddRow({"2", "3", "extra"});
  EXPECT_EQ(table.Render(), "A  B\n1\n2  3  extra\n");
}

TEST(TextTableTest, CountsUtf8CodePointsAsOneColumn) {
  EXPECT_EQ(DisplayWidth("µs"), 2u);
  TextTable table({"min µs", "x"});
  table.AddRow({"1.5", "y"});
  EXPECT_EQ(table.Render(), "min µs  x\n1.5     y\n");
}

TEST(TextTableTest, EmptyTableRendersNothing) { EXPECT_EQ(TextTable().Render(), ""); }

}  // namespace
}  // namespace gpuprof::client

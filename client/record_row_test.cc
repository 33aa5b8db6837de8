#include "client/record_row.h"

#include <cmath>
#include <cstdlib>
#include <limits>

#include "gtest/gtest.h"

namespace gpuprof::client {
namespace {

TEST(RoundTripNumberTest, IntegersPrintAsIntegers) {
  EXPECT_EQ(RoundTripNumber(1454616), "1454616");
  EXPECT_EQ(RoundTripNumber(0), "0");
  EXPECT_EQ(RoundTripNumber(-0.0), "0");
  EXPECT_EQ(RoundTripNumber(-42), "-42");
  EXPECT_EQ(RoundTripNumber(1e15), "1000000000000000");
}

TEST(RoundTripNumberTest, DoublesReadBackExactly) {
  EXPECT_EQ(RoundTripNumber(0.1), "0.1");
  EXPECT_EQ(RoundTripNumber(2854.5), "2854.5");
  for (double value : {1.0 / 3, 2854.123456789012, 1e-9, 6.02214076e23, 0.0123456789}) {
    const std::string text = RoundTripNumber(value);
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), value) << text;
    EXPECT_EQ(text.find("e+0"), std::string::npos) << text;  // no %.6g-style truncation
  }
}

TEST(RoundTripNumberTest, NonFiniteIsEmpty) {
  EXPECT_EQ(RoundTripNumber(std::nan("")), "");
  EXPECT_EQ(RoundTripNumber(std::numeric_limits<double>::infinity()), "");
}

TEST(RecordRowTest, CsvAndJsonCarryTheSameColumns) {
  RecordRow row;
  row.AddInteger("point", 0);
  row.AddText("dtype", "bf16");
  row.AddNumber("value", 1454616);
  row.AddNumber("noise", 0.0125);
  row.AddNumber("broken", std::nan(""));
  row.AddEmpty("tflops");
  row.AddText("note", "a,\"b\"");
  EXPECT_EQ(row.CsvHeader(), "point,dtype,value,noise,broken,tflops,note\n");
  EXPECT_EQ(row.Csv(), "0,bf16,1454616,0.0125,,,\"a,\"\"b\"\"\"\n");
  EXPECT_EQ(row.Json(),
            "{\"point\":0,\"dtype\":\"bf16\",\"value\":1454616,\"noise\":0.0125,\"broken\":null,"
            "\"tflops\":null,\"note\":\"a,\\\"b\\\"\"}\n");
}

}  // namespace
}  // namespace gpuprof::client

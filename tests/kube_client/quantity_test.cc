#include "backend/kube/quantity.h"

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

namespace tessera::kube {
namespace {

TEST(Quantity, MilliTable) {
  struct Case {
    const char* text;
    int64_t milli;
  };
  const Case cases[] = {
      {"500m", 500},      {"2", 2000},        {"1.5", 1500},    {"1e3", 1000000}, {"1E3", 1000000},
      {"1e-3", 1},        {"0", 0},           {"0.1", 100},     {".5", 500},      {"5.", 5000},
      {"+3", 3000},       {"-2", -2000},      {"100u", 1},      {"1n", 1},        {"1500000n", 2},
      {"1k", 1000000},    {"2M", 2000000000}, {"1Ki", 1024000}, {"0.0005", 1},    {"1.0001", 1001},
      {"000123", 123000}, {"7m", 7},          {"3.1m", 4},      {"1e0", 1000},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(parse_quantity_milli(c.text), c.milli) << c.text;
  }
}

TEST(Quantity, BytesTable) {
  struct Case {
    const char* text;
    int64_t bytes;
  };
  const Case cases[] = {
      {"16Gi", 16LL << 30},
      {"1536Mi", 1536LL << 20},
      {"2G", 2000000000},
      {"100k", 100000},
      {"1Ki", 1024},
      {"1Ti", 1LL << 40},
      {"1Pi", 1LL << 50},
      {"1Ei", 1LL << 60},
      {"1T", 1000000000000LL},
      {"1P", 1000000000000000LL},
      {"1E", 1000000000000000000LL},
      {"1.5Gi", 1536LL << 20},
      {"0.5Ki", 512},
      {"100m", 1},
      {"128974848", 128974848},
      {"129e6", 129000000},
      {"123Mi", 123LL << 20},
      {"1e+3", 1000},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(parse_quantity_bytes(c.text), c.bytes) << c.text;
  }
}

TEST(Quantity, Errors) {
  for (const char* bad : {"", "abc", "1 Gi", "1gi", "1KB", "Gi", ".", "1.2.3", "1e", "1e+", "--1",
                          "1Gi ", "8Ei", "1e40", "99999999999999999999"}) {
    try {
      parse_quantity_bytes(bad);
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("\"") + bad + "\""), std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(parse_quantity_milli("9223372036854776"), std::invalid_argument);
  EXPECT_EQ(parse_quantity_milli("9223372036854775m"), 9223372036854775LL);
}

TEST(Quantity, Mib) {
  EXPECT_EQ(to_mib(parse_quantity_bytes("16Gi")), 16384);
  EXPECT_EQ(to_mib(parse_quantity_bytes("1536Mi")), 1536);
  EXPECT_EQ(to_mib(1), 1);
  EXPECT_EQ(to_mib(0), 0);
  EXPECT_EQ(to_mib_floor((1 << 20) + 5), 1);
  EXPECT_EQ(to_mib(parse_quantity_bytes("2G")), 1908);  // 1907.35 rounded up
  EXPECT_EQ(to_mib_floor(parse_quantity_bytes("2G")), 1907);
}

}  // namespace
}  // namespace tessera::kube

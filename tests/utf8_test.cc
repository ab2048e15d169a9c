#include "model/utf8.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(Utf8, AcceptsWellFormedTextOnly) {
  EXPECT_EQ(invalid_utf8_at("plain ascii"), std::nullopt);
  EXPECT_EQ(invalid_utf8_at("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x80"), std::nullopt);
  EXPECT_EQ(invalid_utf8_at("ab\xff"), 2u);
  EXPECT_EQ(invalid_utf8_at("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(invalid_utf8_at("\xed\xa0\x80"), 0u);      // a surrogate
  EXPECT_EQ(invalid_utf8_at("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(invalid_utf8_at("x\xe2\x82"), 1u);         // cut short
  EXPECT_EQ(to_valid_utf8("a\xff"
                          "b\xe2\x82"),
            "a\xef\xbf\xbd"
            "b\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(invalid_utf8_at(to_valid_utf8("\x80\x80\xc3")), std::nullopt);
}

}  // namespace
}  // namespace tessera

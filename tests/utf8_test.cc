#include "model/utf8.h"

#include "model/input_error.h"

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
// What a request echoes into an error is shown, not obeyed: ASCII and C1 controls, line
// separators and bidirectional overrides each become '?'.
TEST(QuotePrefix, ControlsSeparatorsAndBidiOverridesAreShownAsQuestionMarks) {
  EXPECT_EQ(quote_prefix("a\x1b[31mb"), "\"a?[31mb\"");
  EXPECT_EQ(quote_prefix("x\xc2\x9by"), "\"x?y\"");      // U+009B (C1 CSI)
  EXPECT_EQ(quote_prefix("x\xe2\x80\xaey"), "\"x?y\"");  // U+202E (RLO)
  EXPECT_EQ(quote_prefix("x\xe2\x80\xa8y"), "\"x?y\"");  // U+2028
  EXPECT_EQ(quote_prefix("x\xe2\x81\xa6y"), "\"x?y\"");  // U+2066
  EXPECT_EQ(quote_prefix("caf\xc3\xa9 \xe2\x82\xac"), "\"caf\xc3\xa9 \xe2\x82\xac\"");  // kept
}

}  // namespace tessera

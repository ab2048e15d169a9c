#include "backend/kube/quantity.h"

#include <limits>
#include <stdexcept>
#include <string>

namespace tessera::kube {
namespace {

__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;
constexpr i128 kI128Max = static_cast<i128>((static_cast<u128>(1) << 127) - 1);
constexpr i128 kDigitCap = static_cast<i128>(1000000000000000000LL) * 100000000000000000LL;  // 1e35

[[noreturn]] void bad(std::string_view text, const char* why) {
  throw std::invalid_argument("invalid quantity \"" + std::string(text) + "\": " + why);
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Multiplies a (>= 0) by b (> 0); false on overflow.
bool mul(i128& a, i128 b) {
  if (a != 0 && a > kI128Max / b) return false;
  a *= b;
  return true;
}

// The quantity times 10^scale_exp, rounded away from zero.
int64_t parse_scaled(std::string_view text, int scale_exp) {
  std::string_view s = text;
  if (s.empty()) bad(text, "empty");
  bool negative = false;
  if (s[0] == '+' || s[0] == '-') {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  // Mantissa digits (integer part then fraction), without leading zeros.
  i128 mantissa = 0;
  int exp10 = 0;  // value = mantissa * 10^exp10 * 2^exp2
  int exp2 = 0;
  size_t i = 0, digits = 0;
  // Digits beyond ~35 significant ones are dropped (their weight kept), far past int64.
  auto take_digit = [&](char c, bool fraction) {
    ++digits;
    if (mantissa == 0 && c == '0') {
      if (fraction) --exp10;
      return;
    }
    if (mantissa >= kDigitCap) {
      if (!fraction) ++exp10;
      return;
    }
    mantissa = mantissa * 10 + (c - '0');
    if (fraction) --exp10;
  };
  while (i < s.size() && is_digit(s[i])) take_digit(s[i++], false);
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && is_digit(s[i])) take_digit(s[i++], true);
  }
  if (digits == 0) bad(text, "no digits");
  std::string_view suffix = s.substr(i);
  if (suffix.empty()) {
  } else if (suffix == "Ki") {
    exp2 = 10;
  } else if (suffix == "Mi") {
    exp2 = 20;
  } else if (suffix == "Gi") {
    exp2 = 30;
  } else if (suffix == "Ti") {
    exp2 = 40;
  } else if (suffix == "Pi") {
    exp2 = 50;
  } else if (suffix == "Ei") {
    exp2 = 60;
  } else if (suffix == "n") {
    exp10 -= 9;
  } else if (suffix == "u") {
    exp10 -= 6;
  } else if (suffix == "m") {
    exp10 -= 3;
  } else if (suffix == "k") {
    exp10 += 3;
  } else if (suffix == "M") {
    exp10 += 6;
  } else if (suffix == "G") {
    exp10 += 9;
  } else if (suffix == "T") {
    exp10 += 12;
  } else if (suffix == "P") {
    exp10 += 15;
  } else if (suffix == "E") {
    exp10 += 18;
  } else if (suffix[0] == 'e' || suffix[0] == 'E') {
    std::string_view e = suffix.substr(1);
    bool eneg = false;
    if (!e.empty() && (e[0] == '+' || e[0] == '-')) {
      eneg = e[0] == '-';
      e.remove_prefix(1);
    }
    if (e.empty()) bad(text, "exponent without digits");
    int v = 0;
    for (char c : e) {
      if (!is_digit(c)) bad(text, "bad exponent");
      if (v > 100000) bad(text, "exponent out of range");
      v = v * 10 + (c - '0');
    }
    exp10 += eneg ? -v : v;
  } else {
    bad(text, "unknown suffix");
  }
  exp10 += scale_exp;
  if (mantissa == 0) return 0;
  i128 value = mantissa;
  if (!mul(value, static_cast<i128>(1) << exp2)) bad(text, "too large");
  if (exp10 >= 0) {
    for (int k = 0; k < exp10; ++k) {
      if (!mul(value, 10)) bad(text, "too large");
    }
  } else {
    // Divide by 10^-exp10, rounding up. A divisor beyond int128 makes the result 1.
    i128 divisor = 1;
    bool tiny = false;
    for (int k = 0; k < -exp10; ++k) {
      if (!mul(divisor, 10)) {
        tiny = true;
        break;
      }
    }
    value = tiny ? 1 : (value + divisor - 1) / divisor;
  }
  if (value > static_cast<i128>(std::numeric_limits<int64_t>::max())) bad(text, "too large");
  auto out = static_cast<int64_t>(value);
  return negative ? -out : out;
}

}  // namespace

int64_t parse_quantity_milli(std::string_view text) {
  return parse_scaled(text, 3);
}
int64_t parse_quantity_bytes(std::string_view text) {
  return parse_scaled(text, 0);
}

int64_t to_mib(int64_t bytes) {
  constexpr int64_t kMiB = 1 << 20;
  return bytes >= 0 ? (bytes + kMiB - 1) / kMiB : -((-bytes + kMiB - 1) / kMiB);
}
int64_t to_mib_floor(int64_t bytes) {
  return bytes / (1 << 20);
}

}  // namespace tessera::kube

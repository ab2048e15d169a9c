#include "model/input_error.h"

#include <algorithm>

namespace tessera {

std::string input_error_message(const std::string& origin, size_t line, const std::string& field,
                                const std::string& message) {
  std::string out = origin;
  if (line > 0) out += ":" + std::to_string(line);
  out += ": ";
  if (!field.empty()) out += "field " + field + ": ";
  out += message;
  return out;
}

std::string quote_prefix(std::string_view value, size_t max) {
  size_t cut = std::min(max, value.size());
  // Back to the start of a UTF-8 character (never between its continuation bytes).
  while (cut < value.size() && cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) {
    --cut;
  }
  std::string out = "\"";
  const std::string_view shown = value.substr(0, cut);
  for (size_t i = 0; i < shown.size(); ++i) {
    const auto u = static_cast<unsigned char>(shown[i]);
    const auto next = [&](size_t k) {
      return i + k < shown.size() ? static_cast<unsigned char>(shown[i + k]) : 0;
    };
    // C1 controls (U+0080..U+009F) and the line separators and bidirectional controls
    // (U+2028/9, U+200E/F, U+202A..E, U+2066..9) would reorder or break a terminal's or a log
    // reader's line just as ASCII controls do: each is one '?'.
    size_t hidden = 0;
    if (u == 0xc2 && next(1) >= 0x80 && next(1) <= 0x9f) {
      hidden = 2;
    } else if (u == 0xe2 && next(1) == 0x80 &&
               ((next(2) >= 0xa8 && next(2) <= 0xae) || next(2) == 0x8e || next(2) == 0x8f)) {
      hidden = 3;
    } else if (u == 0xe2 && next(1) == 0x81 && next(2) >= 0xa6 && next(2) <= 0xa9) {
      hidden = 3;
    }
    if (hidden > 0) {
      out += '?';
      i += hidden - 1;
      continue;
    }
    out += u < 0x20 || u == 0x7f ? '?' : shown[i];
  }
  out += cut < value.size() ? "...\"" : "\"";
  return out;
}

std::string join_names(std::initializer_list<std::string_view> names, std::string_view sep) {
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out += sep;
    out += n;
  }
  return out;
}

}  // namespace tessera

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
  for (const char c : value.substr(0, cut)) {
    const auto u = static_cast<unsigned char>(c);
    out += u < 0x20 || u == 0x7f ? '?' : c;
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

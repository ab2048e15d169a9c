#include "model/input_error.h"

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

std::string join_names(std::initializer_list<std::string_view> names, std::string_view sep) {
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out += sep;
    out += n;
  }
  return out;
}

}  // namespace tessera

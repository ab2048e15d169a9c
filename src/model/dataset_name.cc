#include "model/dataset_name.h"

#include <cctype>

#include "model/input_error.h"

namespace tessera {

namespace {

bool alnum(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0;
}

std::string quoted(std::string_view s) {
  return quote_prefix(s);
}

}  // namespace

std::string dataset_component_problem(std::string_view part) {
  if (part.empty()) return "an empty part";
  if (part.size() > 63) return quoted(part) + " is longer than 63 characters";
  if (!alnum(part.front()) || !alnum(part.back())) {
    return quoted(part) + " must start and end with a letter or digit";
  }
  for (const char c : part) {
    if (!alnum(c) && c != '.' && c != '_' && c != '-') {
      return quoted(part) + " may hold only letters, digits, '.', '_' and '-'";
    }
  }
  return "";
}

std::string dataset_name_problem(std::string_view name, bool allow_owner) {
  if (name.size() > 255) return "a dataset name is at most 255 characters";
  const size_t slash = name.find('/');
  if (slash == std::string_view::npos) return dataset_component_problem(name);
  if (!allow_owner) return quoted(name) + " must be one name, without '/'";
  size_t begin = 0;
  for (;;) {
    const size_t end = name.find('/', begin);
    const std::string why = dataset_component_problem(
        name.substr(begin, end == std::string_view::npos ? end : end - begin));
    if (!why.empty()) return why + " (in " + quoted(name) + ")";
    if (end == std::string_view::npos) return "";
    begin = end + 1;
  }
}

std::string_view dataset_owner(std::string_view name) {
  const size_t slash = name.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : name.substr(0, slash);
}

}  // namespace tessera

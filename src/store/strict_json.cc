#include "store/strict_json.h"

#include <charconv>
#include <set>
#include <string>
#include <vector>

#include "model/json_depth.h"
#include "store/job_request.h"

namespace tessera {
namespace {

// The first number token outside strings that no double holds (overflow, or underflow of a
// non-zero value to zero), as written; "" if none. The text need not be valid JSON.
std::string out_of_range_number(std::string_view text) {
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      continue;
    }
    if (c != '-' && (c < '0' || c > '9')) continue;
    size_t end = i;
    while (end < text.size() &&
           ((text[end] >= '0' && text[end] <= '9') || text[end] == '-' || text[end] == '+' ||
            text[end] == '.' || text[end] == 'e' || text[end] == 'E')) {
      ++end;
    }
    const std::string_view token = text.substr(i, end - i);
    double d = 0;
    const auto [p, ec] = std::from_chars(token.data(), token.data() + token.size(), d);
    if (ec == std::errc::result_out_of_range) return std::string(token);
    (void)p;
    i = end - 1;
  }
  return "";
}

}  // namespace

nlohmann::json parse_json_strict(std::string_view text) {
  if (json_nesting_exceeds(text)) {
    throw FieldError("", "JSON nests arrays/objects more than " + std::to_string(kMaxJsonDepth) +
                             " levels deep");
  }
  if (const std::string n = out_of_range_number(text); !n.empty()) {
    throw FieldError("", "the number " + n.substr(0, 40) + " is out of range (a double holds " +
                             "magnitudes from about 1e-308 to 1e308)");
  }
  // Keys seen in each open object, innermost last.
  std::vector<std::set<std::string>> keys;
  auto callback = [&keys](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) {
      keys.emplace_back();
    } else if (event == E::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (event == E::key && !keys.empty()) {
      const std::string& k = parsed.get_ref<const std::string&>();
      if (!keys.back().insert(k).second) {
        throw FieldError(k, "the key \"" + k.substr(0, 80) + "\" appears twice in one object");
      }
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, callback);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line 1, column 9: ...".
    std::string what = e.what();
    if (const size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    throw FieldError("", "invalid JSON (byte " + std::to_string(e.byte) + "): " + what);
  } catch (const nlohmann::json::exception& e) {  // out_of_range: a number the scan missed
    std::string what = e.what();
    if (const size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    throw FieldError("", "invalid JSON: " + what);
  }
}

}  // namespace tessera

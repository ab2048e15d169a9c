#include "kube_emulator/util.h"

#include <openssl/evp.h>

#include <cmath>
#include <cstdio>
#include <ctime>

namespace kube_emulator {

std::string rfc3339(Clock::time_point t) {
  const std::time_t secs = Clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string rfc3339_micro(Clock::time_point t) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch());
  const std::time_t secs = static_cast<std::time_t>(us.count() / 1000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[48];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%06dZ", static_cast<int>(us.count() % 1000000));
  return buf;
}

std::optional<Clock::time_point> parse_rfc3339(const std::string& s) {
  std::tm tm{};
  int frac_us = 0;
  const char* end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr) return std::nullopt;
  if (*end == '.') {
    ++end;
    int digits = 0;
    while (*end >= '0' && *end <= '9') {
      if (digits < 6) frac_us = frac_us * 10 + (*end - '0');
      ++digits;
      ++end;
    }
    for (int i = digits; i < 6; ++i) frac_us *= 10;
  }
  long offset = 0;
  if (*end == 'Z') {
    ++end;
  } else if (*end == '+' || *end == '-') {
    int hh = 0, mm = 0;
    if (std::sscanf(end + 1, "%2d:%2d", &hh, &mm) != 2) return std::nullopt;
    offset = (hh * 3600L + mm * 60L) * (*end == '+' ? 1 : -1);
    end += 6;
  } else {
    return std::nullopt;
  }
  if (*end != '\0') return std::nullopt;
  const std::time_t secs = timegm(&tm) - offset;
  return Clock::time_point(std::chrono::seconds(secs)) + std::chrono::microseconds(frac_us);
}

std::string human_duration(std::chrono::seconds d) {
  const long long seconds = d.count();
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 120) return std::to_string(seconds) + "s";
  const long long minutes = seconds / 60;
  if (minutes < 10) {
    const long long s = seconds % 60;
    return s == 0 ? std::to_string(minutes) + "m"
                  : std::to_string(minutes) + "m" + std::to_string(s) + "s";
  }
  if (minutes < 180) return std::to_string(minutes) + "m";
  const long long hours = seconds / 3600;
  if (hours < 8) {
    const long long m = minutes % 60;
    return m == 0 ? std::to_string(hours) + "h"
                  : std::to_string(hours) + "h" + std::to_string(m) + "m";
  }
  if (hours < 48) return std::to_string(hours) + "h";
  if (hours < 24 * 8) {
    const long long h = hours % 24;
    return h == 0 ? std::to_string(hours / 24) + "d"
                  : std::to_string(hours / 24) + "d" + std::to_string(h) + "h";
  }
  if (hours < 24 * 365 * 2) return std::to_string(hours / 24) + "d";
  if (hours < 24 * 365 * 8) {
    const long long dy = (hours / 24) % 365;
    return dy == 0 ? std::to_string(hours / 24 / 365) + "y"
                   : std::to_string(hours / 24 / 365) + "y" + std::to_string(dy) + "d";
  }
  return std::to_string(hours / 24 / 365) + "y";
}

std::string reason_for_code(int code) {
  switch (code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 406:
      return "NotAcceptable";
    case 409:
      return "Conflict";
    case 410:
      return "Expired";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "";
  }
}

namespace {
void put_details(json& s, const std::string& name, const std::string& qualified) {
  if (name.empty() && qualified.empty()) return;
  json d = json::object();
  if (!name.empty()) d["name"] = name;
  if (!qualified.empty()) {
    const auto dot = qualified.find('.');
    if (dot == std::string::npos) {
      d["kind"] = qualified;
    } else {
      d["group"] = qualified.substr(dot + 1);
      d["kind"] = qualified.substr(0, dot);
    }
  }
  s["details"] = std::move(d);
}
}  // namespace

json status_failure(int code, const std::string& reason, const std::string& message,
                    const std::string& name, const std::string& qualified_resource) {
  json s = {{"kind", "Status"},
            {"apiVersion", "v1"},
            {"metadata", json::object()},
            {"status", "Failure"},
            {"message", message}};
  if (!reason.empty()) s["reason"] = reason;
  put_details(s, name, qualified_resource);
  s["code"] = code;
  return s;
}

json status_success(int code, const std::string& name, const std::string& qualified_resource,
                    const std::string& uid) {
  json s = {{"kind", "Status"},
            {"apiVersion", "v1"},
            {"metadata", json::object()},
            {"status", "Success"}};
  put_details(s, name, qualified_resource);
  if (!uid.empty() && s.contains("details")) s["details"]["uid"] = uid;
  s["code"] = code;
  return s;
}

std::optional<int64_t> parse_quantity_milli(const std::string& s) {
  if (s.empty()) return std::nullopt;
  size_t i = 0;
  if (s[i] == '+' || s[i] == '-') ++i;
  while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.')) ++i;
  const std::string number = s.substr(0, i);
  const std::string suffix = s.substr(i);
  if (number.empty() || number == "+" || number == "-") return std::nullopt;
  long double value = 0;
  try {
    size_t used = 0;
    value = std::stold(number, &used);
    if (used != number.size()) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  long double mult = 1;
  if (suffix.empty()) {
  } else if (suffix == "m") {
    mult = 1e-3L;
  } else if (suffix == "u") {
    mult = 1e-6L;
  } else if (suffix == "n") {
    mult = 1e-9L;
  } else if (suffix == "k") {
    mult = 1e3L;
  } else if (suffix == "M") {
    mult = 1e6L;
  } else if (suffix == "G") {
    mult = 1e9L;
  } else if (suffix == "T") {
    mult = 1e12L;
  } else if (suffix == "P") {
    mult = 1e15L;
  } else if (suffix == "Ki") {
    mult = 1024.0L;
  } else if (suffix == "Mi") {
    mult = 1024.0L * 1024;
  } else if (suffix == "Gi") {
    mult = 1024.0L * 1024 * 1024;
  } else if (suffix == "Ti") {
    mult = 1024.0L * 1024 * 1024 * 1024;
  } else if (suffix == "Pi") {
    mult = 1024.0L * 1024 * 1024 * 1024 * 1024;
  } else if (suffix[0] == 'e' || suffix[0] == 'E') {
    try {
      size_t used = 0;
      const int exp = std::stoi(suffix.substr(1), &used);
      if (used != suffix.size() - 1) return std::nullopt;
      mult = std::pow(10.0L, exp);
    } catch (const std::exception&) {
      return std::nullopt;
    }
  } else {
    return std::nullopt;
  }
  const long double milli = std::ceil(value * mult * 1000.0L - 1e-9L);
  if (milli > 9.0e18L || milli < -9.0e18L) return std::nullopt;
  return static_cast<int64_t>(milli);
}

int64_t milli_to_units_ceil(int64_t milli) {
  return (milli + 999) / 1000;
}

std::string Random::hex(size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out(n, '0');
  for (auto& c : out) c = digits[rng_() & 15];
  return out;
}

std::string Random::uid() {
  std::string h = hex(32);
  h[12] = '4';
  h[16] = "89ab"[rng_() & 3];
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
         "-" + h.substr(20);
}

std::string Random::name_suffix(size_t n) {
  static const std::string alphabet = "bcdfghjklmnpqrstvwxz2456789";
  std::string out;
  for (size_t i = 0; i < n; ++i) out += alphabet[rng_() % alphabet.size()];
  return out;
}

const json* find_path(const json& j, std::string_view dotted) {
  const json* cur = &j;
  while (!dotted.empty()) {
    const auto dot = dotted.find('.');
    const std::string key(dotted.substr(0, dot));
    if (!cur->is_object()) return nullptr;
    const auto it = cur->find(key);
    if (it == cur->end()) return nullptr;
    cur = &*it;
    if (dot == std::string_view::npos) break;
    dotted.remove_prefix(dot + 1);
  }
  return cur;
}

std::string string_at(const json& j, std::string_view dotted, const std::string& def) {
  const json* v = find_path(j, dotted);
  if (v == nullptr || v->is_null()) return def;
  if (v->is_string()) return v->get<std::string>();
  if (v->is_boolean()) return v->get<bool>() ? "true" : "false";
  return v->dump();
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

std::string url_encode(const std::string& s) {
  static const char* hexd = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : s) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hexd[c >> 4];
      out += hexd[c & 15];
    }
  }
  return out;
}

std::string base64_encode(const std::string& s) {
  std::string out(4 * ((s.size() + 2) / 3) + 1, '\0');
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::optional<std::string> base64_decode(const std::string& s) {
  if (s.size() % 4 != 0) return std::nullopt;
  std::string out(s.size() / 4 * 3 + 1, '\0');
  const int n =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  if (n < 0) return std::nullopt;
  size_t len = static_cast<size_t>(n);
  if (!s.empty() && s.back() == '=') --len;
  if (s.size() > 1 && s[s.size() - 2] == '=') --len;
  out.resize(len);
  return out;
}

}  // namespace kube_emulator

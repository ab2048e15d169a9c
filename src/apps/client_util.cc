#include "apps/client_util.h"

#include <fmt/format.h>

#include <cctype>
#include <chrono>
#include <iostream>
#include <stdexcept>

namespace tessera {

std::string query_escape(const std::string& v) {
  std::string out;
  for (const unsigned char ch : v) {
    if (std::isalnum(ch) != 0 || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out += static_cast<char>(ch);
    } else {
      out += fmt::format("%{:02X}", ch);
    }
  }
  return out;
}

void add_common(CLI::App* s, ClientArgs& a) {
  s->add_option("--addr", a.addr, "server address host:port (default: TESSERA_ADDR)");
  s->add_option("--token", a.token, "bearer token (default: TESSERA_TOKEN)");
}

std::string ok_body(const HttpResult& r, const std::string& what) {
  if (r.status == 0) {
    throw std::runtime_error(what + ": cannot reach the server (" + r.error +
                             "); is `tessera serve` running at TESSERA_ADDR?");
  }
  if (r.status >= 400) {
    std::string msg = r.body;
    try {
      const auto j = nlohmann::json::parse(r.body);
      msg = j.value("error", r.body);
      if (j.contains("field")) msg += " (field " + j["field"].get<std::string>() + ")";
    } catch (const std::exception&) {  // not JSON: print it as it came
    }
    throw std::runtime_error(what + ": HTTP " + std::to_string(r.status) + ": " + msg);
  }
  return r.body;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int print_list(ApiClient& c, const ClientArgs& a, const std::string& path, const char* key,
               const std::string& what, std::string (*table)(const nlohmann::json&)) {
  const auto j = nlohmann::json::parse(ok_body(c.get(path), what));
  if (a.json) {
    std::cout << j[key].dump() << "\n";
  } else {
    std::cout << table(j[key]);
  }
  return 0;
}

}  // namespace tessera

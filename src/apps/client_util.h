// What every client command of `tessera serve` shares: the server's address and token flags,
// a successful answer's body (else the server's error, with its field), a list printed as a
// table or JSON, and query escaping.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "api/client.h"
#include "apps/service_commands.h"

namespace tessera {

// A query parameter's value, percent-encoded (RFC 3986: all but unreserved characters).
std::string query_escape(const std::string& v);
// --addr and --token.
void add_common(CLI::App* s, ClientArgs& a);
// The body of a successful answer; throws with the server's error (and field) otherwise.
std::string ok_body(const HttpResult& r, const std::string& what);
// The time now, unix seconds.
double now_seconds();
// GET `path` and print its `key` array: as JSON with --json, else as `table` prints it.
int print_list(ApiClient& c, const ClientArgs& a, const std::string& path, const char* key,
               const std::string& what, std::string (*table)(const nlohmann::json&));

}  // namespace tessera

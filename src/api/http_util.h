// Pieces every HTTP API of Tessera shares (`tessera serve`'s and `tessera kube`'s): JSON
// errors naming the field, bearer tokens, query parameters, the job-list filter.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "control/service.h"

namespace httplib {
struct Request;
struct Response;
class Server;
}  // namespace httplib

namespace tessera {

inline constexpr const char* kJson = "application/json";

// {"error": message, "field": field} with the status.
void send_error(httplib::Response& res, int status, const std::string& message,
                const std::string& field = "");
int status_of(ServiceError::Kind k);
// The token of "Authorization: Bearer TOKEN", or "".
std::string bearer(const httplib::Request& req);
// An integer query parameter in [lo, hi]; `def` when absent. Throws ServiceError naming it.
int64_t int_param(const httplib::Request& req, const char* name, int64_t def, int64_t lo,
                  int64_t hi);
// A boolean query parameter ("true"/"1"/"false"/"0"; present without a value is true);
// false when absent. Throws ServiceError naming it.
bool bool_param(const httplib::Request& req, const char* name);
// The request body as JSON; FieldError (400) when it is not.
nlohmann::json json_body(const httplib::Request& req);
// The job id of a /v1/jobs/{id}... path (the first match); ServiceError kNotFound if malformed.
int64_t path_id(const httplib::Request& req);
// Binds host:port (port 0 = any free port); returns the port, or throws std::runtime_error
// naming the address.
int bind_server(httplib::Server& http, const std::string& host, int port);
// GET /v1/jobs's query: state, tenant, limit, after.
JobFilter job_filter(const httplib::Request& req);

}  // namespace tessera

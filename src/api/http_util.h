// Pieces every HTTP API of Tessera shares (`tessera serve`'s and `tessera kube`'s): JSON
// errors naming the field, bearer tokens, query parameters, the job-list filter.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "control/read_model.h"

namespace httplib {
struct Request;
struct Response;
class Server;
}  // namespace httplib

namespace tessera {

inline constexpr const char* kJson = "application/json";

// JSON text of a response. Ill-formed UTF-8 (which no input that passes validation holds,
// but an error message may quote) becomes U+FFFD instead of an exception.
std::string json_text(const nlohmann::json& j);
// {"error": message, "field": field} with the status.
void send_error(httplib::Response& res, int status, const std::string& message,
                const std::string& field = "");
int status_of(ServiceError::Kind k);
// Runs `handle`, answering what it throws as JSON errors: ServiceError by its kind, FieldError
// as 400 naming the field, anything else as a 500 naming it (never a crash). serve's and kube's
// routes both answer this way.
void answer_errors(httplib::Response& res, const std::function<void()>& handle);
// The token of "Authorization: Bearer TOKEN", or "".
std::string bearer(const httplib::Request& req);
// Why a request's token was not taken, for its 401: none sent, not in the Bearer form, or one
// this server does not know (`what` names the tokens it takes). Says nothing of any token.
std::string unauthorized_reason(const httplib::Request& req,
                                const std::string& what = "a tenant's or the admin token");
// A query parameter, decoded, or nullopt when absent (the last one if repeated). Read from
// the raw request target, so a value may hold '=' (httplib's own parser keeps only the
// part after the last '=').
std::optional<std::string> query_param(const httplib::Request& req, std::string_view name);
// Throws ServiceError (400) naming the first part of the request (path, query, body) that
// is not valid UTF-8: every API answer is JSON, which must be.
void refuse_invalid_utf8(const httplib::Request& req);
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
// The cursor of the next page of a job list: "next_after" (ascending) or "next_before"
// (order=desc), null on the last page.
void add_next_page(nlohmann::json& out, const std::vector<JobView>& page, const JobFilter& f);

}  // namespace tessera

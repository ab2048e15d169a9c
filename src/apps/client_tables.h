// How the client commands print what the API returns: job lists (as squeue), one job (as
// kubectl describe), nodes (as sinfo), queues and tenants. Pure functions of the JSON and the
// current time, so tests can check them without a server.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/accounting.h"
#include "model/accounting_json.h"

namespace tessera {

// "42s", "5m12s", "2h05m", "3d04h": a duration for a table cell; "-" when negative.
std::string short_duration(double seconds);
// "2026-11-26 21:57:04 UTC": a timestamp in the local time zone, with its name; "-" for null.
std::string local_time(const nlohmann::json& t);
// A cell at most `width` characters wide: longer text ends in "...".
std::string fit(const std::string& text, size_t width);

// The columns of `tessera jobs`: ID NAME QUEUE CLASS STATE REASON GPUS NODES ATTEMPTS AGE
// ELAPSED.
std::string job_table(const nlohmann::json& jobs, double now);
// Sorts a job list by one of job_sort_keys(); throws std::invalid_argument for another key.
void sort_jobs(nlohmann::json& jobs, const std::string& key, double now);
const std::vector<std::string>& job_sort_keys();
// `tessera job ID`: every field, the reason in words, the placement per rank.
std::string job_page(const nlohmann::json& job, double now);
// `tessera nodes`: a row per GPU: node, type, free share, jobs holding it, the reservation that
// holds it, CPU and memory.
std::string node_table(const nlohmann::json& nodes);
// `tessera queues`: weight, guarantee, limit, holdings against the fair share, long-term
// (decayed) usage, jobs, and a mark for a queue that borrows (holds more than its guarantee)
// or is over its fair share (and so may be reclaimed from).
std::string queue_table(const nlohmann::json& queues);
// `tessera audit`: newest first.
std::string audit_table(const nlohmann::json& entries);
// `tessera usage`: the rows of GET /v1/usage, with a cost column when prices are given (types
// used without a price are added to `unpriced`), and a total line. `by_user`: rows of
// GET /v1/usage?by=user, the first column USER (user@tenant; the tenant for its own token).
std::string usage_table(const nlohmann::json& rows, const PriceTable* prices,
                        std::vector<std::string>& unpriced, bool by_user = false);
// The same as CSV, one line per (tenant, queue, GPU type), for spreadsheets.
std::string usage_csv(const nlohmann::json& rows, const PriceTable* prices,
                      std::vector<std::string>& unpriced);
// `tessera tenant list`.
std::string tenant_table(const nlohmann::json& tenants);
// USER (name@tenant), TENANT, ROLE, CREATED.
std::string user_table(const nlohmann::json& users);

}  // namespace tessera

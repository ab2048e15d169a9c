// The client commands of `tessera serve`: they talk to its HTTP API (address and token from
// flags, else TESSERA_ADDR / TESSERA_TOKEN).
#include <fmt/format.h>

#include <unistd.h>

#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "api/client.h"
#include "apps/client_tables.h"
#include "apps/client_util.h"
#include "apps/command_line.h"
#include "apps/reservation_commands.h"
#include "apps/service_commands.h"
#include "control/token.h"
#include "model/csv.h"
#include "store/store.h"

namespace tessera {

namespace {

// --state: one or more of the job states, comma-separated.
CLI::Validator job_states_check() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::vector<JobState> states;
        std::string bad;
        if (parse_job_states(text, states, bad)) return "";
        const std::string guess = closest_match(bad, job_state_list());
        return "unknown state '" + bad + "'" +
               (guess.empty() ? std::string() : " (did you mean " + guess + "?)") +
               "; states: " + job_state_names();
      },
      "STATE[,STATE...] of " + job_state_names());
}

int submit(ApiClient& c, const ClientArgs& a) {
  std::string body;
  if (a.file == "-") {
    body.assign(std::istreambuf_iterator<char>(std::cin), {});
  } else {
    std::ifstream in(a.file, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + a.file);
    body.assign(std::istreambuf_iterator<char>(in), {});
  }
  const size_t first = body.find_first_not_of(" \t\r\n");
  const bool json = first != std::string::npos && body[first] == '{';
  // One key per invocation: if the server restarts mid-request, the retry finds the job the
  // first try created.
  const HttpResult r = c.post("/v1/jobs", body, json ? "application/json" : "application/yaml",
                              {{"Idempotency-Key", new_token().substr(0, 32)}});
  const auto j = nlohmann::json::parse(ok_body(r, "submit " + a.file));
  if (a.json) {
    std::cout << j.dump(2) << "\n";
  } else if (j.contains("array_id")) {
    // The array's id first, as for any job, then where its tasks are.
    const std::string spec = j["spec"].value("array", "");
    std::cout << j["id"].get<int64_t>() << " (array " << spec << ": tessera jobs --array "
              << j["array_id"].get<int64_t>() << ")\n";
  } else {
    std::cout << j["id"].get<int64_t>() << "\n";
  }
  return 0;
}

// Newest first, `limit` at most (0: all), in pages of 10,000.
nlohmann::json fetch_jobs(ApiClient& c, const ClientArgs& a) {
  nlohmann::json all = nlohmann::json::array();
  int64_t before = 0;
  for (;;) {
    size_t page = 10000;
    if (a.limit > 0) page = std::min(page, a.limit - all.size());
    std::string q = "/v1/jobs?order=desc&limit=" + std::to_string(page);
    if (before > 0) q += "&before=" + std::to_string(before);
    if (!a.state.empty()) q += "&state=" + a.state;
    if (!a.tenant.empty()) q += "&tenant=" + a.tenant;
    if (a.array > 0) q += "&array=" + std::to_string(a.array);
    const auto j = nlohmann::json::parse(ok_body(c.get(q), "jobs"));
    for (const auto& job : j["jobs"]) all.push_back(job);
    if (j["next_before"].is_null() || (a.limit > 0 && all.size() >= a.limit)) break;
    before = j["next_before"].get<int64_t>();
  }
  return all;
}

// A job as a user names it: its id ("12"), or an array's task as Slurm writes it
// ("ARRAYID_INDEX", "3_0"), looked up among the array's tasks.
int64_t resolve_job_ref(ApiClient& c, const std::string& ref) {
  const size_t us = ref.find('_');
  if (us == std::string::npos) return std::stoll(ref);
  ClientArgs tasks;
  tasks.array = std::stoll(ref.substr(0, us));
  const int64_t index = std::stoll(ref.substr(us + 1));
  const nlohmann::json all = fetch_jobs(c, tasks);
  for (const auto& j : all) {
    if (j.value("array_index", int64_t{-1}) == index) return j["id"].get<int64_t>();
  }
  throw std::runtime_error(
      all.empty() ? "job " + ref + ": no array " + std::to_string(tasks.array) + " (" +
                        std::to_string(tasks.array) + " is not the first task of an array)"
                  : "job " + ref + ": array " + std::to_string(tasks.array) + " has no task " +
                        std::to_string(index) + " (" + std::to_string(all.size()) + " tasks)");
}

// "12", or "3_0" for an array's task.
CLI::Validator job_ref_check() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const size_t us = text.find('_');
        const auto digits = [](std::string_view s) {
          return !s.empty() && s.size() <= 18 &&
                 std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
        };
        const bool ok = us == std::string::npos ? digits(text)
                                                : digits(std::string_view(text).substr(0, us)) &&
                                                      digits(std::string_view(text).substr(us + 1));
        return ok ? ""
                  : "expected a job id (12) or an array's task (ARRAYID_INDEX: 3_0), got '" + text +
                        "'";
      },
      "ID|ARRAYID_INDEX");
}

int jobs(ApiClient& c, const ClientArgs& a) {
  if (!a.sort.empty()) {
    nlohmann::json probe = nlohmann::json::array();
    sort_jobs(probe, a.sort, 0);  // an unknown key fails before any request
  }
  for (;;) {
    nlohmann::json all = fetch_jobs(c, a);
    const double now = now_seconds();
    if (!a.sort.empty()) sort_jobs(all, a.sort, now);
    if (a.json) {
      std::cout << all.dump() << "\n";
    } else {
      if (a.watch > 0) {
        if (isatty(STDOUT_FILENO)) std::cout << "\033[H\033[2J";  // a fresh screen each time
        std::cout << "Every " << a.watch << " s: tessera jobs    " << local_time(now) << "\n\n";
      }
      std::cout << job_table(all, now);
    }
    std::cout.flush();
    if (a.watch <= 0) return 0;
    std::this_thread::sleep_for(std::chrono::duration<double>(a.watch));
  }
}

int job(ApiClient& c, const ClientArgs& a) {
  auto j = nlohmann::json::parse(ok_body(c.get("/v1/jobs/" + std::to_string(a.id)), "job"));
  const auto history =
      nlohmann::json::parse(ok_body(c.get("/v1/jobs/" + std::to_string(a.id) + "/events"), "job"));
  j["events"] = history.value("events", nlohmann::json::array());
  if (a.json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << job_page(j, now_seconds());
  return 0;
}

int cancel(ApiClient& c, const ClientArgs& a) {
  std::string q = "/v1/jobs/" + std::to_string(a.id) + "/cancel";
  if (a.force) q += "?force=true";
  if (a.cancel_array) q += a.force ? "&array=true" : "?array=true";
  const auto j = nlohmann::json::parse(ok_body(c.post(q, "", "application/json"), "cancel"));
  if (a.cancel_array) {
    std::cout << "array " << j["array_id"].get<int64_t>() << ": "
              << j["cancelled_tasks"].get<int64_t>() << " tasks cancelled\n";
  } else {
    std::cout << "job " << j["id"].get<int64_t>() << ": " << j["state"].get<std::string>() << "\n";
  }
  return 0;
}

// hold, release, requeue: POST /v1/jobs/ID/ACTION.
int job_action(ApiClient& c, const ClientArgs& a, const std::string& action) {
  const auto j = nlohmann::json::parse(ok_body(
      c.post("/v1/jobs/" + std::to_string(a.id) + "/" + action, "", "application/json"), action));
  std::cout << "job " << j["id"].get<int64_t>() << ": " << j["state"].get<std::string>()
            << (j.value("reason", nlohmann::json()).is_string()
                    ? " (" + j["reason"].get<std::string>() + ")"
                    : std::string())
            << "\n";
  return 0;
}

int update(ApiClient& c, const ClientArgs& a) {
  nlohmann::json body = nlohmann::json::object();
  if (!a.priority_class.empty()) body["priority_class"] = a.priority_class;
  if (!a.time_limit.empty()) body["time_limit"] = a.time_limit;
  if (body.empty()) {
    throw std::invalid_argument("update: give --priority-class or --time-limit (or both)");
  }
  const auto j = nlohmann::json::parse(ok_body(
      c.patch("/v1/jobs/" + std::to_string(a.id), body.dump(), "application/json"), "update"));
  std::cout << job_page(j, now_seconds());
  return 0;
}

// GET `path` and print its list `key` as JSON (--json) or as `table` renders it.
int audit(ApiClient& c, const ClientArgs& a) {
  std::string q = "/v1/audit?limit=" + std::to_string(a.limit > 0 ? a.limit : 100);
  if (!a.actor.empty()) q += "&actor=" + a.actor;
  if (!a.target.empty()) q += "&target=" + query_escape(a.target);
  if (a.since_hours >= 0) {
    q += "&since=" + std::to_string(static_cast<int64_t>(now_seconds() - a.since_hours * 3600));
  }
  if (a.refused) q += "&refused=true";
  return print_list(c, a, q, "entries", "audit", audit_table);
}

// A simulation's accounting: the "usage" rows of its --json result file (the whole run).
nlohmann::json usage_of_result(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot be read");
  nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    throw std::runtime_error(path + ": not a JSON object (a result written by simulate --json)");
  }
  if (!doc.contains("usage") || !doc["usage"].is_array()) {
    throw std::runtime_error(path +
                             ": has no \"usage\" (not a simulate --json result, or one written "
                             "by a Tessera older than tessera usage --result): run it again");
  }
  nlohmann::json out{{"result", path}, {"usage", doc["usage"]}};
  // Energy, where the simulation wrote it (energy.by_tenant: tenant, gpu_kwh, kwh, carbon_kg):
  // each row's energy_kwh and carbon_kg by tenant; a result without it leaves energy unknown.
  const nlohmann::json* by_tenant = nullptr;
  if (doc.contains("energy") && doc["energy"].is_object() && doc["energy"].contains("by_tenant") &&
      doc["energy"]["by_tenant"].is_array()) {
    by_tenant = &doc["energy"]["by_tenant"];
  }
  if (by_tenant != nullptr) {
    for (nlohmann::json& row : out["usage"]) {
      if (!row.is_object() || !row.contains("tenant")) continue;
      for (const nlohmann::json& e : *by_tenant) {
        if (!e.is_object() || !e.contains("tenant") || e["tenant"] != row["tenant"]) continue;
        if (e.contains("kwh") && e["kwh"].is_number()) row["energy_kwh"] = e["kwh"];
        if (e.contains("carbon_kg") && e["carbon_kg"].is_number()) {
          row["carbon_kg"] = e["carbon_kg"];
        }
      }
    }
  }
  if (doc.contains("policy")) out["policy"] = doc["policy"];
  if (doc.contains("makespan")) out["makespan_seconds"] = doc["makespan"];
  return out;
}

// Accounting over a window of hours before now (or over a simulation, --result); cost from a
// local price table (the server keeps usage, the operator keeps prices).
int usage(const std::function<std::unique_ptr<ApiClient>()>& client, const ClientArgs& a) {
  std::optional<PriceTable> prices;
  if (!a.prices.empty()) prices = load_prices(a.prices);
  nlohmann::json j;
  if (!a.result.empty()) {
    j = usage_of_result(a.result);
  } else {
    const double since_hours = a.since_hours >= 0 ? a.since_hours : 30 * 24;
    if (since_hours <= a.until_hours) {
      throw CLI::ValidationError("--since", "must be more hours ago than --until");
    }
    const double now = now_seconds();
    const std::string q = fmt::format("/v1/usage?since={}&until={}&by={}",
                                      static_cast<int64_t>(now - since_hours * 3600),
                                      static_cast<int64_t>(now - a.until_hours * 3600), a.usage_by);
    j = nlohmann::json::parse(ok_body(client()->get(q), "usage"));
  }
  std::vector<std::string> unpriced;
  if (a.json) {
    nlohmann::json out = j;
    if (prices) {
      for (auto& row : out["usage"]) {
        row["cost"] = cost_of(usage_row_from_json(row), *prices, unpriced);
      }
    }
    std::cout << out.dump(2) << "\n";
  } else if (a.csv) {
    std::cout << usage_csv(j["usage"], prices ? &*prices : nullptr, unpriced);
  } else {
    if (j.contains("result")) {
      std::cout << "Simulation " << j["result"].get<std::string>()
                << (j.contains("policy") ? " (" + j["policy"].get<std::string>() + ")" : "")
                << (j.contains("makespan_seconds")
                        ? ", " + short_duration(j["makespan_seconds"].get<double>()) +
                              " of simulated time"
                        : "")
                << "\n";
    } else {
      std::cout << "From " << local_time(j["since"]) << " to " << local_time(j["until"]) << "\n";
    }
    std::cout << usage_table(j["usage"], prices ? &*prices : nullptr, unpriced,
                             a.usage_by == "user");
  }
  if (!unpriced.empty()) {
    std::string list;
    for (const std::string& t : unpriced) list += (list.empty() ? "" : ", ") + t;
    std::cerr << "tessera: warning: " << a.prices << " has no price for " << list
              << ": their GPU-hours cost nothing here\n";
  }
  return 0;
}

int node_action(ApiClient& c, const ClientArgs& a, const std::string& action) {
  ok_body(c.post("/v1/nodes/" + query_escape(a.name) + "/" + action, "", "application/json"),
          "node " + action);
  std::cout << "node " << a.name
            << (action == "drain" ? " drained: no new work starts there" : " resumed") << "\n";
  return 0;
}

int queues(ApiClient& c, const ClientArgs& a) {
  return print_list(c, a, "/v1/queues", "queues", "queues", queue_table);
}

int queues_apply(ApiClient& c, const ClientArgs& a) {
  const std::string text = csv::read_file(a.file);
  const std::string name = std::filesystem::path(a.file).filename().string();
  const auto j = nlohmann::json::parse(
      ok_body(c.post("/v1/queues?origin=" + query_escape(name) + (a.dry_run ? "&dry_run=true" : ""),
                     text, "application/yaml"),
              "queues apply"));
  if (a.json) {
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::cout << a.file << (a.dry_run ? ": valid, not applied" : ": applied") << " ("
            << j["queues"].get<int64_t>() << " queues";
  for (const char* key : {"added", "removed"}) {
    std::string list;
    for (const auto& q : j[key]) list += (list.empty() ? "" : ", ") + q.get<std::string>();
    if (!list.empty()) std::cout << "; " << key << " " << list;
  }
  std::cout << ")\n";
  return 0;
}

int nodes(ApiClient& c, const ClientArgs& a) {
  return print_list(c, a, "/v1/nodes", "nodes", "nodes", node_table);
}

int tenant_list(ApiClient& c, const ClientArgs& a) {
  return print_list(c, a, "/v1/tenants", "tenants", "tenant list", tenant_table);
}

// Prints the whole lines of `partial` (what a rank's log gave so far), each with "[RANK] " in
// front when `prefix`, and leaves in it the last line if it has no newline yet.
void print_whole_lines(std::string& partial, int rank, bool prefix) {
  size_t start = 0;
  for (size_t nl = partial.find('\n'); nl != std::string::npos; nl = partial.find('\n', start)) {
    if (prefix) std::cout << "[" << rank << "] ";
    std::cout << std::string_view(partial).substr(start, nl + 1 - start);
    start = nl + 1;
  }
  partial.erase(0, start);
}

// A last line without its newline, ended.
void print_rest(const std::string& partial, int rank, bool prefix) {
  if (partial.empty()) return;
  if (prefix) std::cout << "[" << rank << "] ";
  std::cout << partial << "\n";
}

// --follow: every rank's log (or the one --rank names) as it grows, whole lines, each with
// its rank in front when there are several, until the job has ended and nothing is left. A
// new attempt (a requeue, a preemption) starts its logs from the beginning.
int follow_logs(ApiClient& c, const ClientArgs& a) {
  int64_t attempt = -1;
  std::vector<int64_t> offset;
  std::vector<std::string> partial;
  for (;;) {
    const auto job =
        nlohmann::json::parse(ok_body(c.get("/v1/jobs/" + std::to_string(a.id)), "logs"));
    const std::string state = job["state"].get<std::string>();
    const bool ended =
        state == "succeeded" || state == "failed" || state == "cancelled" || state == "timeout";
    const int64_t attempts = job["attempts"].get<int64_t>();
    const int world = job["spec"].value("gang", nlohmann::json::object()).value("max", 1);
    if (attempts != attempt && attempts > 0) {
      attempt = attempts;
      offset.assign(static_cast<size_t>(world), 0);
      partial.assign(static_cast<size_t>(world), "");
      if (attempt > 1) std::cout << "--- attempt " << attempt << " ---\n";
    }
    bool got = false;
    for (int r = 0; r < world && attempt > 0; ++r) {
      if (a.rank >= 0 && r != a.rank) continue;
      const auto k = static_cast<size_t>(r);
      const HttpResult res = c.get(fmt::format("/v1/jobs/{}/logs?rank={}&offset={}&tail_bytes={}",
                                               a.id, r, offset[k], 1 << 20));
      if (res.status == 404) continue;  // not started yet
      const std::string chunk = ok_body(res, "logs");
      offset[k] += static_cast<int64_t>(chunk.size());
      got = got || !chunk.empty();
      partial[k] += chunk;
      print_whole_lines(partial[k], r, a.rank < 0 && world > 1);
    }
    std::cout.flush();
    if (ended && !got) break;
    if (!got) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  for (size_t k = 0; k < partial.size(); ++k) {
    print_rest(partial[k], static_cast<int>(k), a.rank < 0 && partial.size() > 1);
  }
  return 0;
}

int logs(ApiClient& c, const ClientArgs& a) {
  if (a.follow) return follow_logs(c, a);
  const auto rank_log = [&](int rank) {
    return ok_body(
        c.get(fmt::format("/v1/jobs/{}/logs?rank={}&tail_bytes={}", a.id, rank, a.tail_bytes)),
        "logs");
  };
  if (a.rank >= 0) {
    std::cout << rank_log(a.rank);
    return 0;
  }
  // Every rank (a gang's members each write their own log), each line prefixed [RANK], rank
  // by rank: a failure on rank 3 is not hidden behind rank 0's healthy output.
  const auto job =
      nlohmann::json::parse(ok_body(c.get("/v1/jobs/" + std::to_string(a.id)), "logs"));
  const int world = job["spec"].value("gang", nlohmann::json::object()).value("max", 1);
  if (world <= 1) {
    std::cout << rank_log(0);
    return 0;
  }
  for (int r = 0; r < world; ++r) {
    const HttpResult res =
        c.get(fmt::format("/v1/jobs/{}/logs?rank={}&tail_bytes={}", a.id, r, a.tail_bytes));
    if (res.status == 404) continue;  // a member that never started
    std::string text = ok_body(res, "logs");
    print_whole_lines(text, r, true);
    print_rest(text, r, true);
  }
  return 0;
}

int token_rotate(ApiClient& c, const ClientArgs& a) {
  const auto j = nlohmann::json::parse(
      ok_body(c.post("/v1/tenants/" + a.name + "/token", "", "application/json"), "token rotate"));
  std::cout << (a.json ? j.dump() : j["token"].get<std::string>()) << "\n";
  return 0;
}

int token_revoke(ApiClient& c, const ClientArgs& a) {
  ok_body(c.del("/v1/tenants/" + a.name + "/token"), "token revoke");
  std::cout << "tenant " << a.name << ": token revoked\n";
  return 0;
}

int archive(ApiClient& c, const ClientArgs& a) {
  const auto j = nlohmann::json::parse(
      ok_body(c.post("/v1/archive", nlohmann::json{{"older_than_hours", a.older_than_hours}}.dump(),
                     "application/json"),
              "archive"));
  if (a.json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << j["archived"].get<int64_t>() << " jobs archived";
  for (const auto& f : j["files"]) std::cout << "\n  " << f.get<std::string>();
  std::cout << "\n";
  return 0;
}

int tenant_delete(ApiClient& c, const ClientArgs& a) {
  ok_body(c.del("/v1/tenants/" + a.name), "tenant delete");
  std::cout << "tenant " << a.name << ": deleted\n";
  return 0;
}

int tenant_create(ApiClient& c, const ClientArgs& a) {
  const auto j = nlohmann::json::parse(
      ok_body(c.post("/v1/tenants", nlohmann::json{{"name", a.name}}.dump(), "application/json"),
              "tenant create"));
  if (a.json) {
    std::cout << j.dump() << "\n";
  } else {
    std::cout << j["token"].get<std::string>() << "\n";
  }
  return 0;
}

std::string users_path(const ClientArgs& a) {
  return "/v1/tenants/" + query_escape(a.tenant) + "/users";
}

int user_add(ApiClient& c, const ClientArgs& a) {
  const auto j = nlohmann::json::parse(
      ok_body(c.post(users_path(a), nlohmann::json{{"name", a.name}, {"role", a.role}}.dump(),
                     "application/json"),
              "user add"));
  std::cout << (a.json ? j.dump() : j["token"].get<std::string>()) << "\n";
  return 0;
}

int user_list(ApiClient& c, const ClientArgs& a) {
  return print_list(c, a, a.tenant.empty() ? "/v1/users" : users_path(a), "users", "user list",
                    user_table);
}

int user_remove(ApiClient& c, const ClientArgs& a) {
  ok_body(c.del(users_path(a) + "/" + query_escape(a.name)), "user remove");
  std::cout << "user " << a.name << "@" << a.tenant << ": removed (their jobs stay)\n";
  return 0;
}

int user_rotate(ApiClient& c, const ClientArgs& a) {
  const auto j = nlohmann::json::parse(
      ok_body(c.post(users_path(a) + "/" + query_escape(a.name) + "/token", "", "application/json"),
              "user rotate"));
  std::cout << (a.json ? j.dump() : j["token"].get<std::string>()) << "\n";
  return 0;
}

}  // namespace

constexpr const char* kJobRefHelp = "job id, or an array's task as ARRAYID_INDEX (3_0)";

ClientCommands add_client_commands(CLI::App& app, ClientArgs& a) {
  ClientCommands c;
  c.submit = app.add_subcommand("submit", "Submit a job (YAML or JSON file, - for stdin)");
  c.submit->add_option("file", a.file, "job spec")->required();
  c.submit->add_flag("--json", a.json, "print the whole job, not just its id");
  c.jobs = app.add_subcommand(
      "jobs",
      "List jobs, newest first: queue, class, state, a short reason code for waiting jobs "
      "(Resources, GangFit, Reservation, HeadOfLine, Quota, FairShare, InferenceReserve, "
      "ReservedGpus, TenantLimit, ArrayLimit, Preempting, Unrunnable, Held, Dependency; `tessera "
      "job "
      "ID` says it "
      "in words), "
      "GPUs, nodes, "
      "attempts, age and elapsed time");
  c.jobs->add_option("--state", a.state, "only jobs in these states, comma-separated")
      ->check(job_states_check());
  c.jobs->add_option("--tenant", a.tenant, "only this tenant's jobs (admin)");
  c.jobs->add_option("--array", a.array, "only the tasks of this job array (its id)")
      ->check(positive_number());
  c.jobs->add_option("--limit", a.limit, "at most this many, the newest (0: all)");
  c.jobs->add_option("--sort", a.sort, "order of the rows (default: newest first)")
      ->check(CLI::IsMember(job_sort_keys()));
  c.jobs->add_option("--watch", a.watch, "print the list again every this many seconds")
      ->check(non_negative_number());
  c.jobs->add_flag("--json", a.json, "print a JSON array");
  c.job = app.add_subcommand(
      "job",
      "Show one job: state, why it waits, placement, spec, and its history (submitted, each "
      "change of reason, started where, preempted by whom, how it ended)");
  c.job->add_option("id", a.job_ref, kJobRefHelp)->required()->check(job_ref_check());
  c.job->add_flag("--json", a.json, "print JSON");
  c.cancel = app.add_subcommand("cancel", "Cancel a job");
  c.cancel->add_option("id", a.job_ref, kJobRefHelp)->required()->check(job_ref_check());
  c.cancel->add_flag("--force", a.force,
                     "kill it now (SIGKILL) instead of waiting for its checkpoint grace; also "
                     "for a job already cancelled that is still stopping");
  c.cancel->add_flag("--array", a.cancel_array,
                     "every task of the job array ID belongs to that has not ended");
  c.hold = app.add_subcommand("hold", "Hold a waiting job: it is not started until released");
  c.hold->add_option("id", a.job_ref, kJobRefHelp)->required()->check(job_ref_check());
  c.release = app.add_subcommand("release", "Release a held job: it may start again");
  c.release->add_option("id", a.job_ref, kJobRefHelp)->required()->check(job_ref_check());
  c.requeue = app.add_subcommand(
      "requeue", "Stop a running job (SIGTERM, its grace, SIGKILL) and queue it again");
  c.requeue->add_option("id", a.job_ref, kJobRefHelp)->required()->check(job_ref_check());
  c.update = app.add_subcommand(
      "update",
      "Change a job's priority class (while it waits) or time limit (within its queue's "
      "maximum; only the admin may raise it)");
  c.update->add_option("id", a.job_ref, kJobRefHelp)->required()->check(job_ref_check());
  c.update->add_option("--priority-class", a.priority_class, "new priority class")
      ->check(CLI::IsMember({"inference-critical", "production", "research", "best-effort"}));
  c.update->add_option("--time-limit", a.time_limit, "new time limit: seconds, or 30m, 4h, 2d");
  c.audit = app.add_subcommand(
      "audit", "Read the audit log (admin): who did what, newest first, with filters");
  c.audit->add_option("--actor", a.actor, "only this actor: admin, anonymous or a tenant");
  c.audit->add_option("--target", a.target, "only this target, e.g. \"job 12\"");
  c.audit->add_option("--since", a.since_hours, "only the last this many hours")
      ->check(non_negative_number());
  c.audit->add_flag("--refused", a.refused, "only refused requests (status 400 and above)");
  c.audit->add_option("--limit", a.limit, "at most this many entries (0: 100)");
  c.audit->add_flag("--json", a.json, "print JSON");
  c.usage = app.add_subcommand(
      "usage",
      "Accounting (as sreport): per tenant and queue, GPU-hours by GPU type, CPU-hours, "
      "jobs finished by state, mean wait, preemptions suffered and caused, cost");
  auto* since =
      c.usage->add_option("--since", a.since_hours, "the window starts this many hours ago")
          ->default_str("720 (30 days)")
          ->check(non_negative_number());
  auto* until = c.usage->add_option("--until", a.until_hours, "the window ends this many hours ago")
                    ->capture_default_str()
                    ->check(non_negative_number());
  c.usage
      ->add_option("--result", a.result,
                   "a simulation's result (simulate --json FILE) instead of the server: its "
                   "whole run, no server needed")
      ->check(CLI::ExistingFile)
      ->excludes(since)
      ->excludes(until);
  c.usage
      ->add_option("--prices", a.prices,
                   "price table (YAML): GPU type to price per GPU-hour, cpu_hour, and kwh "
                   "(per kWh of energy)")
      ->check(CLI::ExistingFile);
  c.usage->add_flag("--json", a.json, "print JSON (with a cost per row when --prices is given)");
  c.usage->add_flag("--csv", a.csv, "print CSV, one line per tenant, queue and GPU type")
      ->excludes("--json");
  c.usage
      ->add_option("--by", a.usage_by,
                   "queue: a row per tenant and queue (default); user: a row per user of each "
                   "tenant, as sreport by user")
      ->check(CLI::IsMember({"queue", "user"}));
  c.queues = app.add_subcommand(
      "queues",
      "Show the queue tree: shares, holdings, long-term usage, who borrows or is over "
      "its fair share");
  c.queues->add_flag("--json", a.json, "print JSON");
  c.queues_apply = c.queues->add_subcommand(
      "apply",
      "Replace the running queue tree with FILE (admin): checked whole first; refused if a "
      "tenant would have no queue, naming its jobs; running jobs keep running");
  c.queues_apply->add_option("file", a.file, "queue tree (YAML, the --queues format)")
      ->required()
      ->check(CLI::ExistingFile);
  c.queues_apply->add_flag("--dry-run", a.dry_run, "check it against the server; change nothing");
  c.queues_apply->add_flag("--json", a.json, "print JSON");
  c.nodes = app.add_subcommand("nodes", "Show nodes and GPUs");
  c.nodes->add_flag("--json", a.json, "print JSON");
  c.logs = app.add_subcommand(
      "logs",
      "Print a job's log (its latest attempt): every rank's, each line prefixed [RANK], unless "
      "--rank names one");
  c.logs->add_option("id", a.job_ref, kJobRefHelp)->required()->check(job_ref_check());
  c.logs->add_option("--rank", a.rank, "gang member (-1: every rank)");
  c.logs->add_flag("--follow,-f", a.follow,
                   "keep printing as the log grows, until the job ends; every rank, each line "
                   "prefixed with [RANK], unless --rank names one");
  c.logs->add_option("--tail-bytes", a.tail_bytes, "at most this many bytes from the end");
  c.archive = app.add_subcommand(
      "archive",
      "Move jobs that finished long ago out of the server's live tables into JSON-lines files "
      "beside its database (admin; their usage stays for tessera usage)");
  c.archive->add_option("--older-than", a.older_than_hours, "hours since they finished")
      ->required()
      ->check(non_negative_number());
  c.archive->add_flag("--json", a.json, "print JSON");
  c.tenant = app.add_subcommand("tenant", "Manage tenants (admin)");
  c.tenant_create = c.tenant->add_subcommand("create", "Create a tenant; prints its token once");
  c.tenant_create->add_option("name", a.name, "tenant name")->required();
  c.tenant_create->add_flag("--json", a.json, "print JSON");
  c.tenant_list = c.tenant->add_subcommand(
      "list", "List tenants: with or without a token, queue, pending and running jobs");
  c.tenant_list->add_flag("--json", a.json, "print JSON");
  c.tenant_delete = c.tenant->add_subcommand(
      "delete",
      "Delete a tenant with no job waiting or running: its token stops working, its finished "
      "jobs and usage stay; `tenant create` makes it again");
  c.tenant_delete->add_option("name", a.name, "tenant name")->required();
  c.tenant->require_subcommand(1);
  c.token = app.add_subcommand("token", "Manage tenants' tokens (admin)");
  c.token_rotate = c.token->add_subcommand(
      "rotate", "Give a tenant a new token (printed once); the old one stops working at once");
  c.token_rotate->add_option("name", a.name, "tenant name")->required();
  c.token_rotate->add_flag("--json", a.json, "print JSON");
  c.token_revoke = c.token->add_subcommand(
      "revoke", "Remove a tenant's token: nothing authenticates as it (its jobs stay)");
  c.token_revoke->add_option("name", a.name, "tenant name")->required();
  c.token->require_subcommand(1);
  c.node = app.add_subcommand("node", "Drain or resume a node (admin)");
  c.node_drain = c.node->add_subcommand(
      "drain", "No new work starts on the node; the jobs on it run to their end");
  c.node_drain->add_option("name", a.name, "node name, as tessera nodes shows it")->required();
  c.node_resume = c.node->add_subcommand("resume", "The node takes work again");
  c.node_resume->add_option("name", a.name, "node name")->required();
  c.node->require_subcommand(1);
  c.user = app.add_subcommand(
      "user",
      "Manage the people inside a tenant, each with their own token (the admin, the tenant's "
      "token or a tenant admin)");
  c.user_add = c.user->add_subcommand(
      "add",
      "Add a user to a tenant; prints their token once. A member acts on their own jobs, "
      "an admin on all the tenant's and manages its users");
  c.user_add->add_option("tenant", a.tenant, "tenant")->required();
  c.user_add->add_option("name", a.name, "user name")->required();
  c.user_add->add_option("--role", a.role, "member (default) or admin")
      ->check(CLI::IsMember({"member", "admin"}));
  c.user_add->add_flag("--json", a.json, "print JSON");
  c.user_list = c.user->add_subcommand("list", "List a tenant's users (every tenant's: admin)");
  c.user_list->add_option("tenant", a.tenant, "tenant");
  c.user_list->add_flag("--json", a.json, "print JSON");
  c.user_remove = c.user->add_subcommand(
      "remove", "Remove a user: their token stops working at once; their jobs stay");
  c.user_remove->add_option("tenant", a.tenant, "tenant")->required();
  c.user_remove->add_option("name", a.name, "user name")->required();
  c.user_rotate = c.user->add_subcommand(
      "rotate", "Give a user a new token (printed once); the old one stops working at once");
  c.user_rotate->add_option("tenant", a.tenant, "tenant")->required();
  c.user_rotate->add_option("name", a.name, "user name")->required();
  c.user_rotate->add_flag("--json", a.json, "print JSON");
  c.user->require_subcommand(1);
  add_reservation_commands(app, a, c);
  for (CLI::App* s : {c.submit,
                      c.jobs,
                      c.job,
                      c.cancel,
                      c.hold,
                      c.release,
                      c.requeue,
                      c.update,
                      c.audit,
                      c.usage,
                      c.queues,
                      c.nodes,
                      c.logs,
                      c.tenant_create,
                      c.tenant_list,
                      c.tenant_delete,
                      c.archive,
                      c.token_rotate,
                      c.token_revoke,
                      c.node_drain,
                      c.node_resume,
                      c.user_add,
                      c.user_list,
                      c.user_remove,
                      c.user_rotate,
                      c.queues_apply,
                      c.reservation_create,
                      c.reservation_list,
                      c.reservation_delete}) {
    add_common(s, a);
  }
  return c;
}

int run_client_command(const ClientCommands& c, const ClientArgs& given) {
  auto client = [&] {
    return std::make_unique<ApiClient>(client_options_from_env(given.addr, given.token));
  };
  ClientArgs a = given;
  if (!a.job_ref.empty()) a.id = resolve_job_ref(*client(), a.job_ref);
  if (*c.submit) return submit(*client(), a);
  if (*c.jobs) return jobs(*client(), a);
  if (*c.job) return job(*client(), a);
  if (*c.cancel) return cancel(*client(), a);
  if (*c.hold) return job_action(*client(), a, "hold");
  if (*c.release) return job_action(*client(), a, "release");
  if (*c.requeue) return job_action(*client(), a, "requeue");
  if (*c.update) return update(*client(), a);
  if (*c.audit) return audit(*client(), a);
  if (*c.usage) return usage(client, a);
  if (*c.queues_apply) return queues_apply(*client(), a);
  if (*c.queues) return queues(*client(), a);
  if (*c.nodes) return nodes(*client(), a);
  if (*c.logs) return logs(*client(), a);
  if (*c.tenant_create) return tenant_create(*client(), a);
  if (*c.tenant_list) return tenant_list(*client(), a);
  if (*c.tenant_delete) return tenant_delete(*client(), a);
  if (*c.archive) return archive(*client(), a);
  if (*c.token_rotate) return token_rotate(*client(), a);
  if (*c.token_revoke) return token_revoke(*client(), a);
  if (*c.node_drain) return node_action(*client(), a, "drain");
  if (*c.node_resume) return node_action(*client(), a, "resume");
  if (*c.user_add) return user_add(*client(), a);
  if (*c.user_list) return user_list(*client(), a);
  if (*c.user_remove) return user_remove(*client(), a);
  if (*c.user_rotate) return user_rotate(*client(), a);
  if (*c.reservation) return run_reservation_command(c, *client(), a);
  return -1;
}

}  // namespace tessera

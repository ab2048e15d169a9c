#include "apps/client_tables.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <set>
#include <stdexcept>

#include "store/job_request.h"

namespace tessera {

namespace {

double number_or(const nlohmann::json& j, const char* key, double fallback) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback;
}

std::string text_or(const nlohmann::json& j, const char* key, const std::string& fallback) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : fallback;
}

// GPUs the job asks for at its largest: members x GPUs per member.
double gpus_of(const nlohmann::json& job) {
  const nlohmann::json& spec = job["spec"];
  const nlohmann::json res = spec.value("resources", nlohmann::json::object());
  const double per_member = res.contains("gpus") ? res["gpus"].get<double>() : 1.0;
  const nlohmann::json gang = spec.value("gang", nlohmann::json::object());
  return per_member * gang.value("max", 1);
}

size_t nodes_of(const nlohmann::json& job) {
  std::set<std::string> nodes;
  for (const auto& p : job.value("allocation", nlohmann::json::array())) {
    nodes.insert(p["node"].get<std::string>());
  }
  return nodes.size();
}

double age_of(const nlohmann::json& job, double now) {
  return now - number_or(job, "submitted_at", now);
}

// Running: since it started; finished: how long it ran; otherwise -1. A job waiting again
// (preempted or requeued) keeps its last start, but no time passes for it.
double elapsed_of(const nlohmann::json& job, double now) {
  const double started = number_or(job, "started_at", -1);
  if (started < 0) return -1;
  const double finished = number_or(job, "finished_at", -1);
  if (finished >= 0) return finished - started;
  return text_or(job, "state", "") == "pending" ? -1 : now - started;
}

}  // namespace

std::string short_duration(double s) {
  if (s < 0) return "-";
  const auto t = static_cast<int64_t>(s);
  if (t < 60) return fmt::format("{}s", t);
  if (t < 3600) return fmt::format("{}m{:02}s", t / 60, t % 60);
  if (t < 86400) return fmt::format("{}h{:02}m", t / 3600, t % 3600 / 60);
  return fmt::format("{}d{:02}h", t / 86400, t % 86400 / 3600);
}

std::string local_time(const nlohmann::json& t) {
  if (!t.is_number()) return "-";
  const auto secs = static_cast<time_t>(t.get<double>());
  std::tm tm{};
  localtime_r(&secs, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S %Z", &tm);
  return buf;
}

std::string fit(const std::string& text, size_t width) {
  if (text.size() <= width) return text;
  return width <= 3 ? text.substr(0, width) : text.substr(0, width - 3) + "...";
}

const std::vector<std::string>& job_sort_keys() {
  static const std::vector<std::string> keys = {"id",  "name", "queue",  "state",
                                                "age", "gpus", "elapsed"};
  return keys;
}

void sort_jobs(nlohmann::json& jobs, const std::string& key, double now) {
  const auto by = [&](auto value) {
    std::stable_sort(
        jobs.begin(), jobs.end(),
        [&](const nlohmann::json& a, const nlohmann::json& b) { return value(a) < value(b); });
  };
  if (key == "id") {
    by([](const nlohmann::json& j) { return j["id"].get<int64_t>(); });
  } else if (key == "name") {
    by([](const nlohmann::json& j) { return j["name"].get<std::string>(); });
  } else if (key == "queue") {
    by([](const nlohmann::json& j) { return text_or(j, "queue", ""); });
  } else if (key == "state") {
    by([](const nlohmann::json& j) { return j["state"].get<std::string>(); });
  } else if (key == "age") {  // oldest first
    by([&](const nlohmann::json& j) { return -age_of(j, now); });
  } else if (key == "gpus") {  // largest first
    by([](const nlohmann::json& j) { return -gpus_of(j); });
  } else if (key == "elapsed") {  // longest first
    by([&](const nlohmann::json& j) { return -elapsed_of(j, now); });
  } else {
    std::string known;
    for (const std::string& k : job_sort_keys()) known += (known.empty() ? "" : ", ") + k;
    throw std::invalid_argument("--sort: unknown key '" + key + "' (" + known + ")");
  }
}

std::string job_table(const nlohmann::json& jobs, double now) {
  constexpr const char* kRow =
      "{:>6}  {:<24} {:<20} {:<18} {:<10} {:<12} {:>5} {:>5} {:>4} {:>7} {:>7} {:>7}\n";
  std::string out = fmt::format(kRow, "ID", "NAME", "QUEUE", "CLASS", "STATE", "REASON", "GPUS",
                                "NODES", "TRY", "AGE", "ELAPSED", "LIMIT");
  for (const auto& j : jobs) {
    const size_t nodes = nodes_of(j);
    // An array's task shows its index, as name[3], and its id as Slurm writes it (12_3, which
    // every command takes).
    std::string name = j["name"].get<std::string>();
    std::string id = std::to_string(j["id"].get<int64_t>());
    if (j.contains("array_index")) {
      const std::string index = std::to_string(j["array_index"].get<int64_t>());
      name = fit(name, 24 - index.size() - 2) + "[" + index + "]";
      id = std::to_string(j["array_id"].get<int64_t>()) + "_" + index;
    }
    out += fmt::format(
        kRow, id, fit(name, 24), fit(text_or(j, "queue", j["tenant"].get<std::string>()), 20),
        fit(text_or(j, "priority_class", "-"), 18), fit(j["state"].get<std::string>(), 10),
        fit(text_or(j, "reason", "-"), 12), fmt::format("{:g}", gpus_of(j)),
        nodes > 0 ? std::to_string(nodes) : "-", j.value("attempts", 0),
        short_duration(age_of(j, now)), short_duration(elapsed_of(j, now)),
        short_duration(number_or(j["spec"], "time_limit", -1)));
  }
  return out;
}

std::string job_page(const nlohmann::json& j, double now) {
  std::string out;
  const auto line = [&](const std::string& key, const std::string& value) {
    out += fmt::format("{:<16}{}\n", key + ":", value);
  };
  line("Job", std::to_string(j["id"].get<int64_t>()));
  line("Name", j["name"].get<std::string>());
  if (j.contains("array_id")) {
    std::vector<int32_t> indices;
    int32_t throttle = 0;
    parse_array_spec(j["spec"].value("array", "0"), "array", indices, throttle);
    line("Array", fmt::format("task {} of array {} ({}_{}){}", j["array_index"].get<int64_t>(),
                              j["array_id"].get<int64_t>(), j["array_id"].get<int64_t>(),
                              j["array_index"].get<int64_t>(),
                              throttle > 0 ? fmt::format(" (at most {} at once)", throttle) : ""));
  }
  line("Tenant", j["tenant"].get<std::string>());
  if (j.contains("user") && j["user"].is_string()) {
    line("User", j["user"].get<std::string>() + "@" + j["tenant"].get<std::string>());
  }
  line("Queue", text_or(j, "queue", "-"));
  line("Class", text_or(j, "priority_class", "-"));
  line("State", j["state"].get<std::string>());
  if (j["pending_reason"].is_string()) {
    line("Reason", text_or(j, "reason", "-") + ": " + j["pending_reason"].get<std::string>());
  }
  if (!text_or(j, "message", "").empty()) line("Message", j["message"].get<std::string>());
  if (j.contains("exit_code") && !j["exit_code"].is_null()) {
    line("Exit code", std::to_string(j["exit_code"].get<int64_t>()));
  }
  line("Submitted",
       local_time(j["submitted_at"]) + " (" + short_duration(age_of(j, now)) + " ago)");
  line("Started", local_time(j["started_at"]));
  line("Finished", local_time(j["finished_at"]));
  line("Elapsed", short_duration(elapsed_of(j, now)));
  line("Time limit", short_duration(number_or(j["spec"], "time_limit", -1)));
  line("Attempts", std::to_string(j.value("attempts", 0)));
  line("Preemptions", std::to_string(j.value("preemptions", 0)));
  line("GPUs", fmt::format("{:g}", gpus_of(j)));
  if (j.contains("power_limit_w") && j["power_limit_w"].is_number()) {
    line("Power limit", fmt::format("{:.0f} W per GPU", j["power_limit_w"].get<double>()));
  }
  const nlohmann::json placement = j.value("allocation", nlohmann::json::array());
  if (!placement.empty()) {
    out += "Placement:\n";
    for (const auto& p : placement) {
      std::string gpus;
      for (const auto& g : p["gpus"])
        gpus += (gpus.empty() ? "" : ",") + std::to_string(g.get<int>());
      out += fmt::format("  rank {:<4} {} GPU {} ({:g} each)\n", p["rank"].get<int>(),
                         p["node"].get<std::string>(), gpus, p["gpu_milli"].get<double>() / 1000);
    }
  }
  out += "Spec:\n" + j["spec"].dump(2) + "\n";
  // The history, as kubectl describe's Events: when, what, the details.
  const nlohmann::json events = j.value("events", nlohmann::json::array());
  if (!events.empty()) {
    out += "Events:\n";
    out += fmt::format("  {:<25} {:<10} {}\n", "TIME", "EVENT", "MESSAGE");
    for (const auto& e : events) {
      out += fmt::format("  {:<25} {:<10} {}\n", local_time(e["at"]), e["type"].get<std::string>(),
                         e.value("message", ""));
    }
  }
  return out;
}

std::string node_table(const nlohmann::json& nodes) {
  constexpr const char* kRow = "{:<20} {:<9} {:<10} {:>4} {:>6}  {:<20} {:<20} {:>13} {:>19}\n";
  std::string out = fmt::format(kRow, "NODE", "STATE", "TYPE", "GPU", "FREE", "JOBS", "RESERVED",
                                "CPU FREE", "MEM FREE (MiB)");
  for (const auto& n : nodes) {
    const std::string cpu = fmt::format("{:g}/{:g}", n["free_cpu_milli"].get<double>() / 1000,
                                        n["cpu_milli"].get<double>() / 1000);
    const std::string mem =
        fmt::format("{}/{}", n["free_mem_mib"].get<int64_t>(), n["mem_mib"].get<int64_t>());
    bool first = true;
    for (const auto& g : n["gpus"]) {
      std::string jobs;
      for (const auto& id : g.value("jobs", nlohmann::json::array())) {
        jobs += (jobs.empty() ? "" : ",") + std::to_string(id.get<int64_t>());
      }
      // A reservation in its window, or "(soon)" for one yet to begin.
      std::string reserved = "-";
      if (g.contains("reservation")) {
        reserved = g["reservation"].get<std::string>() +
                   (g.value("reservation_active", false) ? "" : " (soon)");
      }
      out +=
          fmt::format(kRow, first ? fit(n["name"].get<std::string>(), 20) : "",
                      first ? text_or(n, "state", "up") : "",
                      first ? fit(n["gpu_type"].get<std::string>(), 10) : "", g["index"].get<int>(),
                      fmt::format("{:g}", g["free_milli"].get<double>() / 1000),
                      jobs.empty() ? "-" : fit(jobs, 20), fit(reserved, 20), first ? cpu : "",
                      first ? mem : "");
      first = false;
    }
    if (n["gpus"].empty()) {
      out += fmt::format(kRow, fit(n["name"].get<std::string>(), 20), text_or(n, "state", "up"),
                         "-", "-", "-", "-", "-", cpu, mem);
    }
  }
  return out;
}

std::string queue_table(const nlohmann::json& queues) {
  constexpr const char* kRow = "{:<24} {:>6} {:>9} {:>6} {:>6} {:>10} {:>8} {:>7} {:>7}  {}\n";
  std::string out = fmt::format(kRow, "QUEUE", "WEIGHT", "GUARANTEE", "LIMIT", "HOLDS",
                                "FAIR SHARE", "DECAYED", "PENDING", "RUNNING", "STATUS");
  for (const auto& q : queues) {
    const double holds = q["holds_gpus"].get<double>();
    const double guarantee = q["guarantee_gpus"].get<double>();
    const double share = q["fair_share_gpus"].get<double>();
    std::string status;
    const std::string path = q["path"].get<std::string>();
    const bool root = path.empty() || path == "/";  // it lends to no one
    // A small tolerance: shares are computed in doubles.
    if (!root && holds > guarantee + 1e-9) status += "borrowing";
    if (!root && holds > share + 1e-6) {
      status += std::string(status.empty() ? "" : ", ") + "over-share";
    }
    out += fmt::format(
        kRow, fit(q["path"].get<std::string>().empty() ? "/" : q["path"].get<std::string>(), 24),
        fmt::format("{:g}", q["weight"].get<double>()), fmt::format("{:g}", guarantee),
        q["limit_gpus"].is_null() ? std::string("-")
                                  : fmt::format("{:g}", q["limit_gpus"].get<double>()),
        fmt::format("{:g}", holds), fmt::format("{:.3g}", share),
        fmt::format("{:.3g}", number_or(q, "decayed_gpus", 0)), q["pending_jobs"].get<int64_t>(),
        q["running_jobs"].get<int64_t>(), status.empty() ? "-" : status);
  }
  return out;
}

std::string audit_table(const nlohmann::json& entries) {
  constexpr const char* kRow = "{:<27} {:<16} {:<7} {:<32} {:>6}  {}\n";
  std::string out = fmt::format(kRow, "TIME", "ACTOR", "METHOD", "PATH", "STATUS", "TARGET");
  for (const auto& e : entries) {
    out += fmt::format(kRow, local_time(e["at"]), fit(e["actor"].get<std::string>(), 16),
                       e["method"].get<std::string>(), fit(e["path"].get<std::string>(), 32),
                       e["status"].get<int>(), text_or(e, "target", ""));
  }
  return out;
}

std::string tenant_table(const nlohmann::json& tenants) {
  constexpr const char* kRow = "{:<24} {:<6} {:<24} {:>8} {:>8}  {}\n";
  std::string out = fmt::format(kRow, "TENANT", "TOKEN", "QUEUE", "PENDING", "RUNNING", "CREATED");
  for (const auto& t : tenants) {
    out += fmt::format(kRow, fit(t["name"].get<std::string>(), 24),
                       t.value("has_token", false) ? "yes" : "no",
                       fit(text_or(t, "queue", "-"), 24), t.value("pending_jobs", 0),
                       t.value("running_jobs", 0), local_time(t["created_at"]));
  }
  return out;
}

std::string user_table(const nlohmann::json& users) {
  constexpr const char* kRow = "{:<32} {:<24} {:<7} {}\n";
  std::string out = fmt::format(kRow, "USER", "TENANT", "ROLE", "CREATED");
  for (const auto& u : users) {
    out += fmt::format(kRow,
                       fit(u["name"].get<std::string>() + "@" + u["tenant"].get<std::string>(), 32),
                       fit(u["tenant"].get<std::string>(), 24), text_or(u, "role", "-"),
                       local_time(u["created_at"]));
  }
  return out;
}

namespace {

// "V100 12.50, A100-80G 3.00"; "-" when it held none.
std::string gpu_hours_cell(const UsageRow& r) {
  std::string out;
  for (const auto& [type, h] : r.gpu_hours) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {:.2f}", type, h);
  }
  return out.empty() ? "-" : out;
}

// "3 ok, 1 failed, 2 cancelled": finished jobs by final state.
std::string jobs_cell(const UsageRow& r) {
  std::string out;
  for (const auto& [state, n] : r.jobs) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {}", n, state == "succeeded" ? "ok" : state);
  }
  return out.empty() ? "-" : out;
}

}  // namespace

std::string usage_table(const nlohmann::json& rows, const PriceTable* prices,
                        std::vector<std::string>& unpriced, bool by_user) {
  // Cells first, then each column as wide as its widest cell (at least its usual width), so
  // that no count is cut and every header stands over its column however large the figures.
  struct Column {
    const char* title;
    size_t width;
    bool left;
  };
  std::vector<Column> columns = {{by_user ? "USER" : "TENANT", 16, true},
                                 {"QUEUE", 20, true},
                                 {"GPU-HOURS", 28, true},
                                 {"CPU-H", 8, false},
                                 {"FINISHED", 26, true},
                                 {"STARTED", 7, false},
                                 {"MEAN-WAIT", 9, false},
                                 {"PREEMP", 6, false},
                                 {"CAUSED", 6, false},
                                 {"KWH", 9, false},
                                 {"CO2-KG", 8, false}};
  if (prices != nullptr) columns.push_back({"COST", 10, false});
  std::vector<std::vector<std::string>> lines;
  lines.emplace_back();
  for (const Column& c : columns) lines.back().emplace_back(c.title);
  double gpu_total = 0, cpu_total = 0, cost_total = 0, kwh_total = 0, co2_total = 0;
  bool kwh_known = false, co2_known = false;
  // Energy and carbon are "-" where unknown (a result without them; no carbon series).
  auto known = [](double v) { return v >= 0 ? fmt::format("{:.2f}", v) : std::string("-"); };
  for (const auto& j : rows) {
    const UsageRow r = usage_row_from_json(j);
    gpu_total += r.total_gpu_hours();
    cpu_total += r.cpu_hours;
    if (r.energy_kwh >= 0) {
      kwh_total += r.energy_kwh;
      kwh_known = true;
    }
    if (r.carbon_kg >= 0) {
      co2_total += r.carbon_kg;
      co2_known = true;
    }
    // By user, each row is a user of a tenant; the tenant's own token's jobs are the tenant's.
    const std::string who = r.user.empty() ? r.tenant : r.user + "@" + r.tenant;
    lines.push_back({who, r.queue.empty() ? "-" : r.queue, gpu_hours_cell(r),
                     fmt::format("{:.2f}", r.cpu_hours), jobs_cell(r), std::to_string(r.started),
                     r.started > 0 ? short_duration(r.mean_wait_hours() * 3600) : "-",
                     std::to_string(r.preempted), std::to_string(r.preemptor), known(r.energy_kwh),
                     known(r.carbon_kg)});
    if (prices != nullptr) {
      const double c = cost_of(r, *prices, unpriced);
      cost_total += c;
      lines.back().push_back(fmt::format("{:.2f}", c));
    }
  }
  lines.push_back({"TOTAL", "", fmt::format("{:.2f}", gpu_total), fmt::format("{:.2f}", cpu_total),
                   "", "", "", "", "", known(kwh_known ? kwh_total : -1),
                   known(co2_known ? co2_total : -1)});
  if (prices != nullptr) lines.back().push_back(fmt::format("{:.2f}", cost_total));
  for (const std::vector<std::string>& line : lines) {
    for (size_t k = 0; k < columns.size(); ++k) {
      columns[k].width = std::max(columns[k].width, line[k].size());
    }
  }
  std::string out;
  for (const std::vector<std::string>& line : lines) {
    std::string text;
    for (size_t k = 0; k < columns.size(); ++k) {
      if (k > 0) text += ' ';
      text += columns[k].left ? fmt::format("{:<{}}", line[k], columns[k].width)
                              : fmt::format("{:>{}}", line[k], columns[k].width);
    }
    out += text + "\n";
  }
  return out;
}

std::string usage_csv(const nlohmann::json& rows, const PriceTable* prices,
                      std::vector<std::string>& unpriced) {
  std::string out =
      "tenant,queue,gpu_type,gpu_hours,cpu_hours,jobs_succeeded,jobs_failed,jobs_timeout,"
      "jobs_cancelled,started,mean_wait_hours,preempted,preemptor,cost,energy_kwh,carbon_kg,"
      "user\n";
  auto quoted = [](const std::string& v) {
    if (v.find_first_of(",\"\n") == std::string::npos) return v;
    std::string q = "\"";
    for (char ch : v) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  };
  for (const auto& j : rows) {
    const UsageRow r = usage_row_from_json(j);
    auto count = [&](const char* state) {
      const auto it = r.jobs.find(state);
      return it == r.jobs.end() ? int64_t{0} : it->second;
    };
    // One line per GPU type it used (a CPU-only row has one line with no type); the row's
    // other figures are on its first line only, so that columns sum.
    std::vector<std::pair<std::string, double>> types(r.gpu_hours.begin(), r.gpu_hours.end());
    if (types.empty()) types.emplace_back("", 0.0);
    for (size_t k = 0; k < types.size(); ++k) {
      const bool first = k == 0;
      std::string cost;
      if (prices != nullptr) {
        UsageRow part;
        part.gpu_hours[types[k].first] = types[k].second;
        part.cpu_hours = first ? r.cpu_hours : 0;
        part.energy_kwh = first ? r.energy_kwh : -1;
        cost = fmt::format("{:.4f}", cost_of(part, *prices, unpriced));
      }
      // Energy and carbon on the first line (empty where unknown).
      auto known = [&](double v) {
        return first && v >= 0 ? fmt::format("{:.4f}", v) : std::string();
      };
      out += fmt::format(
          "{},{},{},{:.4f},{:.4f},{},{},{},{},{},{:.4f},{},{},{},{},{},{}\n", quoted(r.tenant),
          quoted(r.queue), quoted(types[k].first), types[k].second, first ? r.cpu_hours : 0.0,
          first ? count("succeeded") : 0, first ? count("failed") : 0, first ? count("timeout") : 0,
          first ? count("cancelled") : 0, first ? r.started : 0, first ? r.mean_wait_hours() : 0.0,
          first ? r.preempted : 0, first ? r.preemptor : 0, cost, known(r.energy_kwh),
          known(r.carbon_kg), quoted(r.user));
    }
  }
  return out;
}

}  // namespace tessera

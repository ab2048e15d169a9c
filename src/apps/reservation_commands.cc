#include "apps/reservation_commands.h"

#include <fmt/format.h>

#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "apps/client_tables.h"
#include "apps/client_util.h"
#include "model/yaml_util.h"

namespace tessera {

namespace {

constexpr const char* kWhenHelp =
    "now, +DURATION (+2h), @UNIX_SECONDS, or YYYY-MM-DD HH:MM[:SS] (local time; UTC with a "
    "trailing Z)";

int create(ApiClient& c, const ClientArgs& a) {
  const double now = now_seconds();
  const std::optional<double> start = parse_when(a.start, now);
  if (!start) throw std::runtime_error("--start '" + a.start + "': expected " + kWhenHelp);
  double end = 0;
  if (!a.duration.empty()) {
    double d = 0;
    if (!parse_duration(a.duration, d) || d <= 0) {
      throw std::runtime_error("--duration '" + a.duration + "': expected 30m, 4h, 2d, ...");
    }
    end = std::max(*start, now) + d;
  } else {
    const std::optional<double> e = parse_when(a.end, now);
    if (!e) throw std::runtime_error("--end '" + a.end + "': expected " + kWhenHelp);
    end = *e;
  }
  nlohmann::json body{{"name", a.name},  {"tenant", a.tenant}, {"gpus", a.gpus},
                      {"start", *start}, {"end", end},         {"ignore_jobs", a.ignore_jobs}};
  if (!a.user.empty()) body["user"] = a.user;
  if (!a.gpu_type.empty()) body["gpu_type"] = a.gpu_type;
  if (!a.node.empty()) body["node"] = a.node;
  const auto j = nlohmann::json::parse(
      ok_body(c.post("/v1/reservations", body.dump(), "application/json"), "reservation create"));
  if (a.json) {
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::string gpus;
  for (const auto& g : j["gpus"]) gpus += (gpus.empty() ? "" : " ") + g.get<std::string>();
  std::cout << fmt::format("reservation {}: {} GPU{} for {}{}, {} to {}: {}\n", a.name,
                           j["gpus"].size(), j["gpus"].size() == 1 ? "" : "s",
                           a.user.empty() ? "" : a.user + "@", a.tenant, local_time(j["start"]),
                           local_time(j["end"]), gpus);
  return 0;
}

}  // namespace

std::optional<double> parse_when(const std::string& text, double now) {
  if (text == "now") return now;
  if (text.size() > 1 && text[0] == '+') {
    double d = 0;
    if (!parse_duration(std::string_view(text).substr(1), d)) return std::nullopt;
    return now + d;
  }
  if (text.size() > 1 && text[0] == '@') {
    try {
      size_t used = 0;
      const double t = std::stod(text.substr(1), &used);
      if (used + 1 == text.size() && t >= 0) return t;
    } catch (const std::exception&) {
    }
    return std::nullopt;
  }
  std::string s = text;
  const bool utc = !s.empty() && (s.back() == 'Z' || s.back() == 'z');
  if (utc) s.pop_back();
  for (char& ch : s) {
    if (ch == 'T') ch = ' ';
  }
  std::tm tm{};
  const char* rest = strptime(s.c_str(), "%Y-%m-%d %H:%M", &tm);
  if (rest == nullptr) return std::nullopt;
  if (*rest == ':') rest = strptime(rest, ":%S", &tm);
  if (rest == nullptr || *rest != '\0') return std::nullopt;
  tm.tm_isdst = -1;
  const time_t t = utc ? timegm(&tm) : mktime(&tm);
  if (t == -1) return std::nullopt;
  return static_cast<double>(t);
}

std::string reservation_table(const nlohmann::json& reservations) {
  constexpr const char* kRow = "{:<16} {:<20} {:<9} {:<25} {:<25} {:>4}  {}\n";
  std::string out =
      fmt::format(kRow, "NAME", "FOR", "STATE", "START", "END", "GPUS", "BUSY (jobs not its own)");
  for (const auto& r : reservations) {
    std::string who = "(another tenant)";
    if (r["tenant"].is_string()) {
      who = r["tenant"].get<std::string>();
      if (r["user"].is_string()) who = r["user"].get<std::string>() + "@" + who;
    }
    std::string busy;
    for (const auto& id : r["busy_jobs"]) busy += (busy.empty() ? "" : ",") + id.dump();
    std::string gpus = std::to_string(r["gpus"].size());
    if (r.value("missing_gpus", 0) > 0)
      gpus += fmt::format(" ({} gone)", r["missing_gpus"].get<int>());
    out += fmt::format(kRow, fit(r["name"].get<std::string>(), 16), fit(who, 20),
                       r["state"].get<std::string>(), local_time(r["start"]), local_time(r["end"]),
                       gpus, busy.empty() ? "-" : busy);
  }
  return out;
}

void add_reservation_commands(CLI::App& app, ClientArgs& a, ClientCommands& c) {
  c.reservation = app.add_subcommand(
      "reservation",
      "GPUs set aside for a tenant or user over a time window (the admin creates and deletes "
      "them): inside it only their jobs use them; before it, only jobs whose time limit ends by "
      "its start");
  c.reservation_create = c.reservation->add_subcommand(
      "create",
      "Reserve GPUs, chosen now: packed on as few nodes as possible, none another reservation "
      "holds over the window, none another tenant's job may hold past its start (unless "
      "--ignore-jobs)");
  c.reservation_create->add_option("name", a.name, "reservation name")->required();
  c.reservation_create->add_option("--tenant", a.tenant, "the tenant it is for")->required();
  c.reservation_create->add_option("--user", a.user, "only this user of the tenant");
  c.reservation_create->add_option("--gpus", a.gpus, "how many GPUs")
      ->required()
      ->check(CLI::Range(1, 1000000));
  c.reservation_create->add_option("--gpu-type", a.gpu_type, "of this GPU type");
  c.reservation_create->add_option("--node", a.node, "on this node");
  c.reservation_create->add_option("--start", a.start, std::string("when it begins: ") + kWhenHelp)
      ->default_str("now");
  auto* end =
      c.reservation_create->add_option("--end", a.end, std::string("when it ends: ") + kWhenHelp);
  auto* duration =
      c.reservation_create->add_option("--duration", a.duration, "how long it lasts (4h, 2d)");
  end->excludes(duration);
  c.reservation_create->callback([&a] {
    if (a.end.empty() && a.duration.empty()) throw CLI::ValidationError("give --end or --duration");
  });
  c.reservation_create->add_flag(
      "--ignore-jobs", a.ignore_jobs,
      "also reserve GPUs that running jobs may hold past the start (they join as those end)");
  c.reservation_create->add_flag("--json", a.json, "print JSON");
  c.reservation_list = c.reservation->add_subcommand(
      "list", "List reservations: upcoming, active and ended (other tenants' without names)");
  c.reservation_list->add_flag("--json", a.json, "print JSON");
  c.reservation_delete =
      c.reservation->add_subcommand("delete", "Delete a reservation: its GPUs are everyone's");
  c.reservation_delete->add_option("name", a.name, "reservation name")->required();
  c.reservation->require_subcommand(1);
}

int run_reservation_command(const ClientCommands& c, ApiClient& client, const ClientArgs& a) {
  if (*c.reservation_create) return create(client, a);
  if (*c.reservation_list) {
    return print_list(client, a, "/v1/reservations", "reservations", "reservation list",
                      reservation_table);
  }
  if (*c.reservation_delete) {
    ok_body(client.del("/v1/reservations/" + query_escape(a.name)), "reservation delete");
    std::cout << "reservation " << a.name << ": deleted\n";
    return 0;
  }
  return -1;
}

}  // namespace tessera

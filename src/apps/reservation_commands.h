// `tessera reservation create|list|delete`: GPUs set aside for a tenant or user over a time
// window, as Slurm's `scontrol create reservation` (POST/GET/DELETE /v1/reservations).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "api/client.h"
#include "apps/service_commands.h"

namespace tessera {

// Adds `reservation` and its subcommands to `app` (into c.reservation*).
void add_reservation_commands(CLI::App& app, ClientArgs& a, ClientCommands& c);
// Runs the reservation subcommand that was given.
int run_reservation_command(const ClientCommands& c, ApiClient& client, const ClientArgs& a);

// A time as the commands take it, in unix seconds: "now", "+2h" (from now; any duration
// parse_duration takes), "@1764417600" (unix seconds), or "2026-11-29 14:00[:SS]" (also with
// a 'T'), in the local time zone, or UTC with a trailing 'Z'. nullopt when it is none of these.
std::optional<double> parse_when(const std::string& text, double now);

// `tessera reservation list`: NAME TENANT STATE START END GPUS BUSY (jobs not its own on its
// GPUs).
std::string reservation_table(const nlohmann::json& reservations);

}  // namespace tessera

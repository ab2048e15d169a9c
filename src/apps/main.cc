// tessera: the command-line entry point. Each subcommand lives in its own file.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "apps/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Tessera: a multi-tenant scheduler for GPU clusters"};
  app.require_subcommand(0, 1);
  tessera::SimulateArgs sim;
  CLI::App* simulate = tessera::add_simulate_command(app, sim);
  tessera::BenchArgs bench;
  CLI::App* bench_cmd = tessera::add_bench_command(app, bench);
  CLI11_PARSE(app, argc, argv);
  try {
    if (*bench_cmd) return tessera::run_bench(bench);
    if (*simulate || app.get_subcommands().empty()) return tessera::run_simulate(sim);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera: error: %s\n", e.what());
    return 2;
  }
  return 0;
}

// tessera: the command-line entry point. Each subcommand lives in its own file.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string_view>

#include "apps/advise_command.h"
#include "apps/classify_command.h"
#include "apps/colocate_command.h"
#include "apps/command_line.h"
#include "apps/commands.h"
#include "apps/edge_command.h"
#include "apps/forecast_command.h"
#include "apps/frag_command.h"
#include "apps/gpu_commands.h"
#include "apps/kube_command.h"
#include "apps/predict_command.h"
#include "apps/report_command.h"
#include "apps/service_commands.h"

namespace {

// Overwrites the values of secret flags in argv once they are parsed: /proc/PID/cmdline shows
// argv's memory to every user of the host, jobs included (a job read the
// admin token from the server's command line). The flags still work; ps shows "xxxx".
void scrub_secret_args(int argc, char** argv) {
  constexpr std::string_view kSecret[] = {"--admin-token", "--metrics-token", "--token"};
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    for (const std::string_view flag : kSecret) {
      char* value = nullptr;
      if (arg == flag && i + 1 < argc) {
        value = argv[i + 1];
      } else if (arg.size() > flag.size() && arg.substr(0, flag.size()) == flag &&
                 arg[flag.size()] == '=') {
        value = argv[i] + flag.size() + 1;
      }
      if (value != nullptr) std::memset(value, 'x', std::strlen(value));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tessera: a multi-tenant scheduler for GPU clusters", "tessera"};
  tessera::prepare_app(app);
  app.require_subcommand(0, 1);
  tessera::SimulateArgs sim;
  CLI::App* simulate = tessera::add_simulate_command(app, sim);
  tessera::BenchArgs bench;
  CLI::App* bench_cmd = tessera::add_bench_command(app, bench);
  tessera::FragArgs frag;
  CLI::App* frag_cmd = tessera::add_frag_command(app, frag);
  tessera::EdgeArgs edge;
  CLI::App* edge_cmd = tessera::add_edge_command(app, edge);
  tessera::ColocateArgs colocate;
  CLI::App* colocate_cmd = tessera::add_colocate_command(app, colocate);
  tessera::GpusArgs gpus;
  CLI::App* gpus_cmd = tessera::add_gpus_command(app, gpus);
  tessera::ProfileArgs profile;
  CLI::App* profile_cmd = tessera::add_profile_command(app, profile);
  tessera::AdviseArgs advise;
  CLI::App* advise_cmd = tessera::add_advise_command(app, advise);
  tessera::PredictArgs predict;
  CLI::App* predict_cmd = tessera::add_predict_command(app, predict);
  tessera::ClassifyArgs classify;
  CLI::App* classify_cmd = tessera::add_classify_command(app, classify);
  tessera::ReportArgs report;
  CLI::App* report_cmd = tessera::add_report_command(app, report);
  tessera::ForecastArgs forecast;
  CLI::App* forecast_cmd = tessera::add_forecast_command(app, forecast);
  tessera::ServeArgs serve;
  CLI::App* serve_cmd = tessera::add_serve_command(app, serve);
  tessera::KubeArgs kube;
  CLI::App* kube_cmd = tessera::add_kube_command(app, kube);
  tessera::ClientArgs client;
  const tessera::ClientCommands client_cmds = tessera::add_client_commands(app, client);
  if (const std::optional<int> done = tessera::parse_command_line(app, argc, argv)) return *done;
  scrub_secret_args(argc, argv);
  try {
    if (*serve_cmd) return tessera::run_serve(serve);
    if (*kube_cmd) return tessera::run_kube(kube);
    if (const int rc = tessera::run_client_command(client_cmds, client); rc >= 0) return rc;
    if (*bench_cmd) return tessera::run_bench(bench);
    if (*report_cmd) return tessera::run_report(report);
    if (*forecast_cmd) return tessera::run_forecast(forecast);
    if (*advise_cmd) return tessera::run_advise(advise);
    if (*predict_cmd) return tessera::run_predict(predict);
    if (*classify_cmd) return tessera::run_classify(classify);
    if (*gpus_cmd) return tessera::run_gpus(gpus);
    if (*profile_cmd) return tessera::run_profile(profile);
    if (*colocate_cmd) return tessera::run_colocate(colocate);
    if (*frag_cmd) return tessera::run_frag_command(frag);
    if (*edge_cmd) return tessera::run_edge_command(edge);
    if (*simulate) return tessera::run_simulate(sim);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera: error: %s\n", e.what());
    return tessera::kErrorExit;
  }
  return 0;
}

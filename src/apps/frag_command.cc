#include "apps/frag_command.h"
#include "apps/progress_line.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "engine/frag.h"
#include "sim/alibaba_reader.h"
#include "sim/frag_experiment.h"

namespace tessera {

namespace {

#ifdef TESSERA_SHARED_DATA
const char* const kDataDir = TESSERA_SHARED_DATA "/alibaba-gpu-2023";
#else
const char* const kDataDir = "../shared/data/alibaba-gpu-2023";
#endif

// An explicit path, or the shared data's default file when the data directory exists.
std::string input_or_default(const std::string& given, const char* file, const char* flag) {
  if (!given.empty()) return given;
  const std::filesystem::path p = std::filesystem::path(kDataDir) / file;
  if (std::filesystem::exists(p)) return p.string();
  throw std::invalid_argument(fmt::format("{} is required ({} not found)", flag, p.string()));
}

}  // namespace

CLI::App* add_frag_command(CLI::App& app, FragArgs& a) {
  CLI::App* f = app.add_subcommand(
      "frag", "FGD capacity experiment: allocation and fragmentation vs arrived GPU demand");
  f->add_option("--nodes", a.nodes, "node list CSV (default: the shared gpu_node list)");
  f->add_option("--pods", a.pods, "pod list CSV (default: the shared openb_pod_list_default)");
  std::string names;
  for (const auto& n : frag::placer_names()) names += (names.empty() ? "" : ", ") + n;
  f->add_option("--policy", a.policy, "placement policy: " + names);
  f->add_option("--seeds", a.seeds, "number of seeds (first, first+1, ...)")
      ->check(CLI::Range(1, 1000));
  f->add_option("--first-seed", a.first_seed, "first seed (the paper used 42)");
  f->add_option("--inflate", a.inflate, "arrived GPU demand at the end / capacity")
      ->check(CLI::Range(0.01, 10.0));
  f->add_option("--json", a.json_out, "write the curve as JSON here");
  f->add_flag("--quiet", a.quiet, "no table on stdout");
  return f;
}

int run_frag_command(const FragArgs& a) {
  frag::make_placer(a.policy);  // an unknown policy is an error before any file is read
  const std::string nodes_path =
      input_or_default(a.nodes, "openb_node_list_gpu_node.csv", "--nodes");
  const std::string pods_path = input_or_default(a.pods, "openb_pod_list_default.csv", "--pods");
  const AlibabaCluster cluster = read_alibaba_nodes(nodes_path);
  const AlibabaPods pods = read_alibaba_pods(pods_path, cluster);
  FragOptions opt;
  opt.policy = a.policy;
  opt.seeds = a.seeds;
  opt.first_seed = static_cast<uint64_t>(a.first_seed);
  opt.inflate = a.inflate;
  const auto t0 = std::chrono::steady_clock::now();
  FragResult r;
  {
    ProgressLine progress("frag");  // cleared before the results are printed
    opt.progress = progress.callback();
    r = run_frag(cluster, pods, opt);
  }
  r.nodes = nodes_path;
  r.pods = pods_path;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!a.json_out.empty()) {
    std::ofstream out(a.json_out);
    if (!out) throw std::runtime_error(a.json_out + ": cannot write");
    write_frag_json(r, out);
  }
  if (!a.quiet) {
    size_t failed = 0, arrived = 0;
    for (const auto& run : r.runs) {
      failed += run.pods_failed;
      arrived += run.pods_arrived;
    }
    std::cout << fmt::format(
        "{}: {} nodes, {} GPUs, {} pods in {}, {} target shapes, {} seed(s), {:.2f} s\n", r.policy,
        cluster.nodes.size(), r.total_gpus, pods.pods.size(), pods_path, r.target_shapes,
        r.seeds.size(), secs);
    std::cout << fmt::format("{:>8} {:>12} {:>12}\n", "arrived%", "allocated%", "frag ratio%");
    for (size_t b = 10; b < r.curve.size(); b += 10) {
      const FragPoint& p = r.curve[b];
      std::cout << fmt::format("{:>8} {:>12.2f} {:>12.2f}\n", p.arrived_pct, p.allocated_pct,
                               p.frag_ratio_pct);
    }
    if ((r.curve.size() - 1) % 10 != 0) {
      const FragPoint& p = r.curve.back();
      std::cout << fmt::format("{:>8} {:>12.2f} {:>12.2f}\n", p.arrived_pct, p.allocated_pct,
                               p.frag_ratio_pct);
    }
    std::cout << fmt::format("pods failed: {} of {} arrivals (all seeds)\n", failed, arrived);
  }
  return 0;
}

}  // namespace tessera

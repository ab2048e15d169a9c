// Subcommands of the tessera CLI.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "apps/energy_options.h"
#include "apps/goodput_options.h"

namespace tessera {

struct SimulateArgs {
  std::string workload;  // empty: the embedded default workload
  std::string format;    // empty: guessed from the file
  std::string cluster;   // empty: the default cluster
  std::string policy = "fifo";
  uint64_t seed = 1;
  std::string json_out, events_out;
  std::string report_out;  // --report: the HTML page of this run (tessera report)
  std::string data_dir;    // measured data (Pollux profiles, Gavel throughputs)
  double tick = 60;
  std::string backfill;  // empty: the policy's default
  bool no_preemption = false;
  bool elastic = false;            // resize elastic gangs (Policy::elastic)
  bool hetero = false;             // heterogeneity-aware placement (Policy::heterogeneity)
  double rounds = 0;               // round-based scheduling, round length (s); 0: off
  double round_stay = 4;           // SimOptions::round_stay_factor
  size_t round_lp_jobs = 0;        // SimOptions::round_lp_jobs (0: all)
  GoodputArgs goodput;             // --policy goodput
  bool reserve_inference = false;  // SimOptions::reserve_inference
  // Data staging (docs/data.md): Pollux applications' datasets, cache eviction, locality,
  // pre-staging (SimOptions::data_*).
  bool pollux_datasets = false;
  std::string cache_eviction = "lru";
  bool data_locality = false;
  double locality_wait = 0;
  bool prestage = false;
  double prestage_gbs = 0;
  int prestage_jobs = 4;
  bool residency = false;            // --residency (SimOptions::residency)
  double mtbf_hours = 0;             // per node; 0: no generated failures
  double mttr_minutes = 30;          // mean repair time of generated failures
  std::string failures;              // failure list CSV (time,node,repair_seconds)
  std::string recovery = "requeue";  // what failed jobs do: requeue|in-place|q-learning
  bool no_comm_model = false;        // --no-comm-model: measured speeds only
  size_t max_jobs = 0;
  bool skip_impossible = false;  // skip (and report) jobs that can never run, instead of failing
  bool quiet = false;
  std::string queues;            // queue tree YAML; empty: one equal queue per tenant
  double checkpoint_grace = -1;  // < 0: the queue tree's, else 30 s
  // The restart model (sim/restart_model.h): --restart-overhead, --checkpoint-gb,
  // --restore-bandwidth, --checkpoint-bytes-per-param.
  double restart_overhead = 0, checkpoint_gb = 0, restore_gbps = 1, bytes_per_param = 14;
  double series_interval = 3600;      // share-vs-entitlement series buckets; 0: none
  std::vector<std::string> why;       // job names whose history to print (and put in --json)
  std::string predictor = "none";     // duration predictor: none|mean|quantile|gbt
  bool keep_trace_estimates = false;  // with a predictor: jobs with a trace estimate keep it
  std::string classify = "none";      // classifier for unlabelled jobs' class
  EnergyArgs energy;                  // power model settings and policies (apps/energy_options)
};
CLI::App* add_simulate_command(CLI::App& app, SimulateArgs& args);
int run_simulate(const SimulateArgs& args);

struct BenchArgs {
  int nodes = 5000;
  int gpus_per_node = 8;
  int pending = 10000;
  int gang = 1;
  std::string policy = "fifo+bestfit";
  int repeat = 3;
};
CLI::App* add_bench_command(CLI::App& app, BenchArgs& args);
int run_bench(const BenchArgs& args);

}  // namespace tessera

// tessera simulate: replay a workload on a cluster through the engine and report metrics.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include "apps/command_line.h"
#include "apps/commands.h"
#include "apps/data_dir.h"
#include "apps/goodput_options.h"
#include "apps/json_file.h"
#include "apps/progress_line.h"
#include "apps/provenance.h"
#include "apps/report_command.h"
#include "engine/admission.h"
#include "engine/policy.h"
#include "insight/runtime_predictor.h"
#include "insight/workload_classifier.h"
#include "insight/zeus_curves.h"
#include "model/carbon_intensity.h"
#include "model/cluster_spec.h"
#include "model/input_error.h"
#include "model/queue_tree.h"
#include "sim/classification_eval.h"
#include "sim/comm_execution_model.h"
#include "sim/execution_model.h"
#include "sim/failure_model.h"
#include "sim/generator.h"
#include "sim/pollux_profile.h"
#include "sim/recovery_policy.h"
#include "sim/result_metrics.h"
#include "sim/simulator.h"
#include "sim/trace_readers.h"

#ifndef TESSERA_SHARED_DATA
#define TESSERA_SHARED_DATA "../shared/data"
#endif

namespace tessera {

CLI::App* add_simulate_command(CLI::App& app, SimulateArgs& a) {
  CLI::App* s = app.add_subcommand(
      "simulate", "Replay a workload trace through the scheduler (default: embedded workload)");
  CLI::Option* workload =
      s->add_option("--workload", a.workload,
                    "workload trace (default: embedded synthetic workload); a JSONL job's work is "
                    "in V100-seconds (seconds on V100s) unless its work_on names the GPU type it "
                    "was timed on (docs/traces.md)");
  s->add_option("--format", a.format, "trace format (default: guessed from the file)")
      ->check(CLI::IsMember({"pollux", "philly", "tiresias", "alibaba", "jsonl"}))
      ->needs(workload);
  s->add_option(
      "--cluster", a.cluster,
      "cluster: YAML, Alibaba node CSV or Tiresias spec CSV (default: 16 nodes x 4 V100)");
  s->add_option("--policy", a.policy,
                "queue order (fifo|drf|las|sjf|fair|qssf), optionally +placement "
                "(bestfit|spread|topology|random), e.g. las+topology");
  s->add_option("--seed", a.seed, "random seed (policies and the embedded workload)")
      ->check(non_negative_number());
  s->add_option("--json", a.json_out, "write metrics as JSON to this file");
  s->add_option("--report", a.report_out,
                "write this run's HTML report (tables and plots, opens offline; as tessera "
                "report) to this file");
  s->add_option("--events", a.events_out, "write the event log (JSON lines) to this file");
  s->add_option("--data-dir", a.data_dir,
                "measured data: Pollux profiles, Gavel throughputs (default: $TESSERA_DATA or "
                "../shared/data)");
  s->add_option("--tick", a.tick, "seconds between re-evaluations for time-dependent orders (las)")
      ->check(positive_number());
  s->add_option("--backfill", a.backfill, "backfill (default: the policy's own)")
      ->check(CLI::IsMember({"none", "easy", "greedy"}));
  s->add_flag("--no-preemption", a.no_preemption, "never preempt running jobs");
  CLI::Option* mtbf =
      s->add_option("--mtbf", a.mtbf_hours,
                    "inject node failures: mean hours between failures of each node (seeded by "
                    "--seed; 0: none)")
          ->check(non_negative_number());
  s->add_option("--mttr", a.mttr_minutes, "mean minutes to repair a failed node (with --mtbf)")
      ->check(positive_number())
      ->needs(mtbf);
  s->add_option("--failures", a.failures,
                "inject the node failures of a CSV list: time,node,repair_seconds");
  s->add_option("--recovery", a.recovery,
                "jobs a node failure stopped: requeue, in-place (restart at once in place of the "
                "lost members, same rack first) or q-learning (learns which)")
      ->check(CLI::IsMember({"requeue", "in-place", "q-learning"}));
  s->add_flag("--pollux-datasets", a.pollux_datasets,
              "jobs of Pollux's applications read their published datasets (imagenet, cifar10, "
              "librispeech, movielens, squad, coco; docs/data.md)");
  s->add_option("--cache-eviction", a.cache_eviction,
                "storage tiers: which dataset copies caches evict first: lru, or queue (those no "
                "waiting or running job wants, then lru)")
      ->capture_default_str()
      ->check(CLI::IsMember({"lru", "queue"}));
  s->add_flag("--data-locality", a.data_locality,
              "place a job on nodes holding its dataset when it fits there (docs/data.md)");
  s->add_option("--locality-wait", a.locality_wait,
                "with --data-locality: a job waits up to this many seconds for room on nodes "
                "holding its dataset before it starts elsewhere (delay scheduling)")
      ->check(CLI::Range(0.0, 86400.0 * 30));
  s->add_flag("--prestage", a.prestage,
              "copy waiting jobs' datasets towards the nodes they are expected to get");
  s->add_option("--prestage-gbs", a.prestage_gbs,
                "with --prestage: the object-store bandwidth (GB/s) pre-staging may use in all")
      ->check(CLI::Range(0.0, 1e6));
  s->add_flag("--residency", a.residency,
              "with --prestage: give every node a home dataset, by the GPUs waiting and running "
              "jobs want of each, kept on its NVMe against eviction and pre-staged when idle");
  s->add_option("--prestage-jobs", a.prestage_jobs,
                "with --prestage: how many of the first waiting jobs are pre-staged for")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  s->add_flag("--reserve-inference", a.reserve_inference,
              "hold GPUs back for inference-critical arrivals, forecast by Holt-Winters");
  s->add_flag("--hetero", a.hetero,
              "heterogeneity-aware placement: jobs that gain most from fast GPU types get them "
              "first (Gavel's measured per-type throughputs)");
  s->add_option("--rounds", a.rounds,
                "round-based scheduling as Gavel's (docs/heterogeneity.md): every this many "
                "seconds a max-min fairness LP gives jobs time shares of each GPU type (with "
                "--hetero weighed by their throughput there) and a round plan decides who runs "
                "where, suspending or moving running jobs; jobs start at round boundaries only")
      ->check(CLI::Range(1.0, 86400.0));
  add_goodput_options(*s, a.goodput);
  s->add_option("--round-lp-jobs", a.round_lp_jobs,
                "with --rounds: at most this many jobs enter a round's LP (the running ones, then "
                "the least-served waiting ones; the rest wait that round); default: all");
  s->add_option("--round-stay", a.round_stay,
                "with --rounds: a running job's claim on its GPU type counts this many times "
                "before a round moves or suspends it (1: Gavel's rule)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1000.0));
  s->add_flag("--elastic", a.elastic,
              "elastic gangs (min_members < max_members) shrink before anyone is preempted and "
              "grow into idle GPUs");
  s->add_flag("--no-comm-model", a.no_comm_model,
              "do not add the all-reduce time of placements crossing racks or spines "
              "(docs/execution-model.md)");
  s->add_option("--max-jobs", a.max_jobs, "read at most this many jobs from the trace (0: all)")
      ->needs(workload);
  s->add_flag("--skip-impossible", a.skip_impossible,
              "skip each job that can never run on this cluster (e.g. more GPUs of its types "
              "than there are), naming it on stderr and in --json, instead of failing");
  s->add_flag("--quiet", a.quiet, "do not print the summary table");
  s->add_option("--queues", a.queues,
                "queue tree YAML: weights, guarantees, borrowing limits, priority classes "
                "(default: one equal queue per tenant)");
  s->add_option("--checkpoint-grace", a.checkpoint_grace,
                "seconds a preempted job has to checkpoint before its GPUs are handed over "
                "(default: the queue tree's, else 30)");
  s->add_option("--restart-overhead", a.restart_overhead,
                "seconds a job restarted after a preemption spends re-initialising (processes, "
                "NCCL, data loader, warm-up) before it makes progress again (default 0; "
                "docs/fairness.md cites measurements)")
      ->check(non_negative_number());
  s->add_option("--checkpoint-gb", a.checkpoint_gb,
                "checkpoint size read back at a restart after a preemption, for jobs whose trace "
                "does not give their model's size (default 0: none)")
      ->check(non_negative_number());
  s->add_option("--restore-bandwidth", a.restore_gbps,
                "GB/s a restarted job reads its checkpoint at, per node it runs on (default 1)")
      ->check(CLI::PositiveNumber);
  s->add_option("--checkpoint-bytes-per-param", a.bytes_per_param,
                "checkpoint bytes per model parameter where the trace gives the model's size "
                "(default 14: bf16 weights, fp32 master weights, Adam's two moments)")
      ->check(CLI::PositiveNumber);
  s->add_option("--series-interval", a.series_interval,
                "seconds per bucket of the share-vs-entitlement series in --json (0: none)")
      ->check(non_negative_number());
  s->add_option("--why", a.why,
                "print this job's history: every pending reason (which quota or fairness rule "
                "holds it), start, preemption and finish (repeatable; also in --json)");
  CLI::Option* predictor =
      s->add_option("--predictor", a.predictor,
                    "duration predictor for sjf/qssf and backfill: none (the trace's estimates), "
                    "mean, quantile, gbt (learnt online from finished jobs; docs/prediction.md)")
          ->check(CLI::IsMember({"none", "mean", "quantile", "gbt"}));
  s->add_flag("--keep-trace-estimates", a.keep_trace_estimates,
              "with --predictor: jobs whose trace gives a duration estimate keep it")
      ->needs(predictor);
  s->add_option("--classify", a.classify,
                "give jobs that name no priority class the class their predicted kind implies: "
                "none, logistic, threshold, majority (learnt online from the labelled jobs "
                "finished before each submission; docs/classifier.md)")
      ->check(CLI::IsMember({"none", "logistic", "threshold", "majority"}));
  add_energy_options(*s, a.energy);
  return s;
}

namespace {

std::string data_dir(const SimulateArgs& a) {
  return data_dir_or_default(a.data_dir);
}

Cluster default_cluster() {
  return make_uniform_cluster(1, 4, 4, 4, "V100");
}

struct SkippedJob {
  std::string name, source, reason;
};

// Takes the jobs that can never run on `cluster` out of `w`, with why, so that a replay of a
// trace recorded elsewhere can go on without them; tenants left without jobs go too, so that
// no metric lists what was not simulated. Without `skip`, the first such job is an error.
std::vector<SkippedJob> remove_impossible_jobs(Workload& w, const Cluster& cluster, bool skip) {
  std::vector<SkippedJob> skipped;
  std::vector<bool> impossible(w.jobs.size(), false);
  for (size_t k = 0; k < w.jobs.size(); ++k) {
    const JobSpec& job = w.jobs[k];
    std::optional<std::string> why = infeasible_reason(cluster, job);
    if (!why) continue;
    if (!skip) {
      throw InputError(job.source + ": job " + job.name + " can never run on this cluster: " +
                       *why + " (--skip-impossible skips such jobs and reports them)");
    }
    impossible[k] = true;
    skipped.push_back({job.name, job.source, std::move(*why)});
  }
  if (skipped.empty()) return skipped;
  std::vector<JobSpec> kept;
  kept.reserve(w.jobs.size() - skipped.size());
  for (size_t k = 0; k < w.jobs.size(); ++k) {
    if (!impossible[k]) kept.push_back(std::move(w.jobs[k]));
  }
  std::vector<bool> has_jobs(w.tenants.size(), false);
  for (const JobSpec& j : kept) has_jobs[j.tenant] = true;
  Interner tenants;
  std::vector<TenantId> renamed(w.tenants.size(), 0);
  for (TenantId t = 0; t < w.tenants.size(); ++t) {
    if (has_jobs[t]) renamed[t] = tenants.intern(w.tenants.name(t));
  }
  for (JobSpec& j : kept) j.tenant = renamed[j.tenant];
  w.jobs = std::move(kept);
  w.tenants = std::move(tenants);
  return skipped;
}

}  // namespace

int run_simulate(const SimulateArgs& a) {
  // Parse the policy first: a typo should fail before any trace is read.
  Policy policy = make_policy(a.policy, a.seed);
  if (!a.backfill.empty()) {
    if (a.backfill == "none") {
      policy.backfill = Backfill::kNone;
    } else if (a.backfill == "easy") {
      policy.backfill = Backfill::kEasy;
    } else if (a.backfill == "greedy") {
      policy.backfill = Backfill::kGreedy;
    } else {
      throw std::invalid_argument("--backfill: expected none, easy or greedy, got '" + a.backfill +
                                  "'");
    }
  }
  if (a.no_preemption) policy.preemption = false;
  if (a.elastic) policy.elastic = true;
  if (a.hetero) policy.heterogeneity = true;
  std::unique_ptr<RuntimePredictor> predictor;
  if (a.predictor != "none") {
    predictor = make_runtime_predictor(a.predictor);
    if (!predictor) {
      throw std::invalid_argument("--predictor: expected none, mean, quantile or gbt, got '" +
                                  a.predictor + "'");
    }
  }

  const Cluster cluster = a.cluster.empty() ? default_cluster() : load_cluster(a.cluster);
  // How this result is produced, recorded in --json.
  nlohmann::ordered_json run;
  run["command"] = "simulate";
  run["tessera"] = build_identity();
  Workload w;
  std::string source;
  if (a.workload.empty()) {
    GeneratorOptions g;
    g.seed = a.seed;
    w = generate_workload(g);
    source = fmt::format("embedded(seed={})", a.seed);
    run["workload"] = {{"embedded", {{"jobs", g.jobs}, {"tenants", g.tenants}, {"seed", g.seed}}}};
  } else {
    const TraceFormat f = trace_format_for(a.workload, a.format);
    ReaderOptions ro;
    ro.gpu_types = &cluster.gpu_types();
    ro.max_jobs = a.max_jobs;
    w = read_workload(a.workload, f, ro);
    source = a.workload;
    run["workload"] = file_identity(a.workload);
    run["workload"]["format"] = std::string(to_string(f));
    run["workload"]["max_jobs"] = a.max_jobs;
  }
  run["cluster"] = a.cluster.empty() ? nlohmann::ordered_json{{"default", "16 nodes x 4 V100"}}
                                     : file_identity(a.cluster);
  // Before anything counts or labels jobs, so that options, classes and metrics see only the
  // jobs that run.
  const size_t jobs_read = w.jobs.size();
  const std::vector<SkippedJob> skipped = remove_impossible_jobs(w, cluster, a.skip_impossible);
  for (const SkippedJob& j : skipped) {
    std::cerr << "tessera: skipped " << j.source << ": job " << j.name
              << " can never run on this cluster: " << j.reason << "\n";
  }
  if (!skipped.empty()) {
    std::cerr << "tessera: --skip-impossible skipped " << skipped.size() << " of " << jobs_read
              << " jobs of " << source << "\n";
  }
  if (!skipped.empty() && w.jobs.empty()) {
    throw InputError("no job of " + source +
                     " can run on this cluster (--skip-impossible skipped all " +
                     std::to_string(jobs_read) + ")");
  }
  run["queues"] = a.queues.empty()
                      ? nlohmann::ordered_json{{"default", "one equal queue per tenant"}}
                      : file_identity(a.queues);
  // Options that cannot apply to this input say so rather than do nothing (defect 7).
  std::vector<std::string> warnings;
  const auto any_job = [&](auto&& pred) { return std::any_of(w.jobs.begin(), w.jobs.end(), pred); };
  if (a.elastic && !any_job([](const JobSpec& j) { return j.min_members < j.max_members; })) {
    warnings.push_back("--elastic has no effect: no job of " + source +
                       " is elastic (min_members < max_members)");
  }
  if (a.hetero && std::popcount(cluster.present_types()) < 2) {
    warnings.push_back("--hetero has no effect: the cluster has one GPU type");
  }
  if (a.reserve_inference &&
      !any_job([](const JobSpec& j) { return j.priority == PriorityClass::kInferenceCritical; })) {
    warnings.push_back("--reserve-inference has no effect: no job of " + source +
                       " is inference-critical");
  }
  if (a.pollux_datasets) {
    for (JobSpec& j : w.jobs) {
      if (j.model == kNoId || j.dataset != kNoId) continue;
      const std::string_view name = dataset_of_application(w.models.name(j.model));
      if (!name.empty()) j.dataset = w.add_dataset(*known_dataset(name));
    }
  }
  const bool datasets = any_job([](const JobSpec& j) { return j.dataset != kNoId; });
  const bool data_options = a.data_locality || a.prestage || a.locality_wait > 0 ||
                            a.prestage_gbs > 0 || a.cache_eviction != "lru";
  if (data_options && !cluster.storage().present) {
    warnings.push_back(
        "--data-locality, --locality-wait, --prestage* and --cache-eviction have "
        "no effect: the cluster declares no storage tiers (storage: in its YAML; "
        "docs/data.md)");
  } else if (data_options && !datasets) {
    warnings.push_back(
        "--data-locality, --locality-wait, --prestage* and --cache-eviction have "
        "no effect: no job of " +
        source + " names a dataset");
  }
  if (cluster.storage().present && !datasets) {
    warnings.push_back("the cluster's storage tiers have no effect: no job of " + source +
                       " names a dataset (dataset in JSONL, or --pollux-datasets)");
  }
  if (a.locality_wait > 0 && !a.data_locality) {
    warnings.push_back("--locality-wait has no effect without --data-locality");
  }
  if (a.residency && !a.prestage) {
    throw CLI::ValidationError("--residency",
                               "--residency copies home datasets with pre-staging's bandwidth: "
                               "give --prestage and --prestage-gbs too");
  }
  if (a.prestage != (a.prestage_gbs > 0)) {
    throw CLI::ValidationError("--prestage",
                               "--prestage and --prestage-gbs go together (how much of the object "
                               "store's bandwidth pre-staging may use)");
  }
  if (a.keep_trace_estimates && a.predictor == "none") {
    warnings.push_back("--keep-trace-estimates has no effect with --predictor none");
  }
  if (a.mtbf_hours == 0 && a.recovery != "requeue" && a.failures.empty()) {
    warnings.push_back("--recovery " + a.recovery +
                       " has no effect: no node fails (give --mtbf or --failures)");
  }
  {
    // Edge fields (docs/edge.md) need sites; one cluster has none.
    size_t edge_jobs = 0;
    for (const JobSpec& j : w.jobs) edge_jobs += (j.service != kNoId || !j.site.empty()) ? 1 : 0;
    if (edge_jobs > 0) {
      warnings.push_back(std::to_string(edge_jobs) +
                         " job(s) name a service or a site, which only `tessera edge` uses "
                         "(docs/edge.md): here they run as plain jobs");
    }
  }
  for (const std::string& text : warnings) warn(text);
  // Warnings found after the first were printed: printed now and recorded with them.
  const auto late_warning = [&](const std::string& text) {
    warn(text);
    warnings.push_back(text);
  };
  QueueTree queues = a.queues.empty() ? QueueTree::flat(w.tenants) : load_queue_tree(a.queues);
  if (!a.queues.empty()) {
    queues.bind(w.tenants, source);
    queues.validate_against(cluster);
  }
  // Before the queues' defaults, which fill only what is still unlabelled; a class the trace
  // gives always wins.
  nlohmann::ordered_json classified;
  if (a.classify != "none") {
    auto classifier = make_workload_classifier(a.classify);
    const ClassifiedDefaults d =
        apply_classified_defaults(w, *classifier, a.queues.empty() ? nullptr : &queues);
    if (d.classified + d.kept_queue_default == 0) {
      warn("--classify has no effect: every job of " + source + " names its priority class");
    }
    if (d.labelled == 0 && d.classified > 0) {
      // Nothing to learn from: every answer is the untrained fallback.
      warn("--classify: no job of " + source +
           " names its priority class, so the classifier learns nothing (every answer is its "
           "untrained fallback)");
    }
    classified = {{"classifier", a.classify},
                  {"labelled", d.labelled},
                  {"classified", d.classified},
                  {"kept_queue_default", d.kept_queue_default}};
    for (size_t k = 0; k < kWorkloadKinds; ++k) {
      classified["kinds"][std::string(to_string(static_cast<WorkloadKind>(k)))] = d.kinds[k];
    }
  }
  if (!a.queues.empty()) apply_queue_defaults(queues, w);
  std::unique_ptr<ExecutionModel> model = make_measured_execution_model(data_dir(a));
  if (!a.no_comm_model) model = make_comm_execution_model(std::move(model), data_dir(a));
  for (JobSpec& job : w.jobs) model->prepare(job, w, cluster);

  std::ofstream events;
  SimOptions opt;
  opt.tick_seconds = a.tick;
  opt.queues = &queues;
  opt.series_interval = a.series_interval;
  opt.predictor = predictor.get();
  opt.keep_trace_estimates = a.keep_trace_estimates;
  if (a.checkpoint_grace >= 0) {
    opt.checkpoint_grace = a.checkpoint_grace;
  } else if (queues.settings().checkpoint_grace_seconds >= 0) {
    opt.checkpoint_grace = queues.settings().checkpoint_grace_seconds;
  }
  opt.restart.overhead_seconds = a.restart_overhead;
  opt.restart.default_checkpoint_gb = a.checkpoint_gb;
  opt.restart.restore_gbps_per_node = a.restore_gbps;
  opt.restart.bytes_per_param = a.bytes_per_param;
  if (!a.events_out.empty()) {
    events.open(a.events_out);
    if (!events) throw std::runtime_error("cannot write " + a.events_out);
    opt.events = &events;
  }
  for (const std::string& name : a.why) {
    const auto it = std::find_if(w.jobs.begin(), w.jobs.end(),
                                 [&](const JobSpec& j) { return j.name == name; });
    if (it == w.jobs.end()) {
      const bool was_skipped = std::any_of(skipped.begin(), skipped.end(),
                                           [&](const SkippedJob& j) { return j.name == name; });
      throw std::invalid_argument(
          "--why: " + (was_skipped
                           ? "job '" + name + "' was skipped: it can never run on this cluster"
                           : "no job named '" + name + "' in " + source));
    }
    opt.explain.push_back(static_cast<JobId>(it - w.jobs.begin()));
  }
  opt.reserve_inference = a.reserve_inference;
  opt.data_eviction =
      a.cache_eviction == "queue" ? CacheEviction::kQueueAware : CacheEviction::kLru;
  opt.data_locality = a.data_locality;
  opt.locality_wait = a.locality_wait;
  opt.prestage = a.prestage;
  opt.prestage_gbs = a.prestage_gbs;
  opt.prestage_jobs = a.prestage_jobs;
  opt.residency = a.residency;
  const std::unique_ptr<RecoveryPolicy> recovery = make_recovery_policy(a.recovery);
  if (!recovery) {
    throw std::invalid_argument("--recovery: unknown policy '" + a.recovery +
                                "' (requeue, in-place, q-learning)");
  }
  opt.recovery = recovery.get();
  if (!a.failures.empty()) opt.failures = read_failure_list(a.failures, cluster);
  if (a.mtbf_hours > 0 && !w.jobs.empty()) {
    // Failures over the submissions plus a month: the run stops once every job is done.
    const double start = w.jobs.front().submit_time;
    const double end = w.jobs.back().submit_time + 30 * 86400.0;
    std::vector<NodeFailure> more =
        generate_failures(cluster, start, end, a.mtbf_hours * 3600, a.mttr_minutes * 60, a.seed);
    opt.failures.insert(opt.failures.end(), more.begin(), more.end());
    std::stable_sort(opt.failures.begin(), opt.failures.end(),
                     [](const NodeFailure& x, const NodeFailure& y) { return x.time < y.time; });
  }
  run["policy"] = {{"name", policy.name()},
                   {"backfill", std::string(to_string(policy.backfill))},
                   {"preemption", policy.preemption},
                   {"elastic", policy.elastic},
                   {"heterogeneity", policy.heterogeneity}};
  run["seed"] = a.seed;
  run["predictor"] = a.predictor;
  run["keep_trace_estimates"] = a.keep_trace_estimates;
  run["classify"] = a.classify == "none" ? nlohmann::ordered_json("none") : classified;
  run["comm_model"] = !a.no_comm_model;
  run["tick_seconds"] = opt.tick_seconds;
  run["checkpoint_grace_seconds"] = opt.checkpoint_grace;
  if (opt.restart.on()) {
    run["restart_model"] = {{"overhead_seconds", opt.restart.overhead_seconds},
                            {"checkpoint_gb", opt.restart.default_checkpoint_gb},
                            {"restore_gbps_per_node", opt.restart.restore_gbps_per_node},
                            {"bytes_per_param", opt.restart.bytes_per_param}};
  }
  run["series_interval_seconds"] = opt.series_interval;
  run["reserve_inference"] = opt.reserve_inference;
  run["data"] = {{"pollux_datasets", a.pollux_datasets},
                 {"cache_eviction", a.cache_eviction},
                 {"locality", a.data_locality},
                 {"locality_wait_seconds", a.locality_wait},
                 {"prestage", a.prestage},
                 {"prestage_gbs", a.prestage_gbs},
                 {"prestage_jobs", a.prestage_jobs},
                 {"residency", a.residency}};
  run["failures"] = {
      {"mtbf_hours", a.mtbf_hours},
      {"mttr_minutes", a.mttr_minutes},
      {"list", a.failures.empty() ? nlohmann::ordered_json() : file_identity(a.failures)},
      {"recovery", a.recovery}};
  const PowerModel power = load_power_model(data_dir(a));
  opt.power = &power;
  std::optional<CarbonIntensity> carbon;
  if (!a.energy.carbon.empty()) {
    carbon = CarbonIntensity::load(a.energy.carbon, CarbonIntensity::TimeBase::kRelative);
    opt.carbon = &*carbon;
    run["carbon_file"] = file_identity(a.energy.carbon);
  }
  opt.energy = energy_settings(a.energy, cluster, power);
  bool knob = false;
  for (QueueId q = 0; q < queues.size(); ++q) knob = knob || queues.queue(q).energy_weight > 0;
  if (policy.elastic && (opt.energy.policies() || knob)) {
    throw CLI::ValidationError("--elastic",
                               "elastic resizing does not account for power yet: it cannot be "
                               "combined with --power-cap or --energy-weight");
  }
  policy.power_shifting = a.energy.power_shifting;
  if (a.energy.sleep_after_s >= 0 && policy.name().find("spread") != std::string::npos) {
    warn("--node-sleep-after with " + policy.name() +
         ": spread placement keeps nodes busy, so few sleep; bestfit or topology consolidates "
         "(e.g. --policy " +
         policy.name().substr(0, policy.name().find('+')) + "+bestfit)");
  }
  // What neither kind of rounds (Gavel's, goodput's) models, refused with `refuse(what)`.
  const auto refuse_unmodelled = [&](const auto& refuse) {
    if (opt.energy.policies() || knob) refuse("power policies");
    if (!opt.failures.empty()) refuse("node failures");
    if (opt.reserve_inference) refuse("--reserve-inference");
    if (opt.carbon != nullptr) refuse("--carbon");
    if (any_job([](const JobSpec& j) { return j.demand.gpu_milli < kMilliPerGpu; })) {
      refuse("fractional-GPU jobs");
    }
  };
  if (a.rounds > 0) {
    // Rounds replace the cycle's starts and preemptions; what rounds do not model is refused.
    const auto refuse = [](const std::string& what) {
      throw CLI::ValidationError("--rounds", "round-based scheduling cannot be combined with " +
                                                 what + " (the rounds do not model it)");
    };
    if (policy.elastic) refuse("--elastic");
    refuse_unmodelled(refuse);
    opt.round_seconds = a.rounds;
    opt.round_stay_factor = a.round_stay;
    opt.round_lp_jobs = a.round_lp_jobs;
  } else {
    if (a.round_stay != 4) late_warning("--round-stay has no effect without --rounds");
    if (a.round_lp_jobs > 0) late_warning("--round-lp-jobs has no effect without --rounds");
  }
  std::optional<PolluxProfiles> profiles;
  if (policy.goodput) {
    // Goodput rounds replace the cycle as rounds do; what they do not model is refused.
    const auto refuse = [](const std::string& what,
                           const std::string& why = "its rounds do not model it") {
      throw CLI::ValidationError("--policy",
                                 "goodput cannot be combined with " + what + " (" + why + ")");
    };
    if (policy.elastic) refuse("--elastic", "goodput resizes jobs itself");
    if (policy.heterogeneity) refuse("--hetero");
    refuse_unmodelled(refuse);
    profiles = PolluxProfiles::load(
        (std::filesystem::path(data_dir(a)) / "philly" / "pollux" / "applications").string());
    if (profiles->empty()) {
      late_warning("--policy goodput: no application profiles under " + data_dir(a) +
                   "/philly/pollux/applications: every job runs as a rigid gang");
    }
    opt.adaptive_profiles = &*profiles;
    opt.goodput = goodput_allocation(a.goodput);
    if (a.rounds <= 0) opt.round_seconds = 60;  // Pollux's scheduling interval
    run["policy"]["goodput"] = goodput_run_json(a.goodput);
  } else if (goodput_options_given(a.goodput)) {
    late_warning("--goodput-* options have no effect without --policy goodput");
  }
  run["policy"]["round_seconds"] =
      opt.round_seconds > 0 ? nlohmann::ordered_json(opt.round_seconds) : nlohmann::ordered_json();
  if (a.rounds > 0) {
    run["policy"]["round_stay_factor"] = a.round_stay;
    run["policy"]["round_lp_jobs"] = opt.round_lp_jobs;
  }
  run["policy"]["power_shifting"] = policy.power_shifting;
  run["energy"] = energy_run_json(a.energy, opt.energy, power);
  run["data_dir"] = data_dir(a);
  run["warnings"] = warnings;
  if (a.skip_impossible) {
    // Only with the flag, so that results of runs without it stay as they were.
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const SkippedJob& j : skipped) {
      list.push_back({{"name", j.name}, {"source", j.source}, {"reason", j.reason}});
    }
    run["skip_impossible"] = {
        {"jobs_read", jobs_read}, {"skipped", skipped.size()}, {"jobs", list}};
  }
  SimResult r;
  {
    ProgressLine progress("simulate");
    opt.progress = progress.callback();
    r = simulate(w, cluster, policy, *model, opt);
  }
  ReportContext ctx{policy.name(), a.seed, source, run};
  const auto report = make_report(w, cluster, r, ctx);
  write_json_file(a.json_out, report);
  if (!a.report_out.empty()) {
    tessera::report::ReportInput page;
    page.title = "Tessera simulate: " + policy.name();
    page.results.push_back(
        {a.json_out.empty() ? std::string("simulate") : a.json_out, report, nullptr});
    write_report_file(a.report_out, std::move(page));
  }
  if (!a.quiet) std::cout << format_summary(report);
  if (!r.histories.empty()) std::cout << format_histories(report);
  return 0;
}

}  // namespace tessera

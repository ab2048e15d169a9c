// tessera_kube_bench: how fast `tessera kube` binds, measured against the in-process API-server
// emulator. A program, not a timed test: it prints a markdown table.
//
// Each scenario starts a fresh emulator (HTTP, no TLS) with N nodes x 8 GPUs, creates pods
// through the emulator's in-process request() API (before the scheduler starts, or streamed
// while it runs), starts KubeScheduler on the emulator's kubeconfig, and reads the emulator's
// binding log (its own clock, microseconds) to judge it:
//   - binds/s from the first bind to the last, and from scheduler start to all bound;
//   - create->bind latency p50/p99 (create = when the create request returned; for pods made
//     before the scheduler started, start->bind is shown too);
//   - scheduler start -> synced (watches listed) and -> first bind;
//   - the scheduler's own cycle metrics (engine only: KubeScheduler times schedule_cycle());
//   - the status writes and events it sent (the emulator's request counters).
// Scenario `model` times ClusterModel (upsert, refresh, prepare) and the engine cycle directly
// on the restart scenario's objects; `ceiling` is what a bare client gets from the emulator.
//
//   tessera_kube_bench --quick            # small sizes, well under a minute
//   tessera_kube_bench                    # the full table (minutes)
//   tessera_kube_bench --only restart,model --kubelet off
#include <CLI/CLI.hpp>

#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend/kube/kube_client.h"
#include "backend/kube/kube_config.h"
#include "control/kube/cluster_model.h"
#include "control/kube/kube_objects.h"
#include "control/kube/kube_scheduler.h"
#include "engine/cycle.h"
#include "engine/policy.h"
#include "kube_emulator/emulator.h"

namespace {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;
namespace fs = std::filesystem;
namespace tk = tessera::kube;

double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

long rss_mib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6)) / 1024;
  }
  return 0;
}

struct Config {
  bool quick = false;
  bool kubelet = true;
  int kubelet_delay_ms = 20;
  int bind_workers = 16;
  double status_qps = 200;
  double stall_s = 30;
  double stream_rate = 0;  // pods/s offered in streamed scenarios; 0: as fast as created
  int tenants = 4;
  std::string policy = "fair";
  bool verbose = false;
  int model_reps = 5;  // steady prepare()+engine repetitions in the model scenario
};

// A scenario's shape.
struct Scenario {
  std::string name;
  std::string kind;  // ceiling, pending, stream, gangs, restart, model
  int nodes = 0;
  int pods = 0;            // ours (gang members included)
  int gang = 1;            // members per PodGroup (1: plain pods)
  int background = 0;      // another scheduler's pods, bound at creation
  int background_gpu = 0;  // of which hold 1 GPU each (the rest: CPU only)
  int stream_pre = 0;      // ours created before the scheduler starts (stream kind)
  double rate = -1;        // stream kind: pods/s offered (-1: --stream-rate)
};

struct Row {
  std::string name, shape, note;
  int fits = 0;              // pods that can be bound
  int bound = 0;             // bound (201) per the binding log
  int failed = 0;            // bind attempts answered >= 300
  double create_rate = 0;    // pods/s our code created
  double synced_s = -1;      // scheduler start -> watches listed
  double first_bind_s = -1;  // scheduler start -> first bind
  double all_bound_s = -1;   // scheduler start -> last bind
  double rate_first_last = 0, rate_start_all = 0;
  double p50 = -1, p99 = -1, pmax = -1;  // create -> bind
  double s50 = -1, s99 = -1;             // scheduler start -> bind (pods made before start)
  uint64_t cycles = 0;
  double cycle_mean = 0;
  std::string cycle_max;  // the bucket holding the slowest cycle
  uint64_t status_writes = 0, events = 0, api_errors = 0;
  uint64_t emu_patches = 0;  // PATCH requests the emulator served while the scheduler ran
  uint64_t emu_events = 0;   // Events stored meanwhile
  long rss = 0;
  bool complete = false;
};

std::string fmt(double v, int prec = 0) {
  if (v < 0) return "-";
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

std::string fmt_s(double v) {
  if (v < 0) return "-";
  char b[64];
  if (v < 0.01) {
    std::snprintf(b, sizeof b, "%.2f ms", v * 1e3);
  } else if (v < 1) {
    std::snprintf(b, sizeof b, "%.0f ms", v * 1e3);
  } else {
    std::snprintf(b, sizeof b, "%.2f s", v);
  }
  return b;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return -1;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

// ---- the emulator and the objects we create in it ----

class Bench {
 public:
  Bench(const Config& cfg, int nodes) : cfg_(cfg) {
    kube_emulator::Options o;
    o.nodes = {kube_emulator::NodePool{.count = nodes, .gpus = 8}};
    o.kubelet.enabled = cfg.kubelet;
    o.kubelet.start_delay = std::chrono::milliseconds(cfg.kubelet_delay_ms);
    o.threads = 64;
    emu_ = std::make_unique<kube_emulator::Emulator>(o);
    const auto t0 = SteadyClock::now();
    emu_->start();
    node_s_ = since(t0);
    dir_ = fs::temp_directory_path() / ("tessera-kube-bench-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    kubeconfig_ = (dir_ / "kubeconfig").string();
    std::ofstream(kubeconfig_) << emu_->kubeconfig();
    for (int t = 0; t < cfg.tenants; ++t) create_namespace(tenant(t));
  }
  ~Bench() {
    stop_scheduler();
    emu_->stop();
    fs::remove_all(dir_);
  }
  Bench(const Bench&) = delete;
  Bench& operator=(const Bench&) = delete;

  kube_emulator::Emulator& emu() { return *emu_; }
  double node_seconds() const { return node_s_; }
  const std::string& kubeconfig() const { return kubeconfig_; }
  std::string tenant(int i) const { return "team-" + std::to_string(i % cfg_.tenants); }

  void create_namespace(const std::string& ns) {
    const auto r = emu_->request(
        "POST", "/api/v1/namespaces",
        json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}}.dump());
    must(r, "namespace " + ns);
  }

  void create_group(const std::string& ns, const std::string& name, int min_member) {
    const auto r =
        emu_->request("POST", "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/" + ns + "/podgroups",
                      json{{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                           {"kind", "PodGroup"},
                           {"metadata", {{"name", name}, {"namespace", ns}}},
                           {"spec", {{"minMember", min_member}}}}
                          .dump());
    must(r, "podgroup " + name);
  }

  // A pod of ours (1 GPU), recorded with the time its create returned.
  void create_ours(const std::string& ns, const std::string& name, const std::string& group) {
    json labels = json::object();
    if (!group.empty()) labels[tk::kPodGroupLabel] = group;
    json pod = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata", {{"name", name}, {"namespace", ns}, {"labels", labels}}},
                {"spec",
                 {{"schedulerName", "tessera"},
                  {"terminationGracePeriodSeconds", 1},
                  {"containers",
                   {{{"name", "main"},
                     {"image", "trainer"},
                     {"resources",
                      {{"limits", {{"nvidia.com/gpu", "1"}}},
                       {"requests", {{"cpu", "1"}, {"memory", "4Gi"}}}}}}}}}}};
    const auto r = emu_->request("POST", "/api/v1/namespaces/" + ns + "/pods", pod.dump());
    must(r, "pod " + name);
    const double t = wall_now();
    std::lock_guard lock(mu_);
    created_[ns + "/" + name] = t;
  }

  // Another scheduler's pod, already bound (spec.nodeName set at creation).
  void create_theirs(const std::string& ns, const std::string& name, const std::string& node,
                     bool gpu) {
    json res = {{"requests", {{"cpu", "100m"}, {"memory", "256Mi"}}}};
    if (gpu) res["limits"] = {{"nvidia.com/gpu", "1"}};
    json pod = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{"app", "other"}}}}},
                {"spec",
                 {{"schedulerName", "default-scheduler"},
                  {"nodeName", node},
                  {"containers", {{{"name", "main"}, {"image", "svc"}, {"resources", res}}}}}}};
    must(emu_->request("POST", "/api/v1/namespaces/" + ns + "/pods", pod.dump()), "pod " + name);
  }

  // Waits until the emulator's resourceVersion has not moved for `quiet` (the kubelet done).
  void settle(std::chrono::milliseconds quiet = std::chrono::milliseconds(300)) {
    uint64_t last = emu_->resource_version();
    auto still_since = SteadyClock::now();
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const uint64_t rv = emu_->resource_version();
      if (rv != last) {
        last = rv;
        still_since = SteadyClock::now();
      } else if (SteadyClock::now() - still_since >= quiet) {
        return;
      }
    }
  }

  uint64_t binds_accepted() const { return emu_->stats().value("bindsAccepted", uint64_t{0}); }
  std::map<std::string, uint64_t> requests() const {
    std::map<std::string, uint64_t> out;
    const json s = emu_->stats();
    if (s.contains("requests")) {
      for (const auto& [k, v] : s["requests"].items()) out[k] = v.get<uint64_t>();
    }
    if (s.contains("objects")) {
      for (const auto& [k, v] : s["objects"].items()) out["objects " + k] = v.get<uint64_t>();
    }
    return out;
  }

  tk::KubeScheduler& start_scheduler() {
    tk::SchedulerOptions opt;
    opt.model.topology_labels = {"network.topology.nvidia.com/spine",
                                 "network.topology.nvidia.com/leaf"};
    opt.policy = cfg_.policy;
    opt.bind_workers = cfg_.bind_workers;
    opt.status_qps = cfg_.status_qps;
    auto client = std::make_shared<tk::Client>(tk::load_kubeconfig(kubeconfig_));
    sched_ = std::make_unique<tk::KubeScheduler>(client, opt);
    start_wall_ = wall_now();
    start_steady_ = SteadyClock::now();
    sched_->start();
    return *sched_;
  }
  void stop_scheduler() {
    if (sched_) sched_->stop();
    sched_.reset();
  }
  tk::KubeScheduler* scheduler() { return sched_.get(); }
  double start_wall() const { return start_wall_; }
  SteadyClock::time_point start_steady() const { return start_steady_; }
  std::unordered_map<std::string, double> created() {
    std::lock_guard lock(mu_);
    return created_;
  }

 private:
  static void must(const kube_emulator::Reply& r, const std::string& what) {
    if (r.status >= 300) throw std::runtime_error("creating " + what + ": " + r.body);
  }

  const Config& cfg_;
  std::unique_ptr<kube_emulator::Emulator> emu_;
  std::unique_ptr<tk::KubeScheduler> sched_;
  fs::path dir_;
  std::string kubeconfig_;
  double node_s_ = 0;
  double start_wall_ = 0;
  SteadyClock::time_point start_steady_;
  std::mutex mu_;
  std::unordered_map<std::string, double> created_;  // ns/name -> create returned (unix s)
};

std::string node_name(int i) {
  char b[32];
  std::snprintf(b, sizeof b, "gpu-node-%04d", i);
  return b;
}

// Another scheduler's pods: `count` across the nodes, `gpu` of them holding 1 GPU each.
void create_background(Bench& b, int nodes, int count, int gpu) {
  b.create_namespace("other");
  for (int i = 0; i < count; ++i) {
    b.create_theirs("other", "svc-" + std::to_string(i), node_name(i % nodes), i < gpu);
  }
}

// Our pods: `count` of 1 GPU, as gangs of `gang` (PodGroup minMember = gang) when gang > 1.
void create_ours(Bench& b, int first, int count, int gang, double rate,
                 const std::atomic<bool>* stop = nullptr) {
  const auto t0 = SteadyClock::now();
  for (int i = first; i < first + count; ++i) {
    if (stop && stop->load()) return;
    if (rate > 0) {
      const auto due = t0 + std::chrono::duration_cast<SteadyClock::duration>(
                                std::chrono::duration<double>((i - first) / rate));
      std::this_thread::sleep_until(due);
    }
    if (gang > 1) {
      const int g = i / gang;
      const std::string ns = b.tenant(g);
      const std::string group = "g" + std::to_string(g);
      if (i % gang == 0) b.create_group(ns, group, gang);
      b.create_ours(ns, group + "-" + std::to_string(i % gang), group);
    } else {
      b.create_ours(b.tenant(i), "p" + std::to_string(i), "");
    }
  }
}

// Waits until `fits` pods are bound, or nothing was bound for stall_s seconds.
bool wait_bound(Bench& b, int fits, double stall_s, bool verbose) {
  uint64_t last = 0;
  auto moved = SteadyClock::now();
  auto said = SteadyClock::now();
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const uint64_t n = b.binds_accepted();
    if (static_cast<int>(n) >= fits) return true;
    if (n != last) {
      last = n;
      moved = SteadyClock::now();
    }
    if (verbose && since(said) >= 5) {
      said = SteadyClock::now();
      std::fprintf(stderr, "  ... %llu of %d bound, %.1f s since start, rss %ld MiB\n",
                   static_cast<unsigned long long>(n), fits, since(b.start_steady()), rss_mib());
    }
    // Before the first bind, allow the start (lists) a longer while.
    const double limit = last == 0 ? std::max(stall_s, 120.0) : stall_s;
    if (since(moved) >= limit) return false;
  }
}

std::string cycle_max_bucket(const tessera::ServiceMetrics& m) {
  for (size_t i = 0; i < m.cycle_bucket_bounds.size(); ++i) {
    if (m.cycle_bucket_counts[i] >= m.cycles) {
      const double lo = i == 0 ? 0 : m.cycle_bucket_bounds[i - 1];
      return fmt_s(lo) + "–" + fmt_s(m.cycle_bucket_bounds[i]);
    }
  }
  return "> " + fmt_s(m.cycle_bucket_bounds.back());
}

// Reads the binding log and the scheduler's counters into the row.
void measure(Bench& b, Row& row, const std::map<std::string, uint64_t>& req0) {
  tk::KubeScheduler& s = *b.scheduler();
  const tessera::ServiceMetrics m = s.metrics();
  const tk::KubeMetrics k = s.kube_metrics();
  row.cycles = m.cycles;
  row.cycle_mean = m.cycles ? m.cycle_seconds_sum / static_cast<double>(m.cycles) : 0;
  row.cycle_max = m.cycles ? cycle_max_bucket(m) : "-";
  row.status_writes = k.status_writes;
  row.events = k.events;
  row.api_errors = k.api_errors;
  const auto req = b.requests();
  const auto delta = [&](const std::string& verb) {
    auto it = req.find(verb);
    auto i0 = req0.find(verb);
    return (it == req.end() ? 0 : it->second) - (i0 == req0.end() ? 0 : i0->second);
  };
  row.emu_patches = delta("PATCH");
  row.emu_events = delta("objects /events");
  row.rss = rss_mib();

  const auto created = b.created();
  const double start = b.start_wall();
  std::vector<double> lat, from_start;
  double first = -1, last = -1;
  for (const auto& r : b.emu().bindings()) {
    if (r.code >= 300) {
      ++row.failed;
      continue;
    }
    ++row.bound;
    const double t = tk::parse_time(r.time);
    first = first < 0 ? t : std::min(first, t);
    last = std::max(last, t);
    auto it = created.find(r.ns + "/" + r.name);
    if (it == created.end()) continue;
    lat.push_back(t - it->second);
    if (it->second < start) from_start.push_back(t - start);
  }
  if (row.bound > 0) {
    row.first_bind_s = first - start;
    row.all_bound_s = last - start;
    if (row.bound > 1 && last > first) row.rate_first_last = (row.bound - 1) / (last - first);
    row.rate_start_all = row.bound / (last - start);
  }
  row.p50 = percentile(lat, 0.5);
  row.p99 = percentile(lat, 0.99);
  row.pmax = lat.empty() ? -1 : *std::max_element(lat.begin(), lat.end());
  row.s50 = percentile(from_start, 0.5);
  row.s99 = percentile(from_start, 0.99);
}

// ---- scenarios ----

Row run_scheduler_scenario(const Config& cfg, const Scenario& sc) {
  Row row;
  row.name = sc.name;
  const int gpus = sc.nodes * 8 - sc.background_gpu;
  row.fits = std::min(sc.pods, gpus);
  std::ostringstream shape;
  shape << sc.nodes << " nodes, " << sc.pods << " pods";
  if (sc.gang > 1) shape << " (" << sc.pods / sc.gang << " gangs of " << sc.gang << ")";
  if (sc.background > 0) shape << " + " << sc.background << " bound";
  if (sc.kind == "stream") {
    const double rate = sc.rate >= 0 ? sc.rate : cfg.stream_rate;
    shape << ", streamed"
          << (rate > 0 ? " at " + std::to_string(static_cast<int>(rate)) + "/s" : " at full speed");
  }
  row.shape = shape.str();

  Bench b(cfg, sc.nodes);
  if (cfg.verbose) {
    std::fprintf(stderr, "[%s] %d nodes created in %.2f s\n", sc.name.c_str(), sc.nodes,
                 b.node_seconds());
  }
  if (sc.background > 0) {
    const auto t0 = SteadyClock::now();
    create_background(b, sc.nodes, sc.background, sc.background_gpu);
    if (cfg.verbose) {
      std::fprintf(stderr, "[%s] %d background pods created in %.2f s, rss %ld MiB\n",
                   sc.name.c_str(), sc.background, since(t0), rss_mib());
    }
  }
  const int pre = sc.kind == "stream" ? sc.stream_pre : sc.pods;
  {
    const auto t0 = SteadyClock::now();
    create_ours(b, 0, pre, sc.gang, 0);
    if (pre > 0) row.create_rate = pre / since(t0);
  }
  b.settle();  // the kubelet has started the background pods
  const auto req0 = b.requests();
  if (cfg.verbose) std::fprintf(stderr, "[%s] starting the scheduler\n", sc.name.c_str());
  tk::KubeScheduler& s = b.start_scheduler();
  std::atomic<bool> stop_feed{false};
  std::thread feeder;
  std::atomic<double> synced_at{-1};
  std::thread sync_watch([&] {
    while (!stop_feed.load()) {
      if (s.synced()) {
        synced_at = since(b.start_steady());
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  if (sc.kind == "stream") {
    while (synced_at.load() < 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    feeder = std::thread([&] {
      const auto t0 = SteadyClock::now();
      create_ours(b, pre, sc.pods - pre, sc.gang, sc.rate >= 0 ? sc.rate : cfg.stream_rate,
                  &stop_feed);
      row.create_rate = (sc.pods - pre) / since(t0);
    });
  }
  row.complete = wait_bound(b, row.fits, cfg.stall_s, cfg.verbose);
  if (sc.pods > row.fits) {
    // Nothing more fits; make sure nothing more is bound (an over-commit) for a moment.
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  stop_feed = true;
  if (feeder.joinable()) feeder.join();
  sync_watch.join();
  row.synced_s = synced_at.load();
  measure(b, row, req0);
  if (!row.complete) row.note += "stalled: " + std::to_string(row.bound) + " bound; ";
  if (sc.pods > row.fits) {
    row.note += std::to_string(sc.pods - row.fits) + " pods cannot fit (rates over the " +
                std::to_string(row.fits) + " that do); ";
  }
  if (row.failed > 0) row.note += std::to_string(row.failed) + " binds failed; ";
  if (row.bound > row.fits) row.note += "OVER-COMMIT: more bound than GPUs; ";
  const auto t0 = SteadyClock::now();
  b.stop_scheduler();
  if (cfg.verbose) {
    std::fprintf(stderr, "[%s] done: %d bound; scheduler stopped in %.2f s\n", sc.name.c_str(),
                 row.bound, since(t0));
  }
  return row;
}

struct Ceiling {
  int pods = 0, nodes = 0, threads = 0;
  double create_inproc = 0, bind_http = 0, bind_inproc = 0;
  int failures = 0;
};

// What a bare client gets: in-process creates, binds over HTTP (tessera's own Client, one
// keep-alive connection per thread, as the scheduler's binder), and in-process binds.
Ceiling run_ceiling(const Config& cfg, int nodes, int pods) {
  Ceiling c;
  c.pods = pods;
  c.nodes = nodes;
  c.threads = cfg.bind_workers;
  Bench b(cfg, nodes);
  {
    const auto t0 = SteadyClock::now();
    create_ours(b, 0, 2 * pods, 1, 0);
    c.create_inproc = 2 * pods / since(t0);
  }
  // Pod i is in namespace tenant(i), named p<i>.
  auto client = std::make_shared<tk::Client>(tk::load_kubeconfig(b.kubeconfig()));
  std::atomic<int> next{0}, failures{0};
  const auto binding = [&](int i) {
    return json{
        {"apiVersion", "v1"},
        {"kind", "Binding"},
        {"metadata", {{"name", "p" + std::to_string(i)}, {"namespace", b.tenant(i)}}},
        {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node_name(i % nodes)}}}};
  };
  {
    const auto t0 = SteadyClock::now();
    std::vector<std::thread> ts;
    for (int t = 0; t < c.threads; ++t) {
      ts.emplace_back([&] {
        for (int i = next++; i < pods; i = next++) {
          const auto r = client->post(
              "/api/v1/namespaces/" + b.tenant(i) + "/pods/p" + std::to_string(i) + "/binding",
              binding(i));
          if (r.status != 201) ++failures;
        }
      });
    }
    for (auto& t : ts) t.join();
    c.bind_http = pods / since(t0);
  }
  {
    const auto t0 = SteadyClock::now();
    for (int i = pods; i < 2 * pods; ++i) {
      const auto r = b.emu().request(
          "POST", "/api/v1/namespaces/" + b.tenant(i) + "/pods/p" + std::to_string(i) + "/binding",
          binding(i).dump());
      if (r.status != 201) ++failures;
    }
    c.bind_inproc = pods / since(t0);
  }
  c.failures = failures.load();
  return c;
}

struct ModelTiming {
  int nodes = 0, pods = 0, pending = 0;
  double list_request = 0, list_json_full = 0, list_json = 0, list_parse = 0, upsert = 0,
         refresh = 0, prepare_first = 0, prepare_again = 0;
  double engine = 0, prepare_after_event = 0, engine_again = 0;
  size_t starts = 0;
  long rss = 0;
};

// ClusterModel and the engine on the restart scenario's objects, timed from outside: what a
// cycle does before the engine (refresh + prepare) and the engine cycle itself.
ModelTiming run_model(const Config& cfg, const Scenario& sc) {
  ModelTiming mt;
  Bench b(cfg, sc.nodes);
  create_background(b, sc.nodes, sc.background, sc.background_gpu);
  create_ours(b, 0, sc.pods, sc.gang, 0);
  b.settle();
  mt.nodes = sc.nodes;
  // List and parse, as the reflectors do (pages of 500 there; bigger pages here).
  std::vector<tk::NodeInfo> nodes;
  std::vector<tk::PodInfo> pods;
  double t_request = 0, t_json_full = 0, t_json = 0, t_parse = 0;
  const auto list = [&](const std::string& path, const tk::FieldMask& fields, const auto& each) {
    const tk::FieldMask page_fields = fields.under("items");
    std::string cont;
    do {
      std::string q = path + "?limit=500";
      if (!cont.empty()) q += "&continue=" + tk::escape_query(cont);
      auto t0 = SteadyClock::now();
      const auto r = b.emu().request("GET", q);
      t_request += since(t0);
      t0 = SteadyClock::now();
      json full = json::parse(r.body);
      t_json_full += since(t0);
      t0 = SteadyClock::now();
      json page = tk::parse_masked(r.body, page_fields);  // as the reflectors do
      t_json += since(t0);
      t0 = SteadyClock::now();
      for (auto& item : page["items"]) each(item);
      t_parse += since(t0);
      cont = page["metadata"].value("continue", "");
    } while (!cont.empty());
  };
  list("/api/v1/nodes", tk::node_fields(),
       [&](const json& j) { nodes.push_back(tk::parse_node(j)); });
  list("/api/v1/pods", tk::pod_fields(), [&](const json& j) { pods.push_back(tk::parse_pod(j)); });
  mt.list_request = t_request;
  mt.list_json_full = t_json_full;
  mt.list_json = t_json;
  mt.list_parse = t_parse;
  mt.pods = static_cast<int>(pods.size());
  tk::ModelOptions mo;
  mo.topology_labels = {"network.topology.nvidia.com/spine", "network.topology.nvidia.com/leaf"};
  tk::ClusterModel model(mo);
  const double now = wall_now();
  {
    const auto t0 = SteadyClock::now();
    for (auto& n : nodes) model.upsert_node(std::move(n));
    for (auto& p : pods) model.upsert_pod(p, now);
    mt.upsert = since(t0);
  }
  {
    const auto t0 = SteadyClock::now();
    model.refresh();
    mt.refresh = since(t0);
  }
  tessera::Policy policy = tessera::make_policy(cfg.policy, 0);
  policy.elastic = false;
  const auto engine = [&](const tk::CycleInput& in, size_t* starts) {
    tessera::Snapshot snap;
    snap.now = now;
    snap.cycle = 1;
    snap.state = &model.ledger();
    snap.pending = in.pending;
    snap.running = in.running;
    snap.queues = &model.tree();
    const auto t0 = SteadyClock::now();
    const tessera::Decisions d = tessera::schedule_cycle(snap, policy);
    if (starts) *starts = d.starts.size();
    return since(t0);
  };
  {
    const auto t0 = SteadyClock::now();
    const tk::CycleInput in = model.prepare(now);
    mt.prepare_first = since(t0);
    mt.pending = static_cast<int>(in.pending.size());
    mt.engine = engine(in, &mt.starts);
  }
  if (cfg.verbose) std::fprintf(stderr, "[model] steady cycles\n");
  for (int rep = 0; rep < std::max(1, cfg.model_reps); ++rep) {
    // The fastest of the repetitions (each starts from the same state: nothing is applied).
    const auto t0 = SteadyClock::now();
    const tk::CycleInput in = model.prepare(now);
    const double p = since(t0);
    const double e = engine(in, nullptr);
    mt.prepare_again = rep == 0 ? p : std::min(mt.prepare_again, p);
    mt.engine_again = rep == 0 ? e : std::min(mt.engine_again, e);
  }
  {
    // One pod event (a background pod finished), then a cycle: the steady state.
    for (const auto& p : pods) {
      if (!p.node_name.empty()) {
        model.remove_pod(p.uid);
        break;
      }
    }
    const auto t0 = SteadyClock::now();
    model.refresh();
    const tk::CycleInput in = model.prepare(now);
    mt.prepare_after_event = since(t0);
  }
  mt.rss = rss_mib();
  return mt;
}

void print_rows(const std::vector<Row>& rows) {
  std::printf(
      "\n| scenario | shape | created/s | bound / fit | binds/s first→last | binds/s start→all | "
      "start→synced "
      "| start→first bind | start→all bound | create→bind p50 / p99 / max | start→bind p50 / p99 "
      "| engine cycles: n, mean, slowest | status writes / events sent | emu PATCHes / events "
      "stored "
      "| RSS MiB | notes |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    std::printf(
        "| %s | %s | %s | %d / %d | %s | %s | %s | %s | %s | %s / %s / %s | %s / %s | %llu, %s, %s "
        "| "
        "%llu / %llu | %llu / %llu | %ld | %s|\n",
        r.name.c_str(), r.shape.c_str(), fmt(r.create_rate).c_str(), r.bound, r.fits,
        fmt(r.rate_first_last).c_str(), fmt(r.rate_start_all).c_str(), fmt_s(r.synced_s).c_str(),
        fmt_s(r.first_bind_s).c_str(), fmt_s(r.all_bound_s).c_str(), fmt_s(r.p50).c_str(),
        fmt_s(r.p99).c_str(), fmt_s(r.pmax).c_str(), fmt_s(r.s50).c_str(), fmt_s(r.s99).c_str(),
        static_cast<unsigned long long>(r.cycles), fmt_s(r.cycle_mean).c_str(), r.cycle_max.c_str(),
        static_cast<unsigned long long>(r.status_writes), static_cast<unsigned long long>(r.events),
        static_cast<unsigned long long>(r.emu_patches),
        static_cast<unsigned long long>(r.emu_events), r.rss, r.note.c_str());
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  std::string only;
  CLI::App app{"tessera_kube_bench: the Kubernetes scheduler's speed against the emulator"};
  app.add_flag("--quick", cfg.quick, "small sizes (well under a minute)");
  app.add_option("--only", only,
                 "comma-separated scenarios: ceiling, pending-1k-10k, pending-1k-50k, "
                 "pending-5k-10k, pending-5k-50k, stream-5k-10k, stream-5k-10k-1000, gangs-5k, "
                 "restart-5k-140k, "
                 "model-5k-140k (quick names are the same)");
  std::string kubelet = "on";
  app.add_option("--kubelet", kubelet,
                 "the emulator's fake kubelet: on (bound pods turn "
                 "Running, as KWOK) or off (bound pods stay Pending)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--kubelet-delay-ms", cfg.kubelet_delay_ms, "bind -> Running");
  app.add_option("--bind-workers", cfg.bind_workers, "the scheduler's parallel binds");
  app.add_option("--status-qps", cfg.status_qps, "the scheduler's status writes per second");
  app.add_option("--stall", cfg.stall_s, "give up after this many seconds without a bind");
  app.add_option("--stream-rate", cfg.stream_rate,
                 "pods/s created in streamed scenarios (0: as fast as the bench creates)");
  app.add_option("--tenants", cfg.tenants, "namespaces (queues) the pods are spread over");
  app.add_option("--policy", cfg.policy, "the scheduler's policy");
  app.add_option("--model-reps", cfg.model_reps,
                 "repetitions of the steady prepare() + engine cycle in the model scenario "
                 "(the fastest is shown)");
  app.add_flag("-v,--verbose", cfg.verbose, "progress on stderr");
  CLI11_PARSE(app, argc, argv);
  cfg.kubelet = kubelet == "on";

  // Sizes: the issue's, or a tenth (quick).
  const int k = cfg.quick ? 10 : 1;
  const std::vector<Scenario> all = {
      {"ceiling", "ceiling", 5000 / k, 20000 / k},
      {"pending-1k-10k", "pending", 1000 / k, 10000 / k},
      {"pending-1k-50k", "pending", 1000 / k, 50000 / k},
      {"pending-5k-10k", "pending", 5000 / k, 10000 / k},
      {"pending-5k-50k", "pending", 5000 / k, 50000 / k},
      {"stream-5k-10k", "stream", 5000 / k, 10000 / k},
      {"stream-5k-10k-1000", "stream", 5000 / k, 10000 / k, 1, 0, 0, 0, 1000.0},
      {"gangs-5k", "gangs", 5000 / k, 16000 / k, 8},
      // 26 pods of another scheduler per node (4 with a GPU: half the GPUs), 10,000 of ours.
      {"restart-5k-140k", "restart", 5000 / k, 10000 / k, 1, 130000 / k, 20000 / k},
      {"model-5k-140k", "model", 5000 / k, 10000 / k, 1, 130000 / k, 20000 / k},
  };
  std::set<std::string> want;
  {
    std::stringstream ss(only);
    std::string s;
    while (std::getline(ss, s, ',')) {
      if (!s.empty()) want.insert(s);
    }
  }
  for (const std::string& w : want) {
    if (std::none_of(all.begin(), all.end(), [&](const Scenario& s) { return s.name == w; })) {
      std::fprintf(stderr, "unknown scenario %s\n", w.c_str());
      return 2;
    }
  }
  const auto wanted = [&](const Scenario& s) { return want.empty() || want.count(s.name) != 0; };

  std::printf(
      "# tessera kube speed (%s sizes; kubelet %s, start delay %d ms; %d bind workers, "
      "status %g qps; %d tenants; policy %s; %u CPUs)\n",
      cfg.quick ? "quick: a tenth of the issue's" : "the issue's", kubelet.c_str(),
      cfg.kubelet_delay_ms, cfg.bind_workers, cfg.status_qps, cfg.tenants, cfg.policy.c_str(),
      std::thread::hardware_concurrency());
  std::vector<Row> rows;
  try {
    for (const Scenario& sc : all) {
      if (!wanted(sc)) continue;
      if (cfg.verbose) std::fprintf(stderr, "== %s\n", sc.name.c_str());
      if (sc.kind == "ceiling") {
        const Ceiling c = run_ceiling(cfg, sc.nodes, sc.pods);
        std::printf(
            "\n## The emulator's ceiling (a bare client, %d pods, %d nodes)\n\n"
            "| what | per second |\n|---|---|\n"
            "| creates, in-process request() | %.0f |\n"
            "| binds over HTTP, tessera's Client, %d threads | %.0f |\n"
            "| binds, in-process request(), 1 thread | %.0f |\n",
            c.pods, c.nodes, c.create_inproc, c.threads, c.bind_http, c.bind_inproc);
        if (c.failures) std::printf("\n%d binds failed\n", c.failures);
        std::fflush(stdout);
      } else if (sc.kind == "model") {
        const ModelTiming m = run_model(cfg, sc);
        std::printf(
            "\n## ClusterModel and the engine, timed directly (%d nodes, %d pods, %d pending "
            "gangs)\n\n| step | time |\n|---|---|\n"
            "| list every node and pod: the emulator's answers (in-process, pages of 500) | %s |\n"
            "| nlohmann::json::parse of those pages, whole | %s |\n"
            "| the same pages parsed keeping only the fields the parsers read, as the "
            "reflectors do | %s |\n"
            "| parse_node / parse_pod of every object | %s |\n"
            "| upsert every node and pod into a ClusterModel | %s |\n"
            "| refresh(): build the Cluster, replay the ledger | %s |\n"
            "| prepare(), first | %s |\n"
            "| engine schedule_cycle(), first (%zu starts) | %s |\n"
            "| prepare() again, nothing changed | %s |\n"
            "| engine schedule_cycle() again | %s |\n"
            "| one pod event, then refresh() + prepare() | %s |\n"
            "| **a full cycle (refresh + prepare + engine), steady** | **%s** |\n\n"
            "RSS %ld MiB\n",
            m.nodes, m.pods, m.pending, fmt_s(m.list_request).c_str(),
            fmt_s(m.list_json_full).c_str(), fmt_s(m.list_json).c_str(),
            fmt_s(m.list_parse).c_str(), fmt_s(m.upsert).c_str(), fmt_s(m.refresh).c_str(),
            fmt_s(m.prepare_first).c_str(), m.starts, fmt_s(m.engine).c_str(),
            fmt_s(m.prepare_again).c_str(), fmt_s(m.engine_again).c_str(),
            fmt_s(m.prepare_after_event).c_str(),
            fmt_s(m.prepare_after_event + m.engine_again).c_str(), m.rss);
        std::fflush(stdout);
      } else {
        rows.push_back(run_scheduler_scenario(cfg, sc));
        if (cfg.verbose) print_rows({rows.back()});
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera_kube_bench: %s\n", e.what());
    print_rows(rows);
    return 1;
  }
  if (!rows.empty()) {
    std::printf("\n## The scheduler\n");
    print_rows(rows);
    std::printf(
        "\nbinds/s and latency from the emulator's binding log; create = when the bench's create "
        "returned (for pods made before the scheduler started that includes the wait for it: "
        "see start→bind); engine cycles = KubeScheduler::metrics() (it times schedule_cycle() "
        "only, not refresh/prepare/apply/status).\n");
  }
  return 0;
}

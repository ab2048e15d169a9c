#include "sim/frag_experiment.h"

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <ostream>
#include <stdexcept>

namespace tessera {

using frag::NodeState;
using frag::PodSpec;

namespace {

int last_percent(double inflate) {
  return static_cast<int>(std::ceil(inflate * 100.0 - 1e-9));
}

}  // namespace

std::vector<PodSpec> arrival_sequence(const std::vector<PodSpec>& pods, int64_t capacity_milli,
                                      double inflate, Rng& rng) {
  std::vector<PodSpec> seq = pods;
  const double target = inflate * static_cast<double>(capacity_milli);
  int64_t demand = 0;
  for (const PodSpec& p : pods) demand += p.total_gpu_milli();
  if (static_cast<double>(demand) > target) {
    // Thin at random until the demand fits (as the FGD simulator's "tune down").
    while (!seq.empty() && static_cast<double>(demand) > target) {
      const size_t i = rng.below(seq.size());
      demand -= seq[i].total_gpu_milli();
      seq.erase(seq.begin() + static_cast<std::ptrdiff_t>(i));
    }
  } else if (!pods.empty() && demand > 0) {
    // Clone random pods of the trace until the next clone would overshoot ("tune up").
    for (;;) {
      const PodSpec& p = pods[rng.below(pods.size())];
      if (static_cast<double>(demand + p.total_gpu_milli()) > target) break;
      demand += p.total_gpu_milli();
      seq.push_back(p);
    }
  }
  for (size_t i = seq.size(); i > 1; --i) std::swap(seq[i - 1], seq[rng.below(i)]);
  return seq;
}

FragRun run_frag_once(const std::vector<frag::NodeSpec>& node_specs,
                      const std::vector<PodSpec>& pods, frag::FragMemo& memo,
                      const std::string& policy, uint64_t seed, double inflate) {
  const auto t0 = std::chrono::steady_clock::now();
  auto placer = frag::make_placer(policy);
  std::vector<NodeState> nodes;
  nodes.reserve(node_specs.size());
  int64_t capacity = 0;
  for (const auto& s : node_specs) {
    nodes.push_back(frag::make_node(s));
    capacity += int64_t{s.num_gpus} * frag::kMilli;
  }
  if (capacity == 0) throw std::invalid_argument("the cluster has no GPUs");

  // Separate streams: the arrival order must not depend on how many draws a policy makes.
  Rng order_rng(mix_seed(seed, 1)), policy_rng(mix_seed(seed, 2));
  const std::vector<PodSpec> seq = arrival_sequence(pods, capacity, inflate, order_rng);

  // Invariant: node_frag[i] == memo(nodes[i]) and frag_total == sum of node_frag.
  std::vector<double> node_frag(nodes.size());
  double frag_total = 0;
  for (size_t i = 0; i < nodes.size(); ++i) frag_total += node_frag[i] = memo(nodes[i]);

  const int last = last_percent(inflate);
  std::vector<double> alloc_sum(static_cast<size_t>(last) + 1), ratio_sum(alloc_sum.size()),
      frag_sum(alloc_sum.size());
  std::vector<int> count(alloc_sum.size());

  FragRun run;
  run.seed = seed;
  int64_t arrived = 0, allocated = 0;
  // Scoring order: a seeded permutation of the nodes, fixed for the run (see frag.cc).
  std::vector<int> order(nodes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[order_rng.below(i)]);
  const frag::PlacementContext ctx{&nodes, &memo, &order};
  for (const PodSpec& p : seq) {
    arrived += p.total_gpu_milli();
    frag::GpuChoice choice;
    const int n = placer->choose(ctx, p, policy_rng, choice);
    if (n < 0) {
      ++run.pods_failed;
    } else {
      NodeState& node = nodes[static_cast<size_t>(n)];
      frag::place(node, p, choice);
      allocated += p.total_gpu_milli();
      const double f = memo(node);
      frag_total += f - node_frag[static_cast<size_t>(n)];
      node_frag[static_cast<size_t>(n)] = f;
    }
    ++run.pods_arrived;
    const double cap = static_cast<double>(capacity);
    const auto pct = static_cast<long>(std::lround(100.0 * static_cast<double>(arrived) / cap));
    if (pct < 0 || pct > last) continue;
    const auto b = static_cast<size_t>(pct);
    const double idle = cap - static_cast<double>(allocated);
    alloc_sum[b] += 100.0 * static_cast<double>(allocated) / cap;
    ratio_sum[b] += idle > 0 ? 100.0 * frag_total / idle : 0.0;
    frag_sum[b] += 100.0 * frag_total / cap;
    ++count[b];
  }
  // A percent no arrival rounded to (a jump by a large pod) repeats the one before.
  run.curve.resize(alloc_sum.size());
  for (size_t b = 0; b < alloc_sum.size(); ++b) {
    FragPoint& pt = run.curve[b];
    if (count[b] > 0) {
      pt = {static_cast<int>(b), alloc_sum[b] / count[b], ratio_sum[b] / count[b],
            frag_sum[b] / count[b]};
    } else if (b > 0) {
      pt = run.curve[b - 1];
    }
    pt.arrived_pct = static_cast<int>(b);
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return run;
}

FragResult run_frag(const AlibabaCluster& cluster, const AlibabaPods& pods,
                    const FragOptions& opt) {
  if (opt.seeds < 1) throw std::invalid_argument("--seeds must be at least 1");
  if (!(opt.inflate > 0) || opt.inflate > 10) {
    throw std::invalid_argument("--inflate must be in (0, 10]");
  }
  frag::make_placer(opt.policy);  // reject an unknown name before any work
  const std::vector<frag::TargetShape> target = frag::target_workload(pods.pods, opt.popularity);
  frag::FragMemo memo(&target);  // shared by the seeds: same cluster, same target
  FragResult r;
  r.policy = opt.policy;
  r.total_gpus = cluster.total_gpus();
  r.target_shapes = target.size();
  for (int s = 0; s < opt.seeds; ++s) {
    const uint64_t seed = opt.first_seed + static_cast<uint64_t>(s);
    r.seeds.push_back(seed);
    r.runs.push_back(run_frag_once(cluster.nodes, pods.pods, memo, opt.policy, seed, opt.inflate));
    if (opt.progress) {
      opt.progress(Progress{static_cast<double>(s + 1), static_cast<double>(opt.seeds),
                            "seeds of " + opt.policy});
    }
  }
  r.curve.resize(r.runs.front().curve.size());
  for (size_t b = 0; b < r.curve.size(); ++b) {
    FragPoint& m = r.curve[b];
    m.arrived_pct = static_cast<int>(b);
    for (const FragRun& run : r.runs) {
      m.allocated_pct += run.curve[b].allocated_pct;
      m.frag_ratio_pct += run.curve[b].frag_ratio_pct;
      m.frag_pct += run.curve[b].frag_pct;
    }
    const auto n = static_cast<double>(r.runs.size());
    m.allocated_pct /= n;
    m.frag_ratio_pct /= n;
    m.frag_pct /= n;
  }
  return r;
}

void write_frag_json(const FragResult& r, std::ostream& out) {
  nlohmann::json j;
  j["policy"] = r.policy;
  j["seeds"] = r.seeds;
  j["total_gpus"] = r.total_gpus;
  j["target_shapes"] = r.target_shapes;
  if (!r.nodes.empty()) j["nodes"] = r.nodes;
  if (!r.pods.empty()) j["pods"] = r.pods;
  nlohmann::json curve = nlohmann::json::array();
  for (size_t b = 1; b < r.curve.size(); ++b) {
    const FragPoint& p = r.curve[b];
    curve.push_back({{"arrived_pct", p.arrived_pct},
                     {"allocated_pct", p.allocated_pct},
                     {"frag_ratio_pct", p.frag_ratio_pct},
                     {"frag_pct", p.frag_pct}});
  }
  j["curve"] = std::move(curve);
  nlohmann::json runs = nlohmann::json::array();
  for (const FragRun& run : r.runs) {
    runs.push_back({{"seed", run.seed},
                    {"pods_arrived", run.pods_arrived},
                    {"pods_failed", run.pods_failed},
                    {"allocated_pct_at_end", run.curve.back().allocated_pct}});
  }
  j["runs"] = std::move(runs);
  out << j.dump(2) << "\n";
}

}  // namespace tessera

// The FGD capacity experiment (tessera frag): placement policies, the fragmentation measure,
// the Alibaba readers and the command line, on small generated inputs and one real trace.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "engine/frag.h"
#include "model/input_error.h"
#include "sim/alibaba_reader.h"
#include "sim/frag_experiment.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using frag::GpuChoice;
using frag::NodeSpec;
using frag::NodeState;
using frag::PodSpec;

PodSpec pod(int64_t cpu, int gpus, int32_t milli, uint32_t models = frag::kAnyModel,
            int64_t mem = 1024) {
  PodSpec p;
  p.cpu_milli = cpu;
  p.mem_mib = mem;
  p.num_gpus = gpus;
  p.gpu_milli = milli;
  p.models = models;
  return p;
}

NodeSpec node(int64_t cpu, int gpus, int model = 0, int64_t mem = 256 * 1024) {
  return NodeSpec{cpu, mem, gpus, model};
}

// Places `pods` in order with `policy`; returns the node of each (-1: failed). `nodes` ends in
// the final state.
std::vector<int> place_all(const std::string& policy, std::vector<NodeState>& nodes,
                           const std::vector<PodSpec>& pods, uint64_t seed = 42) {
  const auto target = frag::target_workload(pods);
  frag::FragMemo memo(&target);
  std::vector<int> order(nodes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  Rng rng(seed);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  const frag::PlacementContext ctx{&nodes, &memo, &order};
  auto placer = frag::make_placer(policy);
  std::vector<int> where;
  for (const PodSpec& p : pods) {
    GpuChoice c;
    const int n = placer->choose(ctx, p, rng, c);
    if (n >= 0) frag::place(nodes[static_cast<size_t>(n)], p, c);
    where.push_back(n);
  }
  return where;
}

std::vector<NodeState> make_nodes(const std::vector<NodeSpec>& specs) {
  std::vector<NodeState> nodes;
  for (const auto& s : specs) nodes.push_back(frag::make_node(s));
  return nodes;
}

fs::path tmp(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("tessera-frag-" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir / name;
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

TEST(FragPolicies, NeverOvercommitGpuCpuOrMemory) {
  std::vector<PodSpec> pods;
  Rng r(7);
  for (int i = 0; i < 400; ++i) {
    const int kind = static_cast<int>(r.below(4));
    const int64_t cpu = 1000 + static_cast<int64_t>(r.below(16)) * 1000;
    const int64_t mem = 1024 + static_cast<int64_t>(r.below(64)) * 1024;
    if (kind == 0) pods.push_back(pod(cpu, 0, 0, frag::kAnyModel, mem));
    if (kind == 1)
      pods.push_back(
          pod(cpu, 1, 100 + static_cast<int32_t>(r.below(9)) * 100, frag::kAnyModel, mem));
    if (kind == 2) pods.push_back(pod(cpu, 1, 1000, frag::kAnyModel, mem));
    if (kind == 3) pods.push_back(pod(cpu, 2 << r.below(3), 1000, frag::kAnyModel, mem));
  }
  const std::vector<NodeSpec> specs = {node(32000, 8), node(64000, 2), node(16000, 4),
                                       node(96000, 8), node(8000, 1, 0, 32 * 1024)};
  for (const auto& policy : frag::placer_names()) {
    auto nodes = make_nodes(specs);
    const auto where = place_all(policy, nodes, pods);
    std::vector<int64_t> cpu(specs.size()), mem(specs.size()), gpu(specs.size());
    for (size_t i = 0; i < pods.size(); ++i) {
      if (where[i] < 0) continue;
      const auto n = static_cast<size_t>(where[i]);
      cpu[n] += pods[i].cpu_milli;
      mem[n] += pods[i].mem_mib;
      gpu[n] += pods[i].total_gpu_milli();
    }
    for (size_t n = 0; n < specs.size(); ++n) {
      EXPECT_LE(cpu[n], specs[n].cpu_milli) << policy;
      EXPECT_LE(mem[n], specs[n].mem_mib) << policy;
      EXPECT_EQ(nodes[n].cpu_left, specs[n].cpu_milli - cpu[n]) << policy;
      EXPECT_EQ(nodes[n].gpu_left_total(), specs[n].num_gpus * 1000 - gpu[n]) << policy;
      for (int g = 0; g < nodes[n].num_gpus; ++g) {
        EXPECT_GE(nodes[n].gpu_left[static_cast<size_t>(g)], 0) << policy;
        EXPECT_LE(nodes[n].gpu_left[static_cast<size_t>(g)], 1000) << policy;
      }
    }
  }
}

TEST(FragPolicies, HonourGpuModels) {
  // Node 0 and 1 are model 0, node 2 is model 1. Pods accept only model 1; one accepts a
  // model the cluster does not have (mask 0) and must never run.
  const std::vector<NodeSpec> specs = {node(64000, 4, 0), node(64000, 4, 0), node(64000, 4, 1)};
  std::vector<PodSpec> pods(6, pod(1000, 1, 500, 1u << 1));
  pods.push_back(pod(1000, 1, 1000, 0));
  for (const auto& policy : frag::placer_names()) {
    auto nodes = make_nodes(specs);
    const auto where = place_all(policy, nodes, pods);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(where[static_cast<size_t>(i)], 2) << policy;
    EXPECT_EQ(where.back(), -1) << policy;
  }
}

TEST(FragPolicies, PodThatCannotFitFailsAndStaysOut) {
  const std::vector<NodeSpec> specs = {node(16000, 2), node(16000, 2)};
  const std::vector<PodSpec> pods = {pod(1000, 4, 1000), pod(64000, 1, 1000), pod(1000, 1, 1000)};
  for (const auto& policy : frag::placer_names()) {
    auto nodes = make_nodes(specs);
    const auto where = place_all(policy, nodes, pods);
    EXPECT_EQ(where[0], -1) << policy;  // 4 GPUs: no node has them
    EXPECT_EQ(where[1], -1) << policy;  // 64 CPUs: no node has them
    EXPECT_GE(where[2], 0) << policy;
    EXPECT_EQ(nodes[0].gpu_left_total() + nodes[1].gpu_left_total(), 3000) << policy;
  }
}

// Two half-GPU pods, then a pod of two whole GPUs, on two 2-GPU nodes. A packing policy puts
// both halves on one GPU and keeps a node whole; spreading them strands the big pod.
TEST(FragPolicies, PackingPoliciesKeepANodeWholeWhereRandomMayNot) {
  const std::vector<NodeSpec> specs = {node(64000, 2), node(64000, 2)};
  const std::vector<PodSpec> pods = {pod(2000, 1, 500), pod(2000, 1, 500), pod(4000, 2, 1000)};
  for (const char* policy : {"bestfit", "gpupacking", "fgd", "tessera-pack"}) {
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      auto nodes = make_nodes(specs);
      EXPECT_GE(place_all(policy, nodes, pods, seed)[2], 0) << policy << " seed " << seed;
    }
  }
  int random_failures = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    auto nodes = make_nodes(specs);
    random_failures += place_all("random", nodes, pods, seed)[2] < 0 ? 1 : 0;
  }
  EXPECT_GT(random_failures, 0);
}

TEST(FragMeasure, FragmentIsFreeGpuTooSmallForTheTarget) {
  NodeState n = frag::make_node(node(16000, 2));
  frag::place(n, pod(1000, 1, 700), GpuChoice{1000});  // GPUs: 1000, 300 free
  const std::vector<frag::TargetShape> half = {{1000, 500, 1, frag::kAnyModel, 1.0}};
  EXPECT_DOUBLE_EQ(frag::node_fragment(n, half), 300);  // the 300 left can't take a half
  const std::vector<frag::TargetShape> cpu_only = {{1000, 0, 0, frag::kAnyModel, 1.0}};
  EXPECT_DOUBLE_EQ(frag::node_fragment(n, cpu_only), 1300);  // never uses GPUs
  const std::vector<frag::TargetShape> big_cpu = {{64000, 500, 1, frag::kAnyModel, 1.0}};
  EXPECT_DOUBLE_EQ(frag::node_fragment(n, big_cpu), 1300);  // lacks CPU: all free is fragment
  const std::vector<frag::TargetShape> mix = {{1000, 500, 1, frag::kAnyModel, 0.5},
                                              {1000, 0, 0, frag::kAnyModel, 0.5}};
  EXPECT_DOUBLE_EQ(frag::node_fragment(n, mix), 0.5 * 300 + 0.5 * 1300);
}

TEST(FragMeasure, TargetWorkloadCoversThePopularShapes) {
  std::vector<PodSpec> pods(90, pod(1000, 1, 500));
  for (int i = 0; i < 6; ++i) pods.push_back(pod(2000, 1, 1000));
  for (int i = 0; i < 4; ++i) pods.push_back(pod(4000, 8, 1000));
  const auto t = frag::target_workload(pods, 0.95);
  ASSERT_EQ(t.size(), 2u);  // 90 % + 6 % >= 95 %; the 8-GPU shape is left out
  EXPECT_NEAR(t[0].freq, 90.0 / 96.0, 1e-12);
  EXPECT_NEAR(t[0].freq + t[1].freq, 1.0, 1e-12);
}

TEST(FragExperiment, ArrivalsReachTheInflatedDemand) {
  std::vector<PodSpec> pods;
  for (int i = 0; i < 50; ++i) pods.push_back(pod(1000, 1, 100 + 10 * i));
  const int64_t capacity = 20000;
  Rng rng(42);
  const auto seq = arrival_sequence(pods, capacity, 1.3, rng);
  int64_t demand = 0;
  for (const auto& p : seq) demand += p.total_gpu_milli();
  EXPECT_LE(demand, 26000);
  EXPECT_GT(demand, 26000 - 1000);
  Rng rng2(42);
  const auto thinned = arrival_sequence(pods, capacity, 0.5, rng2);
  demand = 0;
  for (const auto& p : thinned) demand += p.total_gpu_milli();
  EXPECT_LE(demand, 10000);
}

AlibabaCluster small_cluster() {
  return parse_alibaba_nodes(
      "sn,cpu_milli,memory_mib,gpu,model\n"
      "n0,32000,131072,4,V100M16\nn1,32000,131072,2,T4\nn2,64000,262144,8,G2\n",
      "nodes.csv");
}

AlibabaPods small_pods(const AlibabaCluster& c) {
  std::string text = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n";
  for (int i = 0; i < 40; ++i) {
    text += "p" + std::to_string(i) + ",2000,4096," + (i % 5 == 0 ? "0,0," : "1,") +
            (i % 5 == 0 ? "" : std::to_string(i % 3 == 0 ? 1000 : 250 + 50 * (i % 4)) + ",") +
            (i % 7 == 0 ? "T4|G2" : "") + "\n";
  }
  return parse_alibaba_pods(text, "pods.csv", c);
}

TEST(FragExperiment, SameSeedSameCurveDifferentSeedsAveraged) {
  const AlibabaCluster c = small_cluster();
  const AlibabaPods p = small_pods(c);
  FragOptions opt;
  opt.policy = "fgd";
  opt.seeds = 3;
  const FragResult a = run_frag(c, p, opt), b = run_frag(c, p, opt);
  ASSERT_EQ(a.curve.size(), 131u);
  for (size_t i = 0; i < a.curve.size(); ++i) {
    EXPECT_EQ(a.curve[i].allocated_pct, b.curve[i].allocated_pct);
    EXPECT_EQ(a.curve[i].frag_ratio_pct, b.curve[i].frag_ratio_pct);
  }
  EXPECT_EQ(a.seeds, (std::vector<uint64_t>{42, 43, 44}));
  double mean = 0;
  for (const auto& r : a.runs) mean += r.curve[130].allocated_pct / 3.0;
  EXPECT_NEAR(a.curve[130].allocated_pct, mean, 1e-9);
  // Allocation never exceeds arrivals nor capacity.
  for (const auto& pt : a.curve) {
    EXPECT_LE(pt.allocated_pct, pt.arrived_pct + 0.5 + 1e-9);
    EXPECT_LE(pt.allocated_pct, 100.0);
  }
}

TEST(FragReader, PodsParseGpuSpecAgainstClusterModels) {
  const AlibabaCluster c = small_cluster();
  ASSERT_EQ(c.models, (std::vector<std::string>{"V100M16", "T4", "G2"}));
  EXPECT_EQ(c.total_gpus(), 14);
  const AlibabaPods p = parse_alibaba_pods(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n"
      "a,1000,100,1,500,T4|G2,LS\nb,1000,100,2,1000,,BE\nc,1000,100,1,1000,A100,LS\n",
      "pods.csv", c);
  EXPECT_EQ(p.pods[0].models, (1u << 1) | (1u << 2));
  EXPECT_EQ(p.pods[1].models, frag::kAnyModel);
  EXPECT_EQ(p.pods[2].models, 0u);  // only a model this cluster lacks: never placeable
}

TEST(FragReader, BadCsvNamesFileLineAndColumn) {
  const AlibabaCluster c = small_cluster();
  try {
    parse_alibaba_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1000,1,1,500\nb,x,1,1,500\n",
                       "pods.csv", c);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("pods.csv:3"), std::string::npos) << m;
    EXPECT_NE(m.find("cpu_milli"), std::string::npos) << m;
  }
  try {
    parse_alibaba_nodes("sn,cpu_milli,memory_mib,gpu,model\nn0,1000,1,12,T4\n", "nodes.csv");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("nodes.csv:2"), std::string::npos) << m;
    EXPECT_NE(m.find("gpu"), std::string::npos) << m;
  }
  EXPECT_THROW(parse_alibaba_nodes("sn,cpu,memory_mib,gpu,model\n", "n.csv"), InputError);
}

TEST(FragCli, WritesTheCurveAsJson) {
  const auto nodes = tmp("nodes.csv"), pods = tmp("pods.csv"), out = tmp("out.json");
  write(nodes, "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,131072,4,T4\nn1,64000,262144,8,G2\n");
  std::string text = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
  for (int i = 0; i < 30; ++i) {
    text += "p" + std::to_string(i) + ",2000,1024,1," + (i % 2 ? "1000" : "300") + "\n";
  }
  write(pods, text);
  const auto [status, output] =
      testing::run_tessera("frag --nodes " + nodes.string() + " --pods " + pods.string() +
                           " --policy tessera-pack --seeds 2 --inflate 1.3 --json " + out.string());
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("arrived%"), std::string::npos) << output;
  std::ifstream in(out);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["policy"], "tessera-pack");
  EXPECT_EQ(j["seeds"], nlohmann::json({42, 43}));
  EXPECT_EQ(j["total_gpus"], 12);
  ASSERT_EQ(j["curve"].size(), 130u);
  EXPECT_EQ(j["curve"][0]["arrived_pct"], 1);
  EXPECT_EQ(j["curve"][129]["arrived_pct"], 130);
  for (const auto& pt : j["curve"]) {
    EXPECT_TRUE(pt.contains("allocated_pct"));
    EXPECT_TRUE(pt.contains("frag_ratio_pct"));
  }
}

TEST(FragCli, UnknownPolicyIsAnError) {
  const auto [status, output] = testing::run_tessera("frag --policy nosuch --seeds 1 --quiet");
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find("unknown placement policy"), std::string::npos) << output;
}

// The published FGD result on the default trace: 95.39 % of GPUs allocated at 130 % demand
// (mean of 10 seeds). One of our seeds should land within a couple of points, and ours
// should allocate more than FGD on the same seeds.
TEST(FragRealTrace, DefaultTraceMatchesPublishedFgd) {
  const std::string dir = std::string(TESSERA_SHARED_DATA) + "/alibaba-gpu-2023";
  if (!fs::exists(dir + "/openb_pod_list_default.csv")) GTEST_SKIP() << "no shared data";
  const AlibabaCluster c = read_alibaba_nodes(dir + "/openb_node_list_gpu_node.csv");
  const AlibabaPods p = read_alibaba_pods(dir + "/openb_pod_list_default.csv", c);
  EXPECT_EQ(c.total_gpus(), 6212);
  FragOptions opt;
  opt.seeds = 3;
  opt.policy = "fgd";
  const FragResult fgd = run_frag(c, p, opt);
  EXPECT_NEAR(fgd.curve[130].allocated_pct, 95.39, 1.5);
  EXPECT_NEAR(fgd.curve[50].allocated_pct, 50.0, 0.5);  // no failures at half load
  opt.policy = "tessera-pack";
  const FragResult ours = run_frag(c, p, opt);
  EXPECT_GT(ours.curve[130].allocated_pct, fgd.curve[130].allocated_pct);
}

}  // namespace
}  // namespace tessera

// The scheduler's model of a cluster: capacity from every bound pod, gangs from pod groups,
// and the engine's decisions on it.
#include "control/kube/cluster_model.h"
#include "control/kube/workload_groups.h"

#include <gtest/gtest.h>

#include <random>
#include <sstream>

#include "engine/cycle.h"
#include "engine/policy.h"

namespace tessera::kube {
namespace {

NodeInfo gpu_node(const std::string& name, const std::string& rack, int gpus = 8,
                  bool ready = true) {
  NodeInfo n;
  n.name = name;
  n.labels = {{"kubernetes.io/hostname", name},
              {"rack", rack},
              {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}};
  n.gpu_product = "NVIDIA-H100-80GB-HBM3";
  n.ready = ready;
  n.gpus = gpus;
  n.cpu_milli = 96000;
  n.mem_mib = 1 << 20;
  return n;
}

PodInfo gpu_pod(const std::string& name, int gpus, const std::string& group = "",
                const std::string& scheduler = "tessera", const std::string& node = "") {
  PodInfo p;
  p.ns = "team-a";
  p.name = name;
  p.uid = "uid-" + name;
  p.scheduler_name = scheduler;
  p.node_name = node;
  p.phase = node.empty() ? "Pending" : "Running";
  p.group = group;
  p.queue = "team-a";
  p.demand.gpus = gpus;
  p.demand.cpu_milli = 1000;
  p.created = 100;
  return p;
}

ModelOptions options() {
  ModelOptions o;
  o.topology_labels = {"rack"};
  return o;
}

TEST(ClusterModel, CountsEveryBoundPodIncludingOtherSchedulersAndSkipsNotReadyNodes) {
  ClusterModel m(options());
  m.upsert_node(gpu_node("n0", "r0"));
  m.upsert_node(gpu_node("n1", "r0"));
  m.upsert_node(gpu_node("n2", "r1", 8, /*ready=*/false));
  m.upsert_pod(gpu_pod("other", 6, "", "default-scheduler", "n0"), 0);
  m.upsert_pod(gpu_pod("daemon", 0, "", "default-scheduler", "n1"), 0);
  m.refresh();
  EXPECT_EQ(m.cluster().nodes().size(), 2u);  // n2 is NotReady
  EXPECT_EQ(m.cluster().racks().size(), 1u);
  EXPECT_EQ(m.ledger().allocated_milli(), 6000);
  EXPECT_EQ(m.ledger().node_free_whole(*m.node_id("n0")), 2);
  // Over-committed by someone else: counted up to what is there, never thrown.
  m.upsert_pod(gpu_pod("greedy", 4, "", "default-scheduler", "n0"), 0);
  EXPECT_EQ(m.ledger().node_free_whole(*m.node_id("n0")), 0);
  EXPECT_EQ(m.overflow_pods(), 1u);
  // The pod finishes: its GPUs come back.
  m.remove_pod("uid-other");
  EXPECT_EQ(m.ledger().node_free_whole(*m.node_id("n0")), 6);
  // The node becomes Ready: rebuilt with it, the bound pods replayed (the greedy pod now fits
  // whole).
  m.upsert_node(gpu_node("n2", "r1"));
  m.refresh();
  EXPECT_EQ(m.cluster().nodes().size(), 3u);
  EXPECT_EQ(m.ledger().allocated_milli(), 4000);
  EXPECT_EQ(m.overflow_pods(), 0u);
}

TEST(ClusterModel, AGangWaitsForItsPodGroupAndItsPodsThenStartsWhole) {
  ClusterModel m(options());
  for (int i = 0; i < 4; ++i) m.upsert_node(gpu_node("n" + std::to_string(i), "r0"));
  for (int i = 0; i < 3; ++i) m.upsert_pod(gpu_pod("w" + std::to_string(i), 8, "train"), 0);
  m.refresh();
  CycleInput in = m.prepare(200);
  EXPECT_TRUE(in.pending.empty());
  EXPECT_NE(m.gang("team-a/train")->waiting.find("waiting for PodGroup"), std::string::npos);

  PodGroupInfo g;
  g.ns = "team-a";
  g.name = "train";
  g.min_member = 4;
  m.upsert_group(g);
  in = m.prepare(200);
  EXPECT_TRUE(in.pending.empty());
  EXPECT_NE(m.gang("team-a/train")->waiting.find("3 of minMember 4"), std::string::npos);

  m.upsert_pod(gpu_pod("w3", 8, "train"), 0);
  in = m.prepare(200);
  ASSERT_EQ(in.pending.size(), 1u);
  EXPECT_EQ(in.pending[0].spec->min_members, 4);
  EXPECT_EQ(in.pending[0].spec->demand.gpus, 8);

  Policy policy = make_policy("fair", 1);
  Snapshot snap;
  snap.now = 200;
  snap.state = &m.ledger();
  snap.pending = in.pending;
  snap.running = in.running;
  snap.queues = &m.tree();
  const Decisions d = schedule_cycle(snap, policy);
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].alloc.members(), 4);
}

TEST(ClusterModel, NodeSelectorsAndTaintsRestrictWhereAGangMayGo) {
  ClusterModel m(options());
  NodeInfo a100 = gpu_node("a", "r0");
  a100.labels["nvidia.com/gpu.product"] = a100.gpu_product = "NVIDIA-A100-SXM4-80GB";
  m.upsert_node(a100);
  NodeInfo tainted = gpu_node("t", "r0");
  tainted.taints.push_back({"dedicated", "infer", "NoSchedule"});
  m.upsert_node(tainted);
  m.upsert_node(gpu_node("h", "r0"));
  PodInfo p = gpu_pod("x", 8);
  p.constraints.selector = {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}};
  m.upsert_pod(p, 0);
  m.refresh();
  CycleInput in = m.prepare(10);
  ASSERT_EQ(in.pending.size(), 1u);
  const auto& set = in.pending[0].spec->eligible_nodes;
  ASSERT_NE(set, nullptr);
  EXPECT_EQ(set->size(), 1u);
  EXPECT_TRUE(set->contains(*m.node_id("h")));
}

TEST(ClusterModel, AssumedBindsHoldCapacityUntilForgotten) {
  ClusterModel m(options());
  m.upsert_node(gpu_node("n0", "r0"));
  m.upsert_pod(gpu_pod("p", 4), 0);
  m.refresh();
  const NodeId n = *m.node_id("n0");
  const GpuId first = m.cluster().node(n).first_gpu;
  m.assume("uid-p", n, {{first, 1000}, {first + 1, 1000}, {first + 2, 1000}, {first + 3, 1000}});
  EXPECT_EQ(m.ledger().node_free_whole(n), 4);
  CycleInput in = m.prepare(1);
  EXPECT_TRUE(in.pending.empty());  // in flight: not offered again
  // The watch shows it bound where we said: the slot stays.
  PodInfo bound = gpu_pod("p", 4, "", "tessera", "n0");
  bound.gpu_index = {0, 1, 2, 3};
  m.upsert_pod(bound, 0);
  EXPECT_EQ(m.ledger().node_free_whole(n), 4);
  // A second pod's bind fails: its capacity comes back.
  m.upsert_pod(gpu_pod("q", 2), 0);
  m.assume("uid-q", n, {{first + 4, 1000}, {first + 5, 1000}});
  EXPECT_EQ(m.ledger().node_free_whole(n), 2);
  m.forget("uid-q");
  EXPECT_EQ(m.ledger().node_free_whole(n), 4);
}

// What prepare() derived, gang by gang, and what it offered (in order): two prepare() calls
// that agree on this offer the engine the same cycle.
std::string derived(const ClusterModel& m, const CycleInput& in) {
  std::ostringstream o;
  for (const auto& [key, g] : m.gangs()) {
    o << key << " wait[" << g.waiting << "] p" << g.pending_id << " r" << g.running_id << " b"
      << g.binding << " pods";
    for (const auto& u : g.pending_pods) o << " " << u;
    o << " |";
    for (const auto& u : g.bound_pods) o << " " << u;
    o << " |";
    for (const auto& u : g.terminating_pods) o << " " << u;
    if (g.pending_id != kNoId) {
      o << " spec " << g.pending_spec.min_members << "-" << g.pending_spec.max_members << "x"
        << g.pending_spec.demand.gpus << " t" << g.pending_spec.tenant << " n"
        << (g.pending_spec.eligible_nodes ? g.pending_spec.eligible_nodes->size() : 0);
    }
    if (g.running_id != kNoId) {
      o << " run " << g.running_alloc.members() << " since " << g.running_since << " limit "
        << g.running_limit_w;
      for (NodeId n : g.running_alloc.member_node) o << " " << n;
    }
    o << "\n";
  }
  for (const PendingJob& p : in.pending) o << "P" << p.id << "@" << p.queued_since << " ";
  for (const RunningJob& r : in.running) {
    o << "R" << r.id << "@" << r.start_time << "+" << r.attained_at(1000) << " ";
  }
  return o.str();
}

// prepare() derives again only the gangs something touched: after every kind of change (pods
// created, bound, deleted, evicted, assumed and forgotten, power limits, groups, nodes), what
// it offers equals what deriving every gang again offers.
TEST(ClusterModel, DerivesOnlyTouchedGangsAndOffersWhatDerivingAllWould) {
  ClusterModel m(options());
  for (int i = 0; i < 6; ++i)
    m.upsert_node(gpu_node("n" + std::to_string(i), "r" + std::to_string(i / 3)));
  m.refresh();
  std::mt19937_64 rng(5);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  std::vector<std::string> names;
  double now = 200;
  int checked = 0;
  for (int step = 0; step < 600; ++step) {
    now += 1;
    const int what = pick(10);
    if (what <= 2 || names.empty()) {  // a new pod, alone or in one of 4 groups
      const std::string name = "p" + std::to_string(step);
      const std::string group = pick(2) == 0 ? "" : "g" + std::to_string(pick(4));
      PodInfo p = gpu_pod(name, 1 + pick(2), group);
      p.created = now;
      m.upsert_pod(p, now);
      names.push_back(name);
    } else {
      const std::string name = names[static_cast<size_t>(pick(static_cast<int>(names.size())))];
      PodRecord* r = m.pod("uid-" + name);
      if (r == nullptr) continue;
      PodInfo p = r->info;
      const NodeId node = static_cast<NodeId>(pick(6));
      switch (what) {
        case 3:  // bound by the watch (where it fits)
          if (p.node_name.empty() && m.ledger().node_free_whole(node) >= p.demand.gpus) {
            p.node_name = m.cluster().node(node).name;
            p.phase = "Running";
            p.bound_at = pick(4) == 0 ? 0 : now;
            m.forget(p.uid);
            m.upsert_pod(p, now);
          }
          break;
        case 4:  // assumed (a bind in flight), or forgotten
          if (p.node_name.empty() && r->assumed_node.empty() &&
              m.ledger().node_free_whole(node) >= p.demand.gpus) {
            std::vector<GpuShare> shares;
            const GpuId first = m.cluster().node(node).first_gpu;
            for (GpuId g = first; g < first + 8 && shares.size() < size_t(p.demand.gpus); ++g) {
              if (m.ledger().gpu_free(g) == kMilliPerGpu) shares.push_back({g, kMilliPerGpu});
            }
            m.assume(p.uid, node, shares);
          } else {
            m.forget(p.uid);
          }
          break;
        case 5:
          m.remove_pod(p.uid);
          break;
        case 6:
          m.mark_evicting(p.uid);
          break;
        case 7: {  // a power limit written to a running member
          std::vector<std::string> running;
          for (const auto& [key, g] : m.gangs()) {
            if (g.running_id != kNoId) running.push_back(g.bound_pods.front());
          }
          const std::string uid =
              running.empty()
                  ? p.uid
                  : running[static_cast<size_t>(pick(static_cast<int>(running.size())))];
          m.note_power_limit(uid, 100.0 * (1 + pick(3)));
          break;
        }
        case 8: {  // a group's minMember
          PodGroupInfo g;
          g.ns = "team-a";
          g.name = "g" + std::to_string(pick(4));
          g.min_member = 1 + pick(3);
          if (pick(4) == 0) {
            m.remove_group(g.key());
          } else {
            m.upsert_group(g);
          }
          break;
        }
        default: {  // a node's labels (eligibility) or capacity
          NodeInfo n = gpu_node("n" + std::to_string(node), "r" + std::to_string(node / 3));
          if (pick(2) == 0) n.labels["pool"] = "x" + std::to_string(pick(2));
          m.upsert_node(n);
          m.refresh();
          break;
        }
      }
    }
    if (pick(4) == 0) continue;  // several changes between cycles, sometimes
    const CycleInput kept = m.prepare(now);
    const std::string got = derived(m, kept);
    m.mark_all_stale();
    const CycleInput all = m.prepare(now);
    ASSERT_EQ(got, derived(m, all)) << "step " << step;
    ++checked;
  }
  EXPECT_GT(checked, 300);
}

}  // namespace
}  // namespace tessera::kube

namespace tessera::kube {
namespace {

// A group named by two conventions at once waits as invalid, saying which; an Indexed Job's
// pods count only with the Job that owns them (its uid), and its last pods after others
// succeeded are a smaller gang.
TEST(ClusterModel, AGroupOfTwoConventionsIsInvalidAndAJobsPodsNeedTheirOwnJob) {
  ClusterModel m(options());
  m.upsert_node(gpu_node("n0", "r0"));
  PodInfo a = gpu_pod("a", 1, "g");
  a.group_api = GroupApi::kSchedulerPlugins;
  a.min_member = 2;
  PodInfo b = gpu_pod("b", 1, "g");
  b.group_api = GroupApi::kVolcano;
  m.upsert_pod(a, 0);
  m.upsert_pod(b, 0);
  m.refresh();
  m.prepare(1);
  const Gang* g = m.gang("team-a/g");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->waiting_code, "Invalid");
  EXPECT_NE(g->waiting.find("a gang follows one convention"), std::string::npos) << g->waiting;

  // Two pods of Indexed Job "train" (uid j1), its last two of six after four succeeded.
  nlohmann::json job = {{"metadata", {{"name", "train"}, {"namespace", "team-a"}, {"uid", "j1"}}},
                        {"spec", {{"parallelism", 4}, {"completions", 6}}},
                        {"status", {{"succeeded", 4}}}};
  m.upsert_group(parse_job(job));
  for (const char* name : {"train-4", "train-5"}) {
    PodInfo p = gpu_pod(name, 2, "train");
    p.group_api = GroupApi::kJob;
    p.owner_uid = "j0";  // an earlier Job of the same name
    m.upsert_pod(p, 0);
  }
  m.refresh();
  m.prepare(2);
  EXPECT_EQ(m.gang("team-a/train")->waiting_code, "PodGroup");  // not its Job's pods
  EXPECT_NE(m.gang("team-a/train")->waiting.find("earlier workload"), std::string::npos);
  for (const char* name : {"train-4", "train-5"}) {
    PodInfo p = gpu_pod(name, 2, "train");
    p.group_api = GroupApi::kJob;
    p.owner_uid = "j1";
    m.upsert_pod(p, 0);
  }
  m.refresh();
  m.prepare(3);
  const Gang* train = m.gang("team-a/train");
  EXPECT_EQ(train->waiting, "");
  EXPECT_EQ(train->pending_spec.min_members, 2);  // min(4, 6 - 4)
}

// A running gang whose members differ only in CPU or memory (a PyTorchJob's workers carry the
// operator's init container) counts as running, at the least of its members' CPU: its queue's
// usage holds its GPUs, and preempting it frees no more than its pods hold. Members with unlike
// GPUs (a Ray head without any) do not.
TEST(ClusterModel, ARunningGangOfMembersUnlikeInCpuCountsAtTheLeastOfThem) {
  ClusterModel m(options());
  m.upsert_node(gpu_node("n0", "r0"));
  PodInfo master = gpu_pod("master", 4, "pt", "tessera", "n0");
  PodInfo worker = gpu_pod("worker", 4, "pt", "tessera", "n0");
  worker.demand.cpu_milli = 1100;  // the init container's 100m on top
  for (PodInfo* p : {&master, &worker}) {
    p->group_api = GroupApi::kSchedulerPlugins;
    p->min_member = 2;
    m.upsert_pod(*p, 0);
  }
  m.refresh();
  CycleInput in = m.prepare(1);
  ASSERT_EQ(in.running.size(), 1u);
  EXPECT_EQ(in.running[0].alloc->gpu_milli(), 8000);
  EXPECT_EQ(in.running[0].alloc->cpu_milli_per_member, 1000);
  EXPECT_EQ(in.running[0].spec->demand.cpu_milli, 1000);

  PodInfo head = gpu_pod("head", 0, "ray", "tessera", "n0");
  PodInfo gpu_worker = gpu_pod("gpu-worker", 2, "ray", "tessera", "n0");
  for (PodInfo* p : {&head, &gpu_worker}) {
    p->group_api = GroupApi::kSchedulerPlugins;
    p->min_member = 2;
    m.upsert_pod(*p, 0);
  }
  m.refresh();
  in = m.prepare(2);
  EXPECT_EQ(in.running.size(), 1u);  // the Ray gang's members are unlike in GPUs
}

}  // namespace
}  // namespace tessera::kube

// One behaviour suite over every combination of the cycle's stages (engine/stages/: backfill
// with EASY's reservation or not, preemption, reclaim, elastic resizing, power and thermal
// admission, data locality, reserved GPUs), as EveryOrderWithQueues runs over every queue order:
// over random snapshots, applying a cycle's decisions never over-commits a GPU, gangs start whole,
// queue limits hold, every waiting job is started or told why once, no running job is both
// preempted and resized, no job starts on GPUs reserved for someone else, and the same snapshot and
// seed give the same decisions.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/cycle.h"
#include "engine/fair_share.h"
#include "engine/power_budget.h"
#include "engine/rng.h"
#include "insight/power_model.h"
#include "model/cluster_spec.h"
#include "model/queue_tree.h"
#include "test_util.h"

namespace tessera {
namespace {

using testing::gang;
using testing::World;

struct Stages {
  Backfill backfill = Backfill::kEasy;
  bool preemption = false, reclaim = false, elastic = false, power = false, locality = false,
       reserved = false;

  std::string name() const {
    std::string n = backfill == Backfill::kNone   ? "NoBackfill"
                    : backfill == Backfill::kEasy ? "Easy"
                                                  : "Greedy";
    if (preemption) n += "Preempt";
    if (reclaim) n += "Reclaim";
    if (elastic) n += "Elastic";
    if (power) n += "Power";
    if (locality) n += "Locality";
    if (reserved) n += "Reserved";
    return n;
  }
};

std::vector<Stages> every_combination() {
  std::vector<Stages> out;
  for (Backfill b : {Backfill::kNone, Backfill::kEasy, Backfill::kGreedy}) {
    for (int bits = 0; bits < 64; ++bits) {
      Stages s;
      s.backfill = b;
      s.preemption = (bits & 1) != 0;
      s.reclaim = (bits & 2) != 0;
      s.elastic = (bits & 4) != 0;
      s.power = (bits & 8) != 0;
      s.locality = (bits & 16) != 0;
      s.reserved = (bits & 32) != 0;
      out.push_back(s);
    }
  }
  return out;
}

PowerModel flat_model() {
  PowerModel::TypeCurves v100;
  v100[""] = PowerCurve({{100, 0.6, 95}, {150, 0.85, 130}, {200, 0.97, 165}, {250, 1.0, 200}});
  return PowerModel({{"V100", v100}});
}

// A random world: 2 racks of 2 nodes of 4 GPUs, three leaf queues (two with limits), some running
// jobs (some elastic, some with estimates), a random queue of gangs, elastic gangs and
// fractional jobs.
struct RandomWorld {
  explicit RandomWorld(uint64_t seed) : w(make_uniform_cluster(1, 2, 2, 4)) {
    const QueueId research = tree.add(kRootQueue, testing::queue_spec("research", 2, 4, 10));
    tree.add(kRootQueue, testing::queue_spec("prod", 1, 4));
    tree.add(research, testing::queue_spec("nlp", 1, 0, 6));
    tree.add(research, testing::queue_spec("vision", 1, 2));
    tree.finish();
    Interner tenants;  // tenants 0, 1, 2 are the leaves nlp, prod and vision
    for (const char* leaf : {"nlp", "prod", "vision"}) tenants.intern(leaf);
    tree.bind(tenants, "test");
    w.queues = &tree;
    w.now = 1000;
    Rng rng(seed);
    ClusterState scratch(w.cluster);
    for (int i = 0; i < 6; ++i) {
      JobSpec s = gang("r" + std::to_string(i), 1 + static_cast<int>(rng.below(2)),
                       1 + static_cast<int>(rng.below(2)), 0, static_cast<TenantId>(rng.below(3)),
                       static_cast<PriorityClass>(rng.below(4)));
      if (rng.below(3) == 0) s.min_members = 1;  // elastic: may shrink to one member
      s.checkpoint_interval = rng.below(2) == 0 ? 0 : 60;
      Allocation a;
      if (!make_scorer("bestfit")->place(scratch, s, s.max_members, rng, a)) continue;
      const double start = 100.0 * static_cast<double>(rng.below(5));
      const double end = rng.below(2) == 0 ? kUnknown : w.now + 50.0 * (1 + rng.below(6));
      w.add_running(s, a, start, end);
    }
    for (int i = 0; i < 14; ++i) {
      JobSpec s =
          gang("p" + std::to_string(i), 1 + static_cast<int>(rng.below(3)),
               1 + static_cast<int>(rng.below(2)), 10 + i, static_cast<TenantId>(rng.below(3)),
               static_cast<PriorityClass>(rng.below(4)));
      if (rng.below(4) == 0) s.min_members = 1;
      if (rng.below(5) == 0) {
        s.demand.gpus = 1;
        s.demand.gpu_milli = 250 * static_cast<int32_t>(1 + rng.below(3));
      }
      s.duration_estimate = 100.0 * static_cast<double>(rng.below(4));
      const JobId id = w.add_pending(s);
      if (rng.below(3) == 0) {
        // Its dataset is on one rack's nodes.
        const NodeId first = rng.below(2) == 0 ? 0 : 2;
        preferred[id] = std::make_shared<const NodeSet>(NodeSet{first, first + 1});
      }
    }
    bound =
        std::make_unique<BoundPowerModel>(model, w.cluster.gpu_types(), std::vector<std::string>{});
    power.model = bound.get();
    power.idle_w = 4 * (200 + 4 * 34.75);
    power.cap_w = power.idle_w + 165.25 * static_cast<double>(6 + rng.below(8));
    power.node_headroom_w = {-1, 400, -1, 700};
    // The last node's GPUs and one of the first's, reserved for one tenant: over a window that
    // holds now, or one that begins soon (jobs whose time limit ends before it may use them).
    reservation.name = "r";
    reservation.tenant = static_cast<TenantId>(seed % 3);
    reservation.start = seed % 2 == 0 ? w.now - 100 : w.now + 150;
    reservation.end = w.now + 1000;
    reservation.gpus = {1, 12, 13, 14, 15};
    for (size_t k = 0; k < w.pending.size(); ++k) {
      if (rng.below(2) == 0) w.specs[w.pending[k].id].time_limit = 100.0 * (1 + rng.below(3));
    }
  }

  Snapshot snapshot(const Stages& st, uint64_t cycle) const {
    Snapshot snap = w.snapshot(cycle);
    if (st.power) snap.power = &power;
    if (st.locality) {
      snap.preferred_nodes = &preferred;
      snap.locality_wait_seconds = 2000;  // some wait for their data, some no longer
    }
    if (st.reserved) snap.reservations = std::span(&reservation, 1);
    return snap;
  }

  World w;
  QueueTree tree;
  std::unordered_map<JobId, std::shared_ptr<const NodeSet>> preferred;
  PowerModel model = flat_model();
  std::unique_ptr<BoundPowerModel> bound;
  PowerView power;
  GpuReservation reservation;
};

Policy policy_for(const Stages& st, uint64_t seed) {
  Policy p = make_policy("las", seed);
  p.backfill = st.backfill;
  p.preemption = st.preemption;
  p.reclaim = st.reclaim;
  p.elastic = st.elastic;
  p.resize_interval = 60;
  return p;
}

// What a user would compare between two runs of one cycle.
std::string summary(const Decisions& d) {
  std::string s;
  for (const Preemption& p : d.preemptions) s += "P" + std::to_string(p.job) + ",";
  for (const Resize& r : d.resizes) {
    s += "R" + std::to_string(r.job) + ":" + std::to_string(r.alloc.members()) + ",";
  }
  for (const Start& st : d.starts) {
    s += "S" + std::to_string(st.job) + ":";
    for (const GpuShare& g : st.alloc.shares) s += std::to_string(g.gpu) + ".";
    s += ",";
  }
  for (const PendingReason& r : d.pending) {
    s += "W" + std::to_string(r.job) + ":" + std::to_string(static_cast<int>(r.code)) + ",";
  }
  return s;
}

class EveryStageCombination : public ::testing::TestWithParam<Stages> {};

TEST_P(EveryStageCombination, KeepsGpusLimitsAndGangsWholeAndIsDeterministic) {
  const Stages st = GetParam();
  // What the stages did over all seeds: each stage in the combination must have acted.
  size_t preempted = 0, resized = 0, power_held = 0, data_held = 0, blocked = 0, backfilled = 0,
         reserved_held = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const RandomWorld rw(seed);
    const World& w = rw.w;
    const Snapshot snap = rw.snapshot(st, seed);
    const Decisions d = schedule_cycle(snap, policy_for(st, seed));
    EXPECT_EQ(summary(d), summary(schedule_cycle(rw.snapshot(st, seed), policy_for(st, seed))));

    // Victims and resized gangs are running jobs, each touched once.
    std::map<JobId, const RunningJob*> running;
    for (const RunningJob& r : w.running) running[r.id] = &r;
    std::set<JobId> touched;
    for (const Preemption& p : d.preemptions) {
      ASSERT_TRUE(running.contains(p.job));
      EXPECT_TRUE(touched.insert(p.job).second) << "job " << p.job << " preempted twice";
      EXPECT_TRUE(st.preemption);
    }
    for (const Resize& r : d.resizes) {
      ASSERT_TRUE(running.contains(r.job));
      EXPECT_TRUE(touched.insert(r.job).second) << "job " << r.job << " preempted and resized";
      EXPECT_TRUE(st.elastic);
      const JobSpec& spec = *running[r.job]->spec;
      EXPECT_GE(r.alloc.members(), spec.min_members);
      EXPECT_LE(r.alloc.members(), spec.max_members);
    }

    // Applied in order (preemptions, shrinks, starts, growth), nothing is over-committed.
    ClusterState s = w.state;
    std::vector<Amounts> usage = compute_queue_shares(w.snapshot()).usage;
    auto charge = [&](const JobSpec& spec, const Allocation& a, int sign) {
      for (QueueId q = rw.tree.leaf_of(spec.tenant); q != kNoId; q = rw.tree.queue(q).parent) {
        usage[q] = sign > 0 ? usage[q] + amounts_of(a) : usage[q] - amounts_of(a);
      }
    };
    const std::vector<Amounts> before = usage;
    for (const Preemption& p : d.preemptions) {
      s.release(*running[p.job]->alloc);
      charge(*running[p.job]->spec, *running[p.job]->alloc, -1);
    }
    auto resize = [&](const Resize& r) {
      s.release(*running[r.job]->alloc);
      charge(*running[r.job]->spec, *running[r.job]->alloc, -1);
      ASSERT_NO_THROW(s.allocate(r.alloc));
      charge(*running[r.job]->spec, r.alloc, +1);
    };
    for (const Resize& r : d.resizes) {
      if (!r.grow) resize(r);
    }
    std::set<JobId> answered;
    for (const Start& start : d.starts) {
      const JobSpec& spec = w.specs[start.job];
      EXPECT_TRUE(answered.insert(start.job).second) << "job " << start.job << " twice";
      EXPECT_GE(start.alloc.members(), spec.min_members);
      EXPECT_LE(start.alloc.members(), spec.max_members);
      EXPECT_EQ(start.alloc.shares.size(),
                static_cast<size_t>(start.alloc.members() * start.alloc.gpus_per_member));
      ASSERT_NO_THROW(s.allocate(start.alloc)) << "job " << start.job;
      charge(spec, start.alloc, +1);
      if (st.reserved && !rw.reservation.open_to(spec, w.now)) {
        for (const GpuShare& g : start.alloc.shares) {
          EXPECT_TRUE(std::find(rw.reservation.gpus.begin(), rw.reservation.gpus.end(), g.gpu) ==
                      rw.reservation.gpus.end())
              << "job " << start.job << " of tenant " << spec.tenant << " on reserved GPU "
              << g.gpu;
        }
      }
    }
    for (const Resize& r : d.resizes) {
      if (r.grow) resize(r);
    }
    for (const PendingReason& r : d.pending) {
      EXPECT_TRUE(answered.insert(r.job).second) << "job " << r.job << " started and waits";
    }
    EXPECT_EQ(answered.size(), w.pending.size());
    preempted += d.preemptions.size();
    resized += d.resizes.size();
    for (const Start& start : d.starts) backfilled += start.backfilled ? 1 : 0;
    for (const PendingReason& r : d.pending) {
      power_held += r.code == PendingCode::kPowerCapped ? 1 : 0;
      data_held += r.code == PendingCode::kDataLocality ? 1 : 0;
      blocked += r.code == PendingCode::kBlockedByHead ? 1 : 0;
      reserved_held += r.code == PendingCode::kReservedGpus ? 1 : 0;
    }
    for (QueueId q = 0; q < rw.tree.size(); ++q) {
      EXPECT_TRUE(all_le(usage[q], rw.tree.queue(q).limit) || all_le(usage[q], before[q]))
          << "queue " << rw.tree.queue(q).path;
    }
  }
  // Each stage the combination has acted on some seed (so the invariants above were tested
  // with it at work), and none it lacks did.
  EXPECT_EQ(preempted > 0, st.preemption);
  EXPECT_EQ(resized > 0, st.elastic);
  EXPECT_EQ(power_held > 0, st.power);
  EXPECT_EQ(data_held > 0, st.locality);
  EXPECT_EQ(blocked > 0, st.backfill == Backfill::kNone);
  EXPECT_EQ(reserved_held > 0, st.reserved);
  if (st.backfill == Backfill::kEasy && !st.power) {
    EXPECT_GT(backfilled, 0u);
  }
  if (st.backfill != Backfill::kEasy) {
    EXPECT_EQ(backfilled, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Stages, EveryStageCombination, ::testing::ValuesIn(every_combination()),
                         [](const auto& p) { return p.param.name(); });

}  // namespace
}  // namespace tessera

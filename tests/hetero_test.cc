// Heterogeneity-aware placement (Policy::heterogeneity): the job that gains most from the fast
// GPU type gets it; the one that gains little takes the slow type, and nobody waits for a
// preferred type while another is free.
#include <gtest/gtest.h>

#include "engine/cycle.h"
#include "engine/policy.h"
#include "test_util.h"

namespace tessera {
namespace {

using testing::gang;
using testing::World;

struct TwoTypes {
  Cluster cluster;
  GpuTypeId v100, k80;
};

TwoTypes two_types(int gpus_each) {
  ClusterBuilder b;
  const GpuTypeId v100 = b.gpu_types().intern("V100");
  const GpuTypeId k80 = b.gpu_types().intern("K80");
  b.add_node("s", "r", "v", v100, static_cast<uint16_t>(gpus_each), 64000, 1 << 20);
  b.add_node("s", "r", "k", k80, static_cast<uint16_t>(gpus_each), 64000, 1 << 20);
  return {b.build(), v100, k80};
}

JobSpec with_speeds(JobSpec j, const TwoTypes& c, float v100, float k80) {
  j.type_speed.assign(c.cluster.gpu_types().size(), 0.0F);
  j.type_speed[c.v100] = v100;
  j.type_speed[c.k80] = k80;
  return j;
}

GpuTypeId type_of(const Cluster& c, const Start& s) {
  return c.node(s.alloc.member_node[0]).gpu_type;
}

TEST(Heterogeneity, TheJobThatGainsMostGetsTheFastType) {
  const TwoTypes c = two_types(1);
  World w(c.cluster);
  // b arrives first but barely gains from a V100; a runs 10x faster on it.
  const JobId b = w.add_pending(with_speeds(gang("b", 1, 1, 0), c, 1.0F, 0.8F));
  const JobId a = w.add_pending(with_speeds(gang("a", 1, 1, 1), c, 1.0F, 0.1F));
  Policy blind = make_policy("fifo", 1);
  Decisions d = schedule_cycle(w.snapshot(), blind);
  ASSERT_EQ(d.starts.size(), 2u);
  EXPECT_EQ(d.starts[0].job, b);
  EXPECT_EQ(type_of(w.cluster, d.starts[0]), c.v100);  // type-blind: first come, fast GPU
  Policy hetero = make_policy("fifo", 1);
  hetero.heterogeneity = true;
  d = schedule_cycle(w.snapshot(), hetero);
  ASSERT_EQ(d.starts.size(), 2u);
  for (const Start& s : d.starts) {
    EXPECT_EQ(type_of(w.cluster, s), s.job == a ? c.v100 : c.k80) << w.specs[s.job].name;
  }
}

TEST(Heterogeneity, APreferredTypeThatIsFullFallsBackToAnyType) {
  const TwoTypes c = two_types(1);
  World w(c.cluster);
  w.add_running(gang("busy", 1), testing::whole_gpus(w.cluster, 0, 0, 1));  // the V100
  const JobId a = w.add_pending(with_speeds(gang("a", 1, 1, 1), c, 1.0F, 0.1F));
  Policy hetero = make_policy("fifo", 1);
  hetero.heterogeneity = true;
  const Decisions d = schedule_cycle(w.snapshot(), hetero);
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job, a);
  EXPECT_EQ(type_of(w.cluster, d.starts[0]), c.k80);
}

}  // namespace
}  // namespace tessera

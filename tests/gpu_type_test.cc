// The built-in GPU type table: the types `tessera serve --virtual-gpu-type` and real clusters
// name must be known to the simulator's files too, without moving the ids of the older types.
#include "model/gpu_type.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/cluster_spec.h"

namespace tessera {
namespace {

TEST(GpuTypeTableTest, ExistingIdsAreUnchanged) {
  // A GpuTypeId is an index into the table: masks, per-type vectors and recorded results
  // depend on these staying where they were.
  const GpuTypeTable t = GpuTypeTable::builtin();
  const std::vector<std::string> before = {"V100",     "K80",  "P100", "V100M16",  "V100M32",
                                           "V100-32G", "T4",   "A10",  "A100-40G", "A100-80G",
                                           "H100",     "H200", "G2",   "G3"};
  ASSERT_GE(t.size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(t.at(static_cast<GpuTypeId>(i)).name, before[i]) << i;
  }
}

TEST(GpuTypeTableTest, KnowsTheNewerTypesWithMemoryAndSpeed) {
  const GpuTypeTable t = GpuTypeTable::builtin();
  struct Want {
    const char* name;
    int64_t memory_mib;
    double speed;
  };
  // Dense TF32 figures relative to the H100's 494.7 TFLOPS, times the H100's 6.3
  // (docs/execution-model.md cites each).
  for (const Want& w : {Want{"L40S", 49152, 2.33}, Want{"B200", 183359, 14.3},
                        Want{"GB200", 190464, 15.9}, Want{"MI300X", 196608, 8.32}}) {
    const std::optional<GpuTypeId> id = t.find(w.name);
    ASSERT_TRUE(id.has_value()) << w.name;
    EXPECT_GE(*id, 14u) << w.name << " must come after the existing types";
    EXPECT_EQ(t.at(*id).memory_mib, w.memory_mib) << w.name;
    EXPECT_DOUBLE_EQ(t.at(*id).relative_speed, w.speed) << w.name;
  }
  // They rank as the vendor figures do against the types already there.
  const auto speed = [&](const char* n) { return t.at(t.known(n)).relative_speed; };
  EXPECT_LT(speed("L40S"), speed("A100-80G"));
  EXPECT_GT(speed("MI300X"), speed("H100"));
  EXPECT_GT(speed("B200"), speed("MI300X"));
  EXPECT_GT(speed("GB200"), speed("B200"));
  // Aliases, any case.
  EXPECT_EQ(t.known("l40s-48gb"), t.known("L40S"));
  EXPECT_EQ(t.known("L40S-48G"), t.known("L40S"));
  EXPECT_EQ(t.known("B200-192G"), t.known("B200"));
  EXPECT_EQ(t.known("b200-180gb"), t.known("B200"));
  EXPECT_EQ(t.known("MI300X-192GB"), t.known("MI300X"));
  EXPECT_EQ(t.known("gb200"), t.known("GB200"));
}

TEST(GpuTypeTableTest, ClusterFilesAcceptTheNewerTypes) {
  // `tessera simulate --cluster` said "unknown GPU type 'L40S'".
  const Cluster c = parse_cluster_yaml(
      "nodes:\n  - {name: a, gpus: 8, gpu_type: L40S}\n  - {name: b, gpus: 8, gpu_type: B200}\n"
      "  - {name: c, gpus: 4, gpu_type: GB200}\n  - {name: d, gpus: 8, gpu_type: MI300X}\n",
      "c.yaml");
  EXPECT_EQ(c.gpu_types().at(c.node(0).gpu_type).name, "L40S");
  EXPECT_EQ(c.gpu_types().at(c.node(1).gpu_type).name, "B200");
  EXPECT_EQ(c.gpu_types().at(c.node(2).gpu_type).name, "GB200");
  EXPECT_EQ(c.gpu_types().at(c.node(3).gpu_type).name, "MI300X");
  EXPECT_EQ(c.num_gpus(), 28u);
}

}  // namespace
}  // namespace tessera

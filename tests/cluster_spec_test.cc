#include "model/cluster_spec.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "input_error_util.h"
#include "model/input_error.h"

namespace tessera {
namespace {

const std::string kData = TESSERA_SHARED_DATA;

using testing::Contains;
using testing::error_of;

std::string write_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("tessera_cs_" + name);
  std::ofstream(path) << text;
  return path.string();
}

TEST(ClusterSpecTest, UniformYaml) {
  const Cluster c = parse_cluster_yaml(
      "spines: 2\n"
      "racks: 2\n"
      "nodes_per_rack: 3\n"
      "node: {gpus: 8, gpu_type: A100-80G, cpu_milli: 96000, mem_mib: 1048576, nvlink_domain: 4}\n",
      "c.yaml");
  EXPECT_EQ(c.spines().size(), 2u);
  EXPECT_EQ(c.racks().size(), 4u);
  ASSERT_EQ(c.nodes().size(), 12u);
  EXPECT_EQ(c.num_gpus(), 96u);
  const Node& n = c.node(5);
  EXPECT_EQ(c.gpu_types().at(n.gpu_type).name, "A100-80G");
  EXPECT_EQ(n.gpus_per_nvl_domain, 4);
  EXPECT_EQ(n.cpu_milli, 96000);
  EXPECT_EQ(n.mem_mib, 1048576);
  EXPECT_EQ(c.racks()[c.node(11).rack].spine, 1u);
}

TEST(ClusterSpecTest, UniformYamlDefaults) {
  const Cluster c = parse_cluster_yaml("racks: 1\nnodes_per_rack: 2\nnode: {gpus: 4}\n", "c.yaml");
  ASSERT_EQ(c.nodes().size(), 2u);
  EXPECT_EQ(c.gpu_types().at(c.node(0).gpu_type).name, "V100");
  EXPECT_EQ(c.node(0).gpus_per_nvl_domain, 4);  // whole node is one domain
  EXPECT_EQ(c.spines().size(), 1u);
}

TEST(ClusterSpecTest, ExplicitNodesAndLinks) {
  const Cluster c = parse_cluster_yaml(
      "nodes:\n"
      "  - {name: a, rack: r0, spine: s0, gpus: 8, gpu_type: H100, cpu_milli: 1000, mem_mib: 10}\n"
      "  - {name: b, rack: r1, spine: s0, gpus: 4, gpu_type: T4}\n"
      "  - {name: c, rack: r0, spine: s0, gpus: 0}\n"
      "links:\n"
      "  rack: {bandwidth_gbps: 25, latency_us: 3}\n"
      "  nvlink: {bandwidth_gbps: 900}\n",
      "c.yaml");
  ASSERT_EQ(c.nodes().size(), 3u);
  EXPECT_EQ(c.racks().size(), 2u);
  // Nodes of a rack are contiguous: a, c under r0, then b.
  EXPECT_EQ(c.node(0).name, "a");
  EXPECT_EQ(c.node(1).name, "c");
  EXPECT_EQ(c.node(2).name, "b");
  EXPECT_EQ(c.num_gpus(), 12u);
  EXPECT_DOUBLE_EQ(c.link(Level::kRack).bandwidth_gbps, 25);
  EXPECT_DOUBLE_EQ(c.link(Level::kRack).latency_us, 3);
  EXPECT_DOUBLE_EQ(c.link(Level::kNvlDomain).bandwidth_gbps, 900);
  EXPECT_DOUBLE_EQ(c.link(Level::kNvlDomain).latency_us, 1.0);  // default kept
  EXPECT_DOUBLE_EQ(c.link(Level::kSpine).bandwidth_gbps, 12.5);
}

TEST(ClusterSpecTest, YamlErrorsNameLineAndField) {
  auto parse = [](const std::string& text) {
    return error_of([&] { parse_cluster_yaml(text, "c.yaml"); });
  };
  std::string e = parse("racks: 2\nnodes_per_rak: 3\nnode: {gpus: 8}\n");
  EXPECT_TRUE(Contains(e, "c.yaml:2"));
  EXPECT_TRUE(Contains(e, "nodes_per_rak"));
  e = parse("racks: 2\nnodes_per_rack: 3\nnode: {gpus: 8x}\n");
  EXPECT_TRUE(Contains(e, "c.yaml:3"));
  EXPECT_TRUE(Contains(e, "node.gpus"));
  e = parse("racks: 2\nnodes_per_rack: 3\nnode:\n  gpus: 0\n");
  EXPECT_TRUE(Contains(e, "c.yaml:4"));
  EXPECT_TRUE(Contains(e, "node.gpus"));
  e = parse("racks: 1\nnodes_per_rack: 1\nnode:\n  gpus: 8\n  cpu_milli: -5\n");
  EXPECT_TRUE(Contains(e, "c.yaml:5"));
  EXPECT_TRUE(Contains(e, "node.cpu_milli"));
  e = parse("racks: 1\nnodes_per_rack: 1\nnode:\n  gpus: 8\n  gpu_typ: V100\n");
  EXPECT_TRUE(Contains(e, "c.yaml:5"));
  EXPECT_TRUE(Contains(e, "node.gpu_typ"));
  e = parse("nodes:\n  - {name: a, gpus: 8}\n  - {name: a, gpus: 8}\n");
  EXPECT_TRUE(Contains(e, "c.yaml:3"));
  EXPECT_TRUE(Contains(e, "nodes[1].name"));
  e = parse("nodes:\n  - {gpus: 8, mem_mib: 0}\n");
  EXPECT_TRUE(Contains(e, "nodes[0].mem_mib"));
  e = parse("nodes:\n  - {gpus: 8, nvlink_domain: 3}\n");
  EXPECT_TRUE(Contains(e, "nodes[0].nvlink_domain"));
  e = parse("racks: 1\nnodes_per_rack: 1\nnode: {gpus: 8}\nnodes: []\n");
  EXPECT_TRUE(Contains(e, "nodes"));
  e = parse("racks: 1\nnode: {gpus: 8}\n");
  EXPECT_TRUE(Contains(e, "nodes_per_rack"));
  e = parse("links:\n  rack: {bandwidth_gbps: 0}\nnodes:\n  - {gpus: 1}\n");
  EXPECT_TRUE(Contains(e, "c.yaml:2"));
  EXPECT_TRUE(Contains(e, "links.rack.bandwidth_gbps"));
  e = parse("racks: [1\n");
  EXPECT_TRUE(Contains(e, "c.yaml"));
  e = parse("");
  EXPECT_TRUE(Contains(e, "empty"));
}

TEST(ClusterSpecTest, KubernetesNodeObjects) {
  const std::string text =
      "apiVersion: v1\nkind: Node\nmetadata:\n  labels:\n"
      "    alibabacloud.com/gpu-card-model: T4\n  name: n0\n"
      "status:\n  allocatable:\n    alibabacloud.com/gpu-count: '2'\n    cpu: 64000m\n"
      "    memory: 262144Mi\n---\n"
      "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n"
      "status:\n  capacity:\n    cpu: '32'\n    memory: 1Gi\n---\n";
  const Cluster c = parse_cluster_yaml(text, "k.yaml");
  ASSERT_EQ(c.nodes().size(), 2u);
  EXPECT_EQ(c.node(0).num_gpus, 2);
  EXPECT_EQ(c.gpu_types().at(c.node(0).gpu_type).name, "T4");
  EXPECT_EQ(c.node(0).cpu_milli, 64000);
  EXPECT_EQ(c.node(0).mem_mib, 262144);
  EXPECT_EQ(c.node(1).num_gpus, 0);
  EXPECT_EQ(c.node(1).cpu_milli, 32000);
  EXPECT_EQ(c.node(1).mem_mib, 1024);
  const std::string bad =
      "apiVersion: v1\nkind: Node\nmetadata:\n  name: n0\n"
      "status:\n  allocatable:\n    alibabacloud.com/gpu-count: '2'\n    cpu: lots\n"
      "    memory: 1Gi\n";
  const std::string e = error_of([&] { parse_cluster_yaml(bad, "k.yaml"); });
  EXPECT_TRUE(Contains(e, "k.yaml:8"));
  EXPECT_TRUE(Contains(e, "status.allocatable.cpu"));
}

TEST(ClusterSpecTest, AlibabaCsv) {
  std::string text = "sn,cpu_milli,memory_mib,gpu,model\n";
  for (int i = 0; i < 10; ++i) {
    text += "n" + std::to_string(i) + ",64000,262144," + (i == 9 ? "0," : "4,V100M32") + "\n";
  }
  const Cluster c = parse_alibaba_nodes_csv(text, "n.csv");
  ASSERT_EQ(c.nodes().size(), 10u);
  EXPECT_EQ(c.racks().size(), 2u);  // 8 per rack
  EXPECT_EQ(c.racks()[0].num_nodes, 8u);
  EXPECT_EQ(c.spines().size(), 1u);
  EXPECT_EQ(c.spines()[0].name, "spine-0");
  EXPECT_EQ(c.num_gpus(), 36u);
  EXPECT_EQ(c.node(9).num_gpus, 0);
  EXPECT_EQ(c.gpu_types().at(c.node(0).gpu_type).name, "V100M32");
}

TEST(ClusterSpecTest, AlibabaCsvErrors) {
  auto parse = [](const std::string& text) {
    return error_of([&] { parse_alibaba_nodes_csv(text, "n.csv"); });
  };
  const std::string head = "sn,cpu_milli,memory_mib,gpu,model\n";
  std::string e = parse(head + "a,1000,1000,2,T4\nb,64000x,1000,2,T4\n");
  EXPECT_TRUE(Contains(e, "n.csv:3"));
  EXPECT_TRUE(Contains(e, "cpu_milli"));
  e = parse(head + "a,1000,1000,2\n");
  EXPECT_TRUE(Contains(e, "n.csv:2"));
  EXPECT_TRUE(Contains(e, "columns"));
  e = parse(head + "a,1000,1000,2,\n");
  EXPECT_TRUE(Contains(e, "n.csv:2"));
  EXPECT_TRUE(Contains(e, "field model"));
  e = parse(head + "a,1000,1000,-1,T4\n");
  EXPECT_TRUE(Contains(e, "field gpu"));
  e = parse(head + "a,1000,0,1,T4\n");
  EXPECT_TRUE(Contains(e, "field memory_mib"));
  e = parse("sn,cpu_milli,memory_mib,gpus,model\n");
  EXPECT_TRUE(Contains(e, "n.csv:1"));
  EXPECT_TRUE(Contains(e, "gpus"));
  EXPECT_TRUE(Contains(e, "sn,cpu_milli,memory_mib,gpu,model"));
  e = parse(head + "a,1000,1000,2,T4\na,1000,1000,2,T4\n");
  EXPECT_TRUE(Contains(e, "n.csv:3"));
  EXPECT_TRUE(Contains(e, "duplicate"));
}

TEST(ClusterSpecTest, TiresiasCsv) {
  const Cluster c = parse_tiresias_cluster_csv(
      "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n2,3,4,40,256",
      "t.csv");
  ASSERT_EQ(c.nodes().size(), 6u);
  EXPECT_EQ(c.racks().size(), 2u);
  EXPECT_EQ(c.num_gpus(), 24u);
  EXPECT_EQ(c.node(0).cpu_milli, 40000);
  EXPECT_EQ(c.node(0).mem_mib, 256 * 1024);
  EXPECT_EQ(c.gpu_types().at(c.node(0).gpu_type).name, "V100");
  const Cluster k = parse_tiresias_cluster_csv(
      "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n1,1,8,40,256\n",
      "t.csv", "K80");
  EXPECT_EQ(k.gpu_types().at(k.node(0).gpu_type).name, "K80");
  const std::string e = error_of([] {
    parse_tiresias_cluster_csv(
        "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n1,x,8,40,256\n",
        "t.csv");
  });
  EXPECT_TRUE(Contains(e, "t.csv:2"));
  EXPECT_TRUE(Contains(e, "num_node_p_switch"));
}

TEST(ClusterSpecTest, AGpuTypeNobodyKnowsIsRefusedInEveryFormat) {
  // An unknown name was taken as a V100. Every cluster format refuses it,
  // naming the field and listing the known types; an ambiguous alias names its choices.
  const std::string yaml = error_of(
      [] { parse_cluster_yaml("nodes:\n  - {name: n0, gpus: 8, gpu_type: Hopper}\n", "c.yaml"); });
  EXPECT_TRUE(Contains(yaml, "c.yaml:2"));
  EXPECT_TRUE(Contains(yaml, "nodes[0].gpu_type"));
  EXPECT_TRUE(Contains(yaml, "unknown GPU type 'Hopper' (known: V100, K80, P100"));
  const std::string uniform = error_of([] {
    parse_cluster_yaml("racks: 1\nnodes_per_rack: 2\nnode: {gpus: 8, gpu_type: A100}\n", "u.yaml");
  });
  EXPECT_TRUE(Contains(uniform, "node.gpu_type"));
  EXPECT_TRUE(Contains(uniform, "ambiguous GPU type 'A100': say A100-40G or A100-80G"));
  const std::string csv = error_of([] {
    parse_alibaba_nodes_csv("sn,cpu_milli,memory_mib,gpu,model\na,1000,1000,2,Hopper\n", "n.csv");
  });
  EXPECT_TRUE(Contains(csv, "n.csv:2"));
  EXPECT_TRUE(Contains(csv, "unknown GPU type 'Hopper'"));
  const std::string tiresias = error_of([] {
    parse_tiresias_cluster_csv(
        "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node,gpu_type\n"
        "1,1,8,40,256,Hopper\n",
        "t.csv");
  });
  EXPECT_TRUE(Contains(tiresias, "t.csv:2"));
  EXPECT_TRUE(Contains(tiresias, "unknown GPU type 'Hopper'"));
  // Unambiguous aliases and any case resolve to the one type they mean.
  const Cluster c = parse_cluster_yaml(
      "nodes:\n  - {name: n0, gpus: 8, gpu_type: a100-80gb}\n  - {name: n1, gpus: 8, gpu_type: "
      "h100}\n",
      "c.yaml");
  EXPECT_EQ(c.gpu_types().at(c.node(0).gpu_type).name, "A100-80G");
  EXPECT_EQ(c.gpu_types().at(c.node(1).gpu_type).name, "H100");
}

TEST(ClusterSpecTest, LoadClusterDetectsFormat) {
  const Cluster a =
      load_cluster(write_temp("a.csv", "sn,cpu_milli,memory_mib,gpu,model\nx,1,1,2,T4\n"));
  EXPECT_EQ(a.num_gpus(), 2u);
  const Cluster t = load_cluster(write_temp(
      "t.csv",
      "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n1,2,4,8,16\n"));
  EXPECT_EQ(t.num_gpus(), 8u);
  const Cluster y =
      load_cluster(write_temp("y.yaml", "racks: 1\nnodes_per_rack: 3\nnode: {gpus: 2}\n"));
  EXPECT_EQ(y.num_gpus(), 6u);
  const std::string e = error_of([] { load_cluster("/nonexistent/cluster.yaml"); });
  EXPECT_TRUE(Contains(e, "/nonexistent/cluster.yaml"));
}

TEST(ClusterSpecTest, MakeUniformCluster) {
  const Cluster c = make_uniform_cluster(1, 2, 4, 8);
  EXPECT_EQ(c.nodes().size(), 8u);
  EXPECT_EQ(c.num_gpus(), 64u);
  EXPECT_EQ(c.racks().size(), 2u);
  EXPECT_THROW(make_uniform_cluster(1, 0, 4, 8), std::invalid_argument);
}

TEST(ClusterSpecTest, RealAlibabaNodeLists) {
  const std::string csv = kData + "/alibaba-gpu-2023/openb_node_list_gpu_node.csv";
  const std::string yaml = kData + "/alibaba-gpu-2023/openb_node_list_gpu_node.yaml";
  if (!std::filesystem::exists(csv) || !std::filesystem::exists(yaml)) GTEST_SKIP();
  const Cluster a = load_cluster(csv);
  EXPECT_EQ(a.nodes().size(), 1213u);
  EXPECT_EQ(a.num_gpus(), 6212u);
  EXPECT_EQ(a.racks().size(), (1213u + 7) / 8);
  const Cluster b = load_cluster(yaml);
  ASSERT_EQ(b.nodes().size(), 1213u);
  EXPECT_EQ(b.num_gpus(), 6212u);
  for (size_t i = 0; i < a.nodes().size(); ++i) {
    const Node& x = a.node(static_cast<NodeId>(i));
    const Node& y = b.node(static_cast<NodeId>(i));
    ASSERT_EQ(x.name, y.name);
    EXPECT_EQ(x.num_gpus, y.num_gpus);
    EXPECT_EQ(x.cpu_milli, y.cpu_milli);
    EXPECT_EQ(x.mem_mib, y.mem_mib);
    EXPECT_EQ(a.gpu_types().at(x.gpu_type).name, b.gpu_types().at(y.gpu_type).name);
  }
  const std::string all = kData + "/alibaba-gpu-2023/openb_node_list_all_node.csv";
  if (std::filesystem::exists(all)) {
    const Cluster c = load_cluster(all);
    EXPECT_EQ(c.nodes().size(), 1523u);
    EXPECT_EQ(c.num_gpus(), 6212u);
  }
}

TEST(ClusterSpecTest, RealTiresiasSpecs) {
  const std::string spec = kData + "/philly/tiresias/cluster_spec.csv";
  if (!std::filesystem::exists(spec)) GTEST_SKIP();
  const Cluster c = load_cluster(spec);
  EXPECT_EQ(c.nodes().size(), 16u);
  EXPECT_EQ(c.num_gpus(), 64u);
  EXPECT_EQ(c.max_node_gpus(), 4);
  const Cluster big = load_cluster(kData + "/philly/tiresias/n160g8.csv");
  EXPECT_EQ(big.nodes().size(), 160u);
  EXPECT_EQ(big.racks().size(), 5u);
  EXPECT_EQ(big.num_gpus(), 1280u);
}

}  // namespace
}  // namespace tessera

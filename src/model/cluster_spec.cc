#include "model/cluster_spec.h"

#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <unordered_set>

#include "model/csv.h"
#include "model/input_error.h"
#include "model/yaml_util.h"

namespace tessera {

namespace {

// Alibaba's node lists and Kubernetes node objects carry no rack information; like the FGD
// simulator we assume racks of 8 nodes in file order under one spine (docs/traces.md).
constexpr size_t kNodesPerRack = 8;
constexpr int64_t kMaxGpusPerNode = 1024;  // uint16_t in Node; anything larger is a typo
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
// A node's CPU (milli) or memory (MiB) at most 2^40, beyond any machine: a cluster's totals
// (a million such nodes) then stay within int64.
constexpr int64_t kMaxNodeQuantity = int64_t{1} << 40;

std::string rack_name(size_t i) {
  return "rack-" + std::to_string(i);
}
std::string spine_name(size_t i) {
  return "spine-" + std::to_string(i);
}

// The attributes a node description shares between the uniform and the explicit shape.
struct NodeShape {
  int64_t gpus = 0;
  std::string gpu_type = "V100";
  int64_t cpu_milli = 64000;
  int64_t mem_mib = 512 * 1024;
  int64_t nvlink_domain = 0;
};

NodeShape read_node_shape(const std::string& origin, const YAML::Node& n, const std::string& where,
                          int64_t min_gpus) {
  NodeShape s;
  if (!n["gpus"]) yaml_fail(origin, n, where + ".gpus", "missing");
  s.gpus = yaml_int(origin, n["gpus"], where + ".gpus", min_gpus, kMaxGpusPerNode);
  if (n["gpu_type"]) s.gpu_type = yaml_string(origin, n["gpu_type"], where + ".gpu_type");
  if (n["cpu_milli"])
    s.cpu_milli = yaml_int(origin, n["cpu_milli"], where + ".cpu_milli", 1, kMaxNodeQuantity);
  if (n["mem_mib"]) {
    s.mem_mib = yaml_int(origin, n["mem_mib"], where + ".mem_mib", 1, kMaxNodeQuantity);
  }
  if (n["nvlink_domain"]) {
    s.nvlink_domain =
        yaml_int(origin, n["nvlink_domain"], where + ".nvlink_domain", 0, kMaxGpusPerNode);
    if (s.nvlink_domain > 0 && (s.nvlink_domain > s.gpus || s.gpus % s.nvlink_domain != 0)) {
      yaml_fail(origin, n["nvlink_domain"], where + ".nvlink_domain",
                "must divide the node's " + std::to_string(s.gpus) + " GPUs");
    }
  }
  return s;
}

void read_links(const std::string& origin, const YAML::Node& links, ClusterBuilder& b) {
  check_keys(origin, links, "links", {"nvlink", "node", "rack", "spine", "cluster"});
  // Start from the defaults so a file may override one field of one level.
  ClusterBuilder defaults;
  const Cluster d = defaults.build();
  for (int i = 0; i < kNumLevels; ++i) {
    const auto level = static_cast<Level>(i);
    const std::string key(level_name(level));
    const YAML::Node l = links[key];
    if (!l) continue;
    const std::string where = "links." + key;
    check_keys(origin, l, where, {"bandwidth_gbps", "latency_us"});
    Link link = d.link(level);
    if (l["bandwidth_gbps"]) {
      link.bandwidth_gbps =
          yaml_number(origin, l["bandwidth_gbps"], where + ".bandwidth_gbps", true);
    }
    if (l["latency_us"]) {
      link.latency_us = yaml_number(origin, l["latency_us"], where + ".latency_us", false);
    }
    b.set_link(level, link);
  }
}

// Alibaba's openb_node_list_gpu_node.yaml: one Kubernetes Node object per document.
Cluster parse_kubernetes_nodes(const std::vector<YAML::Node>& docs, const std::string& origin) {
  ClusterBuilder b;
  std::unordered_set<std::string> names;
  for (const YAML::Node& doc : docs) {
    if (doc.IsNull()) continue;  // a trailing "---"
    if (!doc.IsMap()) yaml_fail(origin, doc, "", "expected a Kubernetes Node object");
    const YAML::Node kind = doc["kind"];
    if (!kind || !kind.IsScalar() || kind.Scalar() != "Node") {
      yaml_fail(origin, kind ? kind : doc, "kind", "expected 'Node'");
    }
    const YAML::Node meta = doc["metadata"];
    if (!meta || !meta.IsMap()) yaml_fail(origin, doc, "metadata", "missing");
    if (!meta["name"]) yaml_fail(origin, meta, "metadata.name", "missing");
    const std::string name = yaml_string(origin, meta["name"], "metadata.name");
    if (!names.insert(name).second) {
      yaml_fail(origin, meta["name"], "metadata.name", "duplicate node '" + name + "'");
    }
    const YAML::Node status = doc["status"];
    if (!status || !status.IsMap()) yaml_fail(origin, doc, "status", "missing");
    // What the scheduler may hand out is `allocatable`; `capacity` when that is absent.
    const bool has_allocatable = static_cast<bool>(status["allocatable"]);
    const std::string where = has_allocatable ? "status.allocatable" : "status.capacity";
    const YAML::Node res = has_allocatable ? status["allocatable"] : status["capacity"];
    if (!res || !res.IsMap()) yaml_fail(origin, status, where, "missing");

    int64_t gpus = 0;
    for (const char* key : {"alibabacloud.com/gpu-count", "nvidia.com/gpu"}) {
      if (res[key]) {
        gpus = yaml_int(origin, res[key], where + "." + key, 0, kMaxGpusPerNode);
        break;
      }
    }
    int64_t cpu_milli = 0, mem_mib = 0;
    if (!res["cpu"]) yaml_fail(origin, res, where + ".cpu", "missing");
    const std::string cpu = scalar_of(origin, res["cpu"], where + ".cpu", "a CPU quantity");
    if (!parse_cpu_quantity(cpu, cpu_milli) || cpu_milli <= 0) {
      yaml_fail(origin, res["cpu"], where + ".cpu",
                "expected a positive CPU quantity, got '" + cpu + "'");
    }
    if (!res["memory"]) yaml_fail(origin, res, where + ".memory", "missing");
    const std::string mem =
        scalar_of(origin, res["memory"], where + ".memory", "a memory quantity");
    if (!parse_memory_quantity(mem, mem_mib) || mem_mib <= 0) {
      yaml_fail(origin, res["memory"], where + ".memory",
                "expected a positive memory quantity, got '" + mem + "'");
    }
    GpuTypeId type = 0;
    const YAML::Node labels = meta["labels"];
    std::string model, model_field;
    YAML::Node model_node;
    if (labels && labels.IsMap()) {
      for (const char* key : {"alibabacloud.com/gpu-card-model", "nvidia.com/gpu.product"}) {
        if (labels[key]) {
          model_field = std::string("metadata.labels.") + key;
          model_node = labels[key];
          model = scalar_of(origin, model_node, model_field, "a string");
          break;
        }
      }
    }
    if (gpus > 0) {
      if (model.empty()) {
        yaml_fail(origin, meta, "metadata.labels.alibabacloud.com/gpu-card-model",
                  "a node with GPUs needs its GPU model label");
      }
      try {
        type = b.gpu_types().known(model);
      } catch (const std::invalid_argument& e) {
        yaml_fail(origin, model_node, model_field, e.what());
      }
    }
    const size_t index = b.num_nodes();
    b.add_node(spine_name(0), rack_name(index / kNodesPerRack), name, type,
               static_cast<uint16_t>(gpus), cpu_milli, mem_mib);
  }
  if (b.num_nodes() == 0) throw InputError(input_error_message(origin, 0, "", "no nodes"));
  return b.build();
}

// `power:` of a cluster file, resolved against the built cluster's rack and node names.
ClusterPower read_power(const std::string& origin, const YAML::Node& p, const Cluster& c) {
  check_keys(origin, p, "power",
             {"cap_kw", "node_watts", "pue", "rack_caps_kw", "thermal_headroom_watts"});
  ClusterPower out;
  if (p["cap_kw"]) out.cap_w = yaml_number(origin, p["cap_kw"], "power.cap_kw", true) * 1000;
  if (p["node_watts"]) {
    out.node_base_w = yaml_number(origin, p["node_watts"], "power.node_watts", false);
  }
  if (p["pue"]) {
    out.pue = yaml_number(origin, p["pue"], "power.pue", true);
    if (out.pue < 1) yaml_fail(origin, p["pue"], "power.pue", "must be at least 1");
  }
  auto by_name = [&](const char* key, auto&& index_of, size_t size, double scale) {
    std::vector<double> v;
    const YAML::Node m = p[key];
    if (!m) return v;
    const std::string field = std::string("power.") + key;
    if (!m.IsMap()) yaml_fail(origin, m, field, "expected a map of name: value");
    v.assign(size, -1.0);
    for (const auto& kv : m) {
      const std::string name = kv.first.as<std::string>();
      const size_t i = index_of(name);
      if (i >= size) yaml_fail(origin, kv.first, field + "." + name, "no such name in the cluster");
      v[i] = yaml_number(origin, kv.second, field + "." + name, false) * scale;
    }
    return v;
  };
  // The position of the item named `name` in `items` (racks or nodes), or items.size().
  const auto index_in = [](const auto& items) {
    return [&items](const std::string& name) {
      for (size_t i = 0; i < items.size(); ++i) {
        if (items[i].name == name) return i;
      }
      return items.size();
    };
  };
  out.rack_cap_w = by_name("rack_caps_kw", index_in(c.racks()), c.racks().size(), 1000.0);
  out.node_headroom_w =
      by_name("thermal_headroom_watts", index_in(c.nodes()), c.nodes().size(), 1.0);
  return out;
}

// `storage:` of a cluster file (docs/data.md).
ClusterStorage read_storage(const std::string& origin, const YAML::Node& s) {
  check_keys(origin, s, "storage", {"object_store", "cache", "nvme"});
  ClusterStorage out;
  out.present = true;
  const auto number = [&](const YAML::Node& parent, const char* key, const std::string& where,
                          bool positive) {
    const YAML::Node v = parent[key];
    if (!v) yaml_fail(origin, parent, where + "." + key, "required");
    return yaml_number(origin, v, where + "." + key, positive);
  };
  const YAML::Node obj = s["object_store"];
  if (!obj) yaml_fail(origin, s, "storage.object_store", "required (where every dataset lives)");
  check_keys(origin, obj, "storage.object_store", {"bandwidth_gbs", "per_job_gbs"});
  out.object_gbs = number(obj, "bandwidth_gbs", "storage.object_store", true);
  out.per_job_gbs = obj["per_job_gbs"] ? number(obj, "per_job_gbs", "storage.object_store", true)
                                       : out.object_gbs;
  if (const YAML::Node cache = s["cache"]) {
    check_keys(origin, cache, "storage.cache", {"per", "capacity_gb", "bandwidth_gbs"});
    if (const YAML::Node per = cache["per"]) {
      const std::string v = per.IsScalar() ? per.Scalar() : "";
      if (v != "rack" && v != "cluster") {
        yaml_fail(origin, per, "storage.cache.per", "expected rack or cluster, got " + v);
      }
      out.cache_per_rack = v == "rack";
    }
    out.cache_gb = number(cache, "capacity_gb", "storage.cache", true);
    out.cache_gbs = number(cache, "bandwidth_gbs", "storage.cache", true);
  }
  if (const YAML::Node nvme = s["nvme"]) {
    check_keys(origin, nvme, "storage.nvme", {"capacity_gb", "bandwidth_gbs"});
    out.nvme_gb = number(nvme, "capacity_gb", "storage.nvme", true);
    out.nvme_gbs = number(nvme, "bandwidth_gbs", "storage.nvme", true);
  }
  return out;
}

Cluster parse_tessera_nodes(const YAML::Node& root, const std::string& origin);

}  // namespace

Cluster parse_tessera_yaml(const YAML::Node& root, const std::string& origin) {
  check_keys(origin, root, "",
             {"spines", "racks", "nodes_per_rack", "node", "nodes", "links", "power", "storage"});
  Cluster c = parse_tessera_nodes(root, origin);
  if (root["power"]) c.set_power(read_power(origin, root["power"], c));
  if (root["storage"]) c.set_storage(read_storage(origin, root["storage"]));
  return c;
}

namespace {

Cluster parse_tessera_nodes(const YAML::Node& root, const std::string& origin) {
  ClusterBuilder b;
  if (root["links"]) read_links(origin, root["links"], b);
  const bool uniform = root["racks"] || root["nodes_per_rack"] || root["node"] || root["spines"];
  if (root["nodes"] && uniform) {
    yaml_fail(origin, root["nodes"], "nodes",
              "give either explicit nodes or spines/racks/nodes_per_rack/node, not both");
  }
  if (root["nodes"]) {
    const YAML::Node nodes = root["nodes"];
    if (!nodes.IsSequence() || nodes.size() == 0) {
      yaml_fail(origin, nodes, "nodes", "expected a non-empty list of nodes");
    }
    std::unordered_set<std::string> names;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const YAML::Node n = nodes[i];
      const std::string where = "nodes[" + std::to_string(i) + "]";
      check_keys(
          origin, n, where,
          {"name", "rack", "spine", "gpus", "gpu_type", "cpu_milli", "mem_mib", "nvlink_domain"});
      // Explicit nodes may have 0 GPUs: CPU-only nodes host CPU-only pods (Alibaba).
      const NodeShape s = read_node_shape(origin, n, where, 0);
      const std::string name =
          n["name"] ? yaml_string(origin, n["name"], where + ".name") : "node-" + std::to_string(i);
      if (!names.insert(name).second) {
        yaml_fail(origin, n["name"] ? n["name"] : n, where + ".name",
                  "duplicate node '" + name + "'");
      }
      const std::string rack =
          n["rack"] ? yaml_string(origin, n["rack"], where + ".rack") : rack_name(0);
      const std::string spine =
          n["spine"] ? yaml_string(origin, n["spine"], where + ".spine") : spine_name(0);
      GpuTypeId type = 0;
      try {
        type = b.gpu_types().known(s.gpu_type);
      } catch (const std::invalid_argument& e) {
        yaml_fail(origin, n["gpu_type"] ? n["gpu_type"] : n, where + ".gpu_type", e.what());
      }
      try {
        b.add_node(spine, rack, name, type, static_cast<uint16_t>(s.gpus), s.cpu_milli, s.mem_mib,
                   static_cast<uint16_t>(s.nvlink_domain));
      } catch (const std::invalid_argument& e) {
        yaml_fail(origin, n, where + ".rack", e.what());
      }
    }
    return b.build();
  }
  if (!uniform) {
    yaml_fail(origin, root, "", "expected either 'nodes' or 'racks', 'nodes_per_rack' and 'node'");
  }
  const int64_t spines =
      root["spines"] ? yaml_int(origin, root["spines"], "spines", 1, 1 << 16) : 1;
  if (!root["racks"]) yaml_fail(origin, root, "racks", "missing");
  if (!root["nodes_per_rack"]) yaml_fail(origin, root, "nodes_per_rack", "missing");
  if (!root["node"]) yaml_fail(origin, root, "node", "missing");
  const int64_t racks = yaml_int(origin, root["racks"], "racks", 1, 1 << 16);
  const int64_t per_rack = yaml_int(origin, root["nodes_per_rack"], "nodes_per_rack", 1, 1 << 16);
  check_keys(origin, root["node"], "node",
             {"gpus", "gpu_type", "cpu_milli", "mem_mib", "nvlink_domain"});
  const NodeShape s = read_node_shape(origin, root["node"], "node", 1);
  if (spines * racks * per_rack > (int64_t{1} << 20)) {
    yaml_fail(origin, root, "racks", "more than 2^20 nodes");
  }
  GpuTypeId type = 0;
  try {
    type = b.gpu_types().known(s.gpu_type);
  } catch (const std::invalid_argument& e) {
    const YAML::Node node = root["node"];
    yaml_fail(origin, node["gpu_type"] ? node["gpu_type"] : node, "node.gpu_type", e.what());
  }
  size_t node = 0, rack = 0;
  for (int64_t sp = 0; sp < spines; ++sp) {
    for (int64_t r = 0; r < racks; ++r, ++rack) {
      for (int64_t k = 0; k < per_rack; ++k, ++node) {
        b.add_node(spine_name(static_cast<size_t>(sp)), rack_name(rack),
                   "node-" + std::to_string(node), type, static_cast<uint16_t>(s.gpus), s.cpu_milli,
                   s.mem_mib, static_cast<uint16_t>(s.nvlink_domain));
      }
    }
  }
  return b.build();
}

}  // namespace

Cluster parse_cluster_yaml(std::string_view text, const std::string& origin) {
  std::vector<YAML::Node> docs;
  try {
    docs = load_yaml_documents(text);
  } catch (const YAML::Exception& e) {
    const size_t line = e.mark.is_null() ? 0 : static_cast<size_t>(e.mark.line) + 1;
    throw InputError(input_error_message(origin, line, "", yaml_syntax_message(text, e)));
  }
  size_t non_null = 0;
  for (const YAML::Node& d : docs) non_null += d.IsNull() ? 0 : 1;
  if (non_null == 0) throw InputError(input_error_message(origin, 0, "", "empty file"));
  const YAML::Node& first = docs.front();
  if (first.IsMap() && first["kind"]) return parse_kubernetes_nodes(docs, origin);
  if (non_null > 1) {
    throw InputError(input_error_message(
        origin, line_of(docs[1]), "", "expected one YAML document (or Kubernetes Node objects)"));
  }
  try {
    return parse_tessera_yaml(first, origin);
  } catch (const YAML::Exception& e) {
    // yaml-cpp throws on access to a node of the wrong shape (e.g. indexing a scalar).
    const size_t line = e.mark.is_null() ? 0 : static_cast<size_t>(e.mark.line) + 1;
    throw InputError(input_error_message(origin, line, "", "YAML: " + e.msg));
  }
}

Cluster parse_alibaba_nodes_csv(std::string_view text, const std::string& origin) {
  csv::LineReader lines(text);
  std::string_view line;
  while (lines.next(line) && csv::is_blank(line)) {
  }
  if (csv::is_blank(line)) throw InputError(input_error_message(origin, 0, "", "empty file"));
  const csv::Header header(line, {"sn", "cpu_milli", "memory_mib", "gpu", "model"}, {}, origin,
                           lines.line_number(), "Alibaba node list");
  const int c_sn = header.index("sn"), c_cpu = header.index("cpu_milli"),
            c_mem = header.index("memory_mib"), c_gpu = header.index("gpu"),
            c_model = header.index("model");
  ClusterBuilder b;
  csv::Row row(origin, header);
  std::unordered_set<std::string> names;
  while (lines.next(line)) {
    if (csv::is_blank(line)) continue;
    row.reset(line, lines.line_number());
    const std::string name(row.str(c_sn));
    if (name.empty()) row.fail(c_sn, "empty node name");
    if (!names.insert(name).second) row.fail(c_sn, "duplicate node '" + name + "'");
    const int64_t cpu = row.integer(c_cpu, 1, kInt64Max);
    const int64_t mem = row.integer(c_mem, 1, kInt64Max);
    const int64_t gpus = row.integer(c_gpu, 0, kMaxGpusPerNode);
    GpuTypeId type = 0;  // CPU-only nodes: the type is irrelevant (no GPUs carry it)
    if (gpus > 0) {
      if (row.empty(c_model)) row.fail(c_model, "a node with GPUs needs a GPU model");
      try {
        type = b.gpu_types().known(row.str(c_model));
      } catch (const std::invalid_argument& e) {
        row.fail(c_model, e.what());
      }
    }
    const size_t index = b.num_nodes();
    b.add_node(spine_name(0), rack_name(index / kNodesPerRack), name, type,
               static_cast<uint16_t>(gpus), cpu, mem);
  }
  if (b.num_nodes() == 0) throw InputError(input_error_message(origin, 0, "", "no nodes"));
  return b.build();
}

Cluster parse_tiresias_cluster_csv(std::string_view text, const std::string& origin,
                                   std::string_view gpu_type) {
  csv::LineReader lines(text);
  std::string_view line;
  while (lines.next(line) && csv::is_blank(line)) {
  }
  if (csv::is_blank(line)) throw InputError(input_error_message(origin, 0, "", "empty file"));
  const csv::Header header(
      line, {"num_switch", "num_node_p_switch", "num_gpu_p_node", "num_cpu_p_node", "mem_p_node"},
      {"gpu_type"}, origin, lines.line_number(), "Tiresias cluster spec");
  csv::Row row(origin, header);
  bool seen = false;
  int64_t switches = 0, per_switch = 0, gpus = 0, cpus = 0, mem_gb = 0;
  std::string type_name(gpu_type);
  size_t type_line = 0;  // where the type was named; 0: the caller's default
  while (lines.next(line)) {
    if (csv::is_blank(line)) continue;
    row.reset(line, lines.line_number());
    // Tiresias's simulator reads exactly one spec row; a second one would be ignored there.
    if (seen) row.fail(-1, "a Tiresias cluster spec has exactly one data row");
    seen = true;
    switches = row.integer(header.index("num_switch"), 1, 1 << 16);
    per_switch = row.integer(header.index("num_node_p_switch"), 1, 1 << 16);
    gpus = row.integer(header.index("num_gpu_p_node"), 1, kMaxGpusPerNode);
    cpus = row.integer(header.index("num_cpu_p_node"), 1, kInt64Max / 1000);
    mem_gb = row.integer(header.index("mem_p_node"), 1, kInt64Max / 1024);
    const int c_type = header.index("gpu_type");
    if (!row.empty(c_type)) {
      type_name = std::string(row.str(c_type));
      type_line = lines.line_number();
    }
  }
  if (!seen) throw InputError(input_error_message(origin, 0, "", "no data row"));
  // A Tiresias switch is a rack (leaf switch); all switches hang off one spine.
  ClusterBuilder b;
  GpuTypeId type = 0;
  try {
    type = b.gpu_types().known(type_name);
  } catch (const std::invalid_argument& e) {
    throw InputError(input_error_message(origin, type_line, "gpu_type", e.what()));
  }
  size_t node = 0;
  for (int64_t s = 0; s < switches; ++s) {
    for (int64_t k = 0; k < per_switch; ++k, ++node) {
      b.add_node(spine_name(0), rack_name(static_cast<size_t>(s)), "node-" + std::to_string(node),
                 type, static_cast<uint16_t>(gpus), cpus * 1000, mem_gb * 1024);
    }
  }
  return b.build();
}

Cluster make_uniform_cluster(int spines, int racks_per_spine, int nodes_per_rack, int gpus,
                             std::string_view gpu_type, int64_t cpu_milli, int64_t mem_mib,
                             int gpus_per_nvl_domain) {
  if (spines < 1 || racks_per_spine < 1 || nodes_per_rack < 1 || gpus < 1 ||
      gpus > kMaxGpusPerNode || cpu_milli < 1 || mem_mib < 1 || gpus_per_nvl_domain < 0 ||
      (gpus_per_nvl_domain > 0 && gpus % gpus_per_nvl_domain != 0)) {
    throw std::invalid_argument("make_uniform_cluster: invalid shape");
  }
  ClusterBuilder b;
  const GpuTypeId type = b.gpu_types().known(gpu_type);
  size_t node = 0, rack = 0;
  for (int s = 0; s < spines; ++s) {
    for (int r = 0; r < racks_per_spine; ++r, ++rack) {
      for (int k = 0; k < nodes_per_rack; ++k, ++node) {
        b.add_node(spine_name(static_cast<size_t>(s)), rack_name(rack),
                   "node-" + std::to_string(node), type, static_cast<uint16_t>(gpus), cpu_milli,
                   mem_mib, static_cast<uint16_t>(gpus_per_nvl_domain));
      }
    }
  }
  return b.build();
}

Cluster load_cluster(const std::string& path) {
  const std::string text = csv::read_file(path);
  // The format is told by the content: the CSV formats by their header's first column.
  csv::LineReader lines(text);
  std::string_view line;
  while (lines.next(line) && csv::is_blank(line)) {
  }
  std::vector<std::string_view> fields;
  csv::split(line, fields);
  if (!fields.empty() && fields.size() > 1) {
    if (fields[0] == "sn") return parse_alibaba_nodes_csv(text, path);
    if (fields[0] == "num_switch") return parse_tiresias_cluster_csv(text, path);
  }
  return parse_cluster_yaml(text, path);
}

}  // namespace tessera

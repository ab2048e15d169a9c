#include "kube_emulator/nodes.h"

#include <algorithm>
#include <cstdio>
#include <regex>
#include <stdexcept>

namespace kube_emulator {

NodePool parse_node_spec(const std::string& spec) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const auto colon = spec.find(':', start);
    parts.push_back(spec.substr(start, colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (parts.size() < 3 || parts.size() > 5) {
    throw std::invalid_argument("--node-spec: expected COUNT:GPUS:PRODUCT[:CPU[:MEMORY]], got '" +
                                spec + "'");
  }
  NodePool p;
  try {
    p.count = std::stoi(parts[0]);
    p.gpus = std::stoi(parts[1]);
  } catch (const std::exception&) {
    throw std::invalid_argument("--node-spec: bad count or GPUs in '" + spec + "'");
  }
  if (p.count < 0 || p.gpus < 0)
    throw std::invalid_argument("--node-spec: negative in '" + spec + "'");
  p.product = parts[2];
  if (parts.size() > 3) p.cpu = parts[3];
  if (parts.size() > 4) p.memory = parts[4];
  if (!parse_quantity_milli(p.cpu) || !parse_quantity_milli(p.memory)) {
    throw std::invalid_argument("--node-spec: bad CPU or memory quantity in '" + spec + "'");
  }
  return p;
}

int gpu_memory_mib_of(const std::string& product) {
  if (product.find("H100") != std::string::npos && product.find("80GB") != std::string::npos)
    return 81559;
  if (product.find("H200") != std::string::npos) return 143771;
  if (product.find("B200") != std::string::npos) return 183359;
  std::smatch m;
  static const std::regex gb("([0-9]+)GB");
  if (std::regex_search(product, m, gb)) return std::stoi(m[1]) * 1024;
  return 16384;
}

namespace {
std::string family_of(const std::string& product) {
  if (product.find("H100") != std::string::npos || product.find("H200") != std::string::npos ||
      product.find("H800") != std::string::npos || product.find("GH200") != std::string::npos) {
    return "hopper";
  }
  if (product.find("B200") != std::string::npos || product.find("GB200") != std::string::npos)
    return "blackwell";
  if (product.find("A100") != std::string::npos || product.find("A10") != std::string::npos ||
      product.find("A30") != std::string::npos) {
    return "ampere";
  }
  if (product.find("L40") != std::string::npos || product.find("L4") != std::string::npos)
    return "ada-lovelace";
  if (product.find("V100") != std::string::npos) return "volta";
  if (product.find("T4") != std::string::npos) return "turing";
  return "unknown";
}
}  // namespace

std::vector<json> make_nodes(const std::vector<NodePool>& pools, const NodeLayout& layout,
                             int first_index) {
  int total = 0;
  for (const auto& p : pools) total += p.count;
  const int racks = layout.racks > 0 ? layout.racks : std::max(1, (total + 7) / 8);
  const int per_rack = std::max(1, (total + racks - 1) / racks);
  const int per_spine = std::max(1, layout.racks_per_spine);
  const std::string now = rfc3339(Clock::now());
  std::vector<json> out;
  int i = 0;
  for (const auto& pool : pools) {
    for (int n = 0; n < pool.count; ++n, ++i) {
      const int index = first_index + i;
      char name[64];
      std::snprintf(name, sizeof name, "%s%04d", layout.name_prefix.c_str(), index);
      const int rack = i / per_rack;
      char leaf[32], spine[32], ip[32], cidr[32];
      std::snprintf(leaf, sizeof leaf, "leaf-%02d", rack);
      std::snprintf(spine, sizeof spine, "spine-%02d", rack / per_spine);
      std::snprintf(ip, sizeof ip, "172.20.%d.%d", index / 250, index % 250 + 2);
      std::snprintf(cidr, sizeof cidr, "10.%d.%d.0/24", 64 + index / 256, index % 256);
      const int mem =
          pool.gpu_memory_mib > 0 ? pool.gpu_memory_mib : gpu_memory_mib_of(pool.product);
      json labels = {{"kubernetes.io/hostname", name},
                     {"kubernetes.io/os", "linux"},
                     {"kubernetes.io/arch", "amd64"},
                     {"beta.kubernetes.io/os", "linux"},
                     {"beta.kubernetes.io/arch", "amd64"},
                     {"type", "kwok"},
                     {"node.kubernetes.io/instance-type",
                      "gpu-" + std::to_string(pool.gpus) + "x-" + pool.product},
                     {layout.spine_key, spine},
                     {layout.leaf_key, leaf}};
      if (pool.gpus > 0) {
        labels["nvidia.com/gpu.present"] = "true";
        labels["nvidia.com/gpu.product"] = pool.product;
        labels["nvidia.com/gpu.count"] = std::to_string(pool.gpus);
        labels["nvidia.com/gpu.memory"] = std::to_string(mem);
        labels["nvidia.com/gpu.family"] = family_of(pool.product);
      }
      json capacity = {{"cpu", pool.cpu},
                       {"memory", pool.memory},
                       {"pods", std::to_string(pool.pods)},
                       {"ephemeral-storage", "1Ti"}};
      if (pool.gpus > 0) capacity["nvidia.com/gpu"] = std::to_string(pool.gpus);
      const auto cond = [&](const char* type, const char* status, const char* reason,
                            const char* message) {
        return json{{"type", type},       {"status", status},         {"reason", reason},
                    {"message", message}, {"lastHeartbeatTime", now}, {"lastTransitionTime", now}};
      };
      json node = {{"apiVersion", "v1"},
                   {"kind", "Node"},
                   {"metadata",
                    {{"name", name},
                     {"labels", labels},
                     {"annotations",
                      {{"kwok.x-k8s.io/node", "fake"}, {"node.alpha.kubernetes.io/ttl", "0"}}}}},
                   {"spec", {{"podCIDR", cidr}, {"podCIDRs", {cidr}}}},
                   {"status",
                    {{"capacity", capacity},
                     {"allocatable", capacity},
                     {"conditions",
                      {cond("MemoryPressure", "False", "KubeletHasSufficientMemory",
                            "kubelet has sufficient memory available"),
                       cond("DiskPressure", "False", "KubeletHasNoDiskPressure",
                            "kubelet has no disk pressure"),
                       cond("PIDPressure", "False", "KubeletHasSufficientPID",
                            "kubelet has sufficient PID available"),
                       cond("Ready", "True", "KubeletReady", "kubelet is posting ready status")}},
                     {"addresses",
                      {{{"type", "InternalIP"}, {"address", ip}},
                       {{"type", "Hostname"}, {"address", name}}}},
                     {"daemonEndpoints", {{"kubeletEndpoint", {{"Port", 10250}}}}},
                     {"nodeInfo",
                      {{"machineID", ""},
                       {"systemUUID", ""},
                       {"bootID", ""},
                       {"kernelVersion", "5.15.0-1063-nvidia"},
                       {"osImage", "Ubuntu 22.04.4 LTS"},
                       {"containerRuntimeVersion", "containerd://1.7.13"},
                       {"kubeletVersion", layout.kubelet_version},
                       {"kubeProxyVersion", layout.kubelet_version},
                       {"operatingSystem", "linux"},
                       {"architecture", "amd64"}}},
                     {"phase", "Running"}}}};
      out.push_back(std::move(node));
    }
  }
  return out;
}

}  // namespace kube_emulator

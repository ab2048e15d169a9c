#include "model/cluster.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace tessera {

namespace {
constexpr std::string_view kLevelNames[kNumLevels] = {"nvlink", "node", "rack", "spine", "cluster"};
}  // namespace

std::string_view level_name(Level l) {
  return kLevelNames[static_cast<size_t>(l)];
}

bool parse_level(std::string_view name, Level& out) {
  for (int i = 0; i < kNumLevels; ++i) {
    if (kLevelNames[i] == name) {
      out = static_cast<Level>(i);
      return true;
    }
  }
  return false;
}

uint32_t Cluster::max_gpus_per_node(GpuTypeMask mask) const {
  uint32_t best = 0;
  for (size_t t = 0; t < max_gpus_by_type_.size(); ++t) {
    if (type_allowed(mask, static_cast<GpuTypeId>(t))) best = std::max(best, max_gpus_by_type_[t]);
  }
  return best;
}

uint32_t Cluster::num_gpus_matching(GpuTypeMask mask) const {
  uint32_t total = 0;
  for (size_t t = 0; t < gpus_by_type_.size(); ++t) {
    if (type_allowed(mask, static_cast<GpuTypeId>(t))) total += gpus_by_type_[t];
  }
  return total;
}

ClusterBuilder::ClusterBuilder() {
  set_default_links(*this);
}

void set_default_links(ClusterBuilder& b) {
  b.set_link(Level::kNvlDomain, {300.0, 1.0});
  b.set_link(Level::kNode, {32.0, 2.0});
  b.set_link(Level::kRack, {12.5, 5.0});
  b.set_link(Level::kSpine, {12.5, 8.0});
  b.set_link(Level::kCluster, {6.25, 12.0});
}

void ClusterBuilder::add_node(const std::string& spine, const std::string& rack,
                              const std::string& name, GpuTypeId type, uint16_t gpus,
                              int64_t cpu_milli, int64_t mem_mib, uint16_t gpus_per_nvl_domain) {
  auto find_or_add = [](std::vector<std::string>& names, const std::string& s) {
    auto it = std::find(names.begin(), names.end(), s);
    if (it != names.end()) return static_cast<uint32_t>(it - names.begin());
    names.push_back(s);
    return static_cast<uint32_t>(names.size() - 1);
  };
  const uint32_t s = find_or_add(spine_names_, spine);
  // Rack names are scoped by spine so two spines may each have a "rack-0".
  const uint32_t r = find_or_add(rack_names_, spine + "/" + rack);
  if (r == rack_spine_.size()) rack_spine_.push_back(s);
  if (rack_spine_[r] != s) throw std::invalid_argument("rack " + rack + " under two spines");
  Node n;
  n.name = name;
  n.gpu_type = type;
  n.num_gpus = gpus;
  n.gpus_per_nvl_domain = gpus_per_nvl_domain == 0 ? gpus : gpus_per_nvl_domain;
  n.cpu_milli = cpu_milli;
  n.mem_mib = mem_mib;
  pending_.push_back(PendingNode{s, r, std::move(n)});
}

Cluster ClusterBuilder::build() const {
  Cluster c;
  c.types_ = types_;
  std::copy(std::begin(links_), std::end(links_), std::begin(c.links_));
  // Order: by spine, then rack, then insertion (stable).
  std::vector<size_t> order(pending_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto& x = pending_[a];
    const auto& y = pending_[b];
    return std::pair(x.spine, x.rack) < std::pair(y.spine, y.rack);
  });
  std::vector<uint32_t> rack_map(rack_names_.size(), kNoId);
  std::vector<uint32_t> spine_map(spine_names_.size(), kNoId);
  c.gpus_by_type_.assign(types_.size(), 0);
  c.max_gpus_by_type_.assign(types_.size(), 0);
  for (size_t idx : order) {
    const PendingNode& p = pending_[idx];
    if (spine_map[p.spine] == kNoId) {
      spine_map[p.spine] = static_cast<uint32_t>(c.spines_.size());
      c.spines_.push_back(Spine{spine_names_[p.spine], static_cast<RackId>(c.racks_.size()), 0});
    }
    if (rack_map[p.rack] == kNoId) {
      rack_map[p.rack] = static_cast<uint32_t>(c.racks_.size());
      const std::string& full = rack_names_[p.rack];
      c.racks_.push_back(Rack{full.substr(full.find('/') + 1), spine_map[p.spine],
                              static_cast<NodeId>(c.nodes_.size()), 0});
      c.spines_[spine_map[p.spine]].num_racks++;
    }
    Node n = p.node;
    n.rack = rack_map[p.rack];
    n.first_gpu = static_cast<GpuId>(c.gpu_node_.size());
    const auto node_id = static_cast<NodeId>(c.nodes_.size());
    for (uint16_t g = 0; g < n.num_gpus; ++g) c.gpu_node_.push_back(node_id);
    c.gpus_by_type_[n.gpu_type] += n.num_gpus;
    c.max_gpus_by_type_[n.gpu_type] =
        std::max<uint32_t>(c.max_gpus_by_type_[n.gpu_type], n.num_gpus);
    c.max_node_gpus_ = std::max(c.max_node_gpus_, n.num_gpus);
    c.max_nvl_slack_ = std::max<uint16_t>(c.max_nvl_slack_,
                                          static_cast<uint16_t>(n.num_gpus - n.nvl_domain_size()));
    if (n.num_gpus > 0) c.present_types_ |= GpuTypeMask{1} << n.gpu_type;
    // Saturating: what a reader let through must not overflow a total (it only bounds a check).
    if (__builtin_add_overflow(c.total_cpu_milli_, n.cpu_milli, &c.total_cpu_milli_)) {
      c.total_cpu_milli_ = std::numeric_limits<int64_t>::max();
    }
    if (__builtin_add_overflow(c.total_mem_mib_, n.mem_mib, &c.total_mem_mib_)) {
      c.total_mem_mib_ = std::numeric_limits<int64_t>::max();
    }
    c.racks_[n.rack].num_nodes++;
    c.nodes_.push_back(std::move(n));
  }
  return c;
}

}  // namespace tessera

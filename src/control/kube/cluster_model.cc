#include "control/kube/cluster_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/admission.h"
#include "model/input_error.h"

namespace tessera::kube {

namespace {

// What of a node shapes the engine's Cluster (anything else changes only eligibility).
bool same_shape(const NodeInfo& a, const NodeInfo& b, const std::vector<std::string>& topo) {
  if (a.usable() != b.usable() || a.gpus != b.gpus || a.cpu_milli != b.cpu_milli ||
      a.mem_mib != b.mem_mib || a.gpu_product != b.gpu_product) {
    return false;
  }
  for (const std::string& k : topo) {
    auto ia = a.labels.find(k), ib = b.labels.find(k);
    const bool ha = ia != a.labels.end(), hb = ib != b.labels.end();
    if (ha != hb || (ha && ia->second != ib->second)) return false;
  }
  return true;
}

bool same_eligibility(const NodeInfo& a, const NodeInfo& b) {
  if (a.labels != b.labels || a.taints.size() != b.taints.size()) return false;
  for (size_t i = 0; i < a.taints.size(); ++i) {
    if (a.taints[i].key != b.taints[i].key || a.taints[i].value != b.taints[i].value ||
        a.taints[i].effect != b.taints[i].effect) {
      return false;
    }
  }
  return true;
}

std::string label_or(const NodeInfo& n, const std::string& key) {
  auto it = n.labels.find(key);
  return it == n.labels.end() ? std::string("-") : it->second;
}

}  // namespace

ClusterModel::ClusterModel(ModelOptions opt) : opt_(std::move(opt)) {
  if (!opt_.queues_path.empty() && !opt_.queues_from_objects) {
    tree_template_ = load_queue_tree(opt_.queues_path);
    tree_given_ = true;
    tree_origin_ = opt_.queues_path;
  }
  tree_ = std::make_unique<QueueTree>(tree_given_ ? tree_template_ : QueueTree::flat(tenants_));
  tree_->bind(tenants_, tree_given_ ? tree_origin_ : "queues");
  rebuild();
}

void ClusterModel::set_queue_tree(QueueTree tree, std::string origin) {
  tree_template_ = std::move(tree);
  tree_given_ = true;
  tree_origin_ = std::move(origin);
  // Every name known so far, bound again one by one: those the tree has no leaf for are
  // unknown until the next tree.
  const Interner before = tenants_;
  tenants_ = Interner{};
  unknown_queues_.clear();
  tree_ = std::make_unique<QueueTree>(tree_template_);
  tree_->bind(tenants_, tree_origin_);
  for (TenantId t = 0; t < before.size(); ++t) ensure_tenant(before.name(t));
  all_stale_ = true;
  dirty_ = true;
}

bool ClusterModel::ours(const PodInfo& p) const {
  return std::find(opt_.scheduler_names.begin(), opt_.scheduler_names.end(), p.scheduler_name) !=
         opt_.scheduler_names.end();
}

PodRecord* ClusterModel::pod(const std::string& uid) {
  auto it = pods_.find(uid);
  return it == pods_.end() ? nullptr : &it->second;
}

Gang* ClusterModel::gang(const std::string& key) {
  auto it = gangs_.find(key);
  return it == gangs_.end() ? nullptr : &it->second;
}

std::optional<NodeId> ClusterModel::node_id(const std::string& name) const {
  auto it = node_ids_.find(name);
  if (it == node_ids_.end()) return std::nullopt;
  return it->second;
}

// ---- nodes ----

void ClusterModel::upsert_node(NodeInfo n) {
  auto it = nodes_.find(n.name);
  if (it == nodes_.end()) {
    nodes_changed_ = true;
    nodes_.emplace(n.name, std::move(n));
    return;
  }
  if (!same_shape(it->second, n, opt_.topology_labels)) {
    nodes_changed_ = true;
  } else if (!same_eligibility(it->second, n)) {
    eligible_.clear();
    ++cluster_generation_;  // node sets (and what was decided with them) are stale
    dirty_ = true;
    all_stale_ = true;
  }
  if (it->second.thermal_headroom_w != n.thermal_headroom_w) dirty_ = true;  // decide again
  it->second = std::move(n);
}

void ClusterModel::remove_node(const std::string& name) {
  if (nodes_.erase(name) != 0) nodes_changed_ = true;
}

void ClusterModel::retain_nodes(const std::set<std::string>& keep) {
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    if (keep.count(it->first) == 0) {
      it = nodes_.erase(it);
      nodes_changed_ = true;
    } else {
      ++it;
    }
  }
}

void ClusterModel::rebuild() {
  all_stale_ = true;
  // Release every slot first: the old ledger goes away with the old cluster.
  for (auto& [uid, r] : pods_) r.slot.reset();
  drop_reservations();
  ClusterBuilder b;
  set_default_links(b);
  const auto& keys = opt_.topology_labels;
  unusable_nodes_ = 0;
  for (const auto& [name, n] : nodes_) {
    if (!n.usable()) {  // NotReady or cordoned: no new pods (its pods are not counted)
      ++unusable_nodes_;
      continue;
    }
    std::string spine = "cluster", rack = "cluster";
    if (keys.size() == 1) {
      rack = label_or(n, keys[0]);
    } else if (keys.size() >= 2) {
      spine = label_or(n, keys[0]);
      rack = spine;
      for (size_t k = 1; k < keys.size(); ++k) rack += "/" + label_or(n, keys[k]);
    }
    const std::string type = n.gpus > 0 ? gpu_type_for_product(n.gpu_product) : "none";
    const GpuTypeId t = b.gpu_types().intern(type.empty() ? "unknown" : type);
    b.add_node(spine, rack, name, t, static_cast<uint16_t>(std::clamp(n.gpus, 0, 65535)),
               n.cpu_milli, n.mem_mib);
  }
  cluster_ = std::make_unique<Cluster>(b.build());
  ledger_ = std::make_unique<ClusterState>(*cluster_);
  node_ids_.clear();
  for (NodeId id = 0; id < cluster_->nodes().size(); ++id) node_ids_[cluster_->node(id).name] = id;
  eligible_.clear();
  overflow_pods_ = 0;
  // Replay in a fixed order (by uid) so the ledger depends only on what runs where.
  std::vector<PodRecord*> order;
  order.reserve(pods_.size());
  for (auto& [uid, r] : pods_) order.push_back(&r);
  std::sort(order.begin(), order.end(),
            [](const PodRecord* x, const PodRecord* y) { return x->info.uid < y->info.uid; });
  for (PodRecord* r : order) place_slot(*r);
  ++cluster_generation_;
  nodes_changed_ = false;
  dirty_ = true;
}

void ClusterModel::refresh() {
  if (nodes_changed_) rebuild();
}

// ---- ledger slots ----

void ClusterModel::place_slot(PodRecord& r) {
  if (r.slot) return;
  const PodInfo& p = r.info;
  if (p.terminal()) return;
  const std::string& node = p.node_name.empty() ? r.assumed_node : p.node_name;
  if (node.empty()) return;
  auto it = node_ids_.find(node);
  if (it == node_ids_.end()) return;  // a node the engine does not schedule (NotReady, gone)
  const NodeId n = it->second;
  const Node& nd = cluster_->node(n);
  PodSlot s;
  s.node = n;
  const MemberDemand& d = p.demand;
  bool fits = true;
  if (d.gpus > 0) {
    // Where Tessera chose the GPUs, it wrote them on the pod: keep them.
    if (r.ours && static_cast<int32_t>(p.gpu_index.size()) == d.gpus) {
      for (int32_t idx : p.gpu_index) {
        if (idx < 0 || idx >= nd.num_gpus) {
          fits = false;
          break;
        }
        s.shares.push_back({nd.first_gpu + static_cast<GpuId>(idx), d.gpu_milli});
      }
      for (const GpuShare& g : s.shares) fits = fits && ledger_->gpu_free(g.gpu) >= g.milli;
      if (!fits) s.shares.clear();
      fits = true;
    }
    if (s.shares.empty()) {
      MemberDemand gpus_only = d;
      gpus_only.cpu_milli = 0;
      gpus_only.mem_mib = 0;
      if (!ledger_->pick_gpus(n, gpus_only, /*pack=*/true, s.shares)) {
        // Over-committed by someone else: count what is there to take.
        fits = false;
        int32_t need = d.gpus;
        for (GpuId g = nd.first_gpu; g < nd.first_gpu + nd.num_gpus && need > 0; ++g) {
          const int32_t take = std::min(ledger_->gpu_free(g), d.gpu_milli);
          if (take > 0) {
            s.shares.push_back({g, take});
            --need;
          }
        }
      }
    }
  }
  s.cpu_milli = std::min(p.demand.cpu_milli, ledger_->node_free_cpu(n));
  s.mem_mib = std::min(p.demand.mem_mib, ledger_->node_free_mem(n));
  if (s.cpu_milli < p.demand.cpu_milli || s.mem_mib < p.demand.mem_mib) fits = false;
  if (!fits) ++overflow_pods_;
  ledger_->allocate_member(n, s.shares, s.cpu_milli, s.mem_mib);
  r.slot = std::move(s);
  stale(r);
}

void ClusterModel::stale(const PodRecord& r) {
  if (!r.ours) return;
  if (auto it = gangs_.find(r.info.gang_key()); it != gangs_.end()) it->second.stale_ = true;
}

void ClusterModel::release_slot(PodRecord& r) {
  if (!r.slot) return;
  stale(r);
  ledger_->release_member(r.slot->node, r.slot->shares, r.slot->cpu_milli, r.slot->mem_mib);
  r.slot.reset();
}

void ClusterModel::assume(const std::string& uid, NodeId node, std::vector<GpuShare> shares) {
  PodRecord* r = pod(uid);
  if (!r) return;
  release_slot(*r);
  stale(*r);
  r->assumed_node = cluster_->node(node).name;
  PodSlot s;
  s.node = node;
  s.shares = std::move(shares);
  s.cpu_milli = r->info.demand.cpu_milli;
  s.mem_mib = r->info.demand.mem_mib;
  ledger_->allocate_member(node, s.shares, s.cpu_milli, s.mem_mib);
  r->slot = std::move(s);
}

void ClusterModel::forget(const std::string& uid) {
  PodRecord* r = pod(uid);
  if (!r || r->assumed_node.empty()) return;
  stale(*r);
  r->assumed_node.clear();
  if (r->info.node_name.empty()) release_slot(*r);
  dirty_ = true;
}

double ClusterModel::power_limit(const Gang& g) const {
  double limit = -1;
  for (const std::string& uid : g.bound_pods) {
    auto it = pods_.find(uid);
    if (it == pods_.end()) continue;
    const double l = it->second.power_limit_w();
    limit = limit < 0 ? l : (l <= 0 || limit <= 0 ? 0.0 : std::max(limit, l));
  }
  return std::max(0.0, limit);
}

void ClusterModel::note_power_limit(const std::string& uid, double limit_w) {
  if (PodRecord* r = pod(uid)) {
    r->limit_sent = limit_w;
    stale(*r);
  }
}

void ClusterModel::mark_evicting(const std::string& uid) {
  if (PodRecord* r = pod(uid)) {
    r->evicting = true;
    stale(*r);
  }
  dirty_ = true;
}

std::string ClusterModel::name_of(const Gang& g) const {
  if (!g.group.empty() || g.pods.empty()) return g.key;
  const auto it = pods_.find(*g.pods.begin());
  return it == pods_.end() ? g.key : it->second.info.key();
}

// ---- pods ----

void ClusterModel::attach(PodRecord& r) {
  if (!r.ours) return;
  const std::string key = r.info.gang_key();
  Gang& g = gangs_[key];
  if (g.key.empty()) {
    g.key = key;
    g.ns = r.info.ns;
    g.group = r.info.group;
    g.serial = next_serial_++;
  }
  g.pods.insert(r.info.uid);
  g.stale_ = true;
}

void ClusterModel::detach(const PodRecord& r) {
  if (!r.ours) return;
  auto it = gangs_.find(r.info.gang_key());
  if (it == gangs_.end()) return;
  it->second.pods.erase(r.info.uid);
  it->second.stale_ = true;
  if (empty_gang(it->second)) {
    changed_.push_back(2 * it->second.serial);
    gangs_.erase(it);
  }
}

void ClusterModel::upsert_pod(PodInfo p, double now) {
  if (p.terminal()) {  // finished: it holds nothing (the watch also drops it)
    remove_pod(p.uid);
    return;
  }
  auto it = pods_.find(p.uid);
  if (it == pods_.end()) {
    PodRecord r;
    r.ours = ours(p);
    r.first_seen = now;
    r.info = std::move(p);
    auto [pos, inserted] = pods_.emplace(r.info.uid, std::move(r));
    place_slot(pos->second);
    attach(pos->second);
    dirty_ = true;
    return;
  }
  PodRecord& r = it->second;
  stale(r);  // every change to one of our pods (its gang as it was; the new one below)
  const PodInfo& old = r.info;
  const bool relevant = old.node_name != p.node_name || old.deleting != p.deleting ||
                        old.gated != p.gated || old.gang_key() != p.gang_key() ||
                        old.demand != p.demand || old.queue != p.queue ||
                        old.invalid != p.invalid || !(old.constraints == p.constraints);
  if (old.gang_key() != p.gang_key()) detach(r);
  const bool moved = old.node_name != p.node_name;
  const bool was_ours = r.ours;
  r.ours = ours(p);
  const bool regroup = old.gang_key() != p.gang_key() || was_ours != r.ours;
  if (was_ours && !r.ours) {
    PodRecord tmp = r;
    tmp.ours = true;
    detach(tmp);
  }
  r.info = std::move(p);
  if (r.limit_sent >= 0 && std::abs(r.info.power_limit_w - r.limit_sent) < 0.5) {
    r.limit_sent = -1;  // the API shows the limit written: it is the truth again
  }
  if (!r.assumed_node.empty() && !r.info.node_name.empty()) {
    // The bind landed (or someone else bound it elsewhere): the API is the truth now.
    if (r.info.node_name != r.assumed_node) release_slot(r);
    r.assumed_node.clear();
  } else if (moved || old.demand != r.info.demand) {
    release_slot(r);
  }
  place_slot(r);
  if (regroup) attach(r);
  stale(r);
  if (relevant) dirty_ = true;
}

void ClusterModel::remove_pod(const std::string& uid) {
  auto it = pods_.find(uid);
  if (it == pods_.end()) return;
  release_slot(it->second);
  stale(it->second);
  detach(it->second);
  pods_.erase(it);
  dirty_ = true;
}

void ClusterModel::retain_pods(const std::set<std::string>& keep_uids) {
  std::vector<std::string> gone;
  for (const auto& [uid, r] : pods_) {
    if (keep_uids.count(uid) == 0) gone.push_back(uid);
  }
  for (const std::string& uid : gone) remove_pod(uid);
}

// ---- pod groups ----

void ClusterModel::upsert_group(PodGroupInfo g) {
  const std::string key = g.key();
  auto it = groups_.find(key);
  if (it == groups_.end() || it->second.min_member != g.min_member || it->second.queue != g.queue) {
    dirty_ = true;
  }
  if (auto gang = gangs_.find(g.gang_key()); gang != gangs_.end()) gang->second.stale_ = true;
  if (g.api == GroupApi::kJob) track_admission(g);
  groups_[key] = std::move(g);
}

void ClusterModel::remove_group(const std::string& key) {
  auto it = groups_.find(key);
  if (it == groups_.end()) return;
  if (auto gang = gangs_.find(it->second.gang_key()); gang != gangs_.end()) {
    gang->second.stale_ = true;
  }
  untrack_admission(it->second);
  groups_.erase(it);
  dirty_ = true;
}

void ClusterModel::retain_groups(GroupApi api, const std::set<std::string>& keep) {
  for (auto it = groups_.begin(); it != groups_.end();) {
    if (it->second.api == api && keep.count(it->first) == 0) {
      if (auto gang = gangs_.find(it->second.gang_key()); gang != gangs_.end()) {
        gang->second.stale_ = true;
      }
      untrack_admission(it->second);
      it = groups_.erase(it);
      dirty_ = true;
    } else {
      ++it;
    }
  }
}

}  // namespace tessera::kube

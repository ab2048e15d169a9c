// Reservations: GPUs the admin sets aside for a tenant, or one of its users, over a time window
// (as Slurm's `scontrol create reservation`). Their GPUs are chosen when the reservation is made
// and kept by node name and index; each cycle passes the reservations not over to the engine,
// which keeps their GPUs for their own jobs inside the window and, before it, for jobs whose
// time limit ends by its start (engine/reserved_gpus.h).
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "control/serve/job.h"
#include "control/serve/service.h"
#include "model/input_error.h"
#include "store/job_request.h"

namespace tessera {

namespace {

// In force at once: the engine honours at most this many (ReservedGpus::kMax).
constexpr size_t kMaxReservationsInForce = 64;
// The longest window, and the farthest ahead one may begin: a year and a day.
constexpr double kMaxWindowSeconds = 366.0 * 24 * 3600;

bool overlaps(double a0, double a1, double b0, double b1) {
  return a0 < b1 && b0 < a1;
}

std::string when(double t) {
  return fmt::format("{:%Y-%m-%d %H:%M} UTC", fmt::gmtime(static_cast<std::time_t>(t)));
}

}  // namespace

uint32_t Service::user_id_locked(const std::string& tenant, const std::string& user) {
  return user.empty() ? kNoId : user_ids_.intern(tenant + "/" + user);
}

void Service::load_reservations_locked() {
  const auto text = store_->setting("reservations");
  if (!text) return;
  const auto j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_array()) return;
  for (const auto& e : j) {
    if (!e.is_object()) continue;
    StoredReservation r;
    r.name = e.value("name", "");
    r.tenant = e.value("tenant", "");
    r.user = e.value("user", "");
    r.start = e.value("start", 0.0);
    r.end = e.value("end", 0.0);
    r.created_by = e.value("created_by", "");
    r.created_at = e.value("created_at", 0.0);
    for (const auto& g : e.value("gpus", nlohmann::json::array())) {
      if (g.is_object()) r.gpus.emplace_back(g.value("node", ""), g.value("index", -1));
    }
    r.ids = gpu_ids_locked(r);
    if (!r.name.empty()) reservations_[r.name] = std::move(r);
  }
}

void Service::save_reservations_locked(std::map<std::string, StoredReservation> next,
                                       const AuditEntry& audit) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& [name, r] : next) {
    nlohmann::json gpus = nlohmann::json::array();
    for (const auto& [node, index] : r.gpus) gpus.push_back({{"node", node}, {"index", index}});
    j.push_back({{"name", r.name},
                 {"tenant", r.tenant},
                 {"user", r.user},
                 {"start", r.start},
                 {"end", r.end},
                 {"gpus", std::move(gpus)},
                 {"created_by", r.created_by},
                 {"created_at", r.created_at}});
  }
  api_write([&] { store_->set_setting("reservations", j.dump(), &audit); });
  reservations_ = std::move(next);
  dirty_ = true;  // the next cycle honours it
}

std::vector<GpuId> Service::gpu_ids_locked(const StoredReservation& r) const {
  std::vector<GpuId> out;
  for (const auto& [node, index] : r.gpus) {
    for (NodeId n = 0; n < cluster_.nodes().size(); ++n) {
      const Node& nd = cluster_.node(n);
      if (nd.name != node) continue;
      for (GpuId g = nd.first_gpu; g < nd.first_gpu + nd.num_gpus; ++g) {
        if (gpu_index_[g] == index) out.push_back(g);
      }
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<GpuReservation> Service::gpu_reservations_locked(double t) {
  std::vector<GpuReservation> out;
  for (const auto& [name, r] : reservations_) {
    if (t >= r.end || out.size() == kMaxReservationsInForce) continue;
    const std::optional<TenantId> tenant = tenants_.find(r.tenant);
    GpuReservation g;
    g.name = r.name;
    // A tenant that is gone keeps its GPUs reserved (for nobody) until the window ends.
    g.tenant = tenant ? *tenant : kNoId;
    g.user = user_id_locked(r.tenant, r.user);
    g.start = r.start;
    g.end = r.end;
    g.gpus = r.ids;
    out.push_back(std::move(g));
  }
  return out;
}

ReservationView Service::reservation_view_locked(const StoredReservation& r,
                                                 const Caller& caller) const {
  ReservationView v;
  v.name = r.name;
  if (caller.admin || caller.tenant == r.tenant) {
    v.tenant = r.tenant;
    v.user = r.user;
    v.created_by = r.created_by;
  }
  v.start = r.start;
  v.end = r.end;
  const double t = now();
  v.state = t >= r.end ? "ended" : t >= r.start ? "active" : "upcoming";
  v.created_at = r.created_at;
  const std::vector<GpuId>& ids = r.ids;
  v.missing_gpus = static_cast<int32_t>(r.gpus.size() - ids.size());
  for (GpuId g : ids) {
    v.gpus.push_back(cluster_.node(cluster_.node_of_gpu(g)).name + "/" +
                     std::to_string(gpu_index_[g]));
  }
  for (const auto& [id, jp] : active_) {
    if (t >= r.end) break;  // an ended reservation has no one in its way
    if (jp->row.tenant == r.tenant && (r.user.empty() || jp->row.user == r.user)) continue;
    for (const GpuShare& s : jp->alloc.shares) {
      if (std::binary_search(ids.begin(), ids.end(), s.gpu)) {
        v.busy_jobs.push_back(id);
        break;
      }
    }
  }
  return v;
}

std::vector<ReservationView> Service::reservations(const Caller& caller) const {
  std::lock_guard lock(mu_);
  std::vector<ReservationView> out;
  for (const auto& [name, r] : reservations_) out.push_back(reservation_view_locked(r, caller));
  std::sort(out.begin(), out.end(), [](const ReservationView& a, const ReservationView& b) {
    return std::tie(a.start, a.name) < std::tie(b.start, b.name);
  });
  return out;
}

ReservationView Service::create_reservation(const RequestContext& ctx,
                                            const ReservationRequest& req) {
  if (!ctx.caller.admin) {
    throw ServiceError(ServiceError::kForbidden, "", "only the admin reserves GPUs");
  }
  if (!is_valid_name(req.name)) {
    throw ServiceError(ServiceError::kInvalid, "name",
                       "reservation names are 1-63 characters of letters, digits, '-', '_', '.'");
  }
  if (req.gpus < 1) {
    throw ServiceError(ServiceError::kInvalid, "gpus", "reserve at least 1 GPU");
  }
  std::lock_guard lock(mu_);
  const double t = now();
  const double start = std::max(req.start, t);
  if (!(req.end > start)) {
    throw ServiceError(ServiceError::kInvalid, "end",
                       "the window must end after it begins (and after now): " + when(start) +
                           " to " + when(req.end));
  }
  if (start - t > kMaxWindowSeconds) {
    throw ServiceError(ServiceError::kInvalid, "start",
                       "a window begins at most 366 days ahead (before it, only jobs with a time "
                       "limit could use its GPUs)");
  }
  if (req.end - start > kMaxWindowSeconds) {
    throw ServiceError(ServiceError::kInvalid, "end", "a window is at most 366 days");
  }
  if (reservations_.contains(req.name)) {
    throw ServiceError(
        ServiceError::kConflict, "name",
        "reservation " + req.name + " exists (tessera reservation delete " + req.name + " first)");
  }
  const std::optional<TenantId> tenant = tenants_.find(req.tenant);
  if (!tenant || deleted_tenants_.contains(req.tenant)) {
    throw ServiceError(ServiceError::kNotFound, "tenant", "no tenant " + quote_prefix(req.tenant));
  }
  if (!req.user.empty() && std::none_of(token_user_.begin(), token_user_.end(), [&](const auto& e) {
        return e.second.tenant == req.tenant && e.second.name == req.user;
      })) {
    throw ServiceError(ServiceError::kNotFound, "user",
                       "tenant " + req.tenant + " has no user " + quote_prefix(req.user) +
                           " (tessera user list " + req.tenant + ")");
  }
  size_t in_force = 0;
  for (const auto& [name, r] : reservations_) in_force += t < r.end ? 1 : 0;
  if (in_force >= kMaxReservationsInForce) {
    throw ServiceError(ServiceError::kConflict, "",
                       fmt::format("{} reservations are in force, the most there may be; delete "
                                   "one that is no longer needed",
                                   in_force));
  }
  GpuTypeMask types = kAnyGpuType;
  if (!req.gpu_type.empty()) {
    const auto type = cluster_.gpu_types().find(req.gpu_type);
    if (!type || (cluster_.present_types() & (GpuTypeMask{1} << *type)) == 0) {
      throw ServiceError(ServiceError::kInvalid, "gpu_type",
                         unknown_gpu_type(cluster_, req.gpu_type));
    }
    types = GpuTypeMask{1} << *type;
  }
  bool node_found = req.node.empty();
  // What each candidate GPU is: taken by another reservation over the window, held past the
  // start by someone else's job, or free to reserve.
  std::map<GpuId, std::string> other_reservation;
  for (const auto& [name, r] : reservations_) {
    if (!overlaps(r.start, r.end, start, req.end)) continue;
    for (GpuId g : r.ids) other_reservation.emplace(g, name);
  }
  std::map<GpuId, int64_t> busy;  // GPU -> a job holding it past the start
  for (const auto& [id, jp] : active_) {
    const Job& j = *jp;
    if (j.row.tenant == req.tenant && (req.user.empty() || j.row.user == req.user)) continue;
    const double limit = j.row.spec.time_limit_seconds;
    if (limit >= 0 && j.row.started_at > 0 && j.row.started_at + limit <= start) continue;
    for (const GpuShare& s : j.alloc.shares) busy.emplace(s.gpu, id);
  }
  // GPUs another reservation in force holds at another time: taken last, so that jobs that may
  // use one reservation's GPUs are not kept from them by the next one's.
  std::set<GpuId> reserved_later;
  for (const auto& [name, r] : reservations_) {
    if (t >= r.end) continue;
    for (GpuId g : r.ids) reserved_later.insert(g);
  }
  // Candidates per node: free ones in no other reservation first, then free ones in one, then
  // (ignore_jobs) busy ones; nodes with the most of the first kind first, so that a
  // reservation packs whole nodes.
  struct NodeCandidates {
    NodeId node;
    std::vector<GpuId> free, later, held;
  };
  std::vector<NodeCandidates> nodes;
  size_t in_other = 0, held_past = 0, drained = 0;
  std::set<int64_t> holders;
  for (NodeId n = 0; n < cluster_.nodes().size(); ++n) {
    const Node& nd = cluster_.node(n);
    if (!req.node.empty() && nd.name != req.node) continue;
    node_found = true;
    if (!type_allowed(types, nd.gpu_type)) continue;
    if (drained_.contains(nd.name)) {
      drained += nd.num_gpus;
      continue;
    }
    NodeCandidates c{n, {}, {}, {}};
    for (GpuId g = nd.first_gpu; g < nd.first_gpu + nd.num_gpus; ++g) {
      if (other_reservation.contains(g)) {
        ++in_other;
      } else if (const auto b = busy.find(g); b != busy.end()) {
        ++held_past;
        holders.insert(b->second);
        if (req.ignore_jobs) c.held.push_back(g);
      } else {
        (reserved_later.contains(g) ? c.later : c.free).push_back(g);
      }
    }
    nodes.push_back(std::move(c));
  }
  if (!node_found) {
    throw ServiceError(ServiceError::kNotFound, "node",
                       "no node " + quote_prefix(req.node) + " (tessera nodes lists them)");
  }
  std::stable_sort(
      nodes.begin(), nodes.end(), [](const NodeCandidates& a, const NodeCandidates& b) {
        return std::pair(a.free.size(), a.later.size()) > std::pair(b.free.size(), b.later.size());
      });
  std::vector<GpuId> chosen;
  for (int pass = 0; pass < 3; ++pass) {
    for (const NodeCandidates& c : nodes) {
      for (GpuId g : pass == 0 ? c.free : pass == 1 ? c.later : c.held) {
        if (chosen.size() < static_cast<size_t>(req.gpus)) chosen.push_back(g);
      }
    }
  }
  if (chosen.size() < static_cast<size_t>(req.gpus)) {
    std::string why = fmt::format(
        "only {} GPU{}{}{} can be reserved from {} to {}", chosen.size(),
        chosen.size() == 1 ? "" : "s", req.gpu_type.empty() ? "" : " of type " + req.gpu_type,
        req.node.empty() ? "" : " on node " + req.node, when(start), when(req.end));
    std::vector<std::string> stand;
    if (in_other > 0) {
      std::set<std::string> names;
      for (const auto& [g, name] : other_reservation) names.insert(name);
      std::string list;
      for (const std::string& nm : names) list += (list.empty() ? "" : ", ") + nm;
      stand.push_back(fmt::format("{} are in reservations over that window ({})", in_other, list));
    }
    if (held_past > 0 && !req.ignore_jobs) {
      std::string ids;
      for (int64_t id : holders) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
      stand.push_back(fmt::format(
          "{} are held by jobs that may run past its start (no time limit ending by then: {}); "
          "--ignore-jobs reserves them, to be used as those jobs end",
          held_past, ids));
    }
    if (drained > 0) stand.push_back(fmt::format("{} are on drained nodes", drained));
    for (size_t k = 0; k < stand.size(); ++k) why += (k == 0 ? ": " : "; ") + stand[k];
    throw ServiceError(ServiceError::kConflict, "gpus", why);
  }
  std::sort(chosen.begin(), chosen.end());
  StoredReservation r;
  r.name = req.name;
  r.tenant = req.tenant;
  r.user = req.user;
  r.start = start;
  r.end = req.end;
  for (GpuId g : chosen) {
    r.gpus.emplace_back(cluster_.node(cluster_.node_of_gpu(g)).name, gpu_index_[g]);
  }
  r.ids = chosen;
  r.created_by = ctx.caller.actor();
  r.created_at = t;
  const std::string what =
      fmt::format("reservation {}: {} GPUs for {}{}, {} to {}", r.name, chosen.size(),
                  r.user.empty() ? "" : r.user + "@", r.tenant, when(r.start), when(r.end));
  const AuditEntry audit{0, t, ctx.caller.actor(), ctx.method, ctx.path, 201, what};
  auto next = reservations_;
  next[r.name] = r;
  save_reservations_locked(std::move(next), audit);
  wake_.notify_one();
  return reservation_view_locked(r, ctx.caller);
}

void Service::delete_reservation(const RequestContext& ctx, const std::string& name) {
  if (!ctx.caller.admin) {
    throw ServiceError(ServiceError::kForbidden, "", "only the admin deletes reservations");
  }
  std::lock_guard lock(mu_);
  if (!reservations_.contains(name)) {
    throw ServiceError(ServiceError::kNotFound, "", "no reservation " + quote_prefix(name));
  }
  const AuditEntry audit{
      0, now(), ctx.caller.actor(), ctx.method, ctx.path, 200, "reservation " + name + " deleted"};
  auto next = reservations_;
  next.erase(name);
  save_reservations_locked(std::move(next), audit);
  wake_.notify_one();
}

void Service::mark_reserved_gpus_locked(std::vector<NodeView>& nodes) const {
  const double t = now();
  std::map<std::pair<std::string, int32_t>, const StoredReservation*> holder;
  for (const auto& [name, r] : reservations_) {
    if (t >= r.end) continue;
    for (const auto& gpu : r.gpus) {
      auto [it, fresh] = holder.try_emplace(gpu, &r);
      // The one in its window now, else the one that begins first.
      const StoredReservation& other = *it->second;
      const bool r_now = t >= r.start, other_now = t >= other.start;
      if (!fresh && (r_now > other_now || (r_now == other_now && r.start < other.start))) {
        it->second = &r;
      }
    }
  }
  if (holder.empty()) return;
  for (NodeView& n : nodes) {
    for (GpuView& g : n.gpus) {
      const auto it = holder.find({n.name, g.index});
      if (it == holder.end()) continue;
      g.reservation = it->second->name;
      g.reservation_active = t >= it->second->start;
    }
  }
}

}  // namespace tessera

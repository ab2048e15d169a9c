// The queue tree changes without a restart (tessera queues apply, SIGHUP): the new tree is
// checked whole before it replaces the running one, and a change that would leave a tenant
// without a queue is refused, naming its waiting and running jobs. What was applied is kept in
// the database, so a server started without --queues comes back with it.
#include <algorithm>
#include <set>

#include "control/decayed_usage_json.h"
#include "control/serve/job.h"
#include "control/serve/service.h"
#include "model/csv.h"
#include "model/input_error.h"

namespace tessera {

namespace {

// The leaf paths of a tree, for saying what changed.
std::set<std::string> leaf_paths(const QueueTree& t) {
  std::set<std::string> out;
  for (const QueueSpec& q : t.queues()) {
    if (q.leaf() && !q.path.empty()) out.insert(q.path);
  }
  return out;
}

}  // namespace

QueueTreeChange Service::apply_queue_tree(const RequestContext& ctx, const std::string& text,
                                          const std::string& origin, bool dry_run) {
  if (!ctx.caller.admin) {
    throw ServiceError(ServiceError::kForbidden, "", "only the admin changes the queue tree");
  }
  QueueTree next;
  try {
    next = parse_queue_tree_yaml(text, origin);
    next.validate_against(cluster_);
  } catch (const InputError& e) {
    throw ServiceError(ServiceError::kInvalid, "queues", e.what());
  }
  std::lock_guard lock(mu_);
  // Every tenant the server knows must find its leaf: ids are bound for good, and a tenant
  // without a queue could neither run nor be accounted.
  std::vector<std::string> orphans;
  for (const TenantId t : next.tenants_without_leaf(tenants_)) {
    std::vector<int64_t> live;
    for (const auto& [id, j] : jobs_) {
      if (j->row.tenant == tenants_.name(t) && !is_terminal(j->row.state)) live.push_back(id);
    }
    std::sort(live.begin(), live.end());
    std::string jobs;
    for (size_t i = 0; i < live.size() && i < 10; ++i) {
      jobs += (i ? ", " : "") + std::to_string(live[i]);
    }
    if (live.size() > 10) jobs += ", ... (" + std::to_string(live.size() - 10) + " more)";
    const std::string& name = tenants_.name(t);
    orphans.push_back(name + (live.empty()
                                  ? deleted_tenants_.contains(name)
                                        ? std::string(" (deleted; its finished jobs are still "
                                                      "accounted to its queue)")
                                        : std::string(" (no job waiting or running)")
                                  : " (jobs " + jobs + " waiting or running)"));
  }
  if (!orphans.empty()) {
    std::string list;
    for (const std::string& o : orphans) list += (list.empty() ? "" : "; ") + o;
    throw ServiceError(ServiceError::kConflict, "queues",
                       origin + " has no leaf queue for tenant" +
                           (orphans.size() > 1 ? "s " : " ") + list +
                           ": keep a queue for each, or cancel their jobs first");
  }
  QueueTreeChange change;
  const std::set<std::string> before = leaf_paths(*tree_);
  const std::set<std::string> after = leaf_paths(next);
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(),
                      std::back_inserter(change.added));
  std::set_difference(before.begin(), before.end(), after.begin(), after.end(),
                      std::back_inserter(change.removed));
  change.queues = next.size() - 1;
  if (dry_run) return change;

  const double t = now();
  const AuditEntry audit{0,
                         t,
                         ctx.caller.actor(),
                         ctx.method,
                         ctx.path,
                         200,
                         "queue tree (" + std::to_string(change.queues) + " queues)"};
  api_write([&] { store_->set_setting(kAppliedTreeSetting, text, &audit); });
  // Long-term usage follows the queues by path: ids change with the tree's shape.
  UsageByPath usage = usage_by_path(*tree_, driver_.usage().decayed());
  tree_template_ = std::move(next);
  flat_tree_ = false;
  tree_origin_ = origin;
  rebind_locked();
  if (driver_.usage().on()) apply_usage(*tree_, usage, driver_.usage().decayed());
  dirty_ = true;
  wake_.notify_one();
  return change;
}

std::optional<QueueTreeChange> Service::reload_queue_tree() {
  if (opt_.queues_path.empty()) return std::nullopt;
  std::string text;
  try {
    text = csv::read_file(opt_.queues_path);
  } catch (const std::exception& e) {
    throw ServiceError(ServiceError::kInvalid, "queues", e.what());
  }
  return apply_queue_tree(RequestContext{Caller{true, ""}, "SIGHUP", opt_.queues_path}, text,
                          opt_.queues_path, false);
}

}  // namespace tessera

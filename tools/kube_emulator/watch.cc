// Router::run_watch: a watch stream over the store's change history, with the cacher's
// semantics (synthetic ADDED from "now", resume strictly after a resourceVersion, selector
// transitions as ADDED/DELETED, bookmarks, 410 Expired in-stream, server-side timeout).
#include <algorithm>

#include "kube_emulator/router.h"

namespace kube_emulator {

namespace {

std::string expired_line(const std::string& message) {
  json e = {{"type", "ERROR"}, {"object", status_failure(410, "Expired", message)}};
  return e.dump() + "\n";
}

}  // namespace

std::string Router::event_line(const char* type, const ResourceInfo& r, const json* obj,
                               const std::string* text, const WatchPlan& plan, bool& first) {
  std::string line = "{\"type\":\"";
  line += type;
  line += "\",\"object\":";
  if (plan.table) {
    const json v = cluster_.view(r, *obj);
    // Column definitions go with the first event only, as the real server's table watch.
    line += make_table(r, {&v}, plan.include, string_at(v, "metadata.resourceVersion"), "", first)
                .dump();
    first = false;
  } else if (text != nullptr && !cluster_.has_view(r)) {
    line += *text;
  } else {
    line += cluster_.view(r, *obj).dump();
  }
  line += "}\n";
  return line;
}

void Router::run_watch(const WatchPlan& plan, const std::function<bool(const std::string&)>& write,
                       const std::function<bool()>& alive, const std::atomic<bool>& stopping) {
  const ResourceInfo& r = *plan.resource;
  Store& store = cluster_.store();
  const std::string prefix = (r.namespaced && !plan.ns.empty()) ? plan.ns + "/" : "";
  const auto matches = [&](const json& j) {
    if (!prefix.empty() && string_at(j, "metadata.namespace") != plan.ns) return false;
    const json* labels = find_path(j, "metadata.labels");
    return plan.labels.matches(labels != nullptr ? *labels : json()) && plan.fields.matches(j);
  };
  const std::string bookmark_kind = r.kind;
  const std::string bookmark_api = r.group_version();
  const auto bookmark = [&](uint64_t rv, bool initial_end) {
    json meta = {{"resourceVersion", std::to_string(rv)}, {"creationTimestamp", nullptr}};
    if (initial_end) meta["annotations"] = {{"k8s.io/initial-events-end", "true"}};
    return json{{"type", "BOOKMARK"},
                {"object",
                 {{"kind", bookmark_kind}, {"apiVersion", bookmark_api}, {"metadata", meta}}}}
               .dump() +
           "\n";
  };

  uint64_t cursor = 0;
  uint64_t drop_epoch = 0, compact_epoch = 0;
  std::vector<ObjPtr> initial;
  Collection* coll = nullptr;
  {
    std::lock_guard<std::mutex> lock(store.mutex());
    coll = &store.collection(r.storage);
    drop_epoch = coll->drop_epoch;
    compact_epoch = coll->compact_epoch;
    if (plan.from_now || plan.send_initial) {
      for (auto it = coll->items.lower_bound(prefix); it != coll->items.end(); ++it) {
        if (!prefix.empty() && !starts_with(it->first, prefix)) break;
        initial.push_back(it->second);
      }
      cursor = store.rv();
    } else {
      cursor = plan.rv;
      if (cursor < coll->floor) {
        write(expired_line("too old resource version: " + std::to_string(plan.rv) + " (" +
                           std::to_string(coll->floor) + ")"));
        return;
      }
    }
  }
  bool first = true;
  for (const auto& o : initial) {
    if (!matches(o->j())) continue;
    if (!write(event_line("ADDED", r, &o->j(), &o->text(), plan, first))) return;
  }
  initial.clear();
  if (plan.send_initial && !write(bookmark(cursor, true))) return;

  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + plan.timeout;
  auto next_bookmark = start + opt_.bookmark_interval;
  auto next_alive_check = start + std::chrono::seconds(1);
  std::vector<Change> batch;
  while (true) {
    uint64_t bookmark_rv = 0;
    batch.clear();
    {
      std::unique_lock<std::mutex> lock(store.mutex());
      auto wake = std::min(deadline, next_alive_check);
      if (plan.bookmarks) wake = std::min(wake, next_bookmark);
      coll->cv.wait_until(lock, wake, [&] {
        return stopping.load() || coll->drop_epoch != drop_epoch ||
               coll->compact_epoch != compact_epoch ||
               (!coll->history.empty() && coll->history.back().rv > cursor);
      });
      if (stopping.load() || coll->drop_epoch != drop_epoch) return;
      if (coll->compact_epoch != compact_epoch || cursor < coll->floor) {
        lock.unlock();
        write(expired_line("The resourceVersion for the provided watch is too old."));
        return;
      }
      auto it = std::upper_bound(coll->history.begin(), coll->history.end(), cursor,
                                 [](uint64_t rv, const Change& c) { return rv < c.rv; });
      for (; it != coll->history.end() && batch.size() < 2048; ++it) batch.push_back(*it);
      if (!batch.empty()) cursor = batch.back().rv;
      const bool drained = it == coll->history.end();
      if (plan.bookmarks && drained && std::chrono::steady_clock::now() >= next_bookmark) {
        bookmark_rv = store.rv();
      }
    }
    for (const auto& ch : batch) {
      const bool now_in = ch.type != EventType::Deleted && matches(ch.obj->j());
      const bool was_in = ch.prev && matches(ch.prev->j());
      std::string line;
      if (ch.type == EventType::Added) {
        if (now_in) line = event_line("ADDED", r, &ch.obj->j(), &ch.obj->text(), plan, first);
      } else if (ch.type == EventType::Deleted) {
        if (was_in) line = event_line("DELETED", r, &ch.obj->j(), &ch.obj->text(), plan, first);
      } else if (now_in && was_in) {
        line = event_line("MODIFIED", r, &ch.obj->j(), &ch.obj->text(), plan, first);
      } else if (now_in) {
        line = event_line("ADDED", r, &ch.obj->j(), &ch.obj->text(), plan, first);
      } else if (was_in) {
        // The object left the selection: DELETED with its previous state at the new RV.
        json prev = ch.prev->j();
        prev["metadata"]["resourceVersion"] = std::to_string(ch.rv);
        line = event_line("DELETED", r, &prev, nullptr, plan, first);
      }
      if (!line.empty() && !write(line)) return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (bookmark_rv != 0) {
      if (!write(bookmark(bookmark_rv, false))) return;
      cursor = std::max(cursor, bookmark_rv);
      next_bookmark = now + opt_.bookmark_interval;
    }
    if (now >= deadline) return;
    if (now >= next_alive_check) {
      if (!alive()) return;
      next_alive_check = now + std::chrono::seconds(1);
    }
  }
}

}  // namespace kube_emulator

#include "kube_emulator/store.h"

namespace kube_emulator {

const std::string& Object::text() const {
  std::call_once(once_, [this] { text_ = j_.dump(); });
  return text_;
}

const char* event_name(EventType t) {
  switch (t) {
    case EventType::Added:
      return "ADDED";
    case EventType::Modified:
      return "MODIFIED";
    case EventType::Deleted:
      return "DELETED";
  }
  return "ERROR";
}

std::string object_key(const std::string& ns, const std::string& name) {
  return ns.empty() ? name : ns + "/" + name;
}

Collection& Store::collection(const std::string& storage) {
  auto& slot = collections_[storage];
  if (!slot) {
    slot = std::make_unique<Collection>();
    slot->name = storage;
    slot->floor = base_floor_;
  }
  return *slot;
}

ObjPtr Store::get(Collection& c, const std::string& key) const {
  const auto it = c.items.find(key);
  return it == c.items.end() ? nullptr : it->second;
}

void Store::index(Collection& c, const std::string& key, const ObjPtr& before,
                  const ObjPtr& after) {
  if (c.name != "/pods") return;
  const std::string old_node = before ? string_at(before->j(), "spec.nodeName") : "";
  const std::string new_node = after ? string_at(after->j(), "spec.nodeName") : "";
  if (before && old_node != new_node) {
    auto it = c.by_node.find(old_node);
    if (it != c.by_node.end()) {
      it->second.erase(key);
      if (it->second.empty()) c.by_node.erase(it);
    }
  }
  if (after) c.by_node[new_node].insert(key);
}

void Store::record(Collection& c, Change ch) {
  c.history.push_back(std::move(ch));
  while (c.history.size() > history_limit_) {
    c.floor = c.history.front().rv;
    c.history.pop_front();
  }
  c.cv.notify_all();
}

ObjPtr Store::put(Collection& c, const std::string& key, json obj) {
  const uint64_t rv = next_rv();
  obj["metadata"]["resourceVersion"] = std::to_string(rv);
  auto after = std::make_shared<const Object>(std::move(obj), rv);
  ObjPtr before;
  auto it = c.items.find(key);
  if (it == c.items.end()) {
    c.items.emplace(key, after);
  } else {
    before = it->second;
    it->second = after;
  }
  index(c, key, before, after);
  record(c, Change{rv, before ? EventType::Modified : EventType::Added, after, before});
  return after;
}

ObjPtr Store::erase(Collection& c, const std::string& key) {
  auto it = c.items.find(key);
  if (it == c.items.end()) return nullptr;
  ObjPtr before = it->second;
  c.items.erase(it);
  index(c, key, before, nullptr);
  const uint64_t rv = next_rv();
  json last = before->j();
  last["metadata"]["resourceVersion"] = std::to_string(rv);
  auto final_state = std::make_shared<const Object>(std::move(last), rv);
  record(c, Change{rv, EventType::Deleted, final_state, before});
  return final_state;
}

void Store::load(Collection& c, const std::string& key, json obj) {
  const uint64_t rv = std::stoull(string_at(obj, "metadata.resourceVersion", "0"));
  auto o = std::make_shared<const Object>(std::move(obj), rv);
  c.items[key] = o;
  index(c, key, nullptr, o);
}

void Store::drop_watches() {
  for (auto& [_, c] : collections_) {
    ++c->drop_epoch;
    c->cv.notify_all();
  }
}

void Store::compact() {
  // Every resourceVersion handed out so far becomes too old (the RV moves past them).
  ++rv_;
  base_floor_ = rv_;
  for (auto& [_, c] : collections_) {
    c->history.clear();
    c->floor = rv_;
    ++c->compact_epoch;
    c->cv.notify_all();
  }
}

void Store::start_history_at_current() {
  base_floor_ = rv_;
  for (auto& [_, c] : collections_) {
    c->history.clear();
    c->floor = rv_;
  }
}

void Store::notify_all() {
  for (auto& [_, c] : collections_) c->cv.notify_all();
}

}  // namespace kube_emulator

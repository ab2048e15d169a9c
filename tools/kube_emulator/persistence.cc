#include "kube_emulator/persistence.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace kube_emulator {

void save_state(Cluster& cluster, const std::string& path) {
  std::vector<std::pair<std::string, std::vector<ObjPtr>>> snapshot;
  uint64_t rv = 0;
  {
    Store& s = cluster.store();
    std::lock_guard<std::mutex> lock(s.mutex());
    rv = s.rv();
    for (const auto& [name, c] : s.collections()) {
      std::vector<ObjPtr> objs;
      objs.reserve(c->items.size());
      for (const auto& [_, o] : c->items) objs.push_back(o);
      snapshot.emplace_back(name, std::move(objs));
    }
    cluster.clear_dirty();
  }
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) throw std::runtime_error("cannot write the state file " + tmp);
  std::fprintf(f,
               "{\"kind\":\"TesseraKubeEmulatorState\",\"resourceVersion\":%llu,\"collections\":{",
               static_cast<unsigned long long>(rv));
  bool first_coll = true;
  for (const auto& [name, objs] : snapshot) {
    std::fprintf(f, "%s%s:[", first_coll ? "" : ",", json(name).dump().c_str());
    first_coll = false;
    bool first = true;
    for (const auto& o : objs) {
      std::fputs(first ? "\n" : ",\n", f);
      first = false;
      std::fputs(o->text().c_str(), f);
    }
    std::fputs("]", f);
  }
  std::fputs("}}\n", f);
  const bool ok = std::fflush(f) == 0 && fsync(fileno(f)) == 0;
  std::fclose(f);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw std::runtime_error("cannot write the state file " + path);
  }
}

bool load_state(Cluster& cluster, const std::string& path) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  const json state = json::parse(ss.str(), nullptr, false);
  if (state.is_discarded() || !state.is_object() || !state.contains("collections")) {
    throw std::runtime_error("the state file " + path + " is not an emulator state");
  }
  Store& s = cluster.store();
  std::lock_guard<std::mutex> lock(s.mutex());
  for (const auto& [_, c] : s.collections()) {
    c->items.clear();
    c->by_node.clear();
    c->history.clear();
  }
  for (const auto& [name, objs] : state["collections"].items()) {
    Collection& c = s.collection(name);
    for (const auto& o : objs) {
      const std::string key =
          object_key(string_at(o, "metadata.namespace"), string_at(o, "metadata.name"));
      s.load(c, key, o);
    }
  }
  s.set_rv(state.value("resourceVersion", uint64_t{0}));
  s.start_history_at_current();
  cluster.reload_crds();
  cluster.resume_after(s.rv());
  return true;
}

}  // namespace kube_emulator

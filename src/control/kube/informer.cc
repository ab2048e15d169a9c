#include "control/kube/informer.h"

#include <chrono>
#include <cstdio>

#include "backend/kube/object_path.h"
#include "control/kube/workload_groups.h"

namespace tessera::kube {

using nlohmann::json;

GroupApi Inbox::group_api(Kind k) {
  switch (k) {
    case Kind::kGroup:
      return GroupApi::kSchedulerPlugins;
    case Kind::kVolcanoGroup:
      return GroupApi::kVolcano;
    case Kind::kJob:
      return GroupApi::kJob;
    case Kind::kJobSet:
      return GroupApi::kJobSet;
    case Kind::kRayCluster:
      return GroupApi::kRayCluster;
    case Kind::kNode:
    case Kind::kPod:
    case Kind::kQueue:
      break;
  }
  return GroupApi::kNone;
}

void Inbox::push(Event e) {
  {
    std::lock_guard lock(mu_);
    events_.push_back(std::move(e));
  }
  cv_.notify_one();
}

void Inbox::push(BindResult r) {
  {
    std::lock_guard lock(mu_);
    results_.push_back(std::move(r));
  }
  cv_.notify_one();
}

void Inbox::wait(double timeout_s, const std::atomic<bool>& stop) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::duration<double>(timeout_s),
               [&] { return stop.load() || !events_.empty() || !results_.empty(); });
}

void Inbox::wake() {
  std::lock_guard lock(mu_);  // a waiter between its check and its sleep still sees `stop`
  cv_.notify_all();
}

std::vector<Inbox::Event> Inbox::take_events() {
  std::vector<Event> out;
  std::lock_guard lock(mu_);
  out.swap(events_);
  return out;
}

std::vector<Inbox::BindResult> Inbox::take_results() {
  std::vector<BindResult> out;
  std::lock_guard lock(mu_);
  out.swap(results_);
  return out;
}

// A ReflectorHandler that parses objects (on the watch thread) and queues them.
class Informer::Handler : public ReflectorHandler {
 public:
  Handler(Inbox& inbox, Inbox::Kind kind, const std::function<double()>& now)
      : inbox_(inbox), kind_(kind), now_(now) {}

  void on_list_begin() override { listing_ = std::make_shared<std::set<std::string>>(); }
  void on_list_item(json&& object) override {
    Inbox::Event e;
    if (parse(object, e)) {
      listing_->insert(e.key);
      inbox_.push(std::move(e));
    }
  }
  void on_list_end(const std::string&) override {
    Inbox::Event e;
    e.kind = kind_;
    e.retain = std::move(listing_);
    inbox_.push(std::move(e));
  }
  void on_event(const std::string& type, json&& object) override {
    Inbox::Event e;
    if (!parse(object, e)) return;
    e.removed = type == "DELETED";
    inbox_.push(std::move(e));
  }
  void on_absent() override {
    std::fprintf(stderr,
                 "tessera kube: %s is not served (its CRD is not installed): none are read; "
                 "looked for again every minute\n",
                 path_.c_str());
  }
  void set_path(std::string path) { path_ = std::move(path); }

 private:
  bool parse(const json& object, Inbox::Event& e) {
    e.kind = kind_;
    e.at = now_();
    // The event carries the parsed object under the key its cache keeps it by.
    const auto keep = [&e](auto& parsed, std::string key) {
      e.key = std::move(key);
      e.object = std::move(parsed);
    };
    try {
      switch (kind_) {
        case Inbox::Kind::kNode: {
          NodeInfo n = parse_node(object);
          keep(n, n.name);
          break;
        }
        case Inbox::Kind::kPod: {
          PodInfo p = parse_pod(object);
          keep(p, p.uid);
          break;
        }
        case Inbox::Kind::kGroup:
        case Inbox::Kind::kVolcanoGroup: {
          PodGroupInfo g = parse_pod_group(object, Inbox::group_api(kind_));
          keep(g, g.key());
          break;
        }
        case Inbox::Kind::kJob:
        case Inbox::Kind::kJobSet:
        case Inbox::Kind::kRayCluster: {
          PodGroupInfo g = kind_ == Inbox::Kind::kJob      ? parse_job(object)
                           : kind_ == Inbox::Kind::kJobSet ? parse_jobset(object)
                                                           : parse_ray_cluster(object);
          keep(g, g.key());
          break;
        }
        case Inbox::Kind::kQueue: {
          QueueObject q = parse_queue_object(object);
          keep(q, q.name);
          break;
        }
      }
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "tessera kube: ignoring a malformed object: %s\n", ex.what());
      return false;
    }
    return true;
  }

  Inbox& inbox_;
  Inbox::Kind kind_;
  const std::function<double()>& now_;
  std::shared_ptr<std::set<std::string>> listing_ = std::make_shared<std::set<std::string>>();
  std::string path_;
};

Informer::Informer(Client& client, Inbox& inbox, std::function<double()> now)
    : client_(client), inbox_(inbox), now_(std::move(now)) {}

Informer::~Informer() {
  join();
}

void Informer::start(const std::atomic<bool>& stop, bool queue_objects) {
  struct Watch {
    Inbox::Kind kind;
    std::string path, fields;
    bool optional = false;  // a custom resource: its CRD may not be installed
  };
  // Every pod that is not finished: ours to schedule, and everyone's for capacity.
  std::vector<Watch> watches = {
      {Inbox::Kind::kNode, collection_path(kNodes), ""},
      {Inbox::Kind::kPod, collection_path(kPods), "status.phase!=Succeeded,status.phase!=Failed"},
      {Inbox::Kind::kGroup, collection_path(kPodGroupsX), "", true},
      {Inbox::Kind::kVolcanoGroup, collection_path(kPodGroupsVolcano), "", true},
      // The workloads whose pods are a gang (workload_groups.h).
      {Inbox::Kind::kJob, collection_path(kJobs), ""},
      {Inbox::Kind::kJobSet, collection_path(kJobSets), "", true},
      {Inbox::Kind::kRayCluster, collection_path(kRayClusters), "", true},
  };
  if (queue_objects)
    watches.push_back({Inbox::Kind::kQueue, collection_path(kTesseraQueues), "", true});
  for (const Watch& w : watches) {
    handlers_.push_back(std::make_unique<Handler>(inbox_, w.kind, now_));
    handlers_.back()->set_path(w.path);
    ReflectorOptions ro;
    ro.path = w.path;
    ro.field_selector = w.fields;
    ro.optional = w.optional;
    if (w.kind == Inbox::Kind::kNode) ro.fields = node_fields();
    if (w.kind == Inbox::Kind::kPod) ro.fields = pod_fields();
    if (w.kind == Inbox::Kind::kJob) ro.fields = job_fields();
    if (w.kind == Inbox::Kind::kJobSet) ro.fields = jobset_fields();
    if (w.kind == Inbox::Kind::kRayCluster) ro.fields = ray_cluster_fields();
    reflectors_.push_back(std::make_unique<Reflector>(client_, ro, *handlers_.back()));
  }
  for (auto& r : reflectors_) {
    threads_.emplace_back([rp = r.get(), &stop] { rp->run(stop); });
  }
}

void Informer::join() {
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

Informer::Stats Informer::stats() const {
  Stats s;
  for (const auto& r : reflectors_) {
    s.relists += r->stats().expired.load();
    s.reconnects += r->stats().reconnects.load();
    if (const std::string e = r->last_error(); !e.empty()) s.errors += e + "\n";
  }
  return s;
}

}  // namespace tessera::kube

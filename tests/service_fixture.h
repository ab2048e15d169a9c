// The Service over an in-memory backend and a clock the test moves (tick() runs one poll +
// cycle): the fixture of the service's unit tests.
#pragma once

#include <gtest/gtest.h>

#include <functional>

#include <csignal>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "control/serve/service.h"
#include "service_test_util.h"
#include "store/job_request.h"

namespace tessera {

using testing::TempDir;

// Members are entries in a table; the test ends them, and signals end them as a process's
// default handlers would (unless the member ignores SIGTERM).
class FakeBackend final : public Backend {
 public:
  struct Proc {
    uint64_t job = 0;
    int32_t rank = 0;
    bool alive = true;
    bool ignores_term = false;
    MemberPhase end = MemberPhase::kExited;
    int32_t code = 0;
    std::vector<int> signals;
  };

  std::vector<MemberHandle> launch(const LaunchSpec& spec) override {
    std::lock_guard lock(mu_);
    if (fail_next_launch) {
      fail_next_launch = false;
      throw std::runtime_error("no such file or directory");
    }
    launches.push_back(spec);
    std::vector<MemberHandle> out;
    for (const MemberLaunch& m : spec.members) {
      const int64_t pid = next_pid_++;
      Proc p;
      p.job = spec.job;
      p.rank = m.rank;
      p.ignores_term = ignore_term_of.count(spec.name) != 0;
      procs[pid] = p;
      out.push_back(MemberHandle{m.rank, pid, 1});
    }
    return out;
  }
  std::vector<MemberStatus> poll(uint64_t, uint32_t,
                                 const std::vector<MemberHandle>& members) override {
    std::lock_guard lock(mu_);
    std::vector<MemberStatus> out;
    for (const MemberHandle& h : members) {
      auto it = procs.find(h.pid);
      if (it == procs.end()) {
        out.push_back(MemberStatus{h.rank, MemberPhase::kLost, -1});
      } else if (it->second.alive) {
        out.push_back(MemberStatus{h.rank, MemberPhase::kRunning, -1});
      } else {
        out.push_back(MemberStatus{h.rank, it->second.end,
                                   it->second.end == MemberPhase::kExited ? it->second.code : -1});
      }
    }
    return out;
  }
  void signal(uint64_t /*job*/, uint32_t /*attempt*/, const std::vector<MemberHandle>& members,
              int sig) override {
    std::lock_guard lock(mu_);
    for (const MemberHandle& h : members) {
      auto it = procs.find(h.pid);
      if (it == procs.end() || !it->second.alive) continue;
      it->second.signals.push_back(sig);
      if (sig == SIGKILL) {
        it->second.alive = false;
        it->second.end = MemberPhase::kLost;
      } else if (sig == SIGTERM && !it->second.ignores_term) {
        it->second.alive = false;
        it->second.code = 143;
      }
    }
  }
  std::vector<MemberHandle> discover(uint64_t, uint32_t, int32_t) override { return {}; }
  LogFile open_log(uint64_t, uint32_t, int32_t) const override { return {}; }

  // The member `rank` of the latest launch of `job` exits with `code`.
  void exit(uint64_t job, int32_t rank, int32_t code) {
    std::lock_guard lock(mu_);
    for (auto it = procs.rbegin(); it != procs.rend(); ++it) {
      if (it->second.job == job && it->second.rank == rank) {
        it->second.alive = false;
        it->second.end = MemberPhase::kExited;
        it->second.code = code;
        return;
      }
    }
  }
  // The memory (MiB per member) job `job`'s last launch gave its members; -1 if never.
  int64_t launched_mem_of(uint64_t job) {
    std::lock_guard lock(mu_);
    for (auto it = launches.rbegin(); it != launches.rend(); ++it) {
      if (it->job == job && !it->members.empty()) return it->members[0].mem_mib;
    }
    return -1;
  }
  std::vector<int> signals_of(uint64_t job, int32_t rank) {
    std::lock_guard lock(mu_);
    for (auto it = procs.rbegin(); it != procs.rend(); ++it) {
      if (it->second.job == job && it->second.rank == rank) return it->second.signals;
    }
    return {};
  }

  std::map<int64_t, Proc> procs;
  std::vector<LaunchSpec> launches;
  std::set<std::string> ignore_term_of;  // job names whose members ignore SIGTERM
  bool fail_next_launch = false;

 private:
  std::mutex mu_;
  int64_t next_pid_ = 1000;
};

class ServiceTest : public ::testing::Test {
 protected:
  ServiceOptions options(int gpus) {
    ServiceOptions o;
    o.db_path = dir_.file("tessera.db");
    o.work_dir = dir_.file("jobs");
    o.virtual_gpus = gpus;
    o.checkpoint_grace_seconds = 30;
    o.clock = [this] { return now_; };
    return o;
  }
  // A service over a fresh fake backend (observed through `backend_`, owned by the service).
  std::unique_ptr<Service> make(int gpus) {
    auto b = std::make_unique<FakeBackend>();
    backend_ = b.get();
    return std::make_unique<Service>(options(gpus), std::move(b));
  }
  // The same over the queue tree `yaml` (written to queues.yaml).
  std::unique_ptr<Service> make_with_queues(int gpus, const std::string& yaml) {
    const std::string path = dir_.file("queues.yaml");
    std::ofstream(path) << yaml;
    ServiceOptions o = options(gpus);
    o.queues_path = path;
    auto b = std::make_unique<FakeBackend>();
    backend_ = b.get();
    return std::make_unique<Service>(o, std::move(b));
  }
  static RequestContext as(const std::string& tenant) {
    return RequestContext{Caller{false, tenant}, "POST", "/v1/jobs"};
  }
  static JobRequest job(const std::string& yaml) { return parse_job_request(yaml); }
  // The ServiceError `f` raises, as "FIELD: message" ("" for none); "" if it raises none.
  static std::string field_error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const ServiceError& e) {
      return e.field() + ": " + e.what();
    }
    return "";
  }
  static JobState state(Service& s, int64_t id) { return s.job(Caller{true, ""}, id).row.state; }
  // Submits a job of `gpus` GPUs (a 5 s checkpoint grace) for `tenant`, a second later runs a
  // cycle; its id.
  int64_t submit_and_tick(Service& s, const char* tenant, const char* name, int gpus) {
    const std::string spec = std::string("name: ") + name +
                             "\nresources: {gpus: " + std::to_string(gpus) +
                             "}\ncheckpoint_grace: 5s\ncommand: [x]\n";
    const int64_t id = s.submit(as(tenant), job(spec), "", nullptr).row.id;
    now_ += 1;
    s.tick();
    return id;
  }
  // A reclaim and return, on make(8): team-a submits big1 then big2 (6 GPUs each),
  // team-b submits b (4 GPUs), which reclaims from big1 and runs; 100 s later b ends and big1
  // runs again (big2 still waits).
  struct Reclaimed {
    int64_t big1 = 0, big2 = 0, b = 0;
  };
  void reclaim_then_return(Service& s, Reclaimed& out) {
    out.big1 = submit_and_tick(s, "team-a", "big1", 6);
    out.big2 = submit_and_tick(s, "team-a", "big2", 6);
    out.b = submit_and_tick(s, "team-b", "b", 4);
    now_ += 10;
    s.tick();
    s.tick();
    ASSERT_EQ(state(s, out.b), JobState::kRunning);
    now_ += 100;
    backend_->exit(out.b, 0, 0);
    s.tick();
    s.tick();
    ASSERT_EQ(state(s, out.big1), JobState::kRunning);
  }
  static double free_gpus(Service& s) {
    double free = 0;
    for (const NodeView& n : s.nodes()) {
      for (const GpuView& g : n.gpus) free += g.free_milli / 1000.0;
    }
    return free;
  }

  TempDir dir_{"service"};
  double now_ = 1000;
  FakeBackend* backend_ = nullptr;  // not owned
};

}  // namespace tessera

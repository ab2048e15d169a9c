// A cycle's changes to jobs, made in memory before the database records them (as Volcano's
// Statement): keep() each job before its first change; when the write is refused, undo() puts
// every kept job back as it was (its row, its place in the ledger and among the active jobs, its
// run's accounting), so that nothing is acted on that the database does not know of; commit()
// once the write is in forgets the copies.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "control/serve/job.h"
#include "model/cluster_state.h"

namespace tessera {

class Service::Transaction {
 public:
  Transaction(ClusterState& ledger, std::map<int64_t, Job*>& active)
      : ledger_(ledger), active_(active) {}
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  // Before changing `j`: a copy of what undo() restores (the first copy of a job wins).
  void keep(Job& j);
  // The write failed: every allocation made or released since is returned, and each kept job
  // gets back what it had before its first change.
  void undo();
  void commit() { kept_.clear(); }

 private:
  struct Kept {
    Job* job;
    JobRow row;
    Allocation alloc;
    std::vector<int64_t> waits_for;
    bool active;
    RunRecord run;
    double run_joules;
    double power_since;
  };
  ClusterState& ledger_;
  std::map<int64_t, Job*>& active_;
  std::vector<Kept> kept_;  // in the order changed
};

}  // namespace tessera

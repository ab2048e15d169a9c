#include "control/serve/transaction.h"

#include <set>
#include <utility>

namespace tessera {

void Service::Transaction::keep(Job& j) {
  kept_.push_back(Kept{&j, j.row, j.alloc, j.waits_for, active_.count(j.row.id) != 0, j.run,
                       j.run_joules, j.power_since});
}

void Service::Transaction::undo() {
  std::set<Job*> touched;
  for (const Kept& k : kept_) touched.insert(k.job);
  for (Job* j : touched) {
    if (!j->alloc.empty()) ledger_.release(j->alloc);
  }
  // The earliest copy of a job is what it had before the transaction: restored last.
  for (auto it = kept_.rbegin(); it != kept_.rend(); ++it) {
    Job& j = *it->job;
    j.row = std::move(it->row);
    j.alloc = std::move(it->alloc);
    j.waits_for = std::move(it->waits_for);
    j.run = std::move(it->run);
    j.run_joules = it->run_joules;
    j.power_since = it->power_since;
    if (it->active) {
      active_[j.row.id] = &j;
    } else {
      active_.erase(j.row.id);
    }
  }
  for (Job* j : touched) {
    if (!j->alloc.empty()) ledger_.allocate(j->alloc);
  }
  kept_.clear();
}

}  // namespace tessera

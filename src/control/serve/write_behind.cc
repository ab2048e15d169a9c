// Writes the database refused (a full disk): the server keeps running, remembers that the rows
// are behind, refuses what it cannot record (503), and writes them again before deciding more.
#include "control/serve/service.h"

#include <iostream>

#include "control/serve/job.h"

namespace tessera {

bool Service::save_rows_locked(const std::vector<const JobRow*>& rows) {
  std::vector<const JobRow*> all = rows;
  for (const int64_t id : unsaved_) all.push_back(&jobs_.at(id)->row);
  try {
    store_->update_jobs(all, nullptr, unsaved_runs_, row_events_locked(all, now()));
  } catch (const StoreError& e) {
    for (const JobRow* r : rows) unsaved_.insert(r->id);
    note_write_failure(e);
    return false;
  }
  mark_recorded_locked(all);
  unsaved_.clear();
  unsaved_runs_.clear();
  note_write_success();
  return true;
}

bool Service::retry_writes_locked() {
  if (health_.ok()) return true;
  if (!unsaved_.empty() || !unsaved_runs_.empty()) return save_rows_locked({});
  try {
    store_->set_setting("write_probe", std::to_string(now()));
  } catch (const StoreError& e) {
    note_write_failure(e);
    return false;
  }
  note_write_success();
  return true;
}

void Service::note_write_failure(const std::exception& e) {
  if (health_.failed(e.what(), now())) {
    std::cerr << "tessera serve: DEGRADED: a database write failed (" << e.what()
              << "); running jobs keep running, new work and API writes wait until it takes "
                 "writes again\n";
  }
}

void Service::note_write_success() {
  if (health_.succeeded()) {
    std::cerr << "tessera serve: the database takes writes again; service restored\n";
  }
}

void Service::api_write(const std::function<void()>& write) {
  try {
    write();
  } catch (const StoreError& e) {
    note_write_failure(e);
    throw ServiceError(ServiceError::kUnavailable, "",
                       std::string("the database cannot be written, so nothing was changed; "
                                   "retry later (") +
                           e.what() + ")");
  }
  note_write_success();
}

}  // namespace tessera

// Isolated job networks in `tessera serve` (--job-network isolated; docs/service.md, "What a
// job can reach"): each run of a gang gets a network namespace with only loopback, and a
// listening socket inside it on the API's port, which the API server serves, so the job still
// reaches its TESSERA_REPORT_URL.
#include <cstdio>
#include <exception>
#include <string>

#include "control/serve/job.h"
#include "control/serve/service.h"

namespace tessera {

void Service::set_job_listeners(JobListeners l) {
  std::lock_guard lock(mu_);
  job_listeners_ = std::move(l);
}

int Service::api_port_locked() const {
  const size_t colon = opt_.api_url.rfind(':');
  if (colon == std::string::npos) return 0;
  try {
    return std::stoi(opt_.api_url.substr(colon + 1));
  } catch (const std::exception&) {
    return 0;
  }
}

std::string Service::api_url_for_jobs_locked() const {
  if (!opt_.isolate_job_network || opt_.api_url.empty()) return opt_.api_url;
  // Inside its namespace the API is on loopback, whatever address the host serves it on.
  const size_t scheme = opt_.api_url.find("://");
  return opt_.api_url.substr(0, scheme == std::string::npos ? 0 : scheme + 3) +
         "127.0.0.1:" + std::to_string(api_port_locked());
}

void Service::open_job_network_locked(Job& j, LaunchSpec& ls) {
  if (!opt_.isolate_job_network) return;
  close_job_network_locked(j);
  j.network = JobNetwork::create(api_port_locked());
  ls.netns_fd = j.network->netns_fd();
  if (j.network->listener_fd() >= 0 && job_listeners_.add) {
    job_listeners_.add(j.network->listener_fd());
  }
}

void Service::close_job_network_locked(Job& j) {
  if (!j.network) return;
  if (j.network->listener_fd() >= 0 && job_listeners_.remove) {
    job_listeners_.remove(j.network->listener_fd());
  }
  j.network.reset();
}

void Service::adopt_job_networks_locked() {
  if (!opt_.isolate_job_network) return;
  for (auto& [id, j] : active_) {
    if (j->members.empty() || j->network) continue;
    try {
      j->network = JobNetwork::of_process(j->members.front().pid, api_port_locked());
      if (j->network && j->network->listener_fd() >= 0 && job_listeners_.add) {
        job_listeners_.add(j->network->listener_fd());
      }
    } catch (const std::exception& e) {
      // The job runs on; only its way back to the API is missing (it may bind that port).
      std::fprintf(stderr, "tessera serve: job %lld: %s\n", static_cast<long long>(id), e.what());
    }
  }
}

}  // namespace tessera

// Edge sites in the simulator (docs/edge.md; `tessera edge`): jobs over one main site and
// edge sites near their users, under a connectivity series, with the requests of latency-bound
// inference services counted as they are answered (or not) and within their SLO (or not).
//
// Each site is a cluster of its own with its own queue tree: one scheduling cycle per site
// (engine/cycle.h), guarantees and preemption within it. Which site's cycle a job enters is
// the routing policy's (engine/site_routing.h): edge sites' cycles run first, so a service that
// finds no room at its edge site may still start at the main site in the same event.
//
// Time advances from event to event: arrivals, ends (a training job after its work; a service
// at the end of its window, submit + work, whether it ran or not), and link changes. Between
// events the links hold, and each service's requests (request_rate per second over its
// window) are served by the site it runs at, or fail: not running yet, or its users cut off.
// A service running at the main site whose users' link goes down (or gets too slow for its
// SLO) moves to its edge site when a cycle there finds it room (edge-first only).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/decisions.h"
#include "engine/site_routing.h"
#include "model/inference_service.h"
#include "model/job.h"
#include "model/sites.h"

namespace tessera {

struct EdgeOptions {
  SitePolicy placement = SitePolicy::kEdgeFirst;
  std::string policy = "fair";  // each site's scheduling policy (as simulate's --policy)
  uint64_t seed = 1;
  // Requests sent while their region's link is down or below this (Mbit/s) are also tallied
  // apart (EdgeResult::degraded): how the placement holds up when the link fails its users.
  double degraded_mbps = 0.5;
  // Services as GPU shares (docs/edge.md, "Packing services"): a 1-GPU service asks for
  // packed_service_milli of a GPU instead of the whole GPU. Services sharing a GPU run
  // colocation_slowdown slower (IndSD: 0.25 = 25 %), and each service's requests queue behind
  // all of that GPU's (processor sharing: the compute time over 1 - the GPU's utilisation; a
  // GPU at 99 % or more answers 1 / utilisation of its requests).
  bool pack = false;
  double pack_headroom = 1.5;
  double colocation_slowdown = 0;
};

// The GPU share (milli) a packed service asks for: the fraction of a GPU it keeps busy beside
// others (rate x compute time x (1 + slowdown)) x headroom, in eighths of a GPU, at least one
// eighth and at most the whole GPU. So a GPU shared by services of at most a whole GPU each is
// never busier than 1 / headroom.
int32_t packed_service_milli(const InferenceService& s, double headroom, double slowdown);

// Requests of a set of services: sent, answered, answered within the SLO.
struct RequestTally {
  double requests = 0;
  double served = 0;
  double within_slo = 0;
  double latency_ms_sum = 0;  // over answered requests
  void add(const RequestTally& o);
  double slo_attainment() const { return requests > 0 ? within_slo / requests : 0; }
  double served_fraction() const { return requests > 0 ? served / requests : 0; }
  double mean_latency_ms() const { return served > 0 ? latency_ms_sum / served : 0; }
};

struct EdgeServiceResult {
  std::string name;
  std::string region;
  std::string first_site;  // where it first started; "" if it never ran
  double first_start = -1;
  int migrations = 0;  // moved to its edge site when its users lost the main one
  int preemptions = 0;
  RequestTally tally;
  RequestTally degraded;  // sent while its region's link was down or slow (degraded_mbps)
};

struct EdgeJobResult {  // jobs that are not services
  std::string name;
  std::string site;
  double submit = 0;
  double end = -1;  // -1: did not finish
};

struct EdgeResult {
  std::string placement;
  std::string policy;
  bool pack = false;
  double pack_headroom = 0;
  double colocation_slowdown = 0;
  std::vector<std::string> sites;
  std::vector<EdgeServiceResult> services;
  std::vector<EdgeJobResult> jobs;
  std::vector<std::pair<std::string, RequestTally>> regions;  // by region (site order)
  RequestTally total;
  std::vector<std::pair<std::string, RequestTally>> regions_degraded;
  RequestTally degraded;  // requests sent while their region's link was down or slow
  double degraded_mbps = 0;
  int starts_at_edge = 0;
  int starts_at_main = 0;
  int migrations = 0;
  int preemptions = 0;
  std::vector<std::pair<std::string, std::string>> rejected;  // job, why
  // Seconds jobs waited, by the reason they waited for (PendingCode; SiteUnreachable: a
  // service at its edge site because the main one was cut off or too slow for its SLO).
  std::array<double, kNumPendingCodes> wait_seconds{};
  double site_unreachable_seconds() const {
    return wait_seconds[static_cast<size_t>(PendingCode::kSiteUnreachable)];
  }
  double end_time = 0;
};

// Throws InputError naming a job's source when it names a site or region that is not there.
EdgeResult run_edge_simulation(const Sites& sites, const Workload& w, const EdgeOptions& opt);

nlohmann::ordered_json to_json(const EdgeResult& r);

}  // namespace tessera

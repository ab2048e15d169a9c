// Which site a job may run at (docs/edge.md), as a pure function of the sites' links now.
//
// A latency-bound inference service (JobSpec::service) answers requests from the users of one
// region. Served at its region's edge site, a request costs the users' access round trip and
// the service time; served at the main site, it also crosses the edge site's link to the main
// one: the link's round trip, and the request and response at the link's bandwidth, slowed by
// the load the region's other services at the main site put on it (a queue on the link: the
// transfer time over 1 - utilisation; past full utilisation, only 1/utilisation of the
// requests get through). A down link reaches nothing.
//
// Policies:
//  - edge-first: a service goes to its region's edge site when that site can meet its SLO;
//    it may fall back to the main site when the main site meets the SLO over the link as it is
//    now. With the link down, or too slow for the SLO, it waits at the edge site
//    (SiteUnreachable) instead of starting where its users cannot reach it.
//  - main-only: everything runs at the main site (the baseline: one cluster, no edge).
// Other jobs (training, batch) run at the main site, and a job naming a site runs there.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/inference_service.h"
#include "model/job.h"
#include "model/sites.h"

namespace tessera {

enum class SitePolicy : uint8_t { kEdgeFirst, kMainOnly };
std::optional<SitePolicy> parse_site_policy(std::string_view name);
std::string_view to_string(SitePolicy p);

// What routing sees of one site now.
struct SiteView {
  std::string_view name;
  bool main = false;
  double access_rtt_ms = 0;
  LinkState link;     // to the main site (edge sites), now
  LinkState nominal;  // the same with nothing down: what the link gives at best
  // Mbit/s the services running now put on this site's link (those whose requests cross it),
  // on its busier direction.
  double link_load_mbps = 0;
};

// The sites as routing sees them at time t: their links' states (from the connectivity
// series) and best states, with no load on any link (the caller adds what runs).
std::vector<SiteView> site_views(const Sites& sites, double t);

// Mbit/s of one service's requests (to the serving site) and responses (back), each direction.
double request_mbps(const InferenceService& s);
double response_mbps(const InferenceService& s);

// What a saturated queue (a link, or with packing a GPU, at 99 % or more) charges an answered
// request: this many transfer (or compute) times (1 / (1 - 0.99)), the queue being unbounded.
inline constexpr double kSaturatedFactor = 100;

struct RequestOutcome {
  bool reachable = false;      // false: the link is down (no request is answered)
  double served_fraction = 0;  // of the requests sent, those answered (< 1 on a saturated link)
  double latency_ms = 0;       // of an answered request
};

// Requests of `s` from the region of site `origin`, served at site `at` (crossing the origin's
// link unless it is the main site, and the serving site's unless it is). `counted`: the links'
// link_load_mbps already include this service's traffic (it runs there now); else it is added.
// `nominal`: the links as at best, unloaded (can this ever meet the SLO?).
RequestOutcome request_outcome(const InferenceService& s, std::span<const SiteView> sites,
                               size_t origin, size_t at, bool counted, bool nominal = false);
// The Mbit/s service `s` puts on a link (its busier direction).
double link_mbps_of(const InferenceService& s);

enum class RouteStatus : uint8_t {
  kPlace,  // try the sites in `sites`, in order
  kWait,   // no site may take it now (why); routing again may change that
  kNever,  // no site could ever meet it (why): reject at admission
};

struct SiteRoute {
  RouteStatus status = RouteStatus::kPlace;
  std::vector<uint32_t> sites;  // candidates, best first (kPlace)
  std::string why;              // kWait / kNever
  bool link_blocked = false;    // main was left out for its link (down or too slow)
};

// The sites job `j` may start at now. `service` is the job's service (null: not one); its
// region and a pinned site (JobSpec::site) are looked up by name in `sites`. `hosts[s]`: site
// s could ever host the job (engine/admission.h's infeasible_reason finds nothing); empty:
// every site could.
SiteRoute route_job(const JobSpec& j, const InferenceService* service,
                    std::span<const SiteView> sites, size_t main, SitePolicy policy,
                    std::span<const bool> hosts = {});

}  // namespace tessera

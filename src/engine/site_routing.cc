#include "engine/site_routing.h"

#include <fmt/format.h>

#include <algorithm>

namespace tessera {

std::optional<SitePolicy> parse_site_policy(std::string_view name) {
  if (name == "edge-first") return SitePolicy::kEdgeFirst;
  if (name == "main-only") return SitePolicy::kMainOnly;
  return std::nullopt;
}

std::string_view to_string(SitePolicy p) {
  return p == SitePolicy::kEdgeFirst ? "edge-first" : "main-only";
}

std::vector<SiteView> site_views(const Sites& sites, double t) {
  std::vector<SiteView> v;
  v.reserve(sites.sites.size());
  for (const Site& s : sites.sites) {
    SiteView x;
    x.name = s.name;
    x.main = s.main;
    x.access_rtt_ms = s.access_rtt_ms;
    x.link = s.link_at(t);
    x.nominal = s.main ? x.link : LinkState{true, s.link_mbps, s.link_rtt_ms};
    v.push_back(x);
  }
  return v;
}

// kB/request x requests/s x 8 kbit/kB / 1000 kbit/Mbit.
double request_mbps(const InferenceService& s) {
  return s.request_rate * s.request_kb * 8.0 / 1000.0;
}
double response_mbps(const InferenceService& s) {
  return s.request_rate * s.response_kb * 8.0 / 1000.0;
}
double link_mbps_of(const InferenceService& s) {
  return std::max(request_mbps(s), response_mbps(s));
}

namespace {

std::optional<size_t> find_site(std::span<const SiteView> sites, std::string_view name) {
  for (size_t i = 0; i < sites.size(); ++i) {
    if (sites[i].name == name) return i;
  }
  return std::nullopt;
}

}  // namespace

RequestOutcome request_outcome(const InferenceService& s, std::span<const SiteView> sites,
                               size_t origin, size_t at, bool counted, bool nominal) {
  RequestOutcome out;
  out.reachable = true;
  out.served_fraction = 1;
  out.latency_ms = sites[origin].access_rtt_ms + s.service_ms;
  if (origin == at) return out;
  // A transfer of request and response: kB x 8 / (Mbit/s) = ms.
  const double transfer_kb = s.request_kb + s.response_kb;
  for (const size_t crossed : {origin, at}) {
    if (sites[crossed].main) continue;
    const SiteView& v = sites[crossed];
    const LinkState& link = nominal ? v.nominal : v.link;
    if (!link.up || link.bandwidth_mbps <= 0) return {};
    const double load =
        nominal ? link_mbps_of(s) : v.link_load_mbps + (counted ? 0.0 : link_mbps_of(s));
    const double util = load / link.bandwidth_mbps;
    const double transfer_ms = transfer_kb * 8.0 / link.bandwidth_mbps;
    out.latency_ms += link.rtt_ms;
    if (util < 0.99) {
      out.latency_ms += transfer_ms / (1.0 - util);
    } else {
      out.latency_ms += transfer_ms * kSaturatedFactor;
      out.served_fraction *= std::min(1.0, 1.0 / util);
    }
  }
  return out;
}

SiteRoute route_job(const JobSpec& j, const InferenceService* service,
                    std::span<const SiteView> sites, size_t main, SitePolicy policy,
                    std::span<const bool> hosts) {
  const auto can_host = [&](size_t s) { return hosts.empty() || hosts[s]; };
  const auto cannot = [&](size_t s) {
    SiteRoute x;
    x.status = RouteStatus::kNever;
    x.why = fmt::format("site {} cannot host it", sites[s].name);
    return x;
  };
  SiteRoute r;
  if (!j.site.empty()) {
    const auto at = find_site(sites, j.site);
    if (!at) {
      r.status = RouteStatus::kNever;
      r.why = fmt::format("site '{}' is not one of the sites", j.site);
      return r;
    }
    if (!can_host(*at)) return cannot(*at);
    r.sites.push_back(static_cast<uint32_t>(*at));
    return r;
  }
  if (service == nullptr || policy == SitePolicy::kMainOnly) {
    if (!can_host(main)) return cannot(main);
    r.sites.push_back(static_cast<uint32_t>(main));
    return r;
  }
  const auto origin = find_site(sites, service->region);
  if (!origin) {
    r.status = RouteStatus::kNever;
    r.why = fmt::format("region '{}' is not one of the sites", service->region);
    return r;
  }
  const double slo = service->latency_slo_ms;
  const auto meets = [&](const RequestOutcome& o) {
    return o.reachable && o.served_fraction >= 1.0 && o.latency_ms <= slo;
  };
  const RequestOutcome local = request_outcome(*service, sites, *origin, *origin, false);
  if (*origin == main) {
    if (!can_host(main)) return cannot(main);
    if (!meets(local)) {
      r.status = RouteStatus::kNever;
      r.why = fmt::format("latency SLO {:.0f} ms is below what its site gives ({:.0f} ms)", slo,
                          local.latency_ms);
      return r;
    }
    r.sites.push_back(static_cast<uint32_t>(main));
    return r;
  }
  const RequestOutcome at_main = request_outcome(*service, sites, *origin, main, false);
  const bool edge_ok = can_host(*origin) && meets(local);
  const bool main_ok = can_host(main) && meets(at_main);
  if (edge_ok) r.sites.push_back(static_cast<uint32_t>(*origin));
  if (main_ok) r.sites.push_back(static_cast<uint32_t>(main));
  r.link_blocked = !main_ok;
  if (!r.sites.empty()) return r;
  const RequestOutcome best = request_outcome(*service, sites, *origin, main, false, true);
  if (can_host(main) && meets(best)) {
    r.status = RouteStatus::kWait;
    r.why = !at_main.reachable
                ? fmt::format("the link from {} to the main site is down", service->region)
                : fmt::format("the link from {} is too slow for its SLO now ({:.0f} ms > {:.0f})",
                              service->region, at_main.latency_ms, slo);
    return r;
  }
  if (!can_host(*origin) && !can_host(main)) return cannot(*origin);
  r.status = RouteStatus::kNever;
  r.why = fmt::format(
      "latency SLO {:.0f} ms is below what any site gives (edge {:.0f} ms, main at best {:.0f} "
      "ms)",
      slo, local.latency_ms, best.latency_ms);
  return r;
}

}  // namespace tessera

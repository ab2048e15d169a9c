// Sites (docs/edge.md): one main cluster and small edge sites near the users of their
// regions, each edge site joined to the main one by a link that is slow and sometimes down.
//
// A sites file is YAML:
//   sites:
//     - name: main
//       main: true                    # exactly one site is the main one
//       access_rtt_ms: 5              # round trip from this site's region's users to it
//       cluster: {racks: 2, nodes_per_rack: 4, node: {gpus: 8, gpu_type: A100-80G}}
//     - name: east                    # an edge site; its region is named after it
//       access_rtt_ms: 8
//       cluster: {nodes: [{name: e0, rack: r0, gpus: 4, gpu_type: T4}]}
//       link: {bandwidth_mbps: 20, rtt_ms: 70, connectivity: east.csv}
//       queues: east-queues.yaml      # optional: the site's own queue tree (guarantees are
//                                     # the site's GPUs); default: one equal queue per tenant
// `cluster` takes any Tessera cluster YAML (model/cluster_spec.h). A connectivity series is a
// CSV `time,up,bandwidth_mbps` (seconds since the trace's start, 1/0, Mbit/s), sorted by
// time; each row holds until the next; before the first row the link is up at its nominal
// bandwidth. Relative paths are read from the sites file's folder.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/cluster.h"
#include "model/queue_tree.h"

namespace tessera {

// A link's state over a span of time.
struct LinkState {
  bool up = true;
  double bandwidth_mbps = 0;  // Mbit/s each way
  double rtt_ms = 0;
};

struct ConnectivityPoint {
  double time = 0;
  bool up = true;
  double bandwidth_mbps = 0;
};

struct Site {
  std::string name;
  bool main = false;
  double access_rtt_ms = 0;  // from its region's users
  Cluster cluster;
  // The link to the main site (edge sites): nominal bandwidth and round trip, and the
  // connectivity series that overrides them over time (empty: always up, nominal).
  double link_mbps = 0;
  double link_rtt_ms = 0;
  std::vector<ConnectivityPoint> connectivity;  // sorted by time
  std::string connectivity_path;                // the file it was read from (a result's provenance)
  // The site's queue tree (not bound to tenants), validated against its cluster; null: one
  // equal queue per tenant.
  std::shared_ptr<const QueueTree> queues;

  // The link's state at time t (a main site's link is "up" with infinite bandwidth).
  LinkState link_at(double t) const;
  // The first time after t at which the link's state changes; +inf when none.
  double next_change_after(double t) const;
};

struct Sites {
  std::vector<Site> sites;
  size_t main = 0;  // index of the main site
  // The site of a region's name, or nullopt.
  std::optional<size_t> find(std::string_view name) const;
};

// Throws InputError naming the file, line and field (for a connectivity CSV: its own file).
Sites parse_sites_yaml(std::string_view text, const std::string& origin,
                       const std::string& base_dir);
Sites load_sites(const std::string& path);
std::vector<ConnectivityPoint> parse_connectivity_csv(std::string_view text,
                                                      const std::string& origin);

}  // namespace tessera

#include "sim/failure_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <unordered_map>

#include "engine/rng.h"
#include "model/csv.h"
#include "model/input_error.h"

namespace tessera {

namespace {

// Exponential with the given mean, by inversion (1 - u is in (0, 1]).
double exponential(Rng& rng, double mean) {
  return -mean * std::log(1.0 - rng.uniform());
}

void sort_failures(std::vector<NodeFailure>& f) {
  std::sort(f.begin(), f.end(), [](const NodeFailure& a, const NodeFailure& b) {
    return a.time != b.time ? a.time < b.time : a.node < b.node;
  });
}

}  // namespace

std::vector<NodeFailure> generate_failures(const Cluster& cluster, double start, double end,
                                           double mtbf_seconds, double mttr_seconds,
                                           uint64_t seed) {
  if (!(mtbf_seconds > 0) || !(mttr_seconds >= 0)) {
    throw std::invalid_argument("failures: MTBF must be positive and MTTR not negative");
  }
  std::vector<NodeFailure> out;
  for (NodeId n = 0; n < cluster.nodes().size(); ++n) {
    // One stream per node: adding a node does not change the others' failures.
    Rng rng(mix_seed(seed, n));
    double t = start;
    while (true) {
      t += exponential(rng, mtbf_seconds);
      if (t >= end) break;
      const double repair = mttr_seconds > 0 ? exponential(rng, mttr_seconds) : 0;
      out.push_back(NodeFailure{t, n, repair});
      t += repair;
    }
  }
  sort_failures(out);
  return out;
}

std::vector<NodeFailure> parse_failure_list(const std::string& text, const std::string& origin,
                                            const Cluster& cluster) {
  std::unordered_map<std::string, NodeId> by_name;
  for (NodeId n = 0; n < cluster.nodes().size(); ++n) by_name.emplace(cluster.node(n).name, n);
  csv::LineReader lines(text);
  std::string_view line;
  if (!lines.next(line)) throw InputError(origin + ": empty file (no header)");
  const csv::Header h(line, {"time", "node", "repair_seconds"}, {}, origin, lines.line_number(),
                      "failure list");
  const int c_time = h.index("time"), c_node = h.index("node"), c_rep = h.index("repair_seconds");
  csv::Row row(origin, h);
  std::vector<NodeFailure> out;
  while (lines.next(line)) {
    if (csv::is_blank(line)) continue;
    row.reset(line, lines.line_number());
    NodeFailure f;
    f.time = row.number(c_time, 0, std::numeric_limits<double>::max());
    const auto it = by_name.find(std::string(row.str(c_node)));
    if (it == by_name.end()) {
      row.fail(c_node, "no node named '" + std::string(row.str(c_node)) + "' in the cluster");
    }
    f.node = it->second;
    f.repair_seconds = row.number(c_rep, 0, std::numeric_limits<double>::max());
    out.push_back(f);
  }
  sort_failures(out);
  return out;
}

std::vector<NodeFailure> read_failure_list(const std::string& path, const Cluster& cluster) {
  return parse_failure_list(csv::read_file(path), path, cluster);
}

}  // namespace tessera

#include "report/fgd_reference.h"

#include <cstdlib>
#include <map>
#include <sstream>
#include <stdexcept>

namespace tessera::report {

namespace {

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) out.push_back(cell);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

}  // namespace

std::vector<PublishedCurve> published_curves(const std::string& csv, const std::string& workload,
                                             const std::string& name) {
  std::istringstream in(csv);
  std::string line;
  if (!std::getline(in, line)) throw std::runtime_error(name + ": empty");
  if (!line.empty() && line.back() == '\r') line.pop_back();
  const std::vector<std::string> header = split(line);
  constexpr size_t kFirst = 5;  // workload, sc_policy, tune, seed, total_gpus
  if (header.size() <= kFirst || header[0] != "workload" || header[1] != "sc_policy") {
    throw std::runtime_error(name + ": not an FGD analysis_*_discrete.csv (header " + line + ")");
  }
  std::vector<double> arrived;
  for (size_t c = kFirst; c < header.size(); ++c) arrived.push_back(std::atof(header[c].c_str()));
  struct Sum {
    std::vector<double> total;
    std::vector<int> n;
  };
  std::map<std::string, Sum> by;  // policy names sort in the authors' order (01-, 02-, ...)
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::vector<std::string> row = split(line);
    if (row.size() <= kFirst || row[0] != workload) continue;
    Sum& s = by[row[1]];
    s.total.resize(arrived.size(), 0.0);
    s.n.resize(arrived.size(), 0);
    for (size_t c = kFirst; c < row.size() && c - kFirst < arrived.size(); ++c) {
      if (row[c].empty()) continue;  // a run that stopped early has no value there
      s.total[c - kFirst] += std::atof(row[c].c_str());
      s.n[c - kFirst]++;
    }
  }
  std::vector<PublishedCurve> out;
  for (const auto& [policy, s] : by) {
    PublishedCurve p;
    p.policy = policy;
    for (size_t i = 0; i < arrived.size(); ++i) {
      if (s.n[i] == 0) continue;
      p.arrived.push_back(arrived[i]);
      p.values.push_back(s.total[i] / s.n[i]);
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace tessera::report

#include "insight/zeus_curves.h"

#include <algorithm>
#include <filesystem>
#include <tuple>
#include <vector>

#include "model/csv.h"
#include "model/input_error.h"

namespace tessera {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Row {
  std::string workload;
  std::string config;  // batch size and optimizer
  double limit = 0, time = 0, power = 0;
};

}  // namespace

PowerModel::TypeCurves parse_zeus_power_csv(std::string_view text, const std::string& origin) {
  csv::LineReader lines(text);
  std::string_view line;
  std::vector<std::string_view> f;
  while (lines.next(line) && csv::is_blank(line)) {
  }
  if (csv::is_blank(line)) throw InputError(origin + ": empty file (expected a Zeus power trace)");
  csv::split(line, f);
  const csv::Header h(line,
                      {"dataset", "network", "batch_size", "optimizer", "power_limit",
                       "time_per_epoch", "average_power"},
                      {}, origin, lines.line_number(), "Zeus power trace");
  const auto col = [&](std::string_view n) { return static_cast<size_t>(h.index(n)); };
  std::vector<Row> rows;
  while (lines.next(line)) {
    if (csv::is_blank(line)) continue;
    csv::split(line, f);
    const size_t at = lines.line_number();
    if (f.size() != h.size()) {
      throw InputError(
          input_error_message(origin, at, "", "expected " + std::to_string(h.size()) + " fields"));
    }
    Row r;
    r.workload = PowerModel::workload_of(f[col("network")]);
    if (r.workload.empty()) r.workload = std::string(f[col("network")]);
    r.config = std::string(f[col("dataset")]) + "/" + std::string(f[col("batch_size")]) + "/" +
               std::string(f[col("optimizer")]);
    const std::tuple<std::string_view, double*> nums[] = {
        {"power_limit", &r.limit}, {"time_per_epoch", &r.time}, {"average_power", &r.power}};
    for (const auto& [name, out] : nums) {
      if (!csv::parse_double(f[col(name)], *out) || !(*out > 0)) {
        throw InputError(input_error_message(
            origin, at, std::string(name),
            "expected a positive number, got '" + std::string(f[col(name)]) + "'"));
      }
    }
    rows.push_back(std::move(r));
  }
  if (rows.empty()) throw InputError(origin + ": no measurements");
  // Speed of each row relative to its configuration at the highest limit measured for it.
  std::map<std::pair<std::string, std::string>, double> top_limit, top_time;
  for (const Row& r : rows) {
    auto key = std::make_pair(r.workload, r.config);
    if (r.limit > top_limit[key]) top_limit[key] = r.limit, top_time[key] = r.time;
  }
  // workload -> limit -> (speeds, powers)
  std::map<std::string, std::map<double, std::pair<std::vector<double>, std::vector<double>>>> at;
  for (const Row& r : rows) {
    const double speed = top_time[{r.workload, r.config}] / r.time;
    auto& cell = at[r.workload][r.limit];
    cell.first.push_back(speed);
    cell.second.push_back(r.power);
  }
  PowerModel::TypeCurves out;
  std::map<double, std::pair<std::vector<double>, std::vector<double>>> across;
  for (const auto& [workload, by_limit] : at) {
    std::vector<PowerPoint> pts;
    for (const auto& [limit, cell] : by_limit) {
      pts.push_back(PowerPoint{limit, median(cell.first), median(cell.second)});
    }
    PowerCurve c(std::move(pts));
    // The median curve is the median of the workloads' (monotone, normalised) curves.
    for (const PowerPoint& p : c.points()) {
      across[p.limit_w].first.push_back(p.speed);
      across[p.limit_w].second.push_back(p.power_w);
    }
    out.emplace(workload, std::move(c));
  }
  std::vector<PowerPoint> pts;
  for (const auto& [limit, cell] : across) {
    pts.push_back(PowerPoint{limit, median(cell.first), median(cell.second)});
  }
  out.emplace("", PowerCurve(std::move(pts)));
  return out;
}

std::map<std::string, PowerModel::TypeCurves> load_zeus_curves(const std::string& dir) {
  std::map<std::string, PowerModel::TypeCurves> out;
  const std::pair<const char*, const char*> files[] = {
      {"v100", "V100"}, {"a40", "A40"}, {"p100", "P100"}, {"rtx6000", "RTX6000"}};
  for (const auto& [file, type] : files) {
    const std::string path = dir + "/summary_power_" + file + ".csv";
    if (!std::filesystem::exists(path)) continue;
    out.emplace(type, parse_zeus_power_csv(csv::read_file(path), path));
  }
  return out;
}

PowerModel load_power_model(const std::string& data_dir) {
  return PowerModel(load_zeus_curves(data_dir + "/energy/zeus"));
}

}  // namespace tessera

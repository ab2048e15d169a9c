#include "sim/pollux_profile.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <tuple>

#include "model/input_error.h"

namespace tessera {

namespace {

namespace fs = std::filesystem;

// A small CSV table: these profiles are plain numeric CSV (no quoting), so a full CSV parser
// would buy nothing.
struct CsvTable {
  std::string origin;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<size_t> lines;  // 1-based file line of each row, for error messages

  size_t column(const std::string& name) const {
    auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end()) {
      throw InputError(input_error_message(origin, 1, name, "missing column"));
    }
    return static_cast<size_t>(it - header.begin());
  }
  double number(size_t row, size_t col, const std::string& field) const {
    const std::string& s = col < rows[row].size() ? rows[row][col] : std::string();
    double v = 0;
    const char* end = s.data() + s.size();
    auto [ptr, ec] = std::from_chars(s.data(), end, v);
    if (ec != std::errc() || ptr != end || !std::isfinite(v)) {
      throw InputError(
          input_error_message(origin, lines[row], field, "expected a number, got '" + s + "'"));
    }
    return v;
  }
};

std::vector<std::string> split_commas(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : line) {
    if (ch == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (ch != '\r') {
      cur.push_back(ch);
    }
  }
  out.push_back(cur);
  return out;
}

CsvTable read_csv(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError(input_error_message(path.string(), 0, "", "cannot open file"));
  CsvTable t;
  t.origin = path.string();
  std::string line;
  size_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (t.header.empty()) {
      t.header = split_commas(line);
    } else {
      t.rows.push_back(split_commas(line));
      t.lines.push_back(lineno);
    }
  }
  if (t.header.empty()) throw InputError(input_error_message(t.origin, 0, "", "empty file"));
  return t;
}

// Placement strings of placements.csv: one digit per node. Counts above 9 cannot occur there,
// so such placements map to "" and are never found.
std::string placement_key(const std::vector<int>& canonical) {
  std::string key;
  for (int k : canonical) {
    if (k > 9) return "";
    key.push_back(static_cast<char>('0' + k));
  }
  return key;
}

// Linear interpolation between two points; x0 == x1 returns y0.
double lerp(double x, double x0, double x1, double y0, double y1) {
  if (x1 == x0) return y0;
  const double f = (x - x0) / (x1 - x0);
  return y0 + f * (y1 - y0);
}

// Accumulates (step, sync) samples per local_bsz and averages them into a Curve's points.
struct CurveBuilder {
  std::map<double, std::tuple<double, double, int>> points;  // bsz -> (sum step, sum sync, n)
  void add(double bsz, double step, double sync) {
    auto& [s, y, n] = points[bsz];
    s += step;
    y += sync;
    ++n;
  }
};

}  // namespace

std::vector<int> canonical_placement(const std::vector<int>& replicas_per_node) {
  std::vector<int> p;
  for (int k : replicas_per_node) {
    if (k > 0) p.push_back(k);
  }
  std::vector<int> best = p;
  for (size_t i = 1; i < p.size(); ++i) {
    std::vector<int> rot(p.begin() + static_cast<std::ptrdiff_t>(i), p.end());
    rot.insert(rot.end(), p.begin(), p.begin() + static_cast<std::ptrdiff_t>(i));
    if (rot < best) best = std::move(rot);
  }
  return best;
}

PolluxStepTime PolluxApplication::Curve::at(double local_bsz) const {
  // Clamped at both ends: Pollux's interp1d would raise there, but a simulated job may ask for
  // a per-replica batch just outside what was measured (e.g. below min_local_bsz after the
  // max_batch_size cap).
  if (local_bsz <= bsz.front()) return {step.front(), sync.front()};
  if (local_bsz >= bsz.back()) return {step.back(), sync.back()};
  const auto hi =
      static_cast<size_t>(std::upper_bound(bsz.begin(), bsz.end(), local_bsz) - bsz.begin());
  const size_t lo = hi - 1;
  return {lerp(local_bsz, bsz[lo], bsz[hi], step[lo], step[hi]),
          lerp(local_bsz, bsz[lo], bsz[hi], sync[lo], sync[hi])};
}

PolluxApplication PolluxApplication::load(const std::string& dir, const std::string& name,
                                          int max_epochs, int max_local_bsz) {
  PolluxApplication app;
  app.name_ = name;
  const fs::path base(dir);

  auto finish = [](const CurveBuilder& b) {
    Curve c;
    for (const auto& [bsz, acc] : b.points) {
      const auto& [s, y, n] = acc;
      c.bsz.push_back(bsz);
      c.step.push_back(s / n);
      c.sync.push_back(y / n);
    }
    return c;
  };

  // placements.csv: the measured rows, and their (num_nodes, num_replicas) group means as
  // Pollux's LinearNDInterpolator input.
  {
    const CsvTable t = read_csv(base / "placements.csv");
    const size_t cp = t.column("placement"), cb = t.column("local_bsz"), cs = t.column("step_time"),
                 cy = t.column("sync_time");
    std::map<std::string, CurveBuilder> by_placement;
    std::map<std::pair<int, int>, CurveBuilder> by_group;
    double min_bsz = 0, max_bsz = 0;
    for (size_t r = 0; r < t.rows.size(); ++r) {
      const std::string p = cp < t.rows[r].size() ? t.rows[r][cp] : "";
      if (p.empty() ||
          !std::all_of(p.begin(), p.end(), [](char ch) { return ch >= '1' && ch <= '9'; })) {
        throw InputError(input_error_message(t.origin, t.lines[r], "placement",
                                             "expected digits 1-9, got '" + p + "'"));
      }
      const double bsz = t.number(r, cb, "local_bsz");
      const double step = t.number(r, cs, "step_time");
      const double sync = t.number(r, cy, "sync_time");
      if (bsz <= 0 || step <= 0 || sync < 0 || sync > step) {
        throw InputError(input_error_message(t.origin, t.lines[r], "step_time",
                                             "need local_bsz > 0 and 0 <= sync <= step"));
      }
      int replicas = 0;
      for (char ch : p) replicas += ch - '0';
      by_placement[p].add(bsz, step, sync);
      by_group[{static_cast<int>(p.size()), replicas}].add(bsz, step, sync);
      min_bsz = r == 0 ? bsz : std::min(min_bsz, bsz);
      max_bsz = r == 0 ? bsz : std::max(max_bsz, bsz);
    }
    if (t.rows.empty()) throw InputError(input_error_message(t.origin, 0, "", "no rows"));
    for (const auto& [p, b] : by_placement) app.placements_[p] = finish(b);
    for (const auto& [key, b] : by_group) app.groups_[key.first][key.second] = finish(b);
    app.min_local_bsz_ = static_cast<int>(min_bsz);
    app.max_local_bsz_ = max_local_bsz > 0 ? max_local_bsz : static_cast<int>(max_bsz);
  }

  // scalability.csv: 6-16 nodes, keyed by (num_nodes, num_replicas) only. Optional, as only
  // placements beyond 4 nodes need it.
  if (fs::exists(base / "scalability.csv")) {
    const CsvTable t = read_csv(base / "scalability.csv");
    const size_t cn = t.column("num_nodes"), cr = t.column("num_replicas"),
                 cb = t.column("local_bsz"), cs = t.column("step_time"), cy = t.column("sync_time");
    std::map<std::pair<int, int>, CurveBuilder> by_group;
    for (size_t r = 0; r < t.rows.size(); ++r) {
      const double n = t.number(r, cn, "num_nodes"), k = t.number(r, cr, "num_replicas");
      if (n < 1 || k < n) {
        throw InputError(input_error_message(t.origin, t.lines[r], "num_replicas",
                                             "need 1 <= num_nodes <= num_replicas"));
      }
      by_group[{static_cast<int>(n), static_cast<int>(k)}].add(
          t.number(r, cb, "local_bsz"), t.number(r, cs, "step_time"), t.number(r, cy, "sync_time"));
    }
    for (const auto& [key, b] : by_group) {
      // placements.csv wins where both have a group (they do not overlap in the artifact).
      app.groups_[key.first].try_emplace(key.second, finish(b));
    }
  }

  // validation-<batch>.csv: progress and gradient statistics per epoch.
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(base, ec)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind("validation-", 0) != 0 || entry.path().extension() != ".csv") continue;
    const std::string num = file.substr(11, file.size() - 11 - 4);
    int bsz = 0;
    auto [ptr, perr] = std::from_chars(num.data(), num.data() + num.size(), bsz);
    if (perr != std::errc() || ptr != num.data() + num.size() || bsz <= 0) {
      throw InputError(input_error_message(entry.path().string(), 0, "",
                                           "file name must be validation-<batch size>.csv"));
    }
    const CsvTable t = read_csv(entry.path());
    const size_t cp = t.column("progress"), cq = t.column("grad_sqr"), cv = t.column("grad_var");
    Validation v;
    v.batch_size = bsz;
    for (size_t r = 0; r < t.rows.size(); ++r) {
      v.progress.push_back(t.number(r, cp, "progress"));
      v.grad_sqr.push_back(t.number(r, cq, "grad_sqr"));
      v.grad_var.push_back(t.number(r, cv, "grad_var"));
    }
    if (static_cast<int>(v.progress.size()) < max_epochs) {
      throw InputError(input_error_message(t.origin, 0, "",
                                           "has " + std::to_string(v.progress.size()) +
                                               " epochs, " + name + " trains " +
                                               std::to_string(max_epochs)));
    }
    app.validation_.push_back(std::move(v));
  }
  if (ec || app.validation_.empty()) {
    throw InputError(input_error_message(dir, 0, "", "no validation-<batch>.csv files"));
  }
  std::sort(app.validation_.begin(), app.validation_.end(),
            [](const Validation& a, const Validation& b) { return a.batch_size < b.batch_size; });
  app.init_batch_size_ = app.validation_.front().batch_size;
  app.max_batch_size_ = app.validation_.back().batch_size;
  app.max_epochs_ = max_epochs;
  return app;
}

bool PolluxApplication::measured(const std::vector<int>& replicas_per_node) const {
  return placements_.count(placement_key(canonical_placement(replicas_per_node))) > 0;
}

PolluxStepTime PolluxApplication::throughput(const std::vector<int>& replicas_per_node,
                                             double local_bsz) const {
  const std::vector<int> p = canonical_placement(replicas_per_node);
  if (p.empty()) throw std::invalid_argument("Pollux throughput of an empty placement");
  auto it = placements_.find(placement_key(p));
  if (it != placements_.end()) return it->second.at(local_bsz);
  int replicas = 0;
  for (int k : p) replicas += k;
  return interpolate(static_cast<int>(p.size()), replicas, local_bsz);
}

PolluxStepTime PolluxApplication::interpolate(int num_nodes, int num_replicas,
                                              double local_bsz) const {
  // Node counts outside the measured ones clamp to the nearest (Pollux clamps at 16 nodes);
  // between two measured counts (5, 7, 9-11, 13-15) interpolate linearly in the node count.
  const int n = std::clamp(num_nodes, groups_.begin()->first, groups_.rbegin()->first);
  auto hi = groups_.lower_bound(n);
  if (hi->first == n) return at_node_count(n, num_replicas, local_bsz);
  auto lo = std::prev(hi);
  const PolluxStepTime a = at_node_count(lo->first, num_replicas, local_bsz);
  const PolluxStepTime b = at_node_count(hi->first, num_replicas, local_bsz);
  return {lerp(n, lo->first, hi->first, a.step_time, b.step_time),
          lerp(n, lo->first, hi->first, a.sync_time, b.sync_time)};
}

PolluxStepTime PolluxApplication::at_node_count(int num_nodes, int num_replicas,
                                                double local_bsz) const {
  // Replica counts beyond those measured at this node count clamp to the nearest: a ring
  // all-reduce's time is nearly independent of the ring length once it is bounded by the
  // inter-node link, so e.g. 8 replicas on one 8-GPU node use the 4-replica single-node row.
  const auto& by_replicas = groups_.at(num_nodes);
  const int r = std::clamp(num_replicas, by_replicas.begin()->first, by_replicas.rbegin()->first);
  auto hi = by_replicas.lower_bound(r);
  if (hi->first == r) return hi->second.at(local_bsz);
  auto lo = std::prev(hi);
  const PolluxStepTime a = lo->second.at(local_bsz);
  const PolluxStepTime b = hi->second.at(local_bsz);
  return {lerp(r, lo->first, hi->first, a.step_time, b.step_time),
          lerp(r, lo->first, hi->first, a.sync_time, b.sync_time)};
}

PolluxBatchConfig PolluxApplication::batch_config(int batch_size, int replicas) const {
  if (replicas < 1) throw std::invalid_argument("Pollux batch config needs >= 1 replica");
  PolluxBatchConfig c;
  c.replicas = replicas;
  const int local = (batch_size + replicas - 1) / replicas;
  c.accum_steps = (local + max_local_bsz_ - 1) / max_local_bsz_ - 1;
  // Pollux always accumulates at least once for a single replica above the initial batch.
  if (replicas == 1 && batch_size > init_batch_size_) c.accum_steps = std::max(1, c.accum_steps);
  c.atomic_bsz = (local + c.accum_steps) / (c.accum_steps + 1);
  const int count = replicas * (c.accum_steps + 1);
  c.atomic_bsz = std::max(1, std::min(c.atomic_bsz, max_batch_size_ / count));
  return c;
}

double PolluxApplication::iteration_time(const std::vector<int>& replicas_per_node,
                                         const PolluxBatchConfig& cfg) const {
  const PolluxStepTime t = throughput(replicas_per_node, cfg.atomic_bsz);
  // Accumulation micro-steps repeat the compute but not the synchronisation.
  return t.step_time + cfg.accum_steps * (t.step_time - t.sync_time);
}

double PolluxApplication::progress_at_epoch(int epoch) const {
  if (epoch == 0) return 0.0;
  double p = validation_.front().progress[static_cast<size_t>(epoch - 1)];
  for (const auto& v : validation_) p = std::min(p, v.progress[static_cast<size_t>(epoch - 1)]);
  return p;
}

std::pair<double, double> PolluxApplication::grad_stats(double batch_size, int epoch) const {
  const auto e = static_cast<size_t>(epoch);
  // Outside the validated range Pollux asserts; clamp to the nearest validated batch instead.
  if (batch_size <= validation_.front().batch_size) {
    return {validation_.front().grad_sqr[e], validation_.front().grad_var[e]};
  }
  if (batch_size >= validation_.back().batch_size) {
    return {validation_.back().grad_sqr[e], validation_.back().grad_var[e]};
  }
  size_t hi = 0;
  while (validation_[hi].batch_size < batch_size) ++hi;
  const Validation& a = validation_[hi - 1];
  const Validation& b = validation_[hi];
  return {lerp(batch_size, a.batch_size, b.batch_size, a.grad_sqr[e], b.grad_sqr[e]),
          lerp(batch_size, a.batch_size, b.batch_size, a.grad_var[e], b.grad_var[e])};
}

double PolluxApplication::gain(double batch_size, int epoch) const {
  const double scale = batch_size / init_batch_size_;
  const auto [sqr, var] = grad_stats(batch_size, epoch);
  return (var + sqr) / (var / scale + sqr);
}

double PolluxApplication::total_iterations(const PolluxBatchConfig& cfg) const {
  const double batch = static_cast<double>(cfg.effective_batch());
  double iterations = 0;
  for (int e = 0; e < max_epochs_; ++e) {
    // Statistical efficiency (Pollux's gain): progress per iteration relative to training
    // with the initial batch size.
    iterations += (progress_at_epoch(e + 1) - progress_at_epoch(e)) / gain(batch, e);
  }
  return iterations;
}

double PolluxApplication::work_seconds(const std::vector<int>& replicas_per_node,
                                       int batch_size) const {
  int replicas = 0;
  for (int k : replicas_per_node) replicas += std::max(0, k);
  const PolluxBatchConfig cfg = batch_config(batch_size, replicas);
  return total_iterations(cfg) * iteration_time(replicas_per_node, cfg);
}

PolluxProfiles PolluxProfiles::load(const std::string& applications_dir) {
  struct Known {
    const char* name;
    int max_epochs;
    int max_local_bsz;
  };
  // Training lengths and overrides from Pollux's simulator/applications.py.
  static constexpr Known kKnown[] = {{"bert", 2, 0},         {"cifar10", 100, 0},
                                     {"ncf", 10, 0},         {"imagenet", 90, 0},
                                     {"deepspeech2", 80, 0}, {"yolov3", 50, 8}};
  PolluxProfiles out;
  for (const Known& k : kKnown) {
    const fs::path dir = fs::path(applications_dir) / k.name;
    if (!fs::exists(dir / "placements.csv")) continue;
    out.apps_.push_back(std::make_shared<const PolluxApplication>(
        PolluxApplication::load(dir.string(), k.name, k.max_epochs, k.max_local_bsz)));
  }
  return out;
}

const PolluxApplication* PolluxProfiles::find(std::string_view name) const {
  for (const auto& a : apps_) {
    if (a->name() == name) return a.get();
  }
  return nullptr;
}

}  // namespace tessera

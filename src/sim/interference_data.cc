#include "sim/interference_data.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string_view>

#include <nlohmann/json.hpp>

#include "model/csv.h"
#include "model/input_error.h"

namespace tessera {

namespace {

using csv::Header;
using csv::LineReader;
using csv::Row;

constexpr double kMax = std::numeric_limits<double>::max();

std::string_view first_line(LineReader& lines, const std::string& origin) {
  std::string_view line;
  while (lines.next(line)) {
    if (!csv::is_blank(line)) return line;
  }
  throw InputError(input_error_message(origin, 0, "", "empty file"));
}

// Lower-case letters and digits only, with the seed table's and the profiles' spellings of the
// same model brought together.
std::string normalise_model(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  const std::string bert = "bertenuncased";
  if (auto p = out.find(bert); p != std::string::npos) out.erase(p, bert.size());
  if (out == "reinforcementlearning") out = "rlcartpole";
  return out;
}

double pct(const Row& row, int col) {
  return row.number(col, 0, 100);
}

}  // namespace

std::vector<JobFeatures> parse_alnair_clustering_features(const std::string& text,
                                                          const std::string& origin) {
  LineReader lines(text);
  const std::string_view head = first_line(lines, origin);
  const Header h(head, {"MGUP", "MGMAP", "MGTSAMP"}, {"ID", "Model", "Dataset", "Batch Size"},
                 origin, lines.line_number(), "alnair clustering features");
  Row row(origin, h);
  const int u = h.index("MGUP"), m = h.index("MGMAP"), t = h.index("MGTSAMP");
  std::vector<JobFeatures> out;
  std::string_view line;
  while (lines.next(line)) {
    if (csv::is_blank(line)) continue;
    row.reset(line, lines.line_number());
    out.push_back({pct(row, u), pct(row, m), pct(row, t)});
  }
  if (out.empty()) throw InputError(input_error_message(origin, 0, "", "no rows"));
  return out;
}

std::vector<JobFeatures> read_alnair_clustering_features(const std::string& path) {
  return parse_alnair_clustering_features(csv::read_file(path), path);
}

std::vector<AlnairProfile> parse_alnair_profiles(const std::string& text,
                                                 const std::string& origin) {
  LineReader lines(text);
  const std::string_view head = first_line(lines, origin);
  const size_t head_line = lines.line_number();
  std::vector<std::string_view> names;
  csv::split(head, names);
  auto col = [&](std::string_view n) {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == n) return static_cast<int>(i);
    }
    throw InputError(input_error_message(origin, head_line, std::string(n),
                                         "missing column (not an alnair profiles file?)"));
  };
  const int model = col("Model"), bs = col("BS"), u = col("MGUP"), m = col("MGMAP"),
            t = col("MaGTSAMP");
  std::vector<AlnairProfile> out;
  std::vector<std::string_view> f;
  std::string_view line;
  while (lines.next(line)) {
    if (csv::is_blank(line)) continue;
    csv::split(line, f);
    const size_t ln = lines.line_number();
    if (f.size() != names.size()) {
      throw InputError(input_error_message(origin, ln, "",
                                           "expected " + std::to_string(names.size()) +
                                               " columns, got " + std::to_string(f.size())));
    }
    auto num = [&](int c, double lo, double hi) {
      double v = 0;
      const std::string_view s = f[static_cast<size_t>(c)];
      if (!csv::parse_double(s, v) || v < lo || v > hi) {
        throw InputError(input_error_message(
            origin, ln, std::string(names[static_cast<size_t>(c)]),
            "expected a number in [" + std::to_string(static_cast<int64_t>(lo)) + ", " +
                (hi == kMax ? std::string("inf") : std::to_string(static_cast<int64_t>(hi))) +
                "], got '" + std::string(s) + "'"));
      }
      return v;
    };
    AlnairProfile p;
    p.model = std::string(f[static_cast<size_t>(model)]);
    p.batch = static_cast<int64_t>(num(bs, 1, kMax));
    p.features = {num(u, 0, 100), num(m, 0, 100), num(t, 0, 100)};
    out.push_back(std::move(p));
  }
  if (out.empty()) throw InputError(input_error_message(origin, 0, "", "no rows"));
  return out;
}

void parse_lucid(const std::string& single_text, const std::string& single_origin,
                 const std::string& colocate_text, const std::string& colocate_origin,
                 InterferenceData& out) {
  std::map<std::string, uint32_t> by_key;
  {
    LineReader lines(single_text);
    const std::string_view head = first_line(lines, single_origin);
    const Header h(
        head, {"model", "dataset", "batchsize", "amp", "speed", "gpu_util", "gmem_util", "gmem"},
        {"label"}, single_origin, lines.line_number(), "Lucid single-job");
    Row row(single_origin, h);
    const int mo = h.index("model"), ds = h.index("dataset"), b = h.index("batchsize"),
              amp = h.index("amp"), u = h.index("gpu_util"), mu = h.index("gmem_util"),
              gm = h.index("gmem");
    std::string_view line;
    while (lines.next(line)) {
      if (csv::is_blank(line)) continue;
      row.reset(line, lines.line_number());
      const std::string key = std::string(row.str(mo)) + "/" + std::string(row.str(ds)) + "/bs" +
                              std::to_string(row.integer(b, 1, 1 << 30)) + "/amp" +
                              std::to_string(row.integer(amp, 0, 1));
      CatalogJob j;
      j.name = "lucid:" + key;
      j.source = "lucid";
      j.features = {pct(row, u),
                    std::min(100.0, 100.0 * row.number(gm, 0, kMax) / kLucidGpuMemoryMb),
                    pct(row, mu)};
      by_key[key] = static_cast<uint32_t>(out.jobs.size());
      out.jobs.push_back(std::move(j));
    }
  }
  LineReader lines(colocate_text);
  const std::string_view head = first_line(lines, colocate_origin);
  const Header h(head,
                 {"model1", "dataset1", "gpu_num1", "batchsize1", "amp1", "speed1", "model2",
                  "dataset2", "gpu_num2", "batchsize2", "amp2", "speed2"},
                 {"", "gpu_util", "gmem_util", "gmem"}, colocate_origin, lines.line_number(),
                 "Lucid co-location");
  Row row(colocate_origin, h);
  auto job = [&](const char* suffix) {
    const std::string s(suffix);
    const int mo = h.index("model" + s), ds = h.index("dataset" + s), b = h.index("batchsize" + s),
              amp = h.index("amp" + s);
    const std::string key = std::string(row.str(mo)) + "/" + std::string(row.str(ds)) + "/bs" +
                            std::to_string(row.integer(b, 1, 1 << 30)) + "/amp" +
                            std::to_string(row.integer(amp, 0, 1));
    auto it = by_key.find(key);
    if (it == by_key.end()) {
      row.fail(mo, "job " + key + " is not in " + single_origin);
    }
    row.integer(h.index("gpu_num" + s), 1, 1);
    return it->second;
  };
  std::string_view line;
  while (lines.next(line)) {
    if (csv::is_blank(line)) continue;
    row.reset(line, lines.line_number());
    MeasuredPair p;
    p.a = job("1");
    p.b = job("2");
    // Lucid normalises each speed to the job alone; a few exceed 1 (noise): co-location never
    // makes a job faster, so cap at 1.
    p.speed_a = std::min(1.0, row.number(h.index("speed1"), 0.01, 10));
    p.speed_b = std::min(1.0, row.number(h.index("speed2"), 0.01, 10));
    out.pairs.push_back(p);
  }
  out.notes.push_back(
      "lucid: memory allocated % = gmem / 24 GB; gpu_util and gmem_util are "
      "Lucid's averages, used as the peaks; pair speeds capped at 1");
}

namespace {

// "MobileNet on GTSRB (BS=1024 Epoch=5)" -> ("MobileNet", 1024).
bool parse_seed_job(std::string_view s, std::string& model, int64_t& bs) {
  size_t end = s.find(" on ");
  const size_t paren = s.find(" (");
  if (paren == std::string_view::npos) return false;
  if (end == std::string_view::npos || end > paren) end = paren;
  model = std::string(csv::trim(s.substr(0, end)));
  const size_t b = s.find("BS=", paren);
  if (b == std::string_view::npos) return false;
  size_t e = b + 3;
  while (e < s.size() && std::isdigit(static_cast<unsigned char>(s[e]))) ++e;
  return csv::parse_int(s.substr(b + 3, e - b - 3), bs) && bs > 0 && !model.empty();
}

std::optional<JobFeatures> profile_features(const std::vector<AlnairProfile>& profiles,
                                            const std::string& model, int64_t bs) {
  const std::string key = normalise_model(model);
  std::vector<const AlnairProfile*> same;
  for (const AlnairProfile& p : profiles) {
    if (normalise_model(p.model) == key) same.push_back(&p);
  }
  if (same.empty()) return std::nullopt;
  std::sort(same.begin(), same.end(),
            [](const AlnairProfile* a, const AlnairProfile* b) { return a->batch < b->batch; });
  if (bs <= same.front()->batch) return same.front()->features;
  if (bs >= same.back()->batch) return same.back()->features;
  for (size_t i = 1; i < same.size(); ++i) {
    if (bs > same[i]->batch) continue;
    const AlnairProfile& lo = *same[i - 1];
    const AlnairProfile& hi = *same[i];
    const double w = static_cast<double>(bs - lo.batch) / static_cast<double>(hi.batch - lo.batch);
    const FeatureVec a = to_vec(lo.features), b = to_vec(hi.features);
    FeatureVec v;
    for (size_t d = 0; d < v.size(); ++d) v[d] = a[d] + w * (b[d] - a[d]);
    return from_vec(v);
  }
  return same.back()->features;
}

}  // namespace

void parse_seed_pairs(const std::string& text, const std::string& origin,
                      const std::vector<AlnairProfile>& profiles, InterferenceData& out) {
  LineReader lines(text);
  const std::string_view head = first_line(lines, origin);
  const Header h(head,
                 {"job_a", "job_b", "jct_a_s", "jct_b_s", "ind_slowdown_a_pct",
                  "ind_slowdown_b_pct", "packing_saving_pct"},
                 {"cluster_a", "cluster_b"}, origin, lines.line_number(), "seed pair table");
  Row row(origin, h);
  std::map<std::string, uint32_t> by_name;
  auto job = [&](const char* col, const char* jct_col, const char* sd_col) {
    const int c = h.index(col);
    const std::string name(row.str(c));
    const double jct = row.number(h.index(jct_col), 1e-3, kMax);
    const double sd = row.number(h.index(sd_col), 0, 1000) / 100.0;
    auto it = by_name.find(name);
    if (it != by_name.end()) return it->second;
    std::string model;
    int64_t bs = 0;
    if (!parse_seed_job(name, model, bs)) {
      row.fail(c, "expected '<model> [on <dataset>] (BS=<n> ...)', got '" + name + "'");
    }
    const auto f = profile_features(profiles, model, bs);
    if (!f) row.fail(c, "no profile of model '" + model + "' in the alnair profiles");
    CatalogJob j;
    j.name = "seed:" + name;
    j.source = "seed";
    j.features = *f;
    j.alone_seconds = jct / (1.0 + sd);
    const auto id = static_cast<uint32_t>(out.jobs.size());
    by_name[name] = id;
    out.jobs.push_back(std::move(j));
    return id;
  };
  std::string_view line;
  while (lines.next(line)) {
    if (csv::is_blank(line)) continue;
    row.reset(line, lines.line_number());
    MeasuredPair p;
    p.a = job("job_a", "jct_a_s", "ind_slowdown_a_pct");
    p.b = job("job_b", "jct_b_s", "ind_slowdown_b_pct");
    p.speed_a = 1.0 / (1.0 + row.number(h.index("ind_slowdown_a_pct"), 0, 1000) / 100.0);
    p.speed_b = 1.0 / (1.0 + row.number(h.index("ind_slowdown_b_pct"), 0, 1000) / 100.0);
    p.pacsav = row.number(h.index("packing_saving_pct"), -100, 100) / 100.0;
    out.pairs.push_back(p);
  }
  out.notes.push_back(
      "seed: features from alnair_profiles (same model, linear in batch size); speed = "
      "1 / (1 + IndSD); time alone = JCT / (1 + IndSD)");
}

namespace {

// Gavel model family -> the Lucid job family whose features stand in for it.
const std::map<std::string, std::string>& gavel_to_lucid() {
  static const std::map<std::string, std::string> m = {
      {"ResNet-18", "ResNet18"},
      {"ResNet-50", "ResNet50"},
      {"Transformer", "Transformer"},
      {"LM", "LSTM"},
      {"Recommendation", "NeuMF"},
      {"CycleGAN", "DCGAN"},
      {"A3C", "PPO"},
  };
  return m;
}

// "('ResNet-18 (batch size 16)', 1)" -> ("ResNet-18", 16, scale 1); batch 0 when none.
bool parse_gavel_key(const std::string& key, std::string& family, int64_t& batch, int& scale) {
  const size_t open = key.find('\''), close = key.rfind('\'');
  if (open == std::string::npos || close <= open) return false;
  const std::string model = key.substr(open + 1, close - open - 1);
  const size_t comma = key.find(',', close);
  if (comma == std::string::npos) return false;
  size_t p = comma + 1;
  while (p < key.size() && key[p] == ' ') ++p;
  const size_t end = key.find(')', p);
  if (end == std::string::npos) return false;
  auto [ptr, ec] = std::from_chars(key.data() + p, key.data() + end, scale);
  if (ec != std::errc() || ptr != key.data() + end) return false;
  const size_t bs = model.find(" (batch size ");
  batch = 0;
  family = model.substr(0, bs);
  if (bs != std::string::npos) {
    const size_t s = bs + 13, e = model.find(')', s);
    if (e == std::string::npos || !csv::parse_int(std::string_view(model).substr(s, e - s), batch))
      return false;
  }
  return true;
}

}  // namespace

void parse_gavel_pairs(const std::string& json_text, const std::string& origin,
                       InterferenceData& out) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number
    throw InputError(input_error_message(origin, 0, "", std::string("invalid JSON: ") + e.what()));
  }
  if (!doc.is_object() || !doc.contains("v100") || !doc.at("v100").is_object()) {
    throw InputError(input_error_message(origin, 0, "v100", "expected an object"));
  }
  const auto& v100 = doc.at("v100");
  // Isolated throughputs and catalogue ids of the single-GPU models with a Lucid stand-in.
  std::map<std::string, std::pair<double, uint32_t>> known;
  for (const auto& [key, value] : v100.items()) {
    std::string family;
    int64_t batch = 0;
    int scale = 0;
    if (!parse_gavel_key(key, family, batch, scale)) {
      throw InputError(input_error_message(origin, 0, "v100/" + key, "unexpected key"));
    }
    if (scale != 1) continue;
    if (!value.is_object() || !value.contains("null") || !value.at("null").is_number()) {
      throw InputError(input_error_message(origin, 0, "v100/" + key,
                                           "expected an object with a numeric \"null\""));
    }
    const double iso = value.at("null").get<double>();
    auto fam = gavel_to_lucid().find(family);
    if (iso <= 0 || fam == gavel_to_lucid().end()) continue;
    // The Lucid job of that family without AMP whose batch size is nearest (log scale).
    const CatalogJob* best = nullptr;
    double best_d = kMax;
    for (const CatalogJob& j : out.jobs) {
      if (j.source != "lucid" || j.name.rfind("lucid:" + fam->second + "/", 0) != 0) continue;
      if (j.name.find("/amp0") == std::string::npos) continue;
      const size_t b = j.name.find("/bs");
      int64_t jb = 0;
      csv::parse_int(std::string_view(j.name).substr(b + 3, j.name.find('/', b + 1) - b - 3), jb);
      const double d =
          batch > 0 ? std::abs(std::log(static_cast<double>(jb) / static_cast<double>(batch)))
                    : static_cast<double>(jb);
      if (d < best_d) {
        best_d = d;
        best = &j;
      }
    }
    if (!best) continue;
    CatalogJob j;
    j.name = "gavel:" + key.substr(2, key.rfind('\'') - 2);
    j.source = "gavel";
    j.features = best->features;
    known[key] = {iso, static_cast<uint32_t>(out.jobs.size())};
    out.jobs.push_back(std::move(j));
  }
  if (known.empty()) {
    throw InputError(input_error_message(origin, 0, "v100",
                                         "no single-GPU model with features "
                                         "(read the Lucid data first)"));
  }
  for (const auto& [key, value] : v100.items()) {
    auto self = known.find(key);
    if (self == known.end()) continue;
    for (const auto& [other, thr] : value.items()) {
      if (other == "null") continue;
      auto o = known.find(other);
      if (o == known.end() || other < key) continue;  // each unordered pair once
      if (!thr.is_array() || thr.size() != 2 || !thr[0].is_number() || !thr[1].is_number()) {
        throw InputError(input_error_message(origin, 0, "v100/" + key + "/" + other,
                                             "expected [throughput, throughput]"));
      }
      // 0 marks a pair that did not run together (e.g. out of memory): not measured.
      if (thr[0].get<double>() <= 0 || thr[1].get<double>() <= 0) continue;
      MeasuredPair p;
      p.a = self->second.second;
      p.b = o->second.second;
      p.speed_a = std::clamp(thr[0].get<double>() / self->second.first, 0.01, 1.0);
      p.speed_b = std::clamp(thr[1].get<double>() / o->second.first, 0.01, 1.0);
      out.pairs.push_back(p);
    }
  }
  out.notes.push_back(
      "gavel: V100 single-GPU pairs; each model takes the features of the nearest-batch Lucid "
      "job of its family (ResNet-18->ResNet18, ResNet-50->ResNet50, Transformer, LM->LSTM, "
      "Recommendation->NeuMF, CycleGAN->DCGAN, A3C->PPO); speed = pair / isolated, capped at 1");
}

InterferenceData load_interference_data(const std::string& dir, const std::string& sources) {
  bool lucid = false, seed = false, gavel = false;
  std::vector<std::string_view> names;
  csv::split(sources, names);
  for (std::string_view s : names) {
    if (s == "all") {
      lucid = seed = gavel = true;
    } else if (s == "lucid") {
      lucid = true;
    } else if (s == "seed") {
      seed = true;
    } else if (s == "gavel") {
      gavel = true;
    } else {
      throw std::invalid_argument("unknown co-location data source '" + std::string(s) +
                                  "' (all, lucid, seed, gavel)");
    }
  }
  const std::string in = dir + "/interference/";
  InterferenceData d;
  d.kb_features = read_alnair_clustering_features(in + "alnair_clustering_features.csv");
  const std::string prof_path = in + "alnair_profiles.csv";
  const auto profiles = parse_alnair_profiles(csv::read_file(prof_path), prof_path);
  for (const AlnairProfile& p : profiles) d.kb_features.push_back(p.features);
  if (lucid || gavel) {
    InterferenceData l;
    const std::string s = in + "lucid_single_data.csv", c = in + "lucid_colocate_info.csv";
    parse_lucid(csv::read_file(s), s, csv::read_file(c), c, l);
    if (gavel) {
      const std::string g = dir + "/philly/gavel/simulation_throughputs.json";
      parse_gavel_pairs(csv::read_file(g), g, l);
    }
    // Keep only the sources asked for (Gavel's jobs need Lucid's features to exist).
    std::vector<uint32_t> remap(l.jobs.size(), UINT32_MAX);
    for (size_t i = 0; i < l.jobs.size(); ++i) {
      if ((l.jobs[i].source == "lucid" && !lucid) || (l.jobs[i].source == "gavel" && !gavel)) {
        continue;
      }
      remap[i] = static_cast<uint32_t>(d.jobs.size());
      d.jobs.push_back(l.jobs[i]);
    }
    for (MeasuredPair p : l.pairs) {
      if (remap[p.a] == UINT32_MAX || remap[p.b] == UINT32_MAX) continue;
      p.a = remap[p.a];
      p.b = remap[p.b];
      d.pairs.push_back(p);
    }
    for (auto& n : l.notes) d.notes.push_back(std::move(n));
  }
  if (seed) {
    const std::string s = in + "seed_jrs_inter_cluster_pairs.csv";
    InterferenceData sd;
    parse_seed_pairs(csv::read_file(s), s, profiles, sd);
    const auto base = static_cast<uint32_t>(d.jobs.size());
    for (auto& j : sd.jobs) d.jobs.push_back(std::move(j));
    for (MeasuredPair p : sd.pairs) {
      p.a += base;
      p.b += base;
      d.pairs.push_back(p);
    }
    for (auto& n : sd.notes) d.notes.push_back(std::move(n));
  }
  return d;
}

}  // namespace tessera

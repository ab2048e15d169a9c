#include "sim/gavel_throughput.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "model/input_error.h"

namespace tessera {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

// Parses Gavel's Python-tuple key "('ResNet-50 (batch size 64)', 1)" into (model, scale).
bool parse_key(const std::string& key, std::string& model, int& scale) {
  const size_t open = key.find('\'');
  const size_t close = key.rfind('\'');
  if (open == std::string::npos || close <= open) return false;
  model = key.substr(open + 1, close - open - 1);
  size_t p = key.find(',', close);
  if (p == std::string::npos) return false;
  ++p;
  while (p < key.size() && key[p] == ' ') ++p;
  const size_t end = key.find(')', p);
  if (end == std::string::npos) return false;
  auto [ptr, ec] = std::from_chars(key.data() + p, key.data() + end, scale);
  return ec == std::errc() && ptr == key.data() + end && scale > 0;
}

}  // namespace

GavelThroughputs GavelThroughputs::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(input_error_message(path, 0, "", "cannot open file"));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse(text, path);
}

GavelThroughputs GavelThroughputs::parse(std::string_view json_text, const std::string& origin) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number
    throw InputError(input_error_message(origin, 0, "", std::string("invalid JSON: ") + e.what()));
  }
  if (!doc.is_object()) throw InputError(input_error_message(origin, 0, "", "expected an object"));
  GavelThroughputs out;
  for (const auto& [worker, entries] : doc.items()) {
    if (!entries.is_object()) {
      throw InputError(input_error_message(origin, 0, worker, "expected an object"));
    }
    for (const auto& [key, value] : entries.items()) {
      std::string model;
      int scale = 0;
      if (!parse_key(key, model, scale)) {
        throw InputError(input_error_message(origin, 0, worker, "unexpected key '" + key + "'"));
      }
      if (!value.is_object() || !value.contains("null") || !value.at("null").is_number()) {
        throw InputError(input_error_message(origin, 0, worker + "/" + key,
                                             "expected an object with a numeric \"null\""));
      }
      const double thr = value.at("null").get<double>();
      // 0 marks a configuration that did not run (e.g. ResNet-50 batch 128 on several K80s,
      // out of memory): treat it as not measured.
      if (thr > 0) {
        out.thr_[{lower(worker), model}][scale] = thr;
        out.models_.insert(model);
      }
    }
  }
  return out;
}

bool GavelThroughputs::has_model(std::string_view model) const {
  return models_.find(model) != models_.end();
}

std::optional<double> GavelThroughputs::throughput(std::string_view worker_type,
                                                   std::string_view model, int scale) const {
  auto it = thr_.find(std::pair<std::string, std::string>(worker_type, model));
  if (it == thr_.end()) return std::nullopt;
  auto s = it->second.find(scale);
  if (s == it->second.end()) return std::nullopt;
  return s->second;
}

std::string GavelThroughputs::worker_type_of(std::string_view gpu_type_name) {
  const std::string n = lower(gpu_type_name);
  if (n == "k80") return "k80";
  if (n == "p100") return "p100";
  // Alibaba's V100M16/V100M32 and V100-32G are V100s with more memory: same compute.
  if (n.rfind("v100", 0) == 0) return "v100";
  return "";
}

double GavelThroughputs::type_factor(std::string_view model, const GpuType& type) const {
  const std::string w = worker_type_of(type.name);
  if (!w.empty()) {
    const auto on_type = throughput(w, model, 1);
    const auto on_v100 = throughput("v100", model, 1);
    if (on_type && on_v100) return *on_type / *on_v100;
  }
  return type.relative_speed;  // the table is relative to V100 already
}

double GavelThroughputs::spread_factor(std::string_view model, int gpus,
                                       const GpuType& type) const {
  auto ratio = [&](const std::string& w) -> std::optional<double> {
    if (w.empty()) return std::nullopt;
    auto cons = thr_.find(std::pair<std::string, std::string>(w, model));
    auto spread = thr_.find(std::pair<std::string, std::string>(w + "_unconsolidated", model));
    if (cons == thr_.end() || spread == thr_.end()) return std::nullopt;
    // The largest scale <= gpus measured both ways; scale 1 says nothing about spreading.
    for (auto it = cons->second.rbegin(); it != cons->second.rend(); ++it) {
      if (it->first > gpus || it->first < 2) continue;
      auto u = spread->second.find(it->first);
      if (u == spread->second.end()) continue;
      // Gavel's runs sometimes show spread faster than packed (measurement noise, e.g.
      // ResNet-50 on 8 V100s: 1.36); spreading never helps a data-parallel job, so cap at 1.
      return std::min(1.0, u->second / it->second);
    }
    return std::nullopt;
  };
  if (auto r = ratio(worker_type_of(type.name))) return *r;
  if (auto r = ratio("v100")) return *r;
  return 1.0;
}

double GavelThroughputs::speed(std::string_view model, const PlacementShape& shape,
                               const GpuTypeTable& types) const {
  const GpuType& t = types.at(shape.slowest_type);
  double s = type_factor(model, t);
  if (shape.nodes > 1 || shape.members_per_node.size() > 1) {
    s *= spread_factor(model, std::max(1, shape.members() * shape.gpus_per_member), t);
  }
  return s;
}

}  // namespace tessera

#include "store/job_request.h"

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <limits>
#include <system_error>

#include "model/cluster.h"
#include "model/csv.h"
#include "model/dataset_name.h"
#include "model/input_error.h"
#include "model/job.h"
#include "model/json_depth.h"
#include "model/spelling.h"
#include "model/yaml_util.h"
#include "store/strict_json.h"

namespace tessera {

namespace {

using nlohmann::json;

constexpr size_t kMaxNameChars = 63;
constexpr size_t kMaxTenantChars = 255;
constexpr int64_t kMaxGangMembers = 100000;
constexpr int64_t kMaxGpusPerMember = 64;
constexpr size_t kMaxCommandArgs = 4096;
// Quantities beyond this (before the unit) are typos; the bound also keeps the conversions to
// milli-CPU and MiB far from int64 overflow (1e12 Ti is below 2^63 MiB).
constexpr double kMaxQuantity = 1e12;
// A YAML alias expands to a copy of its anchor in the JSON tree, so a document of nested
// aliases ("billion laughs") could expand exponentially; no real job spec comes near this.
constexpr size_t kMaxYamlNodes = 1 << 18;

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

bool env_name_char(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         (!first && c >= '0' && c <= '9');
}

// A value as quoted in an error message, cut short so a huge value cannot flood the log.
std::string show(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  constexpr size_t kMax = 80;
  if (s.size() > kMax) s = s.substr(0, kMax) + "...";
  return s;
}

// The variables glibc drops from the environment of a setuid program (its UNSECURE_ENVVARS):
// each makes a program load code or data it names. A job's processes run as its tenant only
// after the uid drop, but none of these has a use a job needs and each is an attack on
// anything that runs with more rights than its caller; LD_LIBRARY_PATH and TMPDIR, which
// jobs do need, stay allowed.
bool loader_variable(std::string_view name) {
  static constexpr std::string_view kRefused[] = {
      "GCONV_PATH",     "GETCONF_DIR",     "GLIBC_TUNABLES",   "HOSTALIASES",
      "LD_AUDIT",       "LD_DEBUG_OUTPUT", "LD_DYNAMIC_WEAK",  "LD_HWCAP_MASK",
      "LD_ORIGIN_PATH", "LD_PRELOAD",      "LD_PROFILE",       "LD_PROFILE_OUTPUT",
      "LD_SHOW_AUXV",   "LOCALDOMAIN",     "LOCPATH",          "MALLOC_TRACE",
      "NIS_PATH",       "NLSPATH",         "RESOLV_HOST_CONF", "RES_OPTIONS",
      "TZDIR"};
  return std::find(std::begin(kRefused), std::end(kRefused), name) != std::end(kRefused);
}

// Reads a job spec out of a JSON tree. `lenient_scalars` is set for trees converted from YAML:
// there a scalar's type is a guess from its spelling (`BATCH: 64` is a number, `tag: 1.10` a
// number that lost its zero), so each field reads a scalar by the text the user wrote instead:
// a string field takes a number or boolean (the YAML conversion only makes numbers whose JSON
// spelling is the original text, so the text comes back exactly), and a number field takes a
// string that spells a number. JSON clients state their types, so for them both are errors.
class Reader {
 public:
  explicit Reader(bool lenient_scalars) : lenient_(lenient_scalars) {}

  JobRequest read(const json& j) const {
    if (!j.is_object()) fail("", "expected an object (the job spec), got " + show(j));
    check_keys(j, "",
               {"name", "tenant", "gang", "resources", "priority_class", "span", "sla",
                "duration_estimate", "checkpoint_grace", "time_limit", "after_ok", "after_any",
                "command", "env", "array", "adaptive", "dataset"});
    JobRequest r;
    r.name = name(required(j, "name", ""), "name");
    if (const json* v = optional(j, "tenant")) r.tenant = tenant(*v, "tenant");
    if (const json* v = optional(j, "gang")) gang(*v, r);
    if (const json* v = optional(j, "resources")) resources(*v, r);
    if (const json* v = optional(j, "priority_class")) {
      const std::string s = string(*v, "priority_class");
      PriorityClass p = PriorityClass::kResearch;
      if (!parse_priority_class(s, p)) {
        fail("priority_class",
             "expected one of inference-critical, production, research, best-effort, got " +
                 show(*v));
      }
      r.priority_class = std::string(to_string(p));
    }
    if (const json* v = optional(j, "span")) {
      r.span = string(*v, "span");
      // "cluster" (no constraint) is what leaving span out says.
      Level level = Level::kCluster;
      if (!parse_level(r.span, level) || level == Level::kCluster)
        fail("span", "expected one of nvlink, node, rack, spine, got " + show(*v));
    }
    if (const json* v = optional(j, "sla")) {
      check_keys(*v, "sla", {"max_queueing"});
      if (const json* q = optional(*v, "max_queueing"))
        r.sla_max_queueing_seconds = duration(*q, "sla.max_queueing");
    }
    if (const json* v = optional(j, "duration_estimate"))
      r.duration_estimate_seconds = duration(*v, "duration_estimate");
    if (const json* v = optional(j, "checkpoint_grace"))
      r.checkpoint_grace_seconds = duration(*v, "checkpoint_grace");
    if (const json* v = optional(j, "time_limit")) {
      r.time_limit_seconds = duration(*v, "time_limit");
      if (!(r.time_limit_seconds > 0)) fail("time_limit", "must be more than 0");
    }
    if (const json* v = optional(j, "after_ok")) r.after_ok = job_ids(*v, "after_ok");
    if (const json* v = optional(j, "after_any")) r.after_any = job_ids(*v, "after_any");
    command(required(j, "command", ""), r);
    if (const json* v = optional(j, "env")) env(*v, r);
    if (const json* v = optional(j, "array")) {
      // A bare number (`array: 7`) is one index, as YAML reads it.
      const std::string text =
          v->is_number_integer() ? std::to_string(v->get<int64_t>()) : string(*v, "array");
      std::vector<int32_t> indices;
      parse_array_spec(text, "array", indices, r.array_throttle);
      r.array_indices = std::move(indices);
    }
    if (const json* v = optional(j, "adaptive")) adaptive(*v, r);
    if (const json* v = optional(j, "dataset")) dataset(*v, r);
    return r;
  }

 private:
  [[noreturn]] static void fail(const std::string& field, const std::string& msg) {
    throw FieldError(field, msg);
  }

  static std::string path(const std::string& where, std::string_view key) {
    return where.empty() ? std::string(key) : where + "." + std::string(key);
  }

  // Unknown keys are errors: a misspelt key would otherwise silently take its default.
  static void check_keys(const json& obj, const std::string& where,
                         std::initializer_list<std::string_view> known) {
    if (!obj.is_object()) fail(where, "expected an object, got " + show(obj));
    for (const auto& kv : obj.items()) {
      bool ok = false;
      for (std::string_view k : known) ok = ok || k == kv.key();
      if (!ok) {
        const std::string key = kv.key().size() <= 64 ? kv.key() : quote_prefix(kv.key());
        fail(path(where, key),
             "unknown key" + did_you_mean(kv.key(), known) + " (known: " + join_names(known) + ")");
      }
    }
  }

  // A present, non-null member, or nullptr: null means "not given", as an absent key does.
  static const json* optional(const json& obj, std::string_view key) {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }

  static const json& required(const json& obj, std::string_view key, const std::string& where) {
    const json* v = optional(obj, key);
    if (v == nullptr) fail(path(where, key), "required");
    return *v;
  }

  std::string string(const json& v, const std::string& field) const {
    if (v.is_string()) return v.get<std::string>();
    if (lenient_ && (v.is_number() || v.is_boolean())) return v.dump();
    fail(field, "expected a string, got " + show(v));
  }

  // The number a scalar spells, if any: JSON numbers, and in lenient mode numeric strings.
  bool number(const json& v, double& out) const {
    if (v.is_number()) {
      out = v.get<double>();
      return std::isfinite(out);
    }
    if (lenient_ && v.is_string()) return csv::parse_double(v.get_ref<const std::string&>(), out);
    return false;
  }

  // An integer in [min, max]. An integral float (2.0, as some JSON encoders write) counts.
  int64_t integer(const json& v, const std::string& field, int64_t min, int64_t max) const {
    if (v.is_number_integer()) {
      // Unsigned values above INT64_MAX read as negative; compare as the right type.
      if (v.is_number_unsigned()) {
        const uint64_t u = v.get<uint64_t>();
        if (u <= static_cast<uint64_t>(max) && static_cast<int64_t>(u) >= min)
          return static_cast<int64_t>(u);
      } else {
        const int64_t i = v.get<int64_t>();
        if (i >= min && i <= max) return i;
      }
    } else {
      double d = 0;
      if (number(v, d) && d == std::floor(d) && d >= static_cast<double>(min) &&
          d <= static_cast<double>(max)) {
        return static_cast<int64_t>(d);
      }
    }
    const std::string range = max == std::numeric_limits<int64_t>::max()
                                  ? ">= " + std::to_string(min)
                                  : "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
    fail(field, "expected an integer " + range + ", got " + show(v));
  }

  std::string name(const json& v, const std::string& field) const {
    const std::string s = string(v, field);
    if (s.empty() || s.size() > kMaxNameChars) {
      fail(field, "expected 1 to " + std::to_string(kMaxNameChars) + " characters, got " +
                      std::to_string(s.size()));
    }
    for (char c : s) {
      if (!name_char(c))
        fail(field, "expected only letters, digits, '.', '_' and '-', got " + show(v));
    }
    return s;
  }

  // A tenant is a queue path: names as above, joined by '/' (research/nlp).
  std::string tenant(const json& v, const std::string& field) const {
    const std::string s = string(v, field);
    if (s.empty() || s.size() > kMaxTenantChars) {
      fail(field, "expected 1 to " + std::to_string(kMaxTenantChars) + " characters, got " +
                      std::to_string(s.size()));
    }
    for (size_t i = 0; i < s.size(); ++i) {
      const char c = s[i];
      if (c == '/') {
        if (i == 0 || i + 1 == s.size() || s[i - 1] == '/')
          fail(field, "expected a queue path like research/nlp (no empty parts), got " + show(v));
      } else if (!name_char(c)) {
        fail(field, "expected only letters, digits, '.', '_', '-' and '/', got " + show(v));
      }
    }
    return s;
  }

  void gang(const json& v, JobRequest& r) const {
    if (!v.is_object()) {
      const auto n = static_cast<int32_t>(integer(v, "gang", 1, kMaxGangMembers));
      r.min_members = r.max_members = n;
      return;
    }
    check_keys(v, "gang", {"min", "max"});
    const json* min = optional(v, "min");
    const json* max = optional(v, "max");
    // {max: 8} alone is an elastic gang that may start with one member.
    r.min_members = min ? static_cast<int32_t>(integer(*min, "gang.min", 1, kMaxGangMembers)) : 1;
    r.max_members =
        max ? static_cast<int32_t>(integer(*max, "gang.max", 1, kMaxGangMembers)) : r.min_members;
    if (r.min_members > r.max_members) {
      fail("gang", "min (" + std::to_string(r.min_members) + ") must not exceed max (" +
                       std::to_string(r.max_members) + ")");
    }
  }

  void gpus(const json& v, JobRequest& r) const {
    double d = 0;
    if (number(v, d)) {
      if (d == std::floor(d) && d >= 0 && d <= static_cast<double>(kMaxGpusPerMember)) {
        r.gpus = static_cast<int32_t>(d);
        r.gpu_milli = 1000;
        return;
      }
      if (d > 0 && d < 1) {
        const auto milli = static_cast<int32_t>(std::lround(d * 1000));
        if (milli >= 1 && milli <= 999) {
          r.gpus = 1;
          r.gpu_milli = milli;
          return;
        }
      }
    }
    fail("resources.gpus", "expected an integer in [0, " + std::to_string(kMaxGpusPerMember) +
                               "] or a fraction in [0.001, 0.999], got " + show(v));
  }

  // The text of a Kubernetes quantity: a string, or a number written out.
  std::string quantity_text(const json& v, const std::string& field) const {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number()) return v.dump();
    fail(field,
         "expected a quantity (a number or a string like \"500m\" or \"16Gi\"), got " + show(v));
  }

  // Rejects quantities whose number (before the unit) is negative, not finite or absurd.
  static bool quantity_in_range(std::string_view s) {
    double v = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && p != s.data() && std::isfinite(v) && v >= 0 && v <= kMaxQuantity;
  }

  void resources(const json& v, JobRequest& r) const {
    check_keys(v, "resources", {"gpus", "cpu", "memory", "gpu_types"});
    if (const json* g = optional(v, "gpus")) gpus(*g, r);
    if (const json* c = optional(v, "cpu")) {
      const std::string s = quantity_text(*c, "resources.cpu");
      if (!quantity_in_range(s) || !parse_cpu_quantity(s, r.cpu_milli) || r.cpu_milli < 0) {
        fail("resources.cpu",
             "expected a non-negative CPU quantity like 4, 0.5 or \"500m\", got " + show(*c));
      }
    }
    if (const json* m = optional(v, "memory")) {
      const std::string s = quantity_text(*m, "resources.memory");
      if (!quantity_in_range(s) || !parse_memory_quantity(s, r.mem_mib) || r.mem_mib < 0) {
        fail("resources.memory",
             "expected a non-negative memory quantity like \"16Gi\" or \"512Mi\", got " + show(*m));
      }
    }
    if (const json* t = optional(v, "gpu_types")) {
      if (!t->is_array()) fail("resources.gpu_types", "expected an array, got " + show(*t));
      for (size_t i = 0; i < t->size(); ++i) {
        const std::string field = "resources.gpu_types[" + std::to_string(i) + "]";
        std::string s = string((*t)[i], field);
        if (s.empty()) fail(field, "must not be empty");
        r.gpu_types.push_back(std::move(s));
      }
    }
  }

  // A goodput-adaptive job: its batch limits; whole GPUs per member (its GPU count is what the
  // scheduler changes, a member at a time).
  void adaptive(const json& v, JobRequest& r) const {
    check_keys(v, "adaptive", {"batch", "max_batch", "per_gpu"});
    AdaptiveBatch& a = r.adaptive;
    a.batch = static_cast<int32_t>(
        integer(required(v, "batch", "adaptive"), "adaptive.batch", 1, kMaxAdaptiveBatch));
    a.max_batch = a.batch;
    if (const json* m = optional(v, "max_batch")) {
      a.max_batch =
          static_cast<int32_t>(integer(*m, "adaptive.max_batch", a.batch, kMaxAdaptiveBatch));
    }
    a.min_per_gpu = 1;
    a.max_per_gpu = a.max_batch;
    if (const json* g = optional(v, "per_gpu")) {
      check_keys(*g, "adaptive.per_gpu", {"min", "max"});
      if (const json* lo = optional(*g, "min")) {
        a.min_per_gpu = static_cast<int32_t>(integer(*lo, "adaptive.per_gpu.min", 1, a.max_batch));
      }
      a.max_per_gpu = std::max(a.min_per_gpu, a.max_per_gpu);
      if (const json* hi = optional(*g, "max")) {
        a.max_per_gpu =
            static_cast<int32_t>(integer(*hi, "adaptive.per_gpu.max", a.min_per_gpu, a.max_batch));
      }
    }
    if (r.gpu_milli < 1000 || r.gpus < 1) {
      fail("adaptive", "an adaptive job needs whole GPUs per member (resources.gpus >= 1)");
    }
    if (!r.array_indices.empty()) {
      fail("adaptive", "an array's tasks cannot be adaptive (each task is a job of its own)");
    }
  }

  // A dataset's name: a directory of the cache, so a strict one (model/dataset_name.h).
  std::string dataset_name(const json& v, const std::string& field) const {
    std::string s = string(v, field);
    const std::string why = dataset_name_problem(s, /*allow_owner=*/true);
    if (!why.empty()) {
      fail(field, "expected a dataset NAME or TENANT/NAME (a private one): " + why);
    }
    return s;
  }

  // A dataset by name (a built-in one's size is known), or {name, size_gb}.
  void dataset(const json& v, JobRequest& r) const {
    if (v.is_object()) {
      check_keys(v, "dataset", {"name", "size_gb"});
      r.dataset = dataset_name(required(v, "name", "dataset"), "dataset.name");
      if (const json* g = optional(v, "size_gb")) {
        double d = 0;
        if (!number(*g, d) || !(d > 0) || d > 1e9) {
          fail("dataset.size_gb", "expected a number of GB > 0, got " + show(*g));
        }
        r.dataset_gb = d;
      }
      return;
    }
    r.dataset = dataset_name(v, "dataset");
  }

  double duration(const json& v, const std::string& field) const {
    double seconds = -1;
    bool ok = false;
    if (v.is_number()) {
      seconds = v.get<double>();
      ok = std::isfinite(seconds) && seconds >= 0 && seconds <= kMaxDurationSeconds;
    } else if (v.is_string()) {
      ok = parse_duration(v.get_ref<const std::string&>(), seconds);
    }
    if (!ok) {
      fail(field,
           "expected a non-negative duration of at most 100 years (seconds, or a number with "
           "suffix s, m, h or d like 30s or 24h), got " +
               show(v));
    }
    return seconds;
  }

  void command(const json& v, JobRequest& r) const {
    if (!v.is_array() || v.empty())
      fail("command", "expected a non-empty array of strings (the argv), got " + show(v));
    if (v.size() > kMaxCommandArgs)
      fail("command", "expected at most " + std::to_string(kMaxCommandArgs) + " arguments");
    r.command.reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      r.command.push_back(string(v[i], "command[" + std::to_string(i) + "]"));
    if (r.command[0].empty()) fail("command[0]", "the program must not be empty");
  }

  // A list of job ids (dependencies): at most 100, each > 0, none twice.
  std::vector<int64_t> job_ids(const json& v, const std::string& field) const {
    if (!v.is_array()) fail(field, "expected a list of job ids, got " + show(v));
    if (v.size() > 100) fail(field, "at most 100 jobs");
    std::vector<int64_t> out;
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string f = field + "[" + std::to_string(i) + "]";
      const int64_t id = integer(v[i], f, 1, INT64_MAX);
      if (std::find(out.begin(), out.end(), id) != out.end())
        fail(f, "job " + std::to_string(id) + " listed twice");
      out.push_back(id);
    }
    return out;
  }

  void env(const json& v, JobRequest& r) const {
    if (!v.is_object()) fail("env", "expected an object of NAME: value, got " + show(v));
    // json objects iterate in key order with unique keys: the sorted, unique list JobRequest
    // promises comes for free.
    r.env.reserve(v.size());
    for (const auto& kv : v.items()) {
      const std::string& key = kv.key();
      const std::string field = "env." + (key.size() <= 64 ? key : quote_prefix(key));
      bool ok = !key.empty() && key.size() <= 255;
      for (size_t i = 0; ok && i < key.size(); ++i) ok = env_name_char(key[i], i == 0);
      if (!ok)
        fail(field,
             "expected a name of 1 to 255 letters, digits and '_', not starting with a digit");
      if (loader_variable(key)) {
        fail(field, key +
                        " changes how programs load code or data (the C library ignores it in "
                        "setuid programs for that reason), so a job may not set it; "
                        "LD_LIBRARY_PATH is allowed");
      }
      r.env.emplace_back(key, string(kv.value(), field));
    }
  }

  bool lenient_;
};

// ---- YAML to JSON ----

// A plain scalar's JSON value when it spells an integer or a decimal number exactly as JSON
// would write it back; otherwise it stays a string ("007", "1.50", "1e3", "0x10", "inf"), so a
// string field reading it in lenient mode gets the user's text unchanged.
bool canonical_number(const std::string& s, json& out) {
  if (s.empty()) return false;
  const char* begin = s.data();
  const char* end = begin + s.size();
  int64_t i = 0;
  if (auto [p, ec] = std::from_chars(begin, end, i); ec == std::errc() && p == end) {
    json v = i;
    if (v.dump() != s) return false;
    out = std::move(v);
    return true;
  }
  double d = 0;
  if (auto [p, ec] = std::from_chars(begin, end, d); ec == std::errc() && p == end) {
    json v = d;
    if (!std::isfinite(d) || v.dump() != s) return false;
    out = std::move(v);
    return true;
  }
  return false;
}

class YamlToJson {
 public:
  json convert(const YAML::Node& n) {
    if (++nodes_ > kMaxYamlNodes) {
      throw FieldError("", "YAML document too large (more than " + std::to_string(kMaxYamlNodes) +
                               " nodes after expanding aliases)");
    }
    switch (n.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        return nullptr;
      case YAML::NodeType::Sequence: {
        json a = json::array();
        for (const auto& e : n) a.push_back(convert(e));
        return a;
      }
      case YAML::NodeType::Map: {
        json o = json::object();
        for (const auto& kv : n) {
          if (!kv.first.IsScalar()) fail(kv.first, "keys must be plain strings");
          const std::string& key = kv.first.Scalar();
          if (o.contains(key)) fail(kv.first, "duplicate key '" + key + "'");
          o[key] = convert(kv.second);
        }
        return o;
      }
      case YAML::NodeType::Scalar:
        return scalar(n);
    }
    return nullptr;
  }

 private:
  [[noreturn]] static void fail(const YAML::Node& n, const std::string& msg) {
    throw FieldError("", "YAML line " + std::to_string(line_of(n)) + ": " + msg);
  }

  // Resolves a plain scalar's type as YAML 1.2's core schema would, for the spellings a job
  // spec uses; quoted or explicitly tagged scalars are strings.
  static json scalar(const YAML::Node& n) {
    const std::string& s = n.Scalar();
    if (n.Tag() != "?") return s;
    if (s == "true") return true;
    if (s == "false") return false;
    if (s == "null" || s == "~" || s.empty()) return nullptr;
    json v;
    if (canonical_number(s, v)) return v;
    return s;
  }

  size_t nodes_ = 0;
};

std::string error_message(const std::string& field, const std::string& message) {
  return field.empty() ? message : "field " + field + ": " + message;
}

}  // namespace

bool is_valid_name(std::string_view s) {
  return !s.empty() && s.size() <= kMaxNameChars && std::all_of(s.begin(), s.end(), name_char);
}

FieldError::FieldError(std::string field, const std::string& message)
    : std::runtime_error(error_message(field, message)), field_(std::move(field)) {}

JobRequest job_request_from_json(const nlohmann::json& j) {
  return Reader(false).read(j);
}

JobRequest parse_job_request(std::string_view text) {
  size_t first = 0;
  while (first < text.size() &&
         (text[first] == ' ' || text[first] == '\t' || text[first] == '\n' || text[first] == '\r'))
    ++first;
  // Flow collections ([...], {...}) nest in YAML as in JSON; the YAML parser and the reader
  // recurse, so deep nesting is refused before either runs.
  if (json_nesting_exceeds(text)) {
    throw FieldError("", "the job spec nests arrays/objects more than " +
                             std::to_string(kMaxJsonDepth) + " levels deep");
  }
  if (first < text.size() && text[first] == '{') {
    return Reader(false).read(parse_json_strict(text));
  }
  json j;
  try {
    // One job per request: a second document would otherwise be dropped without a word.
    const std::vector<YAML::Node> docs = load_yaml_documents(text);
    if (docs.size() > 1) {
      throw FieldError("", "the spec holds " + std::to_string(docs.size()) +
                               " YAML documents; submit one job per request");
    }
    const YAML::Node root = docs.empty() ? YAML::Node() : docs.front();
    j = YamlToJson().convert(root);
  } catch (const YAML::Exception& e) {
    // The mark is 0-based; e.msg leaves out the "yaml-cpp: error at line ..." prefix.
    const std::string line = e.mark.is_null() ? "?" : std::to_string(e.mark.line + 1);
    throw FieldError("",
                     "invalid YAML at line " + line + ": " + e.msg + yaml_excerpt(text, e.mark));
  }
  return Reader(true).read(j);
}

nlohmann::json to_json(const JobRequest& r) {
  json j = json::object();
  j["name"] = r.name;
  if (!r.tenant.empty()) j["tenant"] = r.tenant;
  j["gang"] = {{"min", r.min_members}, {"max", r.max_members}};
  json res = json::object();
  // A fraction is written as the number it was read from: 500 milli -> 0.5, which reads back
  // as round(0.5 * 1000) = 500 exactly (every k / 1000 does).
  if (r.gpu_milli < 1000) {
    res["gpus"] = r.gpu_milli / 1000.0;
  } else {
    res["gpus"] = r.gpus;
  }
  if (r.cpu_milli != 0) {
    if (r.cpu_milli % 1000 == 0) {
      res["cpu"] = r.cpu_milli / 1000;
    } else {
      res["cpu"] = std::to_string(r.cpu_milli) + "m";
    }
  }
  if (r.mem_mib != 0) {
    res["memory"] = r.mem_mib % 1024 == 0 ? std::to_string(r.mem_mib / 1024) + "Gi"
                                          : std::to_string(r.mem_mib) + "Mi";
  }
  if (!r.gpu_types.empty()) res["gpu_types"] = r.gpu_types;
  j["resources"] = std::move(res);
  if (!r.priority_class.empty()) j["priority_class"] = r.priority_class;
  if (!r.span.empty()) j["span"] = r.span;
  if (r.sla_max_queueing_seconds >= 0) j["sla"] = {{"max_queueing", r.sla_max_queueing_seconds}};
  if (r.duration_estimate_seconds >= 0) j["duration_estimate"] = r.duration_estimate_seconds;
  if (r.checkpoint_grace_seconds >= 0) j["checkpoint_grace"] = r.checkpoint_grace_seconds;
  if (r.time_limit_seconds >= 0) j["time_limit"] = r.time_limit_seconds;
  if (!r.after_ok.empty()) j["after_ok"] = r.after_ok;
  if (!r.after_any.empty()) j["after_any"] = r.after_any;
  j["command"] = r.command;
  json env = json::object();
  for (const auto& [k, v] : r.env) env[k] = v;
  if (!env.empty()) j["env"] = std::move(env);
  if (!r.array_indices.empty())
    j["array"] = array_spec_text(r.array_indices.get(), r.array_throttle);
  if (r.adaptive.batch > 0) {
    const AdaptiveBatch& a = r.adaptive;
    j["adaptive"] = {{"batch", a.batch},
                     {"max_batch", a.max_batch},
                     {"per_gpu", {{"min", a.min_per_gpu}, {"max", a.max_per_gpu}}}};
  }
  if (!r.dataset.empty()) {
    if (r.dataset_gb > 0) {
      j["dataset"] = {{"name", r.dataset}, {"size_gb", r.dataset_gb}};
    } else {
      j["dataset"] = r.dataset;
    }
  }
  return j;
}

void parse_array_spec(std::string_view text, const std::string& field,
                      std::vector<int32_t>& indices, int32_t& throttle) {
  const auto fail = [&](const std::string& msg) {
    throw FieldError(field, msg + " (expected indices such as \"0-99%10\", \"1,3,5-11:2\")");
  };
  // A number of at most 7 digits: indices and throttles are small, and no overflow is possible.
  const auto number = [&](std::string_view s, const char* what) {
    if (s.empty() || s.size() > 7 ||
        !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      fail(std::string("\"") + std::string(s) + "\" is not " + what);
    }
    int32_t v = 0;
    for (const char c : s) v = v * 10 + (c - '0');
    return v;
  };
  indices.clear();
  throttle = 0;
  const size_t pct = text.find('%');
  if (pct != std::string_view::npos) {
    throttle = number(text.substr(pct + 1), "a throttle (tasks at once)");
    if (throttle == 0) fail("the throttle %N must be at least 1");
    text = text.substr(0, pct);
  }
  if (text.empty()) fail("no indices");
  std::vector<int32_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(start, end - start);
    int32_t step = 1;
    if (const size_t colon = item.find(':'); colon != std::string_view::npos) {
      step = number(item.substr(colon + 1), "a step");
      if (step == 0) fail("a step must be at least 1");
      item = item.substr(0, colon);
    }
    const size_t dash = item.find('-');
    const int32_t lo = number(item.substr(0, dash), "an index");
    const int32_t hi =
        dash == std::string_view::npos ? lo : number(item.substr(dash + 1), "an index");
    if (hi < lo) fail(std::string(item) + " runs backwards");
    for (int64_t i = lo; i <= hi; i += step) {
      out.push_back(static_cast<int32_t>(i));
      if (out.size() > kMaxArrayTasks) {
        fail("more than " + std::to_string(kMaxArrayTasks) + " tasks in one array");
      }
    }
    start = end + 1;
  }
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
    fail("index " + std::to_string(*std::adjacent_find(out.begin(), out.end())) + " listed twice");
  }
  indices = std::move(out);
}

std::string array_spec_text(const std::vector<int32_t>& indices, int32_t throttle) {
  std::string out;
  for (size_t i = 0; i < indices.size();) {
    size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(indices[i]);
    if (j > i) out += "-" + std::to_string(indices[j]);
    i = j + 1;
  }
  if (throttle > 0) out += "%" + std::to_string(throttle);
  return out;
}

}  // namespace tessera

#include "sim/trace_readers.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <ostream>
#include <stdexcept>
#include <unordered_map>

#include "model/csv.h"
#include "model/input_error.h"
#include "model/spelling.h"

namespace tessera {

namespace {

using csv::Header;
using csv::LineReader;
using csv::Row;

constexpr int64_t kMaxMembers = 1 << 20;
constexpr int64_t kMaxGpusPerMember = 1024;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr double kDoubleMax = std::numeric_limits<double>::max();
// Pollux's simulator charges this re-scale delay every time a job (re)starts (OSDI'21 §5).
constexpr double kPolluxRestartCost = 30.0;

constexpr std::string_view kPolluxApps[] = {"bert",     "cifar10", "deepspeech2",
                                            "imagenet", "ncf",     "yolov3"};

bool is_pollux_app(std::string_view s) {
  return std::find(std::begin(kPolluxApps), std::end(kPolluxApps), s) != std::end(kPolluxApps);
}

std::string source_of(const std::string& origin, size_t line) {
  std::string s = origin;
  s += ':';
  s += std::to_string(line);
  return s;
}

bool limit_reached(const Workload& w, const ReaderOptions& opt) {
  return opt.max_jobs != 0 && w.jobs.size() >= opt.max_jobs;
}

// Advances to the first non-blank line (the CSV header); throws on an empty file.
std::string_view header_line(LineReader& lines, const std::string& origin) {
  std::string_view line;
  while (lines.next(line)) {
    if (!csv::is_blank(line)) return line;
  }
  throw InputError(input_error_message(origin, 0, "", "empty file"));
}

double positive_number(const Row& row, int col) {
  const double v = row.number(col, 0, kDoubleMax);
  if (v <= 0) row.fail(col, "expected a positive number, got " + std::string(row.str(col)));
  return v;
}

std::string required_string(const Row& row, int col) {
  if (row.empty(col)) row.fail(col, "must not be empty");
  return std::string(row.str(col));
}

// Shifts submit times so the first submission is at 0 (for traces with absolute timestamps).
void shift_to_first_submit(Workload& w) {
  if (w.jobs.empty()) return;
  double first = w.jobs.front().submit_time;
  for (const JobSpec& j : w.jobs) first = std::min(first, j.submit_time);
  for (JobSpec& j : w.jobs) j.submit_time -= first;
}

// ---------------------------------------------------------------- Pollux / Sia workloads

void read_pollux(std::string_view text, const std::string& origin, const ReaderOptions& opt,
                 Workload& w) {
  LineReader lines(text);
  const std::string_view head = header_line(lines, origin);
  const Header h(head, {"name", "time", "application", "num_replicas", "batch_size"},
                 {"tenant", "user"}, origin, lines.line_number(), "Pollux workload");
  const int c_name = h.index("name"), c_time = h.index("time"), c_app = h.index("application"),
            c_rep = h.index("num_replicas"), c_bsz = h.index("batch_size"),
            c_tenant = h.index("tenant") >= 0 ? h.index("tenant") : h.index("user");
  Row row(origin, h);
  std::string_view line;
  while (!limit_reached(w, opt) && lines.next(line)) {
    if (csv::is_blank(line)) continue;
    row.reset(line, lines.line_number());
    JobSpec j;
    j.name = required_string(row, c_name);
    j.submit_time = row.number(c_time, 0, kDoubleMax);
    j.model = w.models.intern(required_string(row, c_app));
    j.min_members = j.max_members = static_cast<int32_t>(row.integer(c_rep, 1, kMaxMembers));
    j.batch_size = static_cast<int32_t>(row.integer(c_bsz, 1, std::numeric_limits<int32_t>::max()));
    j.tenant =
        w.tenants.intern(row.empty(c_tenant) ? std::string_view("default") : row.str(c_tenant));
    // The trace describes the work by application and batch size; the execution model turns
    // that into seconds (Pollux's epochs-to-finish) once the cluster is known.
    j.work_seconds = kUnknown;
    j.duration_estimate = kUnknown;
    j.restart_cost = kPolluxRestartCost;
    j.source = source_of(origin, row.line());
    w.jobs.push_back(std::move(j));
  }
}

// ---------------------------------------------------------------- Philly (Pollux's philly.csv)

// "YYYY-MM-DD HH:MM:SS" (or with 'T') as seconds since 1970-01-01 UTC, computed from the
// civil calendar alone so that neither the locale nor the time zone matters.
bool parse_timestamp(std::string_view s, int64_t& out) {
  if (s.size() != 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') ||
      s[13] != ':' || s[16] != ':') {
    return false;
  }
  auto field = [&](size_t pos, size_t len, int& v) {
    v = 0;
    for (size_t i = pos; i < pos + len; ++i) {
      if (s[i] < '0' || s[i] > '9') return false;
      v = v * 10 + (s[i] - '0');
    }
    return true;
  };
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  if (!field(0, 4, y) || !field(5, 2, mo) || !field(8, 2, d) || !field(11, 2, h) ||
      !field(14, 2, mi) || !field(17, 2, sec)) {
    return false;
  }
  const std::chrono::year_month_day ymd{std::chrono::year{y},
                                        std::chrono::month{static_cast<unsigned>(mo)},
                                        std::chrono::day{static_cast<unsigned>(d)}};
  if (!ymd.ok() || h > 23 || mi > 59 || sec > 59) return false;
  const int64_t days = std::chrono::sys_days(ymd).time_since_epoch().count();
  out = days * 86400 + h * 3600 + mi * 60 + sec;
  return true;
}

void read_philly(std::string_view text, const std::string& origin, const ReaderOptions& opt,
                 Workload& w) {
  LineReader lines(text);
  const std::string_view head = header_line(lines, origin);
  const Header h(head, {"timestamp", "duration", "num_gpus", "cluster"}, {"gpu_time"}, origin,
                 lines.line_number(), "Philly trace");
  const int c_ts = h.index("timestamp"), c_dur = h.index("duration"), c_gpus = h.index("num_gpus"),
            c_cluster = h.index("cluster");
  Row row(origin, h);
  uint32_t model = kNoId;
  std::string_view line;
  while (!limit_reached(w, opt) && lines.next(line)) {
    if (csv::is_blank(line)) continue;
    row.reset(line, lines.line_number());
    int64_t ts = 0;
    if (!parse_timestamp(row.str(c_ts), ts)) {
      row.fail(c_ts, "expected 'YYYY-MM-DD HH:MM:SS', got '" + std::string(row.str(c_ts)) + "'");
    }
    JobSpec j;
    j.name = "philly-" + std::to_string(w.jobs.size());
    j.submit_time = static_cast<double>(ts);
    j.work_seconds = positive_number(row, c_dur);
    j.duration_estimate = j.work_seconds;
    j.min_members = j.max_members = static_cast<int32_t>(row.integer(c_gpus, 1, kMaxMembers));
    // The virtual cluster is the team that submitted the job: Tessera's tenant.
    if (row.empty(c_cluster)) row.fail(c_cluster, "must not be empty");
    j.tenant = w.tenants.intern(row.str(c_cluster));
    if (model == kNoId) model = w.models.intern(opt.default_model);
    j.model = model;
    j.source = source_of(origin, row.line());
    w.jobs.push_back(std::move(j));
  }
  shift_to_first_submit(w);
}

// ---------------------------------------------------------------- Tiresias

}  // namespace

std::string_view gavel_model_for_tiresias(std::string_view name, std::string_view fallback) {
  std::string n(name);
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto starts = [&](std::string_view p) { return n.rfind(p, 0) == 0; };
  if (n == "resnet18" || n == "resnet34") return "ResNet-18 (batch size 64)";
  // ImageNet CNNs: Gavel measured ResNet-50 on ImageNet, the closest of its classes.
  if (starts("resnet") || starts("vgg") || starts("inception") || n == "googlenet" ||
      n == "alexnet") {
    return "ResNet-50 (batch size 64)";
  }
  if (starts("lstm") || starts("rnn") || starts("gru") || n == "lm") return "LM (batch size 20)";
  if (starts("transformer") || starts("bert") || starts("gpt")) {
    return "Transformer (batch size 64)";
  }
  if (n == "a3c") return "A3C";
  if (n == "cyclegan") return "CycleGAN";
  if (n == "ncf" || starts("recommend") || n == "deepfm") return "Recommendation (batch size 2048)";
  return fallback;
}

namespace {

void read_tiresias(std::string_view text, const std::string& origin, const ReaderOptions& opt,
                   Workload& w) {
  LineReader lines(text);
  // Both published variants (60_job.csv and tf_job.csv) share these four columns; the others
  // describe Tiresias's network model and are not used.
  const std::string_view head = header_line(lines, origin);
  const Header h(head, {"job_id", "num_gpu", "submit_time", "duration"},
                 {"iterations", "model_name", "interval", "start_time", "model_size",
                  "aggr_interval", "model_scale"},
                 origin, lines.line_number(), "Tiresias job list");
  const int c_id = h.index("job_id"), c_gpu = h.index("num_gpu"), c_submit = h.index("submit_time"),
            c_dur = h.index("duration"), c_model = h.index("model_name");
  Row row(origin, h);
  std::unordered_map<std::string, int> seen_ids;
  std::string_view line;
  while (!limit_reached(w, opt) && lines.next(line)) {
    if (csv::is_blank(line)) continue;
    row.reset(line, lines.line_number());
    JobSpec j;
    j.name = required_string(row, c_id);
    // Tiresias's simulator runs every row as its own job even when job_ids repeat (tf_job.csv
    // lists job 10 twice); we do the same and keep names unique with a suffix.
    const int count = ++seen_ids[j.name];
    if (count > 1) j.name += "#" + std::to_string(count);
    j.min_members = j.max_members = static_cast<int32_t>(row.integer(c_gpu, 1, kMaxMembers));
    j.submit_time = row.number(c_submit, 0, kDoubleMax);
    j.work_seconds = positive_number(row, c_dur);
    j.duration_estimate = j.work_seconds;
    j.model = w.models.intern(row.empty(c_model)
                                  ? std::string_view(opt.default_model)
                                  : gavel_model_for_tiresias(row.str(c_model), opt.default_model));
    j.tenant = w.tenants.intern("default");
    j.source = source_of(origin, row.line());
    w.jobs.push_back(std::move(j));
  }
}

// ---------------------------------------------------------------- Alibaba (openb pod lists)

GpuTypeMask parse_gpu_spec(const Row& row, int col, const GpuTypeTable* types) {
  const std::string_view spec = row.str(col);
  if (types == nullptr) row.fail(col, "GPU types named but no GPU type table given");
  GpuTypeMask mask = 0;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t end = spec.find('|', start);
    if (end == std::string_view::npos) end = spec.size();
    const std::string_view name = csv::trim(spec.substr(start, end - start));
    if (name.empty()) row.fail(col, "empty GPU type in '" + std::string(spec) + "'");
    GpuTypeId id = 0;
    try {
      id = types->known(name);
    } catch (const std::invalid_argument& e) {
      row.fail(col, e.what());
    }
    // Repeated names (the trace has "V100M16|V100M32|V100M32") just set the same bit.
    mask |= GpuTypeMask{1} << id;
    start = end + 1;
  }
  return mask;
}

void read_alibaba(std::string_view text, const std::string& origin, const ReaderOptions& opt,
                  Workload& w) {
  LineReader lines(text);
  const std::string_view head = header_line(lines, origin);
  const Header h(
      head, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"},
      {"gpu_spec", "qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time"}, origin,
      lines.line_number(), "Alibaba pod list");
  const int c_name = h.index("name"), c_cpu = h.index("cpu_milli"), c_mem = h.index("memory_mib"),
            c_gpu = h.index("num_gpu"), c_milli = h.index("gpu_milli"),
            c_spec = h.index("gpu_spec"), c_qos = h.index("qos"),
            c_create = h.index("creation_time"), c_delete = h.index("deletion_time"),
            c_sched = h.index("scheduled_time");
  Row row(origin, h);
  const TenantId tenant = w.tenants.intern("default");
  std::string_view line;
  while (!limit_reached(w, opt) && lines.next(line)) {
    if (csv::is_blank(line)) continue;
    row.reset(line, lines.line_number());
    JobSpec j;
    j.name = required_string(row, c_name);
    j.tenant = tenant;
    j.demand.cpu_milli = row.integer(c_cpu, 0, kInt64Max);
    // One pod in the trace asks for 0 MiB; that is a legal (if odd) request.
    j.demand.mem_mib = row.integer(c_mem, 0, kInt64Max);
    const int64_t gpus = row.integer(c_gpu, 0, kMaxGpusPerMember);
    const int64_t milli = row.integer(c_milli, 0, kMilliPerGpu);
    if (gpus == 0) {
      if (milli != 0) row.fail(c_milli, "a pod with num_gpu 0 must have gpu_milli 0");
      // A CPU-only pod: no GPUs; gpu_milli stays "whole" so no code mistakes it for a share.
      j.demand.gpus = 0;
      j.demand.gpu_milli = kMilliPerGpu;
    } else {
      if (milli == 0) row.fail(c_milli, "a pod with GPUs needs gpu_milli in [1, 1000]");
      if (gpus > 1 && milli != kMilliPerGpu) {
        row.fail(c_milli, "a pod with several GPUs must take them whole (gpu_milli 1000)");
      }
      j.demand.gpus = static_cast<int32_t>(gpus);
      j.demand.gpu_milli = static_cast<int32_t>(milli);
    }
    if (!row.empty(c_spec)) j.allowed_types = parse_gpu_spec(row, c_spec, opt.gpu_types);
    if (!row.empty(c_qos)) {
      const std::string_view q = row.str(c_qos);
      // LS (latency-sensitive) pods are the production services, BE the best-effort batch;
      // Kubernetes' own Burstable/Guaranteed classes (a few hundred pods) carry no such intent.
      j.priority = q == "LS"   ? PriorityClass::kProduction
                   : q == "BE" ? PriorityClass::kBestEffort
                               : PriorityClass::kResearch;
      // LS and BE are the trace's own label: a queue's default class does not replace it, and
      // `simulate --classify` learns from it rather than guessing over it.
      j.priority_given = q == "LS" || q == "BE";
    }
    j.work_seconds = kUnknown;
    j.duration_estimate = kUnknown;
    if (!row.empty(c_create)) {
      const int64_t created = row.integer(c_create, 0, kInt64Max);
      j.submit_time = static_cast<double>(created);
      // Pending pods were never scheduled (empty scheduled_time): their lifetime is measured
      // from creation instead.
      const int64_t started =
          row.empty(c_sched) ? created : row.integer(c_sched, created, kInt64Max);
      if (!row.empty(c_delete)) {
        const int64_t deleted = row.integer(c_delete, started, kInt64Max);
        // Three pods are deleted within the second they started; the trace's resolution is one
        // second, so they run for one.
        j.work_seconds = static_cast<double>(std::max<int64_t>(deleted - started, 1));
        j.duration_estimate = j.work_seconds;
      }
    }
    j.source = source_of(origin, row.line());
    w.jobs.push_back(std::move(j));
  }
  shift_to_first_submit(w);
}

// ---------------------------------------------------------------- JSONL (Tessera native)

using nlohmann::json;

constexpr std::string_view kJsonlKeys[] = {"name",         "tenant",       "priority",
                                           "submit",       "members",      "min_members",
                                           "max_members",  "gpus",         "gpu_milli",
                                           "cpu_milli",    "mem_mib",      "gpu_types",
                                           "work",         "work_on",      "duration_estimate",
                                           "model",        "batch_size",   "checkpoint_interval",
                                           "restart_cost", "sla",          "span",
                                           "params",       "step_seconds", "dataset",
                                           "service",      "site"};

class JsonlLine {
 public:
  JsonlLine(const std::string& origin, size_t line, const json& obj)
      : origin_(origin), line_(line), obj_(obj) {}

  [[noreturn]] void fail(const std::string& field, const std::string& msg) const {
    throw InputError(input_error_message(origin_, line_, field, msg));
  }
  bool has(const char* key) const { return obj_.contains(key); }
  const json& at(const char* key) const { return obj_.at(key); }

  std::string string(const char* key, const std::string& def, bool required = false) const {
    if (!has(key)) {
      if (required) fail(key, "missing");
      return def;
    }
    const json& v = at(key);
    if (!v.is_string()) fail(key, "expected a string, got " + v.dump());
    std::string s = v.get<std::string>();
    if (s.empty()) fail(key, "must not be empty");
    return s;
  }
  double number(const char* key, double def, double min, bool strictly_positive = false) const {
    if (!has(key)) return def;
    const json& v = at(key);
    if (!v.is_number()) fail(key, "expected a number, got " + v.dump());
    const double d = v.get<double>();
    if (!std::isfinite(d) || d < min || (strictly_positive && d <= 0)) {
      fail(key, std::string("expected a ") + (strictly_positive ? "positive" : "non-negative") +
                    " number, got " + v.dump());
    }
    return d;
  }
  int64_t integer(const char* key, int64_t def, int64_t min, int64_t max) const {
    if (!has(key)) return def;
    const json& v = at(key);
    if (!v.is_number_integer()) fail(key, "expected an integer, got " + v.dump());
    // Unsigned values above int64 range cannot be in [min, max] anyway.
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(kInt64Max)) {
      fail(key, "out of range: " + v.dump());
    }
    const int64_t i = v.get<int64_t>();
    if (i < min || i > max) {
      fail(key, "expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) +
                    "], got " + v.dump());
    }
    return i;
  }

 private:
  const std::string& origin_;
  size_t line_;
  const json& obj_;
};

// `work` is V100-seconds, the execution model's reference type (docs/execution-model.md), so
// ten hours timed on an H100 would end in ten hours / 6.3 there. `work_on` names the type the
// work was timed on; this converts it with the type table's relative speeds.
double work_on_reference_type(const JsonlLine& in, double work, const ReaderOptions& opt) {
  if (!in.has("work")) in.fail("work_on", "given without work (the work it says is timed on)");
  if (in.has("service")) {
    in.fail("work_on", "not for a service: its work is how long it serves, not time on a GPU type");
  }
  static const GpuTypeTable builtin = GpuTypeTable::builtin();
  const GpuTypeTable& types = opt.gpu_types != nullptr ? *opt.gpu_types : builtin;
  GpuTypeId on = 0;
  try {
    on = types.known(in.string("work_on", ""));
  } catch (const std::invalid_argument& e) {
    in.fail("work_on", e.what());
  }
  const GpuTypeId v100 = types.find("V100").value_or(builtin.known("V100"));
  const double reference = v100 < types.size() ? types.at(v100).relative_speed : 1.0;
  return work * types.at(on).relative_speed / reference;
}

void read_jsonl(std::string_view text, const std::string& origin, const ReaderOptions& opt,
                Workload& w) {
  LineReader lines(text);
  std::string_view line;
  bool any = false;
  while (!limit_reached(w, opt) && lines.next(line)) {
    const std::string_view t = csv::trim(line);
    if (t.empty() || t.front() == '#') continue;
    any = true;
    const size_t ln = lines.line_number();
    json obj;
    try {
      obj = json::parse(t);
    } catch (const json::exception& e) {  // parse_error, or out_of_range (a number)
      throw InputError(input_error_message(origin, ln, "", std::string("bad JSON: ") + e.what()));
    }
    if (!obj.is_object()) {
      throw InputError(input_error_message(origin, ln, "", "expected a JSON object"));
    }
    for (const auto& [key, value] : obj.items()) {
      if (std::find(std::begin(kJsonlKeys), std::end(kJsonlKeys), key) == std::end(kJsonlKeys)) {
        const std::string guess = closest_match(
            key, std::vector<std::string>(std::begin(kJsonlKeys), std::end(kJsonlKeys)));
        throw InputError(input_error_message(
            origin, ln, key,
            "unknown key" + (guess.empty() ? std::string() : " (did you mean '" + guess + "'?)")));
      }
    }
    const JsonlLine in(origin, ln, obj);
    JobSpec j;
    j.name = in.string("name", "", true);
    j.tenant = w.tenants.intern(in.string("tenant", "default"));
    if (in.has("priority")) {
      const std::string p = in.string("priority", "");
      if (!parse_priority_class(p, j.priority)) {
        in.fail(
            "priority",
            "expected best-effort, research, production or inference-critical, got '" + p + "'");
      }
      j.priority_given = true;
    }
    j.sla_max_queueing = in.number("sla", kUnknown, 0);
    if (!in.has("submit")) in.fail("submit", "missing");
    j.submit_time = in.number("submit", 0, 0);
    if (in.has("members")) {
      if (in.has("min_members") || in.has("max_members")) {
        in.fail("members", "give either members or min_members and max_members");
      }
      j.min_members = j.max_members =
          static_cast<int32_t>(in.integer("members", 1, 1, kMaxMembers));
    } else if (in.has("min_members") || in.has("max_members")) {
      if (!in.has("min_members")) in.fail("min_members", "missing (max_members is given)");
      if (!in.has("max_members")) in.fail("max_members", "missing (min_members is given)");
      j.min_members = static_cast<int32_t>(in.integer("min_members", 1, 1, kMaxMembers));
      j.max_members = static_cast<int32_t>(in.integer("max_members", 1, 1, kMaxMembers));
      if (j.min_members > j.max_members) in.fail("min_members", "greater than max_members");
    }
    j.demand.gpus = static_cast<int32_t>(in.integer("gpus", 1, 0, kMaxGpusPerMember));
    j.demand.gpu_milli =
        static_cast<int32_t>(in.integer("gpu_milli", kMilliPerGpu, 1, kMilliPerGpu));
    if (j.demand.gpu_milli < kMilliPerGpu && j.demand.gpus != 1) {
      in.fail("gpu_milli", "a fractional GPU share needs gpus == 1");
    }
    j.demand.cpu_milli = in.integer("cpu_milli", 0, 0, kInt64Max);
    j.demand.mem_mib = in.integer("mem_mib", 0, 0, kInt64Max);
    if (in.has("gpu_types")) {
      const json& types = in.at("gpu_types");
      if (!types.is_array() || types.empty()) {
        in.fail("gpu_types", "expected a non-empty array of GPU type names");
      }
      if (opt.gpu_types == nullptr) in.fail("gpu_types", "no GPU type table given");
      for (const json& type : types) {
        if (!type.is_string()) in.fail("gpu_types", "expected a GPU type name, got " + type.dump());
        GpuTypeId id = 0;
        try {
          id = opt.gpu_types->known(type.get<std::string>());
        } catch (const std::invalid_argument& e) {
          in.fail("gpu_types", e.what());
        }
        j.allowed_types |= GpuTypeMask{1} << id;
      }
    }
    const std::string model = in.string("model", "");
    if (!model.empty()) j.model = w.models.intern(model);
    if (in.has("work")) {
      j.work_seconds = in.number("work", 0, 0, true);
    } else if (is_pollux_app(model)) {
      j.work_seconds = kUnknown;  // the execution model derives it from Pollux's profiles
    } else {
      in.fail("work", "missing (required unless model is a Pollux application)");
    }
    if (in.has("work_on")) j.work_seconds = work_on_reference_type(in, j.work_seconds, opt);
    j.duration_estimate = in.number("duration_estimate", kUnknown, 0, true);
    j.batch_size =
        static_cast<int32_t>(in.integer("batch_size", 0, 0, std::numeric_limits<int32_t>::max()));
    j.checkpoint_interval = in.number("checkpoint_interval", 0, 0);
    j.restart_cost = in.number("restart_cost", 0, 0);
    if (in.has("span")) {
      const std::string span = in.string("span", "");
      if (!parse_level(span, j.max_span)) {
        in.fail("span", "expected nvlink, node, rack, spine or cluster, got '" + span + "'");
      }
    }
    j.model_params = in.number("params", 0, 0);
    j.step_seconds = in.number("step_seconds", 0, 0);
    if (in.has("site")) j.site = in.string("site", "");
    if (in.has("service")) {
      // A latency-bound inference service (docs/edge.md).
      const json& d = in.at("service");
      if (!d.is_object()) in.fail("service", "expected {region, latency_slo_ms, ...}");
      constexpr std::string_view kKeys[] = {"region",     "latency_slo_ms", "request_rate",
                                            "request_kb", "response_kb",    "service_ms"};
      for (const auto& kv : d.items()) {
        if (std::find(std::begin(kKeys), std::end(kKeys), kv.key()) == std::end(kKeys)) {
          in.fail("service." + kv.key(),
                  "unknown key (region, latency_slo_ms, request_rate, request_kb, response_kb, "
                  "service_ms)");
        }
      }
      const auto field = [&](const char* key, double def, bool positive) {
        const auto it = d.find(key);
        if (it == d.end()) {
          if (def < 0) in.fail(std::string("service.") + key, "missing");
          return def;
        }
        if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0 ||
            (positive && it->get<double>() <= 0)) {
          in.fail(std::string("service.") + key,
                  std::string("expected a number ") + (positive ? "> 0" : ">= 0"));
        }
        return it->get<double>();
      };
      InferenceService sv;
      if (!d.contains("region") || !d["region"].is_string() ||
          d["region"].get<std::string>().empty()) {
        in.fail("service.region", "expected a site's name");
      }
      sv.region = d["region"].get<std::string>();
      sv.latency_slo_ms = field("latency_slo_ms", -1, true);
      sv.request_rate = field("request_rate", 1, true);
      sv.request_kb = field("request_kb", 0, false);
      sv.response_kb = field("response_kb", 0, false);
      sv.service_ms = field("service_ms", 0, false);
      j.service = static_cast<uint32_t>(w.services.size());
      w.services.push_back(std::move(sv));
    }
    if (in.has("dataset")) {
      // A built-in dataset by name, or {name, size_gb, read_mbs_per_gpu} (docs/data.md).
      const json& d = in.at("dataset");
      Dataset ds;
      if (d.is_string()) {
        const auto known = known_dataset(d.get<std::string>());
        if (!known) {
          std::string names;
          for (const Dataset& k : known_datasets()) names += (names.empty() ? "" : ", ") + k.name;
          in.fail("dataset", "unknown dataset '" + d.get<std::string>() + "' (built in: " + names +
                                 "; or give {name, size_gb, read_mbs_per_gpu})");
        }
        ds = *known;
      } else if (d.is_object()) {
        for (const auto& kv : d.items()) {
          if (kv.key() != "name" && kv.key() != "size_gb" && kv.key() != "read_mbs_per_gpu") {
            in.fail("dataset." + kv.key(), "unknown key (name, size_gb, read_mbs_per_gpu)");
          }
        }
        const auto field = [&](const char* key, bool positive) {
          const auto it = d.find(key);
          if (it == d.end() || !it->is_number() || !std::isfinite(it->get<double>()) ||
              it->get<double>() < 0 || (positive && it->get<double>() <= 0)) {
            in.fail(std::string("dataset.") + key,
                    std::string("expected a number ") + (positive ? "> 0" : ">= 0"));
          }
          return it->get<double>();
        };
        if (!d.contains("name") || !d["name"].is_string() || d["name"].get<std::string>().empty()) {
          in.fail("dataset.name", "expected a non-empty string");
        }
        ds.name = d["name"].get<std::string>();
        ds.size_gb = field("size_gb", true);
        ds.read_mbs_per_gpu = d.contains("read_mbs_per_gpu") ? field("read_mbs_per_gpu", false) : 0;
      } else {
        in.fail("dataset", "expected a dataset name or {name, size_gb, read_mbs_per_gpu}");
      }
      j.dataset = w.add_dataset(ds);
    }
    j.source = source_of(origin, ln);
    w.jobs.push_back(std::move(j));
  }
  if (!any) throw InputError(input_error_message(origin, 0, "", "empty file (no jobs)"));
}

}  // namespace

std::optional<TraceFormat> parse_trace_format(std::string_view name) {
  for (auto f : {TraceFormat::kPollux, TraceFormat::kPhilly, TraceFormat::kTiresias,
                 TraceFormat::kAlibaba, TraceFormat::kJsonl}) {
    if (to_string(f) == name) return f;
  }
  return std::nullopt;
}

std::string_view to_string(TraceFormat f) {
  switch (f) {
    case TraceFormat::kPollux:
      return "pollux";
    case TraceFormat::kPhilly:
      return "philly";
    case TraceFormat::kTiresias:
      return "tiresias";
    case TraceFormat::kAlibaba:
      return "alibaba";
    case TraceFormat::kJsonl:
      return "jsonl";
  }
  return "jsonl";
}

std::optional<TraceFormat> guess_trace_format_of_line(std::string_view first_line) {
  const std::string_view t = csv::trim(first_line);
  if (!t.empty() && t.front() == '{') return TraceFormat::kJsonl;
  std::vector<std::string_view> cols;
  csv::split(t, cols);
  auto has = [&](std::string_view c) {
    return std::find(cols.begin(), cols.end(), c) != cols.end();
  };
  if (has("application") && has("num_replicas")) return TraceFormat::kPollux;
  if (has("timestamp") && has("num_gpus")) return TraceFormat::kPhilly;
  if (has("job_id") && has("num_gpu")) return TraceFormat::kTiresias;
  if (has("gpu_milli") && has("num_gpu")) return TraceFormat::kAlibaba;
  return std::nullopt;
}

TraceFormat trace_format_for(const std::string& path, const std::string& name) {
  if (name.empty()) return guess_trace_format(path);
  if (auto f = parse_trace_format(name)) return *f;
  throw std::invalid_argument("--format: unknown format '" + name +
                              "' (pollux, philly, tiresias, alibaba, jsonl)");
}

TraceFormat guess_trace_format(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(input_error_message(path, 0, "", "cannot open"));
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    const std::string_view t = csv::trim(line);
    // Comment lines are only legal in JSONL, but skipping them costs nothing here.
    if (t.empty() || t.front() == '#') continue;
    if (auto f = guess_trace_format_of_line(t)) return *f;
    throw InputError(input_error_message(
        path, n, "",
        "cannot tell the trace format from '" + std::string(t.substr(0, 120)) +
            "' (expected a Pollux, Philly, Tiresias or Alibaba CSV header, or a JSON object)"));
  }
  throw InputError(input_error_message(path, 0, "", "empty file"));
}

Workload parse_workload(std::string_view text, const std::string& origin, TraceFormat format,
                        const ReaderOptions& opt) {
  Workload w;
  switch (format) {
    case TraceFormat::kPollux:
      read_pollux(text, origin, opt, w);
      break;
    case TraceFormat::kPhilly:
      read_philly(text, origin, opt, w);
      break;
    case TraceFormat::kTiresias:
      read_tiresias(text, origin, opt, w);
      break;
    case TraceFormat::kAlibaba:
      read_alibaba(text, origin, opt, w);
      break;
    case TraceFormat::kJsonl:
      read_jsonl(text, origin, opt, w);
      break;
  }
  sort_by_submit(w);
  return w;
}

Workload read_workload(const std::string& path, TraceFormat format, const ReaderOptions& opt) {
  return parse_workload(csv::read_file(path), path, format, opt);
}

void write_jsonl(const Workload& w, std::ostream& out, const GpuTypeTable* gpu_types) {
  for (const JobSpec& j : w.jobs) {
    nlohmann::ordered_json o;
    o["name"] = j.name;
    o["tenant"] = w.tenants.name(j.tenant);
    o["priority"] = std::string(to_string(j.priority));
    o["submit"] = j.submit_time;
    if (j.min_members == j.max_members) {
      o["members"] = j.min_members;
    } else {
      o["min_members"] = j.min_members;
      o["max_members"] = j.max_members;
    }
    o["gpus"] = j.demand.gpus;
    if (j.demand.gpu_milli != kMilliPerGpu) o["gpu_milli"] = j.demand.gpu_milli;
    if (j.demand.cpu_milli != 0) o["cpu_milli"] = j.demand.cpu_milli;
    if (j.demand.mem_mib != 0) o["mem_mib"] = j.demand.mem_mib;
    if (j.allowed_types != kAnyGpuType) {
      if (gpu_types == nullptr) {
        throw std::invalid_argument("write_jsonl: job " + j.name +
                                    " has GPU type constraints but no GPU type table was given");
      }
      auto names = nlohmann::ordered_json::array();
      for (size_t t = 0; t < 64; ++t) {
        if ((j.allowed_types >> t) & 1u)
          names.push_back(gpu_types->at(static_cast<GpuTypeId>(t)).name);
      }
      o["gpu_types"] = std::move(names);
    }
    if (j.work_seconds != kUnknown) o["work"] = j.work_seconds;
    if (j.duration_estimate != kUnknown) o["duration_estimate"] = j.duration_estimate;
    if (j.model != kNoId) o["model"] = w.models.name(j.model);
    if (j.batch_size != 0) o["batch_size"] = j.batch_size;
    if (j.checkpoint_interval != 0) o["checkpoint_interval"] = j.checkpoint_interval;
    if (j.restart_cost != 0) o["restart_cost"] = j.restart_cost;
    if (j.sla_max_queueing >= 0) o["sla"] = j.sla_max_queueing;
    if (j.model_params > 0) o["params"] = j.model_params;
    if (j.step_seconds > 0) o["step_seconds"] = j.step_seconds;
    if (j.dataset != kNoId) {
      const Dataset& d = w.datasets[j.dataset];
      const auto known = known_dataset(d.name);
      if (known && known->size_gb == d.size_gb && known->read_mbs_per_gpu == d.read_mbs_per_gpu) {
        o["dataset"] = d.name;
      } else {
        o["dataset"] = {
            {"name", d.name}, {"size_gb", d.size_gb}, {"read_mbs_per_gpu", d.read_mbs_per_gpu}};
      }
    }
    if (j.max_span != Level::kCluster) {
      o["span"] = std::string(level_name(j.max_span));
    }
    if (!j.site.empty()) o["site"] = j.site;
    if (j.service != kNoId) {
      const InferenceService& sv = w.services[j.service];
      o["service"] = {{"region", sv.region},
                      {"latency_slo_ms", sv.latency_slo_ms},
                      {"request_rate", sv.request_rate},
                      {"request_kb", sv.request_kb},
                      {"response_kb", sv.response_kb},
                      {"service_ms", sv.service_ms}};
    }
    out << o.dump() << '\n';
  }
}

}  // namespace tessera

#include "sim/alibaba_reader.h"

#include "model/csv.h"
#include "model/input_error.h"

namespace tessera {

namespace {

std::string_view header_line(csv::LineReader& lines, const std::string& origin) {
  std::string_view line;
  while (lines.next(line)) {
    if (!csv::is_blank(line)) return line;
  }
  throw InputError(input_error_message(origin, 0, "", "empty file"));
}

constexpr int64_t kMaxMilli = int64_t{1} << 40;

}  // namespace

int64_t AlibabaCluster::total_gpus() const {
  int64_t t = 0;
  for (const auto& n : nodes) t += n.num_gpus;
  return t;
}

AlibabaCluster parse_alibaba_nodes(std::string_view text, const std::string& origin) {
  csv::LineReader lines(text);
  const std::string_view head = header_line(lines, origin);
  const csv::Header h(head, {"sn", "cpu_milli", "memory_mib", "gpu", "model"}, {}, origin,
                      lines.line_number(), "Alibaba node list");
  const int c_sn = h.index("sn"), c_cpu = h.index("cpu_milli"), c_mem = h.index("memory_mib"),
            c_gpu = h.index("gpu"), c_model = h.index("model");
  csv::Row row(origin, h);
  AlibabaCluster c;
  std::string_view line;
  while (lines.next(line)) {
    if (csv::is_blank(line)) continue;
    row.reset(line, lines.line_number());
    frag::NodeSpec n;
    if (row.empty(c_sn)) row.fail(c_sn, "must not be empty");
    n.cpu_milli = row.integer(c_cpu, 0, kMaxMilli);
    n.mem_mib = row.integer(c_mem, 0, kMaxMilli);
    n.num_gpus = static_cast<int>(row.integer(c_gpu, 0, frag::kMaxGpus));
    const std::string model(row.str(c_model));
    if (n.num_gpus > 0 && model.empty()) row.fail(c_model, "a GPU node needs a model");
    size_t m = 0;
    while (m < c.models.size() && c.models[m] != model) ++m;
    if (m == c.models.size()) {
      if (m >= 32) row.fail(c_model, "more than 32 GPU models");
      c.models.push_back(model);
    }
    n.model = static_cast<int>(m);
    c.node_names.emplace_back(row.str(c_sn));
    c.nodes.push_back(n);
  }
  if (c.nodes.empty()) throw InputError(input_error_message(origin, 0, "", "no nodes"));
  return c;
}

AlibabaPods parse_alibaba_pods(std::string_view text, const std::string& origin,
                               const AlibabaCluster& cluster) {
  csv::LineReader lines(text);
  const std::string_view head = header_line(lines, origin);
  const csv::Header h(
      head, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"},
      {"gpu_spec", "qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time"}, origin,
      lines.line_number(), "Alibaba pod list");
  const int c_name = h.index("name"), c_cpu = h.index("cpu_milli"), c_mem = h.index("memory_mib"),
            c_num = h.index("num_gpu"), c_milli = h.index("gpu_milli"),
            c_spec = h.index("gpu_spec");
  csv::Row row(origin, h);
  AlibabaPods out;
  std::string_view line;
  while (lines.next(line)) {
    if (csv::is_blank(line)) continue;
    row.reset(line, lines.line_number());
    frag::PodSpec p;
    if (row.empty(c_name)) row.fail(c_name, "must not be empty");
    p.cpu_milli = row.integer(c_cpu, 0, kMaxMilli);
    p.mem_mib = row.integer(c_mem, 0, kMaxMilli);
    p.num_gpus = static_cast<int>(row.integer(c_num, 0, frag::kMaxGpus));
    p.gpu_milli = static_cast<int32_t>(row.integer(c_milli, 0, frag::kMilli));
    if (p.num_gpus > 1 && p.gpu_milli != 0 && p.gpu_milli != frag::kMilli) {
      row.fail(c_milli, "a pod of several GPUs must take whole GPUs (1000)");
    }
    if (p.num_gpus == 0) p.gpu_milli = 0;
    if (p.gpu_milli == 0) p.num_gpus = 0;
    if (!row.empty(c_spec)) {
      p.models = 0;
      std::string_view spec = row.str(c_spec);
      while (!spec.empty()) {
        const size_t bar = spec.find('|');
        const std::string_view one = csv::trim(spec.substr(0, bar));
        for (size_t m = 0; m < cluster.models.size(); ++m) {
          if (!one.empty() && cluster.models[m] == one) p.models |= 1u << m;
        }
        if (bar == std::string_view::npos) break;
        spec.remove_prefix(bar + 1);
      }
    }
    out.names.emplace_back(row.str(c_name));
    out.pods.push_back(p);
  }
  if (out.pods.empty()) throw InputError(input_error_message(origin, 0, "", "no pods"));
  return out;
}

AlibabaCluster read_alibaba_nodes(const std::string& path) {
  return parse_alibaba_nodes(csv::read_file(path), path);
}

AlibabaPods read_alibaba_pods(const std::string& path, const AlibabaCluster& cluster) {
  return parse_alibaba_pods(csv::read_file(path), path, cluster);
}

}  // namespace tessera

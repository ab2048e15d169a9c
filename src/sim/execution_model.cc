#include "sim/execution_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "model/input_error.h"
#include "sim/gavel_throughput.h"
#include "sim/pollux_profile.h"

namespace tessera {

PlacementShape shape_of(const Cluster& cluster, const Allocation& a) {
  PlacementShape s;
  s.gpus_per_member = a.gpus_per_member;
  std::vector<NodeId> nodes = a.member_node;
  std::sort(nodes.begin(), nodes.end());
  std::vector<RackId> racks;
  std::vector<SpineId> spines;
  for (size_t i = 0; i < nodes.size();) {
    size_t j = i;
    while (j < nodes.size() && nodes[j] == nodes[i]) ++j;
    s.members_per_node.push_back(static_cast<uint16_t>(j - i));
    const Node& n = cluster.node(nodes[i]);
    racks.push_back(n.rack);
    spines.push_back(cluster.racks()[n.rack].spine);
    // The slowest GPU paces a synchronous gang.
    if (i == 0 || cluster.gpu_types().at(n.gpu_type).relative_speed <
                      cluster.gpu_types().at(s.slowest_type).relative_speed) {
      s.slowest_type = n.gpu_type;
    }
    i = j;
  }
  std::sort(s.members_per_node.begin(), s.members_per_node.end(), std::greater<>());
  std::sort(racks.begin(), racks.end());
  std::sort(spines.begin(), spines.end());
  s.nodes = static_cast<uint32_t>(s.members_per_node.size());
  s.racks = static_cast<uint32_t>(std::unique(racks.begin(), racks.end()) - racks.begin());
  s.spines = static_cast<uint32_t>(std::unique(spines.begin(), spines.end()) - spines.begin());
  // The smallest share held (the member with the least GPU paces the gang); 0 for an
  // allocation without GPUs (a CPU-only pod).
  if (a.shares.empty()) {
    s.gpu_milli = 0;
  } else {
    s.gpu_milli = a.shares.front().milli;
    for (const auto& sh : a.shares) s.gpu_milli = std::min(s.gpu_milli, sh.milli);
  }
  return s;
}

// Speed of a GPU type relative to V100 from the relative-speed table (model/gpu_type.cc).
double relative_to_v100(const GpuTypeTable& types, GpuTypeId t) {
  const auto v100 = types.find("V100");
  const double base = v100 ? types.at(*v100).relative_speed : 1.0;
  return types.at(t).relative_speed / base;
}

namespace {

// The composite measured model (docs/execution-model.md): per job, by its model name,
// Pollux's application profile, else Gavel's throughputs, else the relative-speed table.
class MeasuredExecutionModel final : public ExecutionModel {
 public:
  explicit MeasuredExecutionModel(const std::string& data_dir) {
    namespace fs = std::filesystem;
    const fs::path base(data_dir);
    pollux_ = PolluxProfiles::load((base / "philly" / "pollux" / "applications").string());
    const fs::path gavel = base / "philly" / "gavel" / "simulation_throughputs.json";
    if (fs::exists(gavel)) gavel_ = GavelThroughputs::load(gavel.string());
  }

  void prepare(JobSpec& job, const Workload& w, const Cluster& c) const override {
    fill_type_speed(job, w, c);
    const std::string_view model = model_name(job, w);
    if (const PolluxApplication* app = pollux_.find(model)) {
      // A duration given by the trace wins; Pollux's workloads give none.
      if (job.work_seconds > 0) return;
      const std::vector<int> ref = reference_placement(job, c);
      const double work = pollux_work(*app, pollux_batch(*app, job), ref);
      if (!(work > 0) || !std::isfinite(work)) {
        throw InputError(input_error_message(job.source, 0, "batch_size",
                                             "Pollux profile of " + app->name() +
                                                 " gives no finite work for batch " +
                                                 std::to_string(job.batch_size)));
      }
      job.work_seconds = work;
      return;
    }
    if (!(job.work_seconds > 0) || !std::isfinite(job.work_seconds)) {
      throw InputError(input_error_message(
          job.source, 0, "work_seconds",
          "job '" + job.name + "' has no duration and its model '" + std::string(model) +
              "' is not a Pollux application with a profile in the data folder"));
    }
  }

  double speed(const JobSpec& job, const Workload& w, const PlacementShape& shape,
               const Cluster& c) const override {
    const GpuTypeTable& types = c.gpu_types();
    const std::string_view model = model_name(job, w);
    if (const PolluxApplication* app = pollux_.find(model)) {
      const double type = relative_to_v100(types, shape.slowest_type);
      if (shape.members_per_node.empty()) return type;
      // Replicas are GPUs; list nodes ascending (Pollux's canonical rotation of a sorted
      // placement).
      const int per_member = std::max(1, shape.gpus_per_member);
      std::vector<int> placement;
      for (auto it = shape.members_per_node.rbegin(); it != shape.members_per_node.rend(); ++it) {
        placement.push_back(int{*it} * per_member);
      }
      const int batch = pollux_batch(*app, job);
      const double ref = pollux_work(*app, batch, reference_placement(job, c));
      return ref / pollux_work(*app, batch, placement) * type;
    }
    // An elastic gang below its maximum size runs proportionally slower (perfect scaling is
    // assumed where nothing measured says otherwise).
    const double gang = shape.members() > 0
                            ? static_cast<double>(shape.members()) / std::max(1, job.max_members)
                            : 1.0;
    if (gavel_ && gavel_->has_model(model)) return gavel_->speed(model, shape, types) * gang;
    // Generic: only the GPU type matters. A fractional share (Alibaba gpu_milli < 1000) does
    // not slow the job: Alibaba pod durations are observed with the share already in effect.
    // A CPU-only pod holds no GPU, so no GPU type applies.
    if (shape.gpus_per_member == 0 || shape.members_per_node.empty()) return gang;
    return relative_to_v100(types, shape.slowest_type) * gang;
  }

 private:
  static std::string_view model_name(const JobSpec& job, const Workload& w) {
    if (job.model == kNoId || job.model >= w.models.size()) return {};
    return w.models.name(job.model);
  }

  // What heterogeneity-aware placement ranks GPU types by: Gavel's measured single-GPU
  // throughput on each type relative to V100 for its models, else the relative-speed table.
  // Memoised per model (every job of a model gets the same vector; a trace has few models).
  void fill_type_speed(JobSpec& job, const Workload& w, const Cluster& c) const {
    const GpuTypeTable& types = c.gpu_types();
    const std::string_view model = model_name(job, w);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = type_speed_memo_.find(model);
      if (it != type_speed_memo_.end() && it->second.size() == types.size()) {
        job.type_speed = it->second;
        return;
      }
    }
    const bool gavel = gavel_ && !pollux_.find(model) && gavel_->has_model(model);
    std::vector<float> speed(types.size(), 0.0F);
    for (GpuTypeId t = 0; t < types.size(); ++t) {
      speed[t] = static_cast<float>(gavel ? gavel_->type_factor(model, types.at(t))
                                          : relative_to_v100(types, t));
    }
    job.type_speed = speed;
    std::lock_guard<std::mutex> lock(mu_);
    type_speed_memo_[std::string(model)] = std::move(speed);
  }

  // The job's replicas (GPUs) at its full size.
  static int reference_replicas(const JobSpec& job) {
    return std::max(1, job.max_members) * std::max(1, job.demand.gpus);
  }

  // Consolidated: the replicas packed onto nodes of the largest GPU count the job may use.
  static std::vector<int> reference_placement(const JobSpec& job, const Cluster& c) {
    int per_node = static_cast<int>(c.max_gpus_per_node(job.allowed_types));
    if (per_node <= 0) per_node = c.max_node_gpus() > 0 ? c.max_node_gpus() : 4;
    std::vector<int> p;
    for (int left = reference_replicas(job); left > 0; left -= per_node) {
      p.push_back(std::min(left, per_node));
    }
    std::reverse(p.begin(), p.end());  // ascending, as speed() lists placements
    return p;
  }

  // The job's fixed global batch; Pollux's own default where the trace gives none.
  static int pollux_batch(const PolluxApplication& app, const JobSpec& job) {
    if (job.batch_size > 0) return job.batch_size;
    return std::max(app.init_batch_size(), app.min_local_bsz() * reference_replicas(job));
  }

  // Memoised: prepare() runs once per job but speed() on every start.
  double pollux_work(const PolluxApplication& app, int batch,
                     const std::vector<int>& placement) const {
    std::string key = app.name();
    key += '/';
    key += std::to_string(batch);
    for (int k : placement) {
      key += ',';
      key += std::to_string(k);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = memo_.find(key);
      if (it != memo_.end()) return it->second;
    }
    const double work = app.work_seconds(placement, batch);
    std::lock_guard<std::mutex> lock(mu_);
    memo_.emplace(std::move(key), work);
    return work;
  }

  PolluxProfiles pollux_;
  std::optional<GavelThroughputs> gavel_;
  // Guards memo_ so one model may serve simulations on several threads.
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, double> memo_;
  mutable std::map<std::string, std::vector<float>, std::less<>> type_speed_memo_;
};

}  // namespace

std::unique_ptr<ExecutionModel> make_measured_execution_model(const std::string& data_dir) {
  return std::make_unique<MeasuredExecutionModel>(data_dir);
}

}  // namespace tessera

#include "sim/comm_execution_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <utility>
#include <vector>

#include "insight/comm_cost.h"
#include "sim/gavel_throughput.h"
#include "sim/pollux_profile.h"

namespace tessera {

namespace {

struct ModelSize {
  std::string_view name;
  double params;
};

// Parameter counts; sources in docs/execution-model.md ("Model sizes").
constexpr ModelSize kModelSizes[] = {
    // Pollux applications (petuum/adaptdl examples).
    {"bert", 110e6},        // BERT-base (Devlin et al. 2019), fine-tuned on SQuAD
    {"cifar10", 11.2e6},    // ResNet-18, CIFAR-10 variant
    {"imagenet", 25.6e6},   // ResNet-50 (He et al. 2016)
    {"yolov3", 61.9e6},     // YOLOv3-416 (Redmon & Farhadi 2018)
    {"deepspeech2", 41e6},  // estimate: 2 conv + 5 bi-GRU layers of 800 (deepspeech.pytorch)
    {"ncf", 1.6e6},         // estimate: NeuMF on MovieLens-1M, 32 factors, 3 MLP layers
    // Gavel model classes (the part of the name before " (batch size ...)").
    {"ResNet-18", 11.2e6},     // CIFAR-10 variant
    {"ResNet-50", 25.6e6},     // ImageNet
    {"Transformer", 54e6},     // estimate: base Transformer (6+6 layers, d=512) on Multi30k
    {"LM", 14e6},              // estimate: 2-layer LSTM, 200 units, Wikitext-2 vocabulary
    {"Recommendation", 28e6},  // estimate: autoencoder recommender on ML-20M
    {"CycleGAN", 28.3e6},      // 2 ResNet generators (11.4M) + 2 PatchGAN discriminators (2.8M)
    {"A3C", 3.3e6},            // estimate: Atari conv + LSTM actor-critic
};

std::string_view base_name(std::string_view model) {
  const size_t paren = model.find(" (");
  return paren == std::string_view::npos ? model : model.substr(0, paren);
}

std::string_view model_name(const JobSpec& job, const Workload& w) {
  if (job.model == kNoId || job.model >= w.models.size()) return {};
  return w.models.name(job.model);
}

int replicas_of(const JobSpec& job) {
  return std::max(1, job.max_members) * std::max(1, job.demand.gpus);
}

// The reference placement of the measured model: the replicas packed onto nodes of the
// largest GPU count the job may use, ascending.
std::vector<int> reference_placement(const JobSpec& job, const Cluster& c) {
  int per_node = static_cast<int>(c.max_gpus_per_node(job.allowed_types));
  if (per_node <= 0) per_node = c.max_node_gpus() > 0 ? c.max_node_gpus() : 4;
  std::vector<int> p;
  for (int left = replicas_of(job); left > 0; left -= per_node) {
    p.push_back(std::min(left, per_node));
  }
  std::reverse(p.begin(), p.end());
  return p;
}

// Reference step times from Pollux's profiles and Gavel's throughputs.
class MeasuredReferenceStep {
 public:
  explicit MeasuredReferenceStep(const std::string& data_dir) {
    namespace fs = std::filesystem;
    const fs::path base(data_dir);
    pollux_ = std::make_shared<PolluxProfiles>(
        PolluxProfiles::load((base / "philly" / "pollux" / "applications").string()));
    const fs::path gavel = base / "philly" / "gavel" / "simulation_throughputs.json";
    if (fs::exists(gavel)) {
      gavel_ = std::make_shared<GavelThroughputs>(GavelThroughputs::load(gavel.string()));
    }
  }

  double operator()(const JobSpec& job, const Workload& w, const Cluster& c) const {
    const std::string_view model = model_name(job, w);
    const int replicas = replicas_of(job);
    if (const PolluxApplication* app = pollux_->find(model)) {
      const int batch = job.batch_size > 0
                            ? job.batch_size
                            : std::max(app->init_batch_size(), app->min_local_bsz() * replicas);
      const double t =
          app->iteration_time(reference_placement(job, c), app->batch_config(batch, replicas));
      return std::isfinite(t) && t > 0 ? t : 0.0;
    }
    if (gavel_ && gavel_->has_model(model)) {
      for (int scale = 8; scale >= 1; scale /= 2) {
        if (scale > replicas) continue;
        if (auto thr = gavel_->throughput("v100", model, scale)) return 1.0 / *thr;
      }
    }
    return 0.0;
  }

 private:
  // Shared so that copies of the callable (std::function) do not copy the profiles.
  std::shared_ptr<const PolluxProfiles> pollux_;
  std::shared_ptr<const GavelThroughputs> gavel_;
};

}  // namespace

double model_parameters(std::string_view model) {
  const std::string_view base = base_name(model);
  for (const ModelSize& m : kModelSizes) {
    if (m.name == base) return m.params;
  }
  return 0.0;
}

double gradient_bytes(std::string_view model) {
  return 4.0 * model_parameters(model);
}

double extra_allreduce_s(const Cluster& cluster, const PlacementShape& shape, double bytes) {
  if (!(bytes > 0) || shape.nodes <= 1) return 0.0;
  Level outermost = Level::kRack;
  if (shape.spines > 1) {
    outermost = Level::kCluster;
  } else if (shape.racks > 1) {
    outermost = Level::kSpine;
  } else {
    return 0.0;  // inside one rack: the measurement includes it
  }
  const CommLevels levels = comm_levels(cluster);
  const int m = static_cast<int>(shape.nodes);
  const double across = ring_allreduce_s(bytes, m, levels, outermost);
  const double in_rack = ring_allreduce_s(bytes, m, levels, Level::kRack);
  return std::max(0.0, across - in_rack);
}

CommExecutionModel::CommExecutionModel(std::unique_ptr<ExecutionModel> inner,
                                       ReferenceStepTime reference_step)
    : inner_(std::move(inner)), reference_step_(std::move(reference_step)) {}

void CommExecutionModel::prepare(JobSpec& job, const Workload& w, const Cluster& c) const {
  inner_->prepare(job, w, c);
}

double CommExecutionModel::speed(const JobSpec& job, const Workload& w, const PlacementShape& shape,
                                 const Cluster& c) const {
  const double s = inner_->speed(job, w, shape, c);
  // The job's own figures (JSONL `params`, `step_seconds`) win over the model-name table.
  const double bytes =
      job.model_params > 0 ? 4.0 * job.model_params : gradient_bytes(model_name(job, w));
  const double delta = extra_allreduce_s(c, shape, bytes);
  if (!(delta > 0) || !(s > 0)) return s;
  const double t_ref = job.step_seconds > 0 ? job.step_seconds
                       : reference_step_    ? reference_step_(job, w, c)
                                            : 0.0;
  if (!(t_ref > 0) || !std::isfinite(t_ref)) return s;
  return s * t_ref / (t_ref + s * delta);
}

std::unique_ptr<ExecutionModel> make_comm_execution_model(std::unique_ptr<ExecutionModel> inner,
                                                          const std::string& data_dir) {
  return std::make_unique<CommExecutionModel>(std::move(inner), MeasuredReferenceStep(data_dir));
}

}  // namespace tessera

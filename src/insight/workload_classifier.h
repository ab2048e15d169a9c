// Workload classification (docs/classifier.md): from what a job declares when it is
// submitted (resources, gang shape, GPU share and type constraints, tenant, name, command) and
// from the jobs of its kind that finished before it, predict what kind of work it is and how
// long it will run. A job that names no priority class gets the defaults its predicted kind
// implies (defaults_for); a class the user set always wins, so the prediction only fills gaps.
//
// Classifiers learn online, as the runtime predictors do: observe() each job once it has
// finished (its true kind and how long it ran), predict() each job as it arrives. Nothing else
// reaches them, so an evaluation that calls observe() only for jobs finished before a
// submission cannot peek.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/job.h"

namespace tessera {

enum class WorkloadKind : uint8_t {
  kServing = 0,      // latency-sensitive: a service answering requests, runs until stopped
  kTraining = 1,     // long throughput work that checkpoints (gangs, many GPUs)
  kBatch = 2,        // short throughput work that can wait or be redone
  kInteractive = 3,  // a person waits on it (notebooks, debugging): short, latency-sensitive
};
inline constexpr size_t kWorkloadKinds = 4;
std::string_view to_string(WorkloadKind k);
bool parse_workload_kind(std::string_view s, WorkloadKind& out);

// Expected duration, in the classes a scheduler plans with.
enum class DurationClass : uint8_t {
  kUnder10Min = 0,
  kUnderHour = 1,    // 10 min .. 1 h
  kUnder6Hours = 2,  // 1 h .. 6 h
  kOver6Hours = 3,
};
inline constexpr size_t kDurationClasses = 4;
std::string_view to_string(DurationClass d);  // "<10m", "10m-1h", "1h-6h", ">6h"
DurationClass duration_class_of(double seconds);

// What a job declares at submission. Per member unless said otherwise.
struct WorkloadFeatures {
  int64_t cpu_milli = 0;
  int64_t mem_mib = 0;
  int32_t gpus = 0;            // whole GPUs (1 for a share of one)
  int32_t gpu_milli = 1000;    // share of each GPU; < 1000 = a fraction of one
  int32_t members = 1;         // gang size (its minimum)
  int32_t gpu_type_count = 0;  // GPU types it is restricted to; 0 = any
  std::string tenant;
  std::string name;
  std::vector<std::string> command;  // argv, where known (serve); empty in traces
  bool operator==(const WorkloadFeatures&) const = default;
};
// The features of a job spec; `tenant` is its tenant's name.
WorkloadFeatures workload_features(const JobSpec& s, std::string_view tenant,
                                   std::vector<std::string> command = {});

struct WorkloadPrediction {
  WorkloadKind kind = WorkloadKind::kBatch;
  DurationClass duration = DurationClass::kUnderHour;
  double confidence = 0;             // the predicted kind's probability (or share), in [0, 1]
  std::string_view source = "none";  // which model or fallback answered
};

class WorkloadClassifier {
 public:
  virtual ~WorkloadClassifier() = default;
  virtual std::string_view name() const = 0;
  virtual WorkloadPrediction predict(const WorkloadFeatures& f) const = 0;
  // A finished job, its true kind and how long it ran (seconds >= 0).
  virtual void observe(const WorkloadFeatures& f, WorkloadKind kind, double seconds) = 0;
};

// The baseline that ignores the job: the kind (and duration class) seen most often among the
// finished jobs so far; batch / 10m-1h before any has finished.
std::unique_ptr<WorkloadClassifier> make_majority_classifier();

// The resource-threshold rule (it learns nothing):
//   members > 1, or 8 or more whole GPUs     -> training, 1h-6h
//   a share of one GPU (gpu_milli < 1000)    -> batch, <10m
//   anything else (whole GPUs, or CPU only)  -> serving, 10m-1h
// Its one cut is the whole GPU: a job that shares a GPU is small throughput work packed next
// to others, one that takes whole GPUs (or only CPUs) on its own is a service; big or gang
// jobs train. Confidence is 1/2 (a rule has no probability).
std::unique_ptr<WorkloadClassifier> make_threshold_classifier();

// Online multinomial logistic regression over hashed features, one softmax for the kind and
// one for the duration class, trained by one AdaGrad step per observed job (McMahan et al.,
// "Ad click prediction", KDD'13, without the L1 part). Features (all indicator tokens hashed
// into 2^hash_bits weights, FNV-1a):
//   - the request: GPUs, GPU share, whether shared / whole / CPU-only, log2 buckets of CPU
//     and memory, gang size, GPU-type count, and their exact cross (the job's "shape");
//   - who and what: tenant, the name's digit-free tokens and its name_class(), tenant x name
//     class, the command's digit-free tokens (program basename and arguments);
//   - history (target encoding, only from finished jobs): for the job's shape, tenant and
//     name class, the share of each kind and duration class among the finished jobs with the
//     same key, as real-valued features, and an indicator when there are none.
// Until the first job has finished it answers with the threshold rule. Deterministic: no
// randomness, the same observations in the same order give the same weights.
struct LogisticClassifierOptions {
  uint32_t hash_bits = 16;
  double learning_rate = 0.3;
};
std::unique_ptr<WorkloadClassifier> make_logistic_classifier(LogisticClassifierOptions o = {});

// "majority", "threshold" or "logistic"; nullptr for anything else.
std::unique_ptr<WorkloadClassifier> make_workload_classifier(std::string_view name);
std::vector<std::string> workload_classifier_names();

// What a predicted kind means for a job that names none of these itself (docs/classifier.md).
// A guess never gives a job the top class (inference-critical), which may preempt anything:
// that stays a label a person sets.
struct KindDefaults {
  PriorityClass priority = PriorityClass::kResearch;
  // Whether work of a higher class may take its GPUs: implied by the class (a job may preempt
  // only jobs of a strictly lower class), stated for the reader.
  bool preemptible = true;
  double checkpoint_grace_seconds = 30;  // SIGTERM .. SIGKILL when it is preempted
};
KindDefaults defaults_for(WorkloadKind k);
// The kind a job labelled with class `p` is taken to be, to learn from labelled jobs:
// inference-critical and production -> serving, research -> training, best-effort -> batch.
WorkloadKind kind_of_class(PriorityClass p);

}  // namespace tessera

// Workload-classification accuracy on a labelled trace (docs/classifier.md), and
// the classifier's defaults applied to a simulated workload. Both replay jobs in submission
// order and show a classifier a job only once it has finished before the current submission:
// a label is never used before it is known.
#pragma once

#include <array>
#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "insight/workload_classifier.h"
#include "model/job.h"
#include "model/progress.h"
#include "model/queue_tree.h"

namespace tessera {

struct LabelledJob {
  WorkloadFeatures features;
  WorkloadKind kind = WorkloadKind::kBatch;
  double submit = 0;
  double end = -1;     // when its label becomes known (it finished); < 0: never
  std::string source;  // "file:line"
};

// Alibaba's GPU trace (openb_pod_list_*.csv with the qos and time columns): one job per pod,
// submitted at creation_time, known at deletion_time. The qos column is the label:
//   LS -> serving; BE -> batch; Guaranteed -> serving; Burstable -> batch
// (Kubernetes' Guaranteed pods have requests equal to limits and are the last to be evicted,
// as LS pods are; Burstable pods may use more than they asked for and are throttled or
// evicted first under pressure, as BE pods are.) Anything else is an InputError naming the
// file, line and column; so is a file without the qos, creation_time or deletion_time column.
// `raw_labels` (when given) counts the qos values as written.
std::vector<LabelledJob> read_alibaba_labelled(const std::string& path, size_t max_jobs = 0,
                                               std::map<std::string, size_t>* raw_labels = nullptr);
std::vector<LabelledJob> parse_alibaba_labelled(
    std::string_view text, const std::string& origin, size_t max_jobs = 0,
    std::map<std::string, size_t>* raw_labels = nullptr);

// The classes accuracy is reported in: a name for each, and the class of each kind. The
// default reports the four kinds; alibaba_qos_classes() folds them into the trace's two:
// LS = serving or interactive (latency-sensitive), BE = training or batch.
struct ReportClasses {
  std::vector<std::string> names;
  std::array<size_t, kWorkloadKinds> of_kind{};
};
ReportClasses kind_classes();
ReportClasses alibaba_qos_classes();

struct ClassifierScore {
  std::string name;
  size_t jobs = 0;  // jobs scored
  std::vector<std::string> classes;
  std::vector<std::vector<size_t>> confusion;  // [actual][predicted]
  double accuracy = 0;
  std::vector<double> recall, precision;  // per class; NaN where undefined (no such jobs)
  double macro_recall = 0;                // mean recall over classes with jobs
  double duration_accuracy = 0;           // duration class (submit .. end) right
  std::vector<std::vector<size_t>> duration_confusion;  // [actual][predicted], 4 x 4
  double mean_confidence = 0;
  std::map<std::string, size_t> sources;  // which model or fallback answered, how often
};

struct ClassificationEvalOptions {
  ReportClasses classes = kind_classes();
  size_t skip = 0;      // jobs scored only from this index on (all are learnt from)
  ProgressFn progress;  // every 4,096 jobs (null: never)
};

// Replays `jobs` in submit order (stable): before job i is predicted, every job whose end is
// strictly before its submit has been observed, in end order, with its kind and end - submit
// as its duration. Jobs that never end are scored but never observed. Classifiers are fed in
// place.
std::vector<ClassifierScore> evaluate_classifiers(const std::vector<LabelledJob>& jobs,
                                                  std::span<WorkloadClassifier* const> classifiers,
                                                  const ClassificationEvalOptions& opt = {});

nlohmann::ordered_json to_json(const ClassifierScore& s);

// simulate --classify: jobs that name no priority class (priority_given false) get the class
// their predicted kind implies (defaults_for), where their queue allows it (else they keep the
// queue's default). Labelled jobs teach the classifier (kind_of_class of their class) once they
// would have finished: at submit + their trace duration (work_seconds; the trace gives no
// queueing delay), as the duration-prediction replay does. `tenants` names the tenants;
// `queues` (optional) is bound to them. Returns how many jobs got each kind.
struct ClassifiedDefaults {
  size_t labelled = 0, classified = 0, kept_queue_default = 0;
  std::array<size_t, kWorkloadKinds> kinds{};
};
ClassifiedDefaults apply_classified_defaults(Workload& w, WorkloadClassifier& c,
                                             const QueueTree* queues = nullptr);

}  // namespace tessera

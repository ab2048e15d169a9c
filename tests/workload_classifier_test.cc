// The workload classifier: one behaviour suite every classifier passes, the
// learnt one on small inputs, the no-peeking replay, simulate's defaults, and a slice of the
// real Alibaba trace.
#include "insight/workload_classifier.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "model/input_error.h"
#include "sim/classification_eval.h"

namespace tessera {
namespace {

WorkloadFeatures service(const std::string& name = "web-serve") {
  WorkloadFeatures f;
  f.cpu_milli = 8000;
  f.mem_mib = 16384;
  f.gpus = 1;
  f.gpu_milli = 1000;
  f.tenant = "team-a";
  f.name = name;
  f.command = {"python", "serve.py", "--port=8080"};
  return f;
}

WorkloadFeatures sweep(const std::string& name = "sweep-lr-7") {
  WorkloadFeatures f;
  f.cpu_milli = 2000;
  f.mem_mib = 4096;
  f.gpus = 1;
  f.gpu_milli = 250;
  f.tenant = "team-b";
  f.name = name;
  f.command = {"python", "train.py", "--lr=0.1"};
  return f;
}

class EveryClassifier : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<WorkloadClassifier> make() const {
    auto c = make_workload_classifier(GetParam());
    EXPECT_NE(c, nullptr);
    return c;
  }
};

TEST_P(EveryClassifier, NamesItselfAndAnswersBeforeLearning) {
  auto c = make();
  EXPECT_EQ(c->name(), GetParam());
  const WorkloadPrediction p = c->predict(service());
  EXPECT_GE(p.confidence, 0.0);
  EXPECT_LE(p.confidence, 1.0);
  EXPECT_NE(p.source, "");
}

TEST_P(EveryClassifier, IsDeterministic) {
  auto a = make();
  auto b = make();
  for (int i = 0; i < 20; ++i) {
    for (auto* c : {a.get(), b.get()}) {
      c->observe(service(), WorkloadKind::kServing, 86400);
      c->observe(sweep(), WorkloadKind::kBatch, 120);
    }
  }
  for (const WorkloadFeatures& f : {service(), sweep()}) {
    const WorkloadPrediction pa = a->predict(f), pb = b->predict(f);
    EXPECT_EQ(pa.kind, pb.kind);
    EXPECT_EQ(pa.duration, pb.duration);
    EXPECT_DOUBLE_EQ(pa.confidence, pb.confidence);
  }
}

TEST_P(EveryClassifier, ConfidenceStaysAProbabilityAfterLearning) {
  auto c = make();
  for (int i = 0; i < 50; ++i) c->observe(sweep(), WorkloadKind::kBatch, 60.0 * i);
  for (const WorkloadFeatures& f : {service(), sweep(), WorkloadFeatures{}}) {
    const WorkloadPrediction p = c->predict(f);
    EXPECT_GE(p.confidence, 0.0);
    EXPECT_LE(p.confidence, 1.0);
  }
}

// Every classifier is at least as good as always answering the most common kind, on a
// stream where that kind is also what the rule says.
TEST_P(EveryClassifier, PredictsTheOnlyKindItHasSeenForAFamiliarJob) {
  auto c = make();
  for (int i = 0; i < 30; ++i) c->observe(sweep(), WorkloadKind::kBatch, 120);
  EXPECT_EQ(c->predict(sweep()).kind, WorkloadKind::kBatch);
}

INSTANTIATE_TEST_SUITE_P(WorkloadClassifier, EveryClassifier,
                         ::testing::ValuesIn(workload_classifier_names()));

TEST(WorkloadClassifier, UnknownNameIsNull) {
  EXPECT_EQ(make_workload_classifier("oracle"), nullptr);
}

TEST(WorkloadClassifier, DurationClasses) {
  EXPECT_EQ(duration_class_of(0), DurationClass::kUnder10Min);
  EXPECT_EQ(duration_class_of(599), DurationClass::kUnder10Min);
  EXPECT_EQ(duration_class_of(600), DurationClass::kUnderHour);
  EXPECT_EQ(duration_class_of(3600), DurationClass::kUnder6Hours);
  EXPECT_EQ(duration_class_of(6 * 3600), DurationClass::kOver6Hours);
}

TEST(WorkloadClassifier, ThresholdRule) {
  auto c = make_threshold_classifier();
  EXPECT_EQ(c->predict(service()).kind, WorkloadKind::kServing);
  EXPECT_EQ(c->predict(sweep()).kind, WorkloadKind::kBatch);
  WorkloadFeatures gang = service();
  gang.members = 4;
  EXPECT_EQ(c->predict(gang).kind, WorkloadKind::kTraining);
  WorkloadFeatures eight = service();
  eight.gpus = 8;
  EXPECT_EQ(c->predict(eight).kind, WorkloadKind::kTraining);
  WorkloadFeatures cpu = service();
  cpu.gpus = 0;
  EXPECT_EQ(c->predict(cpu).kind, WorkloadKind::kServing);
}

// The learnt classifier goes against the rule when the history says so: a tenant whose
// whole-GPU jobs named "etl-*" are all batch.
TEST(WorkloadClassifier, LogisticLearnsWhatTheRuleGetsWrong) {
  auto c = make_logistic_classifier();
  WorkloadFeatures etl = service("etl-nightly-1");
  etl.tenant = "data";
  etl.command = {"spark-submit", "etl.py"};
  EXPECT_EQ(c->predict(etl).kind, WorkloadKind::kServing);  // the rule, untrained
  for (int i = 0; i < 40; ++i) {
    etl.name = "etl-nightly-" + std::to_string(i);
    c->observe(etl, WorkloadKind::kBatch, 300);
    c->observe(service("web-" + std::to_string(i)), WorkloadKind::kServing, 86400);
  }
  etl.name = "etl-nightly-99";
  const WorkloadPrediction p = c->predict(etl);
  EXPECT_EQ(p.kind, WorkloadKind::kBatch);
  EXPECT_EQ(p.duration, DurationClass::kUnder10Min);
  EXPECT_GT(p.confidence, 0.5);
  const WorkloadPrediction s = c->predict(service("web-99"));
  EXPECT_EQ(s.kind, WorkloadKind::kServing);
  EXPECT_EQ(s.duration, DurationClass::kOver6Hours);
}

TEST(WorkloadClassifier, DefaultsNeverGiveTheTopClass) {
  for (size_t k = 0; k < kWorkloadKinds; ++k) {
    const KindDefaults d = defaults_for(static_cast<WorkloadKind>(k));
    EXPECT_NE(d.priority, PriorityClass::kInferenceCritical);
    EXPECT_GT(d.checkpoint_grace_seconds, 0);
  }
  EXPECT_EQ(defaults_for(WorkloadKind::kBatch).priority, PriorityClass::kBestEffort);
  EXPECT_TRUE(defaults_for(WorkloadKind::kTraining).preemptible);
  EXPECT_FALSE(defaults_for(WorkloadKind::kServing).preemptible);
}

// ---------------------------------------------------------------- the replay

// Records what it was shown, and when (as the index of the prediction it preceded).
class Spy final : public WorkloadClassifier {
 public:
  std::string_view name() const override { return "spy"; }
  WorkloadPrediction predict(const WorkloadFeatures& f) const override {
    predicted.push_back(f.name);
    return {};
  }
  void observe(const WorkloadFeatures& f, WorkloadKind, double seconds) override {
    observed.push_back(f.name + "@" + std::to_string(predicted.size()) + "/" +
                       std::to_string(static_cast<int>(seconds)));
  }
  mutable std::vector<std::string> predicted;
  std::vector<std::string> observed;
};

LabelledJob labelled(const std::string& name, double submit, double end, WorkloadKind k) {
  LabelledJob j;
  j.features = sweep(name);
  j.submit = submit;
  j.end = end;
  j.kind = k;
  return j;
}

TEST(ClassificationEval, NoLabelIsUsedBeforeItsDeletionTime) {
  // b is deleted at 20: it teaches d (submitted at 30), not c (submitted at 20, the same
  // second: strictly before only). a never ends.
  const std::vector<LabelledJob> jobs = {
      labelled("a", 0, -1, WorkloadKind::kServing), labelled("b", 5, 20, WorkloadKind::kBatch),
      labelled("d", 30, 40, WorkloadKind::kBatch), labelled("c", 20, 25, WorkloadKind::kBatch)};
  Spy spy;
  WorkloadClassifier* cs[] = {&spy};
  const auto scores = evaluate_classifiers(jobs, cs);
  EXPECT_EQ(spy.predicted, (std::vector<std::string>{"a", "b", "c", "d"}));
  // b (15 s) before the 4th prediction (d), c (5 s) too; d and a never.
  EXPECT_EQ(spy.observed, (std::vector<std::string>{"b@3/15", "c@3/5"}));
  ASSERT_EQ(scores.size(), 1u);
  EXPECT_EQ(scores[0].jobs, 4u);
}

TEST(ClassificationEval, ConfusionRecallAndPrecision) {
  // Three serving jobs, one batch, none ever finished: majority answers its prior (batch).
  const std::vector<LabelledJob> jobs = {
      labelled("a", 0, -1, WorkloadKind::kServing), labelled("b", 1, -1, WorkloadKind::kServing),
      labelled("c", 2, -1, WorkloadKind::kServing), labelled("d", 3, -1, WorkloadKind::kBatch)};
  auto m = make_majority_classifier();
  WorkloadClassifier* cs[] = {m.get()};
  ClassificationEvalOptions opt;
  opt.classes = alibaba_qos_classes();
  const auto s = evaluate_classifiers(jobs, cs, opt)[0];
  EXPECT_EQ(s.confusion, (std::vector<std::vector<size_t>>{{0, 3}, {0, 1}}));
  EXPECT_DOUBLE_EQ(s.accuracy, 0.25);
  EXPECT_DOUBLE_EQ(s.recall[0], 0.0);
  EXPECT_DOUBLE_EQ(s.recall[1], 1.0);
  EXPECT_TRUE(std::isnan(s.precision[0]));  // nothing predicted LS
  EXPECT_DOUBLE_EQ(s.precision[1], 0.25);
}

TEST(ClassificationEval, ReadsAlibabaQosAndMapsKubernetesClasses) {
  const std::string text =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
      "deletion_time,scheduled_time\n"
      "p0,1000,1024,1,1000,V100M16|V100M32|V100M32,LS,Running,0,100,0\n"
      "p1,1000,1024,1,500,,BE,Running,5,50,5\n"
      "p2,1000,1024,0,0,,Guaranteed,Running,6,,\n"
      "p3,1000,1024,8,1000,,Burstable,Running,7,9,7\n";
  std::map<std::string, size_t> raw;
  const auto jobs = parse_alibaba_labelled(text, "pods.csv", 0, &raw);
  ASSERT_EQ(jobs.size(), 4u);
  EXPECT_EQ(jobs[0].kind, WorkloadKind::kServing);
  EXPECT_EQ(jobs[0].features.gpu_type_count, 2);
  EXPECT_EQ(jobs[1].kind, WorkloadKind::kBatch);
  EXPECT_EQ(jobs[1].features.gpu_milli, 500);
  EXPECT_EQ(jobs[2].kind, WorkloadKind::kServing);
  EXPECT_LT(jobs[2].end, 0);
  EXPECT_EQ(jobs[3].kind, WorkloadKind::kBatch);
  EXPECT_EQ(jobs[3].source, "pods.csv:5");
  EXPECT_EQ(raw["Burstable"], 1u);
}

TEST(ClassificationEval, BadQosNamesFileLineAndColumn) {
  const std::string text =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,qos,creation_time,deletion_time\n"
      "p0,1000,1024,1,1000,LS,0,100\n"
      "p1,1000,1024,1,1000,Gold,0,100\n";
  try {
    parse_alibaba_labelled(text, "pods.csv");
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("pods.csv"), std::string::npos) << m;
    EXPECT_NE(m.find("3"), std::string::npos) << m;
    EXPECT_NE(m.find("qos"), std::string::npos) << m;
    EXPECT_NE(m.find("Gold"), std::string::npos) << m;
  }
  // A pod list without labels (the multigpu files) says what it lacks.
  EXPECT_THROW(parse_alibaba_labelled("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                                      "p,1,1,0,0\n",
                                      "multigpu.csv"),
               InputError);
}

// ---------------------------------------------------------------- simulate --classify

TEST(ClassifiedDefaults, UnlabelledJobsGetTheirKindsClassLabelledOnesKeepTheirs) {
  Workload w;
  const TenantId t = w.tenants.intern("lab");
  auto job = [&](const std::string& name, double submit, int32_t milli, bool given,
                 PriorityClass p) {
    JobSpec j;
    j.name = name;
    j.tenant = t;
    j.submit_time = submit;
    j.demand.gpus = 1;
    j.demand.gpu_milli = milli;
    j.demand.cpu_milli = 4000;
    j.demand.mem_mib = 8192;
    j.work_seconds = 10;
    j.priority = p;
    j.priority_given = given;
    w.jobs.push_back(j);
  };
  // Labelled shares are production: the learnt classifier must go against the rule (a share
  // is batch) for the unlabelled share submitted after they finished.
  for (int i = 0; i < 30; ++i)
    job("svc-" + std::to_string(i), i, 300, true, PriorityClass::kProduction);
  job("mine", 100, 300, false, PriorityClass::kResearch);
  job("early", 0.5, 300, false, PriorityClass::kResearch);  // nothing finished yet: the rule
  auto c = make_logistic_classifier();
  const ClassifiedDefaults d = apply_classified_defaults(w, *c);
  EXPECT_EQ(d.labelled, 30u);
  EXPECT_EQ(d.classified, 2u);
  EXPECT_EQ(w.jobs[30].priority, PriorityClass::kProduction);
  EXPECT_TRUE(w.jobs[30].priority_given);
  EXPECT_EQ(w.jobs[31].priority, PriorityClass::kBestEffort);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(w.jobs[i].priority, PriorityClass::kProduction);
}

// ---------------------------------------------------------------- the real trace

TEST(ClassificationEval, LogisticBeatsMajorityOnAlibabaSlice) {
  const std::string path =
      std::string(TESSERA_SHARED_DATA) + "/alibaba-gpu-2023/openb_pod_list_default.csv";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  const auto jobs = read_alibaba_labelled(path, 2000);
  auto learnt = make_logistic_classifier();
  auto majority = make_majority_classifier();
  auto rule = make_threshold_classifier();
  WorkloadClassifier* cs[] = {learnt.get(), majority.get(), rule.get()};
  ClassificationEvalOptions opt;
  opt.classes = alibaba_qos_classes();
  const auto s = evaluate_classifiers(jobs, cs, opt);
  EXPECT_GT(s[0].accuracy, s[1].accuracy + 0.1);
  EXPECT_GT(s[0].accuracy, s[2].accuracy);
  EXPECT_GT(s[0].macro_recall, s[1].macro_recall);
}

}  // namespace
}  // namespace tessera

// serve --classify: jobs that name no priority class get their predicted kind's class and
// grace; a class the user names always wins; the classifier learns from the jobs whose class
// their user set, as they end; what it chose survives a restart and a retried submission.
#include <gtest/gtest.h>

#include <fstream>

#include "service_fixture.h"

namespace tessera {
namespace {

class ServiceClassify : public ServiceTest {
 protected:
  // Tenant lab's queue grants every class (else: a queue naming none, where the classifier
  // may choose only the default class and lower ones).
  std::unique_ptr<Service> make_classifying(const std::string& classifier,
                                            bool all_classes = true) {
    ServiceOptions o = options(8);
    o.classifier = classifier;
    if (all_classes) {
      o.queues_path = dir_.file("queues.yaml");
      std::ofstream(o.queues_path) << "queues:\n  - name: lab\n    priority_classes: "
                                      "[inference-critical, production, research, best-effort]\n"
                                      "    default_priority_class: research\n";
    }
    o.max_checkpoint_grace_seconds = 3600;
    auto b = std::make_unique<FakeBackend>();
    backend_ = b.get();
    return std::make_unique<Service>(o, std::move(b));
  }
  JobView submit_yaml(Service& s, const std::string& yaml, const std::string& key = "") {
    return s.submit(as("lab"), job(yaml), key, nullptr);
  }
};

TEST_F(ServiceClassify, UnlabelledJobsGetTheirKindsClassAndGraceAndALabelWins) {
  auto s = make_classifying("threshold");
  // The rule: a gang trains, a share of one GPU is batch, whole GPUs serve.
  const JobView gang = submit_yaml(*s, "name: pretrain\ngang: 2\ncommand: [x]\n");
  EXPECT_EQ(gang.row.classified, "training");
  EXPECT_EQ(gang.priority_class, "research");
  EXPECT_EQ(gang.row.spec.checkpoint_grace_seconds, 300);
  const JobView share = submit_yaml(*s, "name: sweep\nresources: {gpus: 0.5}\ncommand: [x]\n");
  EXPECT_EQ(share.row.classified, "batch");
  EXPECT_EQ(share.priority_class, "best-effort");
  const JobView whole = submit_yaml(*s, "name: api\nresources: {gpus: 1}\ncommand: [x]\n");
  EXPECT_EQ(whole.row.classified, "serving");
  EXPECT_EQ(whole.priority_class, "production");
  // A class the user names is kept, and nothing is predicted for it; a grace too.
  const JobView labelled = submit_yaml(
      *s, "name: g2\ngang: 2\npriority_class: best-effort\ncheckpoint_grace: 5s\ncommand: [x]\n");
  EXPECT_EQ(labelled.row.classified, "");
  EXPECT_EQ(labelled.priority_class, "best-effort");
  const JobView own_grace =
      submit_yaml(*s, "name: g3\ngang: 2\ncheckpoint_grace: 7s\ncommand: [x]\n");
  EXPECT_EQ(own_grace.row.spec.checkpoint_grace_seconds, 7);
  // A retry of the same request (same key) is the same job, not a conflict.
  const std::string spec = "name: keyed\ngang: 2\ncommand: [x]\n";
  const int64_t keyed = submit_yaml(*s, spec, "k1").row.id;
  EXPECT_EQ(submit_yaml(*s, spec, "k1").row.id, keyed);
  // What it chose survives a restart.
  s.reset();
  s = make_classifying("threshold");
  const JobView again = s->job(Caller{true, ""}, gang.row.id);
  EXPECT_EQ(again.row.classified, "training");
  EXPECT_EQ(again.priority_class, "research");
}

// The classifier chooses within what the queue grants: a job shaped like a service is not
// a way to outrank other tenants.
TEST_F(ServiceClassify, ItChoosesOnlyClassesTheQueueGrants) {
  auto s = make_classifying("threshold", /*all_classes=*/false);
  const JobView whole = submit_yaml(*s, "name: api\nresources: {gpus: 1}\ncommand: [x]\n");
  EXPECT_EQ(whole.row.classified, "");
  EXPECT_EQ(whole.priority_class, "research");
  const JobView share = submit_yaml(*s, "name: sweep\nresources: {gpus: 0.5}\ncommand: [x]\n");
  EXPECT_EQ(share.row.classified, "batch");
  EXPECT_EQ(share.priority_class, "best-effort");
}

TEST_F(ServiceClassify, ItLearnsFromJobsWhoseClassTheirUserSetAsTheyEnd) {
  auto s = make_classifying("majority");
  // Nothing has ended: the majority classifier's prior is batch.
  const JobView before = submit_yaml(*s, "name: a\nresources: {gpus: 1}\ncommand: [x]\n");
  EXPECT_EQ(before.row.classified, "batch");
  s->cancel(as("lab"), before.row.id);
  // Two labelled services run and end: serving is now the kind seen most.
  std::vector<int64_t> ids;
  for (const char* name : {"svc1", "svc2"}) {
    ids.push_back(submit_yaml(*s, std::string("name: ") + name +
                                      "\npriority_class: production\ncommand: [x]\n")
                      .row.id);
  }
  now_ += 1;
  s->tick();
  for (const int64_t id : ids) ASSERT_EQ(state(*s, id), JobState::kRunning);
  now_ += 600;
  for (const int64_t id : ids) backend_->exit(id, 0, 0);
  s->tick();
  for (const int64_t id : ids) ASSERT_EQ(state(*s, id), JobState::kSucceeded);
  const JobView after = submit_yaml(*s, "name: b\nresources: {gpus: 1}\ncommand: [x]\n");
  EXPECT_EQ(after.row.classified, "serving");
  EXPECT_EQ(after.priority_class, "production");
  // A restart learns again from what ended before it (the cancelled, never-run job and the
  // classified ones teach nothing).
  s.reset();
  s = make_classifying("majority");
  EXPECT_EQ(submit_yaml(*s, "name: c\nresources: {gpus: 1}\ncommand: [x]\n").row.classified,
            "serving");
}

}  // namespace
}  // namespace tessera

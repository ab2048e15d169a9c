// Queue objects into the engine's queue tree: what `kubectl apply` of Queues gives the
// scheduler, and why a set of them is refused.
#include "control/kube/queue_objects.h"

#include <gtest/gtest.h>

namespace tessera::kube {
namespace {

using nlohmann::json;

std::map<std::string, QueueObject> objects(std::initializer_list<std::pair<const char*, json>> l) {
  std::map<std::string, QueueObject> out;
  for (const auto& [name, spec] : l) {
    out[name] = parse_queue_object(json{{"metadata", {{"name", name}}}, {"spec", spec}});
  }
  return out;
}

TEST(QueueObjects, ParentsMakeTheTreeAndEveryFieldCarriesOver) {
  const auto built =
      build_queue_tree(objects({{"research",
                                 {{"weight", 2},
                                  {"guarantee", {{"gpus", 16}, {"cpu", "64"}, {"memory", "256Gi"}}},
                                  {"borrowLimit", {{"gpus", 8}}},
                                  {"namespaces", {"ml", "ml-dev"}}}},
                                {"nlp",
                                 {{"parent", "research"},
                                  {"guarantee", {{"gpus", 8}, {"gpuTypes", {{"H100", 8}}}}},
                                  {"priorityClasses", {"research", "best-effort"}},
                                  {"defaultPriorityClass", "research"},
                                  {"defaultSLA", "10m"}}},
                                {"vision", {{"parent", "research"}}},
                                {"serving", json::object()}}),
                       FairnessSettings{});
  ASSERT_TRUE(built.tree) << built.error;
  EXPECT_TRUE(built.problems.empty());
  const QueueTree& t = *built.tree;
  std::map<std::string, const QueueSpec*> by_path;
  for (const QueueSpec& q : t.queues()) by_path[q.path] = &q;
  ASSERT_EQ(by_path.count("research/nlp"), 1u);
  ASSERT_EQ(by_path.count("research/vision"), 1u);
  ASSERT_EQ(by_path.count("serving"), 1u);
  const QueueSpec& research = *by_path["research"];
  EXPECT_EQ(research.weight, 2);
  EXPECT_EQ(research.guarantee[kGpuDim], 16000);
  EXPECT_EQ(research.guarantee[kCpuDim], 64000);
  EXPECT_EQ(research.guarantee[kMemDim], 256 * 1024);
  EXPECT_EQ(research.limit[kGpuDim], 24000);
  EXPECT_EQ(research.namespaces, (std::vector<std::string>{"ml", "ml-dev"}));
  const QueueSpec& nlp = *by_path["research/nlp"];
  EXPECT_EQ(nlp.guarantee[kGpuDim], 8000);
  EXPECT_EQ(nlp.by_type.size(), 1u);
  EXPECT_TRUE(nlp.has_default_class);
  EXPECT_EQ(nlp.default_class, PriorityClass::kResearch);
  EXPECT_DOUBLE_EQ(nlp.default_sla_seconds, 600);
}

TEST(QueueObjects, AMissingParentACycleAndAnImpossibleGuaranteeAreSaidNotBuilt) {
  auto missing = build_queue_tree(objects({{"a", json::object()}, {"b", {{"parent", "nope"}}}}),
                                  FairnessSettings{});
  EXPECT_FALSE(missing.tree);
  ASSERT_EQ(missing.problems.count("b"), 1u);
  EXPECT_NE(missing.problems["b"].find("no Queue nope"), std::string::npos);

  auto cycle = build_queue_tree(
      objects({{"top", json::object()}, {"x", {{"parent", "y"}}}, {"y", {{"parent", "x"}}}}),
      FairnessSettings{});
  EXPECT_FALSE(cycle.tree);
  EXPECT_EQ(cycle.problems.count("x"), 1u);
  EXPECT_EQ(cycle.problems.count("y"), 1u);
  EXPECT_EQ(cycle.problems.count("top"), 0u);
  EXPECT_NE(cycle.problems["x"].find("cycle"), std::string::npos);

  // A child guaranteed more than its parent: the tree's own check refuses it, naming them.
  auto greedy = build_queue_tree(objects({{"p", {{"guarantee", {{"gpus", 4}}}}},
                                          {"c", {{"parent", "p"}, {"guarantee", {{"gpus", 8}}}}}}),
                                 FairnessSettings{});
  EXPECT_FALSE(greedy.tree);
  EXPECT_NE(greedy.error.find("p"), std::string::npos) << greedy.error;
  EXPECT_NE(greedy.error.find("guarantee"), std::string::npos) << greedy.error;

  EXPECT_FALSE(build_queue_tree({}, FairnessSettings{}).tree);
  EXPECT_THROW(parse_queue_object(json{{"spec", json::object()}}), std::invalid_argument);
}

}  // namespace
}  // namespace tessera::kube

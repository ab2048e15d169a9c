#include "model/queue_tree.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "input_error_util.h"
#include "model/cluster_spec.h"
#include "model/input_error.h"

namespace tessera {
namespace {

using testing::Contains;
using testing::error_of;

std::string parse_error(const std::string& yaml) {
  return error_of([&] { parse_queue_tree_yaml(yaml, "queues.yaml"); });
}

QueueTree parse(const std::string& yaml) {
  return parse_queue_tree_yaml(yaml, "queues.yaml");
}

GpuTypeId type_id(const char* name) {
  return *GpuTypeTable::builtin().find(name);
}

const QueueSpec* find_path(const QueueTree& t, const std::string& path) {
  for (const QueueSpec& q : t.queues()) {
    if (q.path == path) return &q;
  }
  return nullptr;
}

constexpr int64_t kGiB = 1024;  // in MiB

const char* const kTwoLevel = R"(fairness:
  half_life: 24h
preemption:
  {checkpoint_grace: 30s, reclaim_min_runtime: 10m, reclaim_after: 30m, reclaim_tolerance: 0.1, borrow_max_runtime: 1h, reclaim_cost_ratio: 2}
queues:
  - name: research
    weight: 2
    guarantee: {gpus: 16, cpu: 64, memory: 256Gi, gpu_types: {A100-80G: 8}}
    borrow_limit: {gpus: 16, gpu_types: {A100-80G: 4}}
    priority_classes: [research, best-effort]
    default_priority_class: research
    default_sla: 10m
    queues:
      - name: nlp
        guarantee: {gpus: 8, gpu_types: {A100-80G: 8}}
      - name: cv
        weight: 0.5
        guarantee: {gpus: 4.5, cpu: 500m, memory: 512Mi}
        default_sla: 90
  - name: prod
    priority_classes: [production, inference-critical]
    queues:
      - name: serving
        guarantee: {gpus: 8}
        borrow_limit: {cpu: 16}
        default_priority_class: inference-critical
)";

TEST(QueueTreeTest, ParsesTwoLevelTree) {
  const QueueTree t = parse(kTwoLevel);
  ASSERT_EQ(t.size(), 6u);
  // Parents precede children, in file order.
  const std::vector<std::string> paths = {"",     "research",    "research/nlp", "research/cv",
                                          "prod", "prod/serving"};
  for (QueueId q = 0; q < t.size(); ++q) EXPECT_EQ(t.queue(q).path, paths[q]);
  EXPECT_EQ(t.queue(kRootQueue).children, (std::vector<QueueId>{1, 4}));
  EXPECT_EQ(t.queue(1).children, (std::vector<QueueId>{2, 3}));
  EXPECT_EQ(t.queue(3).parent, 1u);
  EXPECT_EQ(t.queue(3).depth, 2u);
  EXPECT_EQ(t.queue(3).name, "cv");
  EXPECT_TRUE(t.queue(3).leaf());
  EXPECT_FALSE(t.queue(1).leaf());

  const QueueSpec& research = t.queue(1);
  EXPECT_DOUBLE_EQ(research.weight, 2);
  EXPECT_EQ(research.guarantee, (Amounts{16000, 64000, 256 * kGiB}));
  EXPECT_EQ(research.limit, (Amounts{32000, kUnlimited, kUnlimited}));
  ASSERT_EQ(research.by_type.size(), 1u);
  EXPECT_EQ(research.by_type[0].type, type_id("A100-80G"));
  EXPECT_EQ(research.by_type[0].guarantee_milli, 8000);
  EXPECT_EQ(research.by_type[0].limit_milli, 12000);
  EXPECT_EQ(research.allowed_classes,
            class_bit(PriorityClass::kResearch) | class_bit(PriorityClass::kBestEffort));
  EXPECT_TRUE(research.has_default_class);
  EXPECT_EQ(research.default_class, PriorityClass::kResearch);
  EXPECT_DOUBLE_EQ(research.default_sla_seconds, 600);
  EXPECT_EQ(research.source, "queues.yaml:6");

  const QueueSpec& cv = t.queue(3);
  EXPECT_DOUBLE_EQ(cv.weight, 0.5);
  EXPECT_EQ(cv.guarantee, (Amounts{4500, 500, 512}));
  EXPECT_EQ(cv.limit, kUnlimitedAmounts);
  EXPECT_TRUE(cv.by_type.empty());
  EXPECT_DOUBLE_EQ(cv.default_sla_seconds, 90);  // its own, not the parent's
  EXPECT_EQ(t.queue(2).by_type.at(0).limit_milli, kUnlimited);

  // Leaves inherit their parent's classes and defaults: jobs live in leaves.
  const QueueSpec& nlp = t.queue(2);
  EXPECT_EQ(nlp.weight, 1);
  EXPECT_EQ(nlp.allowed_classes, research.allowed_classes);
  EXPECT_TRUE(nlp.has_default_class);
  EXPECT_EQ(nlp.default_class, PriorityClass::kResearch);
  EXPECT_DOUBLE_EQ(nlp.default_sla_seconds, 600);

  const QueueSpec& serving = t.queue(5);
  EXPECT_EQ(serving.allowed_classes,
            class_bit(PriorityClass::kProduction) | class_bit(PriorityClass::kInferenceCritical));
  EXPECT_EQ(serving.default_class, PriorityClass::kInferenceCritical);
  EXPECT_DOUBLE_EQ(serving.default_sla_seconds, kUnknown);
  EXPECT_EQ(serving.limit, (Amounts{kUnlimited, 16000, kUnlimited}));

  // prod names no guarantee: it takes serving's; the root sums the top level.
  EXPECT_EQ(t.queue(4).guarantee, (Amounts{8000, 0, 0}));
  EXPECT_EQ(t.queue(kRootQueue).guarantee, (Amounts{24000, 64000, 256 * kGiB}));

  EXPECT_DOUBLE_EQ(t.settings().half_life_seconds, 86400);
  EXPECT_DOUBLE_EQ(t.settings().long_term_weight, 0.5);  // default with a half-life
  EXPECT_DOUBLE_EQ(t.settings().checkpoint_grace_seconds, 30);
  EXPECT_DOUBLE_EQ(t.settings().reclaim_min_runtime_seconds, 600);
  EXPECT_DOUBLE_EQ(t.settings().reclaim_after_seconds, 1800);
  EXPECT_DOUBLE_EQ(t.settings().reclaim_tolerance, 0.1);
  EXPECT_DOUBLE_EQ(t.settings().reclaim_cost_ratio, 2);
  EXPECT_DOUBLE_EQ(t.settings().borrow_max_runtime_seconds, 3600);
  EXPECT_EQ(t.bound_tenants(), 0u);
}

TEST(QueueTreeTest, DefaultSettingsAndDurations) {
  QueueTree t = parse("queues: [{name: a, default_sla: 1.5d}]\n");
  EXPECT_DOUBLE_EQ(t.settings().half_life_seconds, 0);
  EXPECT_DOUBLE_EQ(t.settings().long_term_weight, 0);
  EXPECT_LT(t.settings().checkpoint_grace_seconds, 0);
  EXPECT_DOUBLE_EQ(t.settings().reclaim_min_runtime_seconds, 0);
  EXPECT_DOUBLE_EQ(t.settings().reclaim_after_seconds, 0);
  EXPECT_DOUBLE_EQ(t.settings().reclaim_tolerance, 0);
  EXPECT_DOUBLE_EQ(t.settings().reclaim_cost_ratio, 0);
  EXPECT_DOUBLE_EQ(t.queue(1).default_sla_seconds, 1.5 * 86400);
  EXPECT_FALSE(t.queue(1).has_default_class);
  EXPECT_EQ(t.queue(1).allowed_classes, kAllClasses);

  t = parse("fairness: {half_life: 3600, long_term_weight: 0.25}\nqueues: [{name: a}]\n");
  EXPECT_DOUBLE_EQ(t.settings().half_life_seconds, 3600);
  EXPECT_DOUBLE_EQ(t.settings().long_term_weight, 0.25);
}

TEST(QueueTreeTest, InnerQueueDerivesGuaranteeFromChildren) {
  const QueueTree t = parse(R"(queues:
  - name: team
    borrow_limit: {gpus: 2, gpu_types: {V100: 1}}
    queues:
      - {name: a, guarantee: {gpus: 4, cpu: 8, gpu_types: {V100: 2}}}
      - {name: b, guarantee: {gpus: 2, memory: 1Gi}}
  - name: partial
    guarantee: {gpus: 10}
    queues:
      - {name: c, guarantee: {gpus: 3, cpu: 4}}
      - {name: d, guarantee: {gpus: 3, cpu: 2}}
)");
  const QueueSpec& team = *find_path(t, "team");
  EXPECT_EQ(team.guarantee, (Amounts{6000, 8000, 1024}));
  // The borrowing limit adds to the derived guarantee.
  EXPECT_EQ(team.limit, (Amounts{8000, kUnlimited, kUnlimited}));
  ASSERT_EQ(team.by_type.size(), 1u);
  EXPECT_EQ(team.by_type[0].guarantee_milli, 2000);
  EXPECT_EQ(team.by_type[0].limit_milli, 3000);
  // A parent that gives some dimensions keeps them and derives only the others.
  const QueueSpec& partial = *find_path(t, "partial");
  EXPECT_EQ(partial.guarantee, (Amounts{10000, 6000, 0}));
  // Type-only guarantee: all its GPUs are of that type.
  const QueueTree typed = parse("queues: [{name: a, guarantee: {gpu_types: {H100: 4}}}]\n");
  EXPECT_EQ(typed.queue(1).guarantee[kGpuDim], 4000);
}

TEST(QueueTreeTest, ProgrammaticTreeDerivesAndChecks) {
  QueueTree t;
  QueueSpec team;
  team.name = "team";
  const QueueId tq = t.add(kRootQueue, team);
  QueueSpec a;
  a.name = "a";
  a.guarantee = {2000, 0, 0};
  a.by_type = {TypeQuota{type_id("T4"), 1000, kUnlimited}};
  const QueueId aq = t.add(tq, a);
  t.finish();
  EXPECT_EQ(t.queue(aq).path, "team/a");
  EXPECT_EQ(t.queue(tq).guarantee[kGpuDim], 2000);
  EXPECT_EQ(t.queue(tq).by_type.at(0).guarantee_milli, 1000);

  QueueTree bad;
  QueueSpec p;
  p.name = "p";
  p.guarantee = {1000, 0, 0};
  const QueueId pq = bad.add(kRootQueue, p);
  QueueSpec c;
  c.name = "c";
  c.guarantee = {3000, 0, 0};
  bad.add(pq, c);
  const std::string e = error_of([&] { bad.finish(); });
  EXPECT_TRUE(Contains(e, "queue tree: field queues[0].guarantee.gpus:"));
  EXPECT_TRUE(Contains(e, "queue 'p'"));
  EXPECT_TRUE(Contains(e, "3 GPUs"));
  EXPECT_TRUE(Contains(e, "1 GPU"));

  QueueTree low;
  QueueSpec l;
  l.name = "l";
  l.guarantee = {4000, 0, 0};
  l.limit = {2000, kUnlimited, kUnlimited};
  low.add(kRootQueue, l);
  EXPECT_TRUE(Contains(error_of([&] { low.finish(); }),
                       "field queues[0].borrow_limit.gpus: limit 2 GPUs is below the guarantee 4 "
                       "GPUs"));
}

struct BadYaml {
  const char* what;
  std::string yaml;
  std::vector<std::string> expected;  // substrings of the message
};

// A tree of YAML anchors names 4^depth queues in a few hundred bytes: refused at a bound,
// before it costs the memory.
TEST(QueueTreeTest, AnAliasBombIsRefusedBeforeItGrows) {
  std::string yaml = "queues:\n  - &l0 {name: b, weight: 1}\n";
  for (int d = 1; d < 12; ++d) {
    const std::string prev = "*l" + std::to_string(d - 1);
    yaml += "  - &l" + std::to_string(d) + " {name: q" + std::to_string(d) +
            ", weight: 1, queues: [" + prev + ", " + prev + ", " + prev + ", " + prev + "]}\n";
  }
  EXPECT_TRUE(Contains(error_of([&] { parse(yaml); }), "more than 10000 queues"));
}

TEST(QueueTreeTest, ValidationErrorsNameFileLineAndField) {
  const std::vector<BadYaml> cases = {
      {"unknown queue key",
       "queues:\n  - name: a\n    wieght: 2\n",
       {"queues.yaml:3: field queues[0].wieght: unknown key", "weight", "borrow_limit"}},
      {"unknown top-level key",
       "fairnes: {}\nqueues: [{name: a}]\n",
       {"queues.yaml:1: field fairnes: unknown key", "fairness, preemption, queues"}},
      {"unknown quota key",
       "queues:\n  - name: a\n    guarantee: {gpu: 1}\n",
       {"queues.yaml:3: field queues[0].guarantee.gpu: unknown key", "gpus, cpu, memory"}},
      {"negative gpus",
       "queues:\n  - name: a\n    guarantee:\n      gpus: 1\n  - name: b\n    guarantee:\n"
       "      gpus: -3\n",
       {"queues.yaml:7: field queues[1].guarantee.gpus: expected a non-negative number, got -3"}},
      {"bad cpu",
       "queues:\n  - name: a\n    guarantee: {cpu: lots}\n",
       {"queues.yaml:3: field queues[0].guarantee.cpu:", "'lots'"}},
      {"bad memory",
       "queues:\n  - name: a\n    borrow_limit: {memory: -1Gi}\n",
       {"queues.yaml:3: field queues[0].borrow_limit.memory:", "'-1Gi'"}},
      {"bad duration",
       "queues:\n  - name: a\n    default_sla: 10x\n",
       {"queues.yaml:3: field queues[0].default_sla: expected a non-negative duration", "'10x'"}},
      {"negative duration",
       "fairness:\n  half_life: -1h\nqueues: [{name: a}]\n",
       {"queues.yaml:2: field fairness.half_life:", "'-1h'"}},
      {"long-term weight above 1",
       "fairness: {long_term_weight: 1.5}\nqueues: [{name: a}]\n",
       {"queues.yaml:1: field fairness.long_term_weight: expected a number in [0, 1], got 1.5"}},
      {"reclaim tolerance above 1",
       "preemption: {reclaim_tolerance: 2}\nqueues: [{name: a}]\n",
       {"queues.yaml:1: field preemption.reclaim_tolerance: expected a number in [0, 1], got 2"}},
      {"negative reclaim cost ratio",
       "preemption: {reclaim_cost_ratio: -1}\nqueues: [{name: a}]\n",
       {"queues.yaml:1: field preemption.reclaim_cost_ratio"}},
      {"zero weight",
       "queues:\n  - name: a\n    weight: 0\n",
       {"queues.yaml:3: field queues[0].weight: expected a positive number, got 0"}},
      {"children over parent guarantee",
       "queues:\n  - name: a\n    guarantee: {gpus: 4}\n    queues:\n"
       "      - {name: x, guarantee: {gpus: 3}}\n      - {name: y, guarantee: {gpus: 3}}\n",
       {"queues.yaml:2: field queues[0].guarantee.gpus:", "queue 'a'", "6 GPUs", "4 GPUs"}},
      {"children over parent memory",
       "queues:\n  - name: a\n    guarantee: {memory: 1Gi}\n    queues:\n"
       "      - {name: x, guarantee: {memory: 1536Mi}}\n",
       {"queues.yaml:2: field queues[0].guarantee.memory:", "1536 MiB", "1 GiB"}},
      {"children over parent GPU type",
       "queues:\n  - name: a\n    guarantee: {gpus: 8, gpu_types: {V100: 2}}\n    queues:\n"
       "      - {name: x, guarantee: {gpu_types: {V100: 3}}}\n",
       {"queues.yaml:2: field queues[0].guarantee.gpu_types.V100:", "3 V100 GPUs", "2 V100 GPUs"}},
      {"type guarantees over GPU guarantee",
       "queues:\n  - name: a\n    guarantee: {gpus: 1, gpu_types: {V100: 2}}\n",
       {"queues.yaml:2: field queues[0].guarantee.gpu_types:", "2 GPUs", "1 GPU"}},
      {"duplicate sibling",
       "queues:\n  - name: a\n    queues:\n      - name: x\n      - name: x\n",
       {"queues.yaml:5: field queues[0].queues[1].name: duplicate queue name 'x'", "queue 'a'"}},
      {"slash in name",
       "queues:\n  - name: a/b\n",
       {"queues.yaml:2: field queues[0].name:", "'/'"}},
      {"missing name",
       "queues:\n  - weight: 2\n",
       {"queues.yaml:2: field queues[0].name: missing"}},
      {"unknown GPU type",
       "queues:\n  - name: a\n    guarantee:\n      gpu_types: {X900: 1}\n",
       {"queues.yaml:4: field queues[0].guarantee.gpu_types.X900: unknown GPU type 'X900'",
        "A100-80G"}},
      {"bad class",
       "queues:\n  - name: a\n    priority_classes:\n      - research\n      - gold\n",
       {"queues.yaml:5: field queues[0].priority_classes[1]: unknown priority class 'gold'",
        "best-effort, research, production, inference-critical"}},
      {"empty class list",
       "queues:\n  - name: a\n    priority_classes: []\n",
       {"queues.yaml:3: field queues[0].priority_classes:"}},
      {"default class not allowed",
       "queues:\n  - name: a\n    priority_classes: [research]\n"
       "    default_priority_class: production\n",
       {"queues.yaml:4: field queues[0].default_priority_class: production",
        "priority_classes (research)"}},
      {"default class excluded by the parent",
       "queues:\n  - name: a\n    priority_classes: [research]\n    queues:\n"
       "      - name: x\n        default_priority_class: production\n",
       {"queues.yaml:5: field queues[0].queues[0].default_priority_class:", "queue 'a/x'"}},
      {"child allows none of its parent's classes",
       "queues:\n  - name: a\n    priority_classes: [research]\n    queues:\n"
       "      - {name: x, priority_classes: [production]}\n",
       {"queues.yaml:5: field queues[0].queues[0].priority_classes:", "(research)"}},
      {"no queues", "fairness: {half_life: 1h}\n", {"queues.yaml:1: field queues: missing"}},
      {"empty queue list", "queues: []\n", {"queues.yaml:1: field queues:", "non-empty"}},
      {"empty child list",
       "queues:\n  - name: a\n    queues: []\n",
       {"queues.yaml:3: field queues[0].queues:", "non-empty"}},
      {"YAML syntax", "queues: [{name: a\n", {"queues.yaml:", "YAML"}},
      {"empty file", "", {"queues.yaml: empty file"}},
  };
  for (const BadYaml& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string e = parse_error(c.yaml);
    for (const std::string& part : c.expected) EXPECT_TRUE(Contains(e, part));
  }
}

TEST(QueueTreeTest, TimeLimitsAreInheritedAndADefaultAboveTheMaximumIsRefused) {
  const QueueTree t = parse(R"(queues:
  - name: batch
    time_limit: {default: 1h, max: 4h}
    queues:
      - name: a
      - name: b
        time_limit: {max: 2h}
)");
  const auto by_path = [&](const std::string& path) -> const QueueSpec& {
    for (const QueueSpec& q : t.queues()) {
      if (q.path == path) return q;
    }
    ADD_FAILURE() << "no queue " << path;
    return t.queue(0);
  };
  const QueueSpec& a = by_path("batch/a");
  const QueueSpec& b = by_path("batch/b");
  EXPECT_EQ(a.default_time_limit_seconds, 3600);
  EXPECT_EQ(a.max_time_limit_seconds, 4 * 3600);
  EXPECT_EQ(b.default_time_limit_seconds, 3600);
  EXPECT_EQ(b.max_time_limit_seconds, 2 * 3600);
  std::string e = parse_error(R"(queues:
  - name: a
    time_limit: {default: 5h, max: 4h}
)");
  EXPECT_TRUE(Contains(e, "time_limit.default")) << e;
  e = parse_error(R"(queues:
  - name: a
    time_limit: {maximum: 4h}
)");
  EXPECT_TRUE(Contains(e, "queues.yaml:3")) << e;
  EXPECT_TRUE(Contains(e, "maximum")) << e;
  e = parse_error(R"(queues:
  - name: a
    time_limit: {max: 0s}
)");
  EXPECT_TRUE(Contains(e, "more than 0")) << e;
}

TEST(QueueTreeTest, LoadsFileAndNamesUnreadablePath) {
  const auto path = std::filesystem::temp_directory_path() / "tessera_qt_queues.yaml";
  std::ofstream(path) << kTwoLevel;
  const QueueTree t = load_queue_tree(path.string());
  EXPECT_EQ(t.size(), 6u);
  EXPECT_EQ(t.queue(1).source, path.string() + ":6");
  std::filesystem::remove(path);
  const std::string e = error_of([&] { load_queue_tree(path.string()); });
  EXPECT_TRUE(Contains(e, path.string()));
  EXPECT_TRUE(Contains(e, "cannot open"));
}

const char* const kBindTree = R"(queues:
  - name: a
    queues: [{name: x}, {name: y}]
  - name: b
    queues: [{name: x}]
  - name: c
)";

Interner tenants_of(const std::vector<std::string>& names) {
  Interner in;
  for (const std::string& n : names) in.intern(n);
  return in;
}

TEST(QueueTreeTest, BindsTenantsByNameAndPath) {
  QueueTree t = parse(kBindTree);
  const Interner tenants = tenants_of({"y", "a/x", "c", "b/x"});
  t.bind(tenants, "w.csv");
  ASSERT_EQ(t.bound_tenants(), 4u);
  EXPECT_EQ(t.queue(t.leaf_of(0)).path, "a/y");
  EXPECT_EQ(t.queue(t.leaf_of(1)).path, "a/x");
  EXPECT_EQ(t.queue(t.leaf_of(2)).path, "c");
  EXPECT_EQ(t.queue(t.leaf_of(3)).path, "b/x");
  EXPECT_EQ(t.leaf_of(4), kNoId);
}

TEST(QueueTreeTest, BindRejectsAmbiguousInnerAndUnknownTenants) {
  QueueTree t = parse(kBindTree);
  std::string e = error_of([&] { t.bind(tenants_of({"c", "x"}), "w.csv"); });
  EXPECT_TRUE(Contains(e, "w.csv: tenant 'x' is ambiguous"));
  EXPECT_TRUE(Contains(e, "a/x, b/x"));
  EXPECT_EQ(t.bound_tenants(), 0u);  // a failed bind leaves the tree unbound

  e = error_of([&] { t.bind(tenants_of({"a"}), "w.csv"); });
  EXPECT_TRUE(Contains(e, "w.csv: tenant 'a'"));
  EXPECT_TRUE(Contains(e, "has child queues; jobs go to leaves"));

  e = error_of([&] { t.bind(tenants_of({"zzz"}), "w.csv"); });
  EXPECT_TRUE(Contains(
      e, "w.csv: tenant 'zzz' matches no leaf queue of the queue tree (leaves: a/x, a/y, b/x, c)"));
}

TEST(QueueTreeTest, ValidatesAgainstCluster) {
  // 2 nodes of 8 A100-80G GPUs, 64 cores and 512 GiB each.
  const Cluster c = make_uniform_cluster(1, 1, 2, 8, "A100-80G", 64000, 512 * kGiB);
  const auto check = [&](const std::string& guarantee) {
    const QueueTree t =
        parse("queues:\n  - name: a\n    guarantee: " + guarantee + "\n  - name: b\n");
    t.validate_against(c);
  };
  EXPECT_NO_THROW(check("{gpus: 16, cpu: 128, memory: 1Ti, gpu_types: {A100-80G: 16}}"));
  std::string e = error_of([&] { check("{gpus: 16.5}"); });
  EXPECT_TRUE(Contains(e, "queues.yaml:2: field queues.guarantee.gpus:"));
  EXPECT_TRUE(Contains(e, "16.5 GPUs"));
  EXPECT_TRUE(Contains(e, "the cluster's 16 GPUs"));
  e = error_of([&] { check("{cpu: 200}"); });
  EXPECT_TRUE(Contains(e, "200 cores"));
  EXPECT_TRUE(Contains(e, "128 cores"));
  e = error_of([&] { check("{memory: 2Ti}"); });
  EXPECT_TRUE(Contains(e, "2048 GiB"));
  EXPECT_TRUE(Contains(e, "1024 GiB"));
  e = error_of([&] { check("{gpu_types: {H100: 1}}"); });
  EXPECT_TRUE(Contains(e, "field queues.guarantee.gpu_types.H100:"));
  EXPECT_TRUE(Contains(e, "1 H100 GPU in all, more than the cluster's 0 H100 GPUs"));
}

JobSpec job(const std::string& name, TenantId tenant, int line) {
  JobSpec j;
  j.name = name;
  j.tenant = tenant;
  j.source = "w.csv:" + std::to_string(line);
  return j;
}

TEST(QueueTreeTest, AppliesQueueDefaults) {
  QueueTree t = parse(kTwoLevel);
  Workload w;
  w.tenants.intern("nlp");
  w.tenants.intern("serving");
  w.tenants.intern("research/cv");
  t.bind(w.tenants, "w.csv");
  w.jobs.push_back(job("defaulted", 0, 2));
  JobSpec given = job("given", 0, 3);
  given.priority = PriorityClass::kBestEffort;
  given.priority_given = true;
  given.sla_max_queueing = 5;
  w.jobs.push_back(given);
  w.jobs.push_back(job("serve", 1, 4));
  w.jobs.push_back(job("vision", 2, 5));
  apply_queue_defaults(t, w);
  EXPECT_EQ(w.jobs[0].priority, PriorityClass::kResearch);
  EXPECT_DOUBLE_EQ(w.jobs[0].sla_max_queueing, 600);  // inherited from research
  EXPECT_EQ(w.jobs[1].priority, PriorityClass::kBestEffort);
  EXPECT_DOUBLE_EQ(w.jobs[1].sla_max_queueing, 5);
  EXPECT_EQ(w.jobs[2].priority, PriorityClass::kInferenceCritical);
  EXPECT_DOUBLE_EQ(w.jobs[2].sla_max_queueing, kUnknown);
  EXPECT_DOUBLE_EQ(w.jobs[3].sla_max_queueing, 90);

  JobSpec wrong = job("wrong", 0, 7);
  wrong.priority = PriorityClass::kProduction;
  wrong.priority_given = true;
  w.jobs.push_back(wrong);
  const std::string e = error_of([&] { apply_queue_defaults(t, w); });
  EXPECT_TRUE(Contains(e,
                       "w.csv:7: job wrong: priority class production is not allowed in "
                       "queue research/nlp (allowed: best-effort, research)"));
}

// Shared front ends gate classes: a replay takes any class a queue does not exclude, serve and
// kube only those listed on the queue's path, else its default and lower ones.
TEST(QueueTreeTest, SharedClassesAreTheListedOnesElseTheDefaultAndLower) {
  const QueueTree t = parse(R"(queues:
  - name: plain
  - name: prod
    default_priority_class: production
  - name: ops
    priority_classes: [inference-critical, best-effort]
    queues:
      - name: oncall
      - name: night
        default_priority_class: best-effort
)");
  const auto shared = [&](const std::string& path) {
    for (QueueId q = 0; q < t.size(); ++q) {
      if (t.queue(q).path == path) return class_list(shared_classes(t.queue(q)));
    }
    return std::string("no queue ") + path;
  };
  EXPECT_EQ(shared("plain"), "best-effort, research");
  EXPECT_EQ(shared("prod"), "best-effort, research, production");
  EXPECT_EQ(shared("ops/oncall"), "best-effort, inference-critical");  // inherited list
  EXPECT_EQ(shared("ops/night"), "best-effort, inference-critical");   // a list, not a default
  EXPECT_EQ(shared(""), "best-effort, research");
  EXPECT_EQ(QueueTree::flat({"a"}).queue(1).allowed_classes, kAllClasses);  // a replay's rule
  EXPECT_EQ(class_refusal(t.queue(1), PriorityClass::kResearch), "");
  EXPECT_EQ(class_refusal(t.queue(1), PriorityClass::kProduction),
            "queue plain does not allow priority class production (it allows best-effort, "
            "research; a queue that lists no priority_classes allows its default class and lower "
            "ones)");
}

TEST(QueueTreeTest, ApplyQueueDefaultsNeedsBoundTree) {
  const QueueTree t = parse(kTwoLevel);
  Workload w;
  w.tenants.intern("nlp");
  w.jobs.push_back(job("j", 0, 2));
  EXPECT_THROW(apply_queue_defaults(t, w), std::logic_error);
}

TEST(QueueTreeTest, FlatTreeFromNames) {
  const QueueTree t = QueueTree::flat({"a", "b"}, {1, 3});
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t.queue(kRootQueue).children, (std::vector<QueueId>{1, 2}));
  for (QueueId q = 1; q < 3; ++q) {
    const QueueSpec& s = t.queue(q);
    EXPECT_TRUE(s.leaf());
    EXPECT_EQ(s.guarantee, kZeroAmounts);
    EXPECT_EQ(s.limit, kUnlimitedAmounts);
    EXPECT_EQ(s.allowed_classes, kAllClasses);
    EXPECT_FALSE(s.has_default_class);
  }
  EXPECT_EQ(t.queue(2).path, "b");
  EXPECT_DOUBLE_EQ(t.queue(1).weight, 1);
  EXPECT_DOUBLE_EQ(t.queue(2).weight, 3);
  ASSERT_EQ(t.bound_tenants(), 2u);
  EXPECT_EQ(t.leaf_of(0), 1u);
  EXPECT_EQ(t.leaf_of(1), 2u);

  EXPECT_TRUE(Contains(error_of([] { QueueTree::flat({"a", "a"}); }), "duplicate queue name"));
  EXPECT_TRUE(Contains(error_of([] { QueueTree::flat({"a"}, {0}); }), "weight"));
  EXPECT_THROW(QueueTree::flat({"a", "b"}, {1}), std::invalid_argument);
}

TEST(QueueTreeTest, FlatTreeFromInternerBindsById) {
  // Trace tenant names need not be valid queue names: the flat tree binds by id.
  const Interner tenants = tenants_of({"team-a", "vc/7", ""});
  const QueueTree t = QueueTree::flat(tenants);
  ASSERT_EQ(t.size(), 4u);
  ASSERT_EQ(t.bound_tenants(), 3u);
  for (TenantId i = 0; i < 3; ++i) {
    EXPECT_EQ(t.queue(t.leaf_of(i)).name, tenants.name(i));
    EXPECT_DOUBLE_EQ(t.queue(t.leaf_of(i)).weight, 1);
  }
  EXPECT_EQ(QueueTree::flat(Interner{}).size(), 1u);
}

}  // namespace
}  // namespace tessera

#include "store/job_request.h"
#include "model/yaml_util.h"
#include "store/strict_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace tessera {
namespace {

using nlohmann::json;

// Succeeds if `f` throws a FieldError naming `field` whose message contains `part`.
template <class F>
::testing::AssertionResult FailsOn(F&& f, const std::string& field, const std::string& part = "") {
  try {
    f();
  } catch (const FieldError& e) {
    if (e.field() != field) {
      return ::testing::AssertionFailure()
             << "field '" << e.field() << "', expected '" << field << "' (" << e.what() << ")";
    }
    if (std::string(e.what()).find(part) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "'" << e.what() << "' does not contain '" << part << "'";
    }
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no FieldError thrown";
}

::testing::AssertionResult YamlFails(const std::string& yaml, const std::string& field,
                                     const std::string& part = "") {
  return FailsOn([&] { parse_job_request(yaml); }, field, part);
}

::testing::AssertionResult JsonFails(const std::string& text, const std::string& field,
                                     const std::string& part = "") {
  const json j = json::parse(text);
  return FailsOn([&] { job_request_from_json(j); }, field, part);
}

// A minimal valid spec plus `extra` lines.
std::string yaml_with(const std::string& extra) {
  return "name: j\ncommand: [sleep, '1']\n" + extra;
}

JobRequest full_request() {
  JobRequest r;
  r.name = "train-7b.v2";
  r.tenant = "research/nlp";
  r.min_members = 2;
  r.max_members = 8;
  r.gpus = 1;
  r.gpu_milli = 250;
  r.cpu_milli = 1500;
  r.mem_mib = 16384 + 512;
  r.gpu_types = {"A100-80G", "H100"};
  r.priority_class = "production";
  r.span = "rack";
  r.sla_max_queueing_seconds = 600;
  r.duration_estimate_seconds = 5400.5;
  r.checkpoint_grace_seconds = 0;
  r.command = {"python", "train.py", "--lr", "3e-4", ""};
  r.env = {{"BATCH", "64"}, {"NAME", "x y"}, {"_Z", ""}};
  return r;
}

TEST(JobRequestTest, ServiceContractExample) {
  const JobRequest r = parse_job_request(R"(name: hello
tenant: team-a
gang: {min: 2, max: 2}
resources: {gpus: 1}
command: ["sh", "-c", "echo rank=$RANK world=$WORLD_SIZE; sleep 1"]
)");
  EXPECT_EQ(r.name, "hello");
  EXPECT_EQ(r.tenant, "team-a");
  EXPECT_EQ(r.min_members, 2);
  EXPECT_EQ(r.max_members, 2);
  EXPECT_EQ(r.gpus, 1);
  EXPECT_EQ(r.gpu_milli, 1000);
  EXPECT_EQ(r.command,
            (std::vector<std::string>{"sh", "-c", "echo rank=$RANK world=$WORLD_SIZE; sleep 1"}));
  EXPECT_TRUE(r.env.empty());
  EXPECT_EQ(r.priority_class, "");
  EXPECT_EQ(r.checkpoint_grace_seconds, -1);
}

TEST(JobRequestTest, Defaults) {
  const JobRequest r = parse_job_request(R"({"name": "a", "command": ["true"]})");
  EXPECT_EQ(r.tenant, "");
  EXPECT_EQ(r.min_members, 1);
  EXPECT_EQ(r.max_members, 1);
  EXPECT_EQ(r.gpus, 1);
  EXPECT_EQ(r.gpu_milli, 1000);
  EXPECT_EQ(r.cpu_milli, 0);
  EXPECT_EQ(r.mem_mib, 0);
  EXPECT_EQ(r.span, "");
  EXPECT_EQ(r.sla_max_queueing_seconds, -1);
  EXPECT_EQ(r.duration_estimate_seconds, -1);
}

TEST(JobRequestTest, FullYaml) {
  const JobRequest r = parse_job_request(R"(
name: big
tenant: research/nlp
gang: 4
resources:
  gpus: 8
  cpu: 500m
  memory: 16Gi
  gpu_types: [A100-80G, H100]
priority_class: inference-critical
span: nvlink
sla: {max_queueing: 10m}
duration_estimate: 1.5h
checkpoint_grace: 30
command:
  - python
  - train.py
env:
  LR: "3e-4"
  DEBUG: true
)");
  EXPECT_EQ(r.tenant, "research/nlp");
  EXPECT_EQ(r.min_members, 4);
  EXPECT_EQ(r.max_members, 4);
  EXPECT_EQ(r.gpus, 8);
  EXPECT_EQ(r.cpu_milli, 500);
  EXPECT_EQ(r.mem_mib, 16384);
  EXPECT_EQ(r.gpu_types, (std::vector<std::string>{"A100-80G", "H100"}));
  EXPECT_EQ(r.priority_class, "inference-critical");
  EXPECT_EQ(r.span, "nvlink");
  EXPECT_EQ(r.sla_max_queueing_seconds, 600);
  EXPECT_EQ(r.duration_estimate_seconds, 5400);
  EXPECT_EQ(r.checkpoint_grace_seconds, 30);
  EXPECT_EQ(r.env,
            (std::vector<std::pair<std::string, std::string>>{{"DEBUG", "true"}, {"LR", "3e-4"}}));
}

TEST(JobRequestTest, FractionalGpus) {
  const JobRequest r = parse_job_request(yaml_with("resources: {gpus: 0.5}"));
  EXPECT_EQ(r.gpus, 1);
  EXPECT_EQ(r.gpu_milli, 500);
  EXPECT_EQ(parse_job_request(yaml_with("resources: {gpus: 0.125}")).gpu_milli, 125);
  EXPECT_TRUE(YamlFails(yaml_with("resources: {gpus: 1.5}"), "resources.gpus", "1.5"));
  EXPECT_TRUE(YamlFails(yaml_with("resources: {gpus: 0.0001}"), "resources.gpus"));
  EXPECT_TRUE(YamlFails(yaml_with("resources: {gpus: 65}"), "resources.gpus"));
  EXPECT_TRUE(YamlFails(yaml_with("resources: {gpus: -1}"), "resources.gpus"));
  EXPECT_TRUE(JsonFails(R"({"name": "a", "command": ["x"], "resources": {"gpus": "1"}})",
                        "resources.gpus"));
}

TEST(JobRequestTest, CpuOnlyJob) {
  const JobRequest r = parse_job_request(yaml_with("resources: {gpus: 0, cpu: 2}"));
  EXPECT_EQ(r.gpus, 0);
  EXPECT_EQ(r.gpu_milli, 1000);
  EXPECT_EQ(r.cpu_milli, 2000);
}

TEST(JobRequestTest, Quantities) {
  const json base = {{"name", "a"}, {"command", {"x"}}};
  json j = base;
  j["resources"] = {{"cpu", 0.25}, {"memory", 1073741824}};
  JobRequest r = job_request_from_json(j);
  EXPECT_EQ(r.cpu_milli, 250);
  EXPECT_EQ(r.mem_mib, 1024);
  EXPECT_TRUE(YamlFails(yaml_with("resources: {cpu: -1}"), "resources.cpu"));
  EXPECT_TRUE(YamlFails(yaml_with("resources: {cpu: lots}"), "resources.cpu"));
  EXPECT_TRUE(YamlFails(yaml_with("resources: {memory: 16Qi}"), "resources.memory"));
  EXPECT_TRUE(YamlFails(yaml_with("resources: {memory: 1e300Ti}"), "resources.memory"));
  // The parsers themselves refuse quantities beyond int64 once scaled (a queue tree's guarantee
  // reaches them without the request reader's range check; found by fuzz_queue_tree).
  int64_t out = 0;
  EXPECT_FALSE(parse_memory_quantity("2577777777777777777777777777777776Gi", out));
  EXPECT_FALSE(parse_cpu_quantity("1e300", out));
  EXPECT_TRUE(parse_memory_quantity("16Gi", out));
  EXPECT_EQ(out, 16384);
  EXPECT_TRUE(YamlFails(yaml_with("resources: {gpu_types: [A100, '']}"), "resources.gpu_types[1]"));
}

TEST(JobRequestTest, UnknownKeys) {
  EXPECT_TRUE(YamlFails(yaml_with("gpu: 1"), "gpu", "known: name, tenant"));
  EXPECT_TRUE(YamlFails(yaml_with("resources: {gpu: 1}"), "resources.gpu", "gpus"));
  EXPECT_TRUE(YamlFails(yaml_with("gang: {min: 1, size: 2}"), "gang.size"));
  EXPECT_TRUE(YamlFails(yaml_with("sla: {max_queue: 1}"), "sla.max_queue"));
}

// A misspelt key is named with what was probably meant; a YAML syntax error shows its line
// with a caret under where the parser stopped.
TEST(JobRequestTest, AMisspeltKeyGetsADidYouMeanAndASyntaxErrorACaret) {
  EXPECT_TRUE(YamlFails(yaml_with("resource: {gpus: 1}"), "resource",
                        "unknown key (did you mean 'resources'?) (known: name"));
  EXPECT_TRUE(
      YamlFails(yaml_with("resources: {gpsu: 1}"), "resources.gpsu", "(did you mean 'gpus'?)"));
  EXPECT_TRUE(YamlFails(yaml_with("zzzz: 1"), "zzzz", "unknown key (known: name"));
  try {
    parse_job_request("name: a\nresources: gpus: 1\ncommand: [x]\n");
    ADD_FAILURE() << "no error";
  } catch (const FieldError& e) {
    EXPECT_EQ(std::string(e.what()),
              "invalid YAML at line 2: illegal map value\n"
              "  2 | resources: gpus: 1\n"
              "    |                ^");
  }
}

TEST(JobRequestTest, Gang) {
  EXPECT_TRUE(YamlFails(yaml_with("gang: {min: 3, max: 2}"), "gang"));
  EXPECT_TRUE(YamlFails(yaml_with("gang: 0"), "gang", "in [1, 100000]"));
  EXPECT_TRUE(YamlFails(yaml_with("gang: 100001"), "gang"));
  EXPECT_TRUE(JsonFails(R"({"name": "a", "command": ["x"], "gang": {"min": "x"}})", "gang.min",
                        "gang.min: expected an integer in [1, 100000], got \"x\""));
  JobRequest r = parse_job_request(yaml_with("gang: {max: 8}"));
  EXPECT_EQ(r.min_members, 1);
  EXPECT_EQ(r.max_members, 8);
  r = parse_job_request(yaml_with("gang: {min: 3}"));
  EXPECT_EQ(r.min_members, 3);
  EXPECT_EQ(r.max_members, 3);
  // Integral floats count as integers (some JSON encoders write 2.0).
  r = job_request_from_json({{"name", "a"}, {"command", {"x"}}, {"gang", 2.0}});
  EXPECT_EQ(r.max_members, 2);
}

TEST(JobRequestTest, Adaptive) {
  JobRequest r = parse_job_request(yaml_with(
      "gang: {max: 8}\nadaptive: {batch: 128, max_batch: 4096, per_gpu: {min: 8, max: 64}}"));
  EXPECT_EQ(r.adaptive, (AdaptiveBatch{128, 4096, 8, 64}));
  // Read back from what the store keeps.
  EXPECT_EQ(job_request_from_json(to_json(r)), r);
  // Defaults: a batch that cannot grow, any micro-batch up to it.
  r = parse_job_request(yaml_with("adaptive: {batch: 32}"));
  EXPECT_EQ(r.adaptive, (AdaptiveBatch{32, 32, 1, 32}));
  EXPECT_EQ(parse_job_request(yaml_with("gang: 2")).adaptive.batch, 0);  // not adaptive
  EXPECT_TRUE(YamlFails(yaml_with("adaptive: {max_batch: 64}"), "adaptive.batch", "required"));
  EXPECT_TRUE(YamlFails(yaml_with("adaptive: {batch: 64, max_batch: 32}"), "adaptive.max_batch"));
  EXPECT_TRUE(
      YamlFails(yaml_with("adaptive: {batch: 64, per_gpu: {min: 0}}"), "adaptive.per_gpu.min"));
  EXPECT_TRUE(YamlFails(yaml_with("adaptive: {batch: 64, per_gpu: {min: 16, max: 8}}"),
                        "adaptive.per_gpu.max"));
  EXPECT_TRUE(YamlFails(yaml_with("adaptive: {batch: 64, step: 1}"), "adaptive.step"));
  EXPECT_TRUE(YamlFails(yaml_with("resources: {gpus: 0.5}\nadaptive: {batch: 64}"), "adaptive",
                        "whole GPUs"));
  EXPECT_TRUE(YamlFails(yaml_with("array: 0-3\nadaptive: {batch: 64}"), "adaptive", "array"));
}

TEST(JobRequestTest, NameAndTenant) {
  EXPECT_TRUE(YamlFails("command: [x]", "name", "required"));
  EXPECT_TRUE(YamlFails("name: 'a b'\ncommand: [x]", "name"));
  EXPECT_TRUE(YamlFails("name: " + std::string(64, 'a') + "\ncommand: [x]", "name"));
  EXPECT_EQ(parse_job_request("name: " + std::string(63, 'a') + "\ncommand: [x]").name,
            std::string(63, 'a'));
  EXPECT_TRUE(YamlFails(yaml_with("tenant: /a"), "tenant"));
  EXPECT_TRUE(YamlFails(yaml_with("tenant: a//b"), "tenant"));
  EXPECT_TRUE(YamlFails(yaml_with("tenant: 'a b'"), "tenant"));
  // A YAML number is the name the user typed.
  EXPECT_EQ(parse_job_request("name: 64\ncommand: [x]").name, "64");
}

TEST(JobRequestTest, Command) {
  EXPECT_TRUE(YamlFails("name: a\ncommand: []", "command"));
  EXPECT_TRUE(YamlFails("name: a", "command", "required"));
  EXPECT_TRUE(YamlFails("name: a\ncommand: python", "command"));
  EXPECT_TRUE(JsonFails(R"({"name": "a", "command": [1, "x"]})", "command[0]"));
  EXPECT_TRUE(JsonFails(R"({"name": "a", "command": ["x", {}]})", "command[1]"));
  json j = {{"name", "a"}, {"command", json::array()}};
  for (int i = 0; i < 4097; ++i) j["command"].push_back("x");
  EXPECT_TRUE(FailsOn([&] { job_request_from_json(j); }, "command", "4096"));
}

TEST(JobRequestTest, YamlScalarsAreText) {
  const JobRequest r = parse_job_request(
      "name: a\ncommand: [sleep, 1, 1.50, true]\nenv: {BATCH: 64, V: 1.10, EMPTY: ''}");
  EXPECT_EQ(r.command, (std::vector<std::string>{"sleep", "1", "1.50", "true"}));
  EXPECT_EQ(r.env, (std::vector<std::pair<std::string, std::string>>{
                       {"BATCH", "64"}, {"EMPTY", ""}, {"V", "1.10"}}));
  // Numbers in YAML may be spelled as the user likes.
  EXPECT_EQ(parse_job_request(yaml_with("gang: '2'\nresources: {gpus: 0.50}")).gpu_milli, 500);
}

TEST(JobRequestTest, Env) {
  EXPECT_TRUE(JsonFails(R"({"name": "a", "command": ["x"], "env": {"BATCH": 64}})", "env.BATCH",
                        "expected a string"));
  EXPECT_TRUE(YamlFails(yaml_with("env: {1X: a}"), "env.1X"));
  EXPECT_TRUE(YamlFails(yaml_with("env: {A-B: a}"), "env.A-B"));
  EXPECT_TRUE(YamlFails(yaml_with("env: [A]"), "env"));
  const JobRequest r = parse_job_request(yaml_with("env: {Z: z, A: a, _m: m}"));
  EXPECT_EQ(r.env, (std::vector<std::pair<std::string, std::string>>{
                       {"A", "a"}, {"Z", "z"}, {"_m", "m"}}));
}

TEST(JobRequestTest, PriorityClassAndSpan) {
  EXPECT_EQ(parse_job_request(yaml_with("priority_class: best-effort")).priority_class,
            "best-effort");
  EXPECT_TRUE(YamlFails(yaml_with("priority_class: urgent"), "priority_class", "research"));
  EXPECT_TRUE(YamlFails(yaml_with("span: datacenter"), "span", "nvlink"));
}

TEST(JobRequestTest, Durations) {
  EXPECT_EQ(parse_job_request(yaml_with("duration_estimate: 10m")).duration_estimate_seconds, 600);
  EXPECT_EQ(parse_job_request(yaml_with("duration_estimate: 1.5h")).duration_estimate_seconds,
            5400);
  EXPECT_EQ(parse_job_request(yaml_with("checkpoint_grace: 2d")).checkpoint_grace_seconds, 172800);
  EXPECT_EQ(parse_job_request(yaml_with("checkpoint_grace: '45'")).checkpoint_grace_seconds, 45);
  EXPECT_EQ(
      job_request_from_json({{"name", "a"}, {"command", {"x"}}, {"sla", {{"max_queueing", 12.5}}}})
          .sla_max_queueing_seconds,
      12.5);
  EXPECT_TRUE(YamlFails(yaml_with("duration_estimate: -5"), "duration_estimate"));
  EXPECT_TRUE(YamlFails(yaml_with("duration_estimate: 10w"), "duration_estimate"));
  EXPECT_TRUE(YamlFails(yaml_with("sla: {max_queueing: soon}"), "sla.max_queueing"));
  EXPECT_TRUE(YamlFails(yaml_with("checkpoint_grace: [1]"), "checkpoint_grace"));
}

TEST(JobRequestTest, NullIsAbsent) {
  const JobRequest r = job_request_from_json(
      {{"name", "a"}, {"command", {"x"}}, {"tenant", nullptr}, {"sla", nullptr}});
  EXPECT_EQ(r.tenant, "");
  EXPECT_EQ(r.sla_max_queueing_seconds, -1);
  EXPECT_TRUE(YamlFails("name: ~\ncommand: [x]", "name", "required"));
}

TEST(JobRequestTest, SyntaxErrors) {
  EXPECT_TRUE(YamlFails("name: a\ncommand: [x\n", "", "line"));
  EXPECT_TRUE(YamlFails("name: a\n  bad: indent\n: :\n", "", "line"));
  EXPECT_TRUE(YamlFails("name: a\nname: b\ncommand: [x]", "", "duplicate key 'name'"));
  EXPECT_TRUE(YamlFails("- a\n- b\n", "", "expected an object"));
  EXPECT_TRUE(YamlFails("", "", "expected an object"));
  EXPECT_TRUE(YamlFails(R"(  {"name": "a", "command": ["x"],})", "", "invalid JSON"));
  EXPECT_TRUE(YamlFails("{\"name\": \"a\",\n \"command\": [x]}", "", "line 2"));
  // JSON is strict about types, even through parse_job_request.
  EXPECT_TRUE(YamlFails(R"({"name": 64, "command": ["x"]})", "name", "expected a string"));
}

TEST(JobRequestTest, AliasBombIsRejected) {
  std::string yaml = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    const std::string prev = "*a" + std::to_string(i - 1);
    yaml += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) yaml += (k ? ", " : "") + prev;
    yaml += "]\n";
  }
  EXPECT_TRUE(YamlFails(yaml, "", "too large"));
}

TEST(JobRequestTest, FieldErrorMessage) {
  EXPECT_STREQ(FieldError("resources.gpus", "expected x").what(),
               "field resources.gpus: expected x");
  EXPECT_STREQ(FieldError("", "invalid YAML").what(), "invalid YAML");
}

TEST(JobRequestTest, RoundTrip) {
  const JobRequest r = full_request();
  const json j = to_json(r);
  EXPECT_EQ(j["resources"]["gpus"], 0.25);
  EXPECT_EQ(j["gang"], json({{"min", 2}, {"max", 8}}));
  EXPECT_EQ(job_request_from_json(j), r);
  EXPECT_EQ(parse_job_request(j.dump()), r);
  EXPECT_EQ(parse_job_request(j.dump(2)), r);

  JobRequest minimal;
  minimal.name = "m";
  minimal.command = {"true"};
  EXPECT_EQ(job_request_from_json(to_json(minimal)), minimal);
  EXPECT_FALSE(to_json(minimal).contains("tenant"));
  EXPECT_FALSE(to_json(minimal).contains("sla"));

  JobRequest cpu_only = full_request();
  cpu_only.gpus = 0;
  cpu_only.gpu_milli = 1000;
  cpu_only.cpu_milli = 4000;
  cpu_only.mem_mib = 300;
  EXPECT_EQ(parse_job_request(to_json(cpu_only).dump()), cpu_only);

  // Every fraction survives.
  for (int milli = 1; milli < 1000; ++milli) {
    JobRequest f = minimal;
    f.gpu_milli = milli;
    ASSERT_EQ(parse_job_request(to_json(f).dump()), f) << milli;
  }
}

TEST(JobRequestTest, YamlRoundTripOfParsedSpec) {
  const JobRequest r = parse_job_request(R"(
name: y
gang: {min: 1, max: 4}
resources: {gpus: 0.3, cpu: 1.5, memory: 1536Mi}
duration_estimate: 90s
command: [a, "b c"]
env: {X: 1}
)");
  EXPECT_EQ(r.mem_mib, 1536);
  EXPECT_EQ(r.cpu_milli, 1500);
  EXPECT_EQ(job_request_from_json(to_json(r)), r);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// Duplicate JSON keys were accepted (the last won) while YAML refused
// them, a second YAML document was dropped, and `gpus: 1e-400` (JSON) read as 0 GPUs.
TEST(JobRequestStrict, DuplicateKeysExtraDocumentsAndUnderflowAreRefused) {
  EXPECT_TRUE(YamlFails(R"({"name": "a", "name": "b", "command": ["true"]})", "name", "twice"));
  EXPECT_TRUE(FailsOn([] { parse_json_strict(R"({"a": {"b": 1, "b": 2}})"); }, "b", "twice"));
  // The same key in two objects is fine.
  EXPECT_NO_THROW(parse_json_strict(R"({"a": {"k": 1}, "b": {"k": 2}})"));
  EXPECT_TRUE(YamlFails(R"({"name": "a", "command": ["true"], "resources": {"gpus": 1e-400}})", "",
                        "1e-400 is out of range"));
  EXPECT_TRUE(YamlFails(R"({"name": "a", "command": ["true"], "x": 1e999})", "", "out of range"));
  EXPECT_NO_THROW(parse_json_strict(R"({"a": 0.0, "b": -1.5e-300, "c": "1e-400"})"));
  EXPECT_TRUE(
      YamlFails("resources: {gpus: 1e-400}\nname: a\ncommand: [\"true\"]\n", "resources.gpus"));
  EXPECT_TRUE(
      YamlFails(yaml_with("---\nname: second\ncommand: [\"rm\"]\n"), "", "2 YAML documents"));
  EXPECT_NO_THROW(parse_job_request("---\n" + yaml_with("")));
  // Found by fuzzing: yaml-cpp's LoadAll loops for ever on this (a hung worker per request).
  EXPECT_TRUE(YamlFails(", a", ""));
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

std::vector<int32_t> array_of(const std::string& text, int32_t* throttle = nullptr) {
  std::vector<int32_t> out;
  int32_t t = -1;
  parse_array_spec(text, "array", out, t);
  if (throttle != nullptr) *throttle = t;
  return out;
}

TEST(JobRequestTest, AnArraysIndicesAndThrottleAsSlurmWritesThem) {
  int32_t throttle = 0;
  const std::vector<int32_t> hundred = array_of("0-99%10", &throttle);
  ASSERT_EQ(hundred.size(), 100u);
  EXPECT_EQ(hundred.front(), 0);
  EXPECT_EQ(hundred.back(), 99);
  EXPECT_EQ(throttle, 10);
  EXPECT_EQ(array_of("1,3,5-11:2", &throttle), (std::vector<int32_t>{1, 3, 5, 7, 9, 11}));
  EXPECT_EQ(throttle, 0);
  EXPECT_EQ(array_of("7"), std::vector<int32_t>{7});
  EXPECT_EQ(array_spec_text(array_of("3,0-2,9%4"), 4), "0-3,9%4");
  // In a job spec: YAML's bare number is one index; the canonical JSON round-trips.
  const JobRequest r = parse_job_request("name: a\narray: 0-3%2\ncommand: [x]\n");
  EXPECT_EQ(r.array_indices, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(r.array_throttle, 2);
  EXPECT_EQ(job_request_from_json(to_json(r)), r);
  EXPECT_EQ(parse_job_request("name: a\narray: 5\ncommand: [x]\n").array_indices,
            std::vector<int32_t>{5});
}

TEST(JobRequestTest, ABadArrayNamesTheFieldAndWhatIsWrong) {
  const auto error = [](const std::string& text) {
    try {
      array_of(text);
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), "array");
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(error("5-1").find("runs backwards"), std::string::npos);
  EXPECT_NE(error("0-20000").find("more than 10000 tasks"), std::string::npos);
  EXPECT_NE(error("1,1").find("listed twice"), std::string::npos);
  EXPECT_NE(error("0-9%0").find("at least 1"), std::string::npos);
  EXPECT_NE(error("a-b").find("is not an index"), std::string::npos);
  EXPECT_NE(error("").find("no indices"), std::string::npos);
  EXPECT_NE(error("-3").find("is not an index"), std::string::npos);
  EXPECT_NE(error("0-9:0").find("step must be at least 1"), std::string::npos);
  EXPECT_NE(error("99999999").find("is not an index"), std::string::npos);
}

}  // namespace
}  // namespace tessera

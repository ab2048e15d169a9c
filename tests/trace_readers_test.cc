#include "sim/trace_readers.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "input_error_util.h"
#include "model/input_error.h"

namespace tessera {
namespace {

const std::string kData = TESSERA_SHARED_DATA;

using testing::Contains;
using testing::error_of;

Workload parse(const std::string& text, TraceFormat f, const ReaderOptions& opt = {}) {
  return parse_workload(text, "w.csv", f, opt);
}

std::string parse_error(const std::string& text, TraceFormat f, const ReaderOptions& opt = {}) {
  return error_of([&] { parse(text, f, opt); });
}

std::string tenant_of(const Workload& w, const JobSpec& j) {
  return w.tenants.name(j.tenant);
}
std::string model_of(const Workload& w, const JobSpec& j) {
  return w.models.name(j.model);
}

TEST(TraceReaderTest, FormatNames) {
  for (auto f : {TraceFormat::kPollux, TraceFormat::kPhilly, TraceFormat::kTiresias,
                 TraceFormat::kAlibaba, TraceFormat::kJsonl}) {
    EXPECT_EQ(parse_trace_format(to_string(f)), f);
  }
  EXPECT_FALSE(parse_trace_format("csv").has_value());
  EXPECT_EQ(guess_trace_format_of_line("name,time,application,num_replicas,batch_size"),
            TraceFormat::kPollux);
  EXPECT_EQ(guess_trace_format_of_line("timestamp,duration,num_gpus,gpu_time,cluster"),
            TraceFormat::kPhilly);
  EXPECT_EQ(guess_trace_format_of_line("job_id,num_gpu,submit_time,iterations,model_name,"
                                       "duration,interval"),
            TraceFormat::kTiresias);
  EXPECT_EQ(guess_trace_format_of_line("name,cpu_milli,memory_mib,num_gpu,gpu_milli"),
            TraceFormat::kAlibaba);
  EXPECT_EQ(guess_trace_format_of_line(R"({"name": "a"})"), TraceFormat::kJsonl);
  EXPECT_FALSE(guess_trace_format_of_line("a,b,c").has_value());
}

TEST(TraceReaderTest, GuessFromFile) {
  const auto path = std::filesystem::temp_directory_path() / "tessera_tr_guess.jsonl";
  std::ofstream(path) << "\n# a comment\n{\"name\": \"a\", \"submit\": 0, \"work\": 5}\n";
  EXPECT_EQ(guess_trace_format(path.string()), TraceFormat::kJsonl);
  const auto bad = std::filesystem::temp_directory_path() / "tessera_tr_guess.txt";
  std::ofstream(bad) << "hello,world\n";
  const std::string e = error_of([&] { guess_trace_format(bad.string()); });
  EXPECT_TRUE(Contains(e, bad.string() + ":1"));
  EXPECT_TRUE(Contains(error_of([] { guess_trace_format("/nonexistent/x.csv"); }), "cannot open"));
}

TEST(TraceReaderTest, Pollux) {
  const Workload w = parse(
      "name,time,application,num_replicas,batch_size\n"
      "cifar10-0,107,cifar10,6,2048\n"
      "bert-1,20,bert,1,384\r\n"
      "\n"
      "ncf-2,300.5,ncf,2,32768\n",
      TraceFormat::kPollux);
  ASSERT_EQ(w.jobs.size(), 3u);
  const JobSpec& j = w.jobs[0];  // sorted by submit time
  EXPECT_EQ(j.name, "bert-1");
  EXPECT_EQ(j.submit_time, 20);
  EXPECT_EQ(model_of(w, j), "bert");
  EXPECT_EQ(j.batch_size, 384);
  EXPECT_EQ(tenant_of(w, j), "default");
  EXPECT_EQ(j.source, "w.csv:3");
  const JobSpec& c = w.jobs[1];
  EXPECT_EQ(c.min_members, 6);
  EXPECT_EQ(c.max_members, 6);
  EXPECT_EQ(c.demand, (MemberDemand{1, 1000, 0, 0}));
  EXPECT_EQ(c.work_seconds, kUnknown);
  EXPECT_EQ(c.duration_estimate, kUnknown);
  EXPECT_EQ(c.restart_cost, 30);
  EXPECT_EQ(c.checkpoint_interval, 0);
  EXPECT_EQ(w.jobs[2].submit_time, 300.5);
  EXPECT_EQ(w.jobs[2].source, "w.csv:5");

  const Workload t = parse(
      "name,time,application,num_replicas,batch_size,tenant\n"
      "a,1,ncf,1,32,team-x\n",
      TraceFormat::kPollux);
  EXPECT_EQ(tenant_of(t, t.jobs[0]), "team-x");
}

TEST(TraceReaderTest, PolluxErrors) {
  const std::string head = "name,time,application,num_replicas,batch_size\n";
  std::string e = parse_error("name,time,app,num_replicas,batch_size\n", TraceFormat::kPollux);
  EXPECT_TRUE(Contains(e, "w.csv:1"));
  EXPECT_TRUE(Contains(e, "app"));
  EXPECT_TRUE(Contains(e, "name,time,application,num_replicas,batch_size"));
  e = parse_error(head + "a,1,ncf,1,32\nb,2,ncf,x,32\n", TraceFormat::kPollux);
  EXPECT_TRUE(Contains(e, "w.csv:3"));
  EXPECT_TRUE(Contains(e, "field num_replicas"));
  e = parse_error(head + "a,1,ncf,1\n", TraceFormat::kPollux);
  EXPECT_TRUE(Contains(e, "w.csv:2"));
  EXPECT_TRUE(Contains(e, "expected 5 columns, got 4"));
  e = parse_error(head + "a,1s,ncf,1,32\n", TraceFormat::kPollux);
  EXPECT_TRUE(Contains(e, "field time"));
  e = parse_error(head + "a,1,ncf,0,32\n", TraceFormat::kPollux);
  EXPECT_TRUE(Contains(e, "field num_replicas"));
  e = parse_error(head + "a,-1,ncf,1,32\n", TraceFormat::kPollux);
  EXPECT_TRUE(Contains(e, "field time"));
  e = parse_error("", TraceFormat::kPollux);
  EXPECT_TRUE(Contains(e, "empty file"));
  e = parse_error("\n\n", TraceFormat::kPhilly);
  EXPECT_TRUE(Contains(e, "empty file"));
}

TEST(TraceReaderTest, Philly) {
  ReaderOptions opt;
  opt.default_model = "LM (batch size 20)";
  const Workload w = parse(
      "timestamp,duration,num_gpus,gpu_time,cluster\n"
      "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
      "2017-10-09 06:13:03,2951.0,8,23608.0,6214e9\n"
      "2016-02-28 23:59:59,10,2,20,11cb48\n"
      "2016-03-01 00:00:00,10,2,20,11cb48\n",
      TraceFormat::kPhilly, opt);
  ASSERT_EQ(w.jobs.size(), 4u);
  // Relative to the earliest row: Feb 29 2016 exists, so Mar 1 00:00 is a day and a second on.
  EXPECT_EQ(w.jobs[0].submit_time, 0);
  EXPECT_EQ(w.jobs[0].source, "w.csv:4");
  EXPECT_EQ(w.jobs[1].submit_time, 86401);
  const JobSpec& j = w.jobs[2];
  EXPECT_EQ(j.source, "w.csv:3");
  EXPECT_EQ(tenant_of(w, j), "6214e9");
  EXPECT_EQ(j.min_members, 8);
  EXPECT_EQ(j.max_members, 8);
  EXPECT_EQ(j.demand.gpus, 1);
  EXPECT_EQ(j.work_seconds, 2951);
  EXPECT_EQ(j.duration_estimate, 2951);
  EXPECT_EQ(model_of(w, j), "LM (batch size 20)");
  EXPECT_EQ(j.restart_cost, 0);
  EXPECT_EQ(w.jobs[3].submit_time - j.submit_time, 48 * 60 + 52);
  EXPECT_EQ(w.tenants.size(), 2u);
}

TEST(TraceReaderTest, PhillyErrors) {
  const std::string head = "timestamp,duration,num_gpus,gpu_time,cluster\n";
  std::string e = parse_error(head + "2017-10-09 07:01,66.0,1,66.0,a\n", TraceFormat::kPhilly);
  EXPECT_TRUE(Contains(e, "w.csv:2"));
  EXPECT_TRUE(Contains(e, "field timestamp"));
  e = parse_error(head + "2017-02-30 07:01:00,66.0,1,66.0,a\n", TraceFormat::kPhilly);
  EXPECT_TRUE(Contains(e, "field timestamp"));
  e = parse_error(head + "2017-10-09 07:01:00,0,1,0,a\n", TraceFormat::kPhilly);
  EXPECT_TRUE(Contains(e, "w.csv:2"));
  EXPECT_TRUE(Contains(e, "field duration"));
  e = parse_error(head + "2017-10-09 07:01:00,5,0,0,a\n", TraceFormat::kPhilly);
  EXPECT_TRUE(Contains(e, "field num_gpus"));
  e = parse_error(head + "2017-10-09 07:01:00,5,1,5,\n", TraceFormat::kPhilly);
  EXPECT_TRUE(Contains(e, "field cluster"));
  e = parse_error(head + "2017-10-09 07:01:00,5.0.1,1,5,a\n", TraceFormat::kPhilly);
  EXPECT_TRUE(Contains(e, "field duration"));
}

TEST(TraceReaderTest, TiresiasBothVariants) {
  const Workload a = parse(
      "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
      "0,1,0,606,vgg19,164,30\n"
      "1,8,30,133,lstm,147,23\n"
      "2,2,53,157,mystery,127,26\n",
      TraceFormat::kTiresias);
  ASSERT_EQ(a.jobs.size(), 3u);
  EXPECT_EQ(a.jobs[0].name, "0");
  EXPECT_EQ(model_of(a, a.jobs[0]), "ResNet-50 (batch size 64)");
  EXPECT_EQ(model_of(a, a.jobs[1]), "LM (batch size 20)");
  EXPECT_EQ(model_of(a, a.jobs[2]), ReaderOptions{}.default_model);
  EXPECT_EQ(a.jobs[1].min_members, 8);
  EXPECT_EQ(a.jobs[1].submit_time, 30);
  EXPECT_EQ(a.jobs[1].work_seconds, 147);
  EXPECT_EQ(a.jobs[1].duration_estimate, 147);

  const Workload b = parse(
      "job_id,num_gpu,submit_time,start_time,duration,model_size,aggr_interval,model_name,"
      "model_scale\n"
      "10,12,11,14,20,400,0,vgg19,1\n"
      "10,12,11,14,20,400,0,vgg19,1",  // no final newline, as in tf_job.csv
      TraceFormat::kTiresias);
  ASSERT_EQ(b.jobs.size(), 2u);
  EXPECT_EQ(b.jobs[0].name, "10");
  EXPECT_EQ(b.jobs[1].name, "10#2");
  EXPECT_EQ(b.jobs[1].min_members, 12);
  EXPECT_EQ(b.jobs[1].source, "w.csv:3");

  EXPECT_EQ(gavel_model_for_tiresias("ResNet18", "x"), "ResNet-18 (batch size 64)");
  EXPECT_EQ(gavel_model_for_tiresias("bert", "x"), "Transformer (batch size 64)");
  EXPECT_EQ(gavel_model_for_tiresias("inception3", "x"), "ResNet-50 (batch size 64)");
  EXPECT_EQ(gavel_model_for_tiresias("", "x"), "x");

  const std::string e = parse_error(
      "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,0,606,vgg19,-4,30\n",
      TraceFormat::kTiresias);
  EXPECT_TRUE(Contains(e, "w.csv:2"));
  EXPECT_TRUE(Contains(e, "field duration"));
}

TEST(TraceReaderTest, Alibaba) {
  const GpuTypeTable types = GpuTypeTable::builtin();
  ReaderOptions opt;
  opt.gpu_types = &types;
  const Workload w = parse(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
      "deletion_time,scheduled_time\n"
      "p0,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
      "p1,6000,12288,1,460,T4|V100M16,BE,Running,427061,12902960,427063\n"
      "p2,8000,30517,0,0,,Burstable,Succeeded,100,200,150\n"
      "p3,11908,47104,1,1000,,BE,Pending,1000,1125,\n"
      "p4,8000,30517,1,230,,BE,Pending,5000,5000,\n"
      "p5,8000,0,8,1000,V100M32|V100M32,Guaranteed,Failed,7,9,8\n",
      TraceFormat::kAlibaba, opt);
  ASSERT_EQ(w.jobs.size(), 6u);
  const JobSpec& p0 = w.jobs[0];
  EXPECT_EQ(p0.name, "p0");
  EXPECT_EQ(p0.priority, PriorityClass::kProduction);
  EXPECT_TRUE(p0.priority_given);  // the trace's LS / BE label is the job's own
  EXPECT_EQ(p0.work_seconds, 12537496);
  EXPECT_EQ(p0.allowed_types, kAnyGpuType);
  EXPECT_EQ(tenant_of(w, p0), "default");
  const JobSpec& p5 = w.jobs[1];
  EXPECT_EQ(p5.name, "p5");
  EXPECT_EQ(p5.demand, (MemberDemand{8, 1000, 8000, 0}));
  EXPECT_EQ(p5.allowed_types, GpuTypeMask{1} << *types.find("V100M32"));
  EXPECT_EQ(p5.priority, PriorityClass::kResearch);
  EXPECT_FALSE(p5.priority_given);  // Kubernetes' Guaranteed says nothing of intent
  EXPECT_EQ(p5.work_seconds, 1);
  const JobSpec& p2 = w.jobs[2];
  EXPECT_EQ(p2.demand.gpus, 0);
  EXPECT_EQ(p2.demand.total_gpu_milli(), 0);
  EXPECT_EQ(p2.demand.cpu_milli, 8000);
  EXPECT_EQ(p2.work_seconds, 50);
  const JobSpec& p3 = w.jobs[3];
  EXPECT_EQ(p3.work_seconds, 125);  // pending pod: deletion - creation
  EXPECT_EQ(p3.priority, PriorityClass::kBestEffort);
  EXPECT_EQ(w.jobs[4].work_seconds, 1);  // deleted in the second it was created
  const JobSpec& p1 = w.jobs[5];
  EXPECT_EQ(p1.demand, (MemberDemand{1, 460, 6000, 12288}));
  EXPECT_EQ(p1.allowed_types,
            (GpuTypeMask{1} << *types.find("T4")) | (GpuTypeMask{1} << *types.find("V100M16")));
  EXPECT_EQ(p1.submit_time, 427061);
  EXPECT_EQ(p1.work_seconds, 12902960 - 427063);
  EXPECT_EQ(p1.duration_estimate, p1.work_seconds);

  const Workload m =
      parse("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,2,4,1000\n", TraceFormat::kAlibaba);
  ASSERT_EQ(m.jobs.size(), 1u);
  EXPECT_EQ(m.jobs[0].submit_time, 0);
  EXPECT_EQ(m.jobs[0].work_seconds, kUnknown);
  EXPECT_EQ(m.jobs[0].demand.gpus, 4);
}

TEST(TraceReaderTest, AlibabaErrors) {
  const GpuTypeTable types = GpuTypeTable::builtin();
  ReaderOptions opt;
  opt.gpu_types = &types;
  const std::string head =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
      "deletion_time,scheduled_time\n";
  std::string e =
      parse_error(head + "p,1,1,1,1000,T4|Z9,LS,Running,0,5,0\n", TraceFormat::kAlibaba, opt);
  EXPECT_TRUE(Contains(e, "w.csv:2"));
  EXPECT_TRUE(Contains(e, "field gpu_spec"));
  EXPECT_TRUE(Contains(e, "Z9"));
  e = parse_error(head + "p,1,1,1,1000,T4,LS,Running,0,5,0\n", TraceFormat::kAlibaba);
  EXPECT_TRUE(Contains(e, "field gpu_spec"));
  e = parse_error(head + "p,1,1,2,500,,LS,Running,0,5,0\n", TraceFormat::kAlibaba);
  EXPECT_TRUE(Contains(e, "field gpu_milli"));
  e = parse_error(head + "p,1,1,1,1001,,LS,Running,0,5,0\n", TraceFormat::kAlibaba);
  EXPECT_TRUE(Contains(e, "field gpu_milli"));
  e = parse_error(head + "p,1,1,1,1000,,LS,Running,10,5,10\n", TraceFormat::kAlibaba);
  EXPECT_TRUE(Contains(e, "field deletion_time"));
  e = parse_error(head + "p,1,1,1,1000,,LS,Running,10,50,5\n", TraceFormat::kAlibaba);
  EXPECT_TRUE(Contains(e, "field scheduled_time"));
  e = parse_error(head + "p,1.5,1,1,1000,,LS,Running,10,50,10\n", TraceFormat::kAlibaba);
  EXPECT_TRUE(Contains(e, "field cpu_milli"));
}

TEST(TraceReaderTest, Jsonl) {
  const GpuTypeTable types = GpuTypeTable::builtin();
  ReaderOptions opt;
  opt.gpu_types = &types;
  const Workload w = parse(
      "# Tessera workload\n"
      "\n"
      R"({"name": "a", "tenant": "t1", "priority": "production", "submit": 10, "members": 4,)"
      R"( "gpus": 2, "cpu_milli": 8000, "mem_mib": 1024, "gpu_types": ["A100-80G", "H100"],)"
      R"j( "work": 3600, "duration_estimate": 4000, "model": "ResNet-50 (batch size 64)",)j"
      R"( "batch_size": 256, "checkpoint_interval": 600, "restart_cost": 20})"
      "\n"
      R"({"name": "b", "submit": 5.5, "min_members": 1, "max_members": 8, "model": "cifar10"})"
      "\n"
      R"({"name": "c", "submit": 7, "gpu_milli": 250, "work": 1})"
      "\n",
      TraceFormat::kJsonl, opt);
  ASSERT_EQ(w.jobs.size(), 3u);
  const JobSpec& b = w.jobs[0];
  EXPECT_EQ(b.name, "b");
  EXPECT_EQ(b.source, "w.csv:4");
  EXPECT_EQ(b.min_members, 1);
  EXPECT_EQ(b.max_members, 8);
  EXPECT_EQ(b.work_seconds, kUnknown);
  EXPECT_EQ(tenant_of(w, b), "default");
  EXPECT_EQ(b.priority, PriorityClass::kResearch);
  const JobSpec& c = w.jobs[1];
  EXPECT_EQ(c.demand, (MemberDemand{1, 250, 0, 0}));
  EXPECT_EQ(c.model, kNoId);
  EXPECT_EQ(c.duration_estimate, kUnknown);
  const JobSpec& a = w.jobs[2];
  EXPECT_EQ(tenant_of(w, a), "t1");
  EXPECT_EQ(a.priority, PriorityClass::kProduction);
  EXPECT_EQ(a.submit_time, 10);
  EXPECT_EQ(a.min_members, 4);
  EXPECT_EQ(a.demand, (MemberDemand{2, 1000, 8000, 1024}));
  EXPECT_EQ(a.allowed_types,
            (GpuTypeMask{1} << *types.find("A100-80G")) | (GpuTypeMask{1} << *types.find("H100")));
  EXPECT_EQ(a.work_seconds, 3600);
  EXPECT_EQ(a.duration_estimate, 4000);
  EXPECT_EQ(model_of(w, a), "ResNet-50 (batch size 64)");
  EXPECT_EQ(a.batch_size, 256);
  EXPECT_EQ(a.checkpoint_interval, 600);
  EXPECT_EQ(a.restart_cost, 20);
}

TEST(TraceReaderTest, JsonlErrors) {
  auto err = [](const std::string& line) {
    return parse_error("# header\n" + line + "\n", TraceFormat::kJsonl);
  };
  struct Case {
    const char* line;
    const char* field;
  };
  const Case cases[] = {
      {R"({"name": "a", "submit": 0, "work": 1, "gpu": 2})", "field gpu"},
      {R"({"name": 5, "submit": 0, "work": 1})", "field name"},
      {R"({"submit": 0, "work": 1})", "field name"},
      {R"({"name": "a", "work": 1})", "field submit"},
      {R"({"name": "a", "submit": "now", "work": 1})", "field submit"},
      {R"({"name": "a", "submit": 0})", "field work"},
      {R"({"name": "a", "submit": 0, "work": 0})", "field work"},
      {R"({"name": "a", "submit": 0, "work": 1, "members": 0})", "field members"},
      {R"({"name": "a", "submit": 0, "work": 1, "members": 1.5})", "field members"},
      {R"({"name": "a", "submit": 0, "work": 1, "min_members": 4, "max_members": 2})",
       "field min_members"},
      {R"({"name": "a", "submit": 0, "work": 1, "min_members": 4})", "field max_members"},
      {R"({"name": "a", "submit": 0, "work": 1, "members": 2, "max_members": 2})", "field members"},
      {R"({"name": "a", "submit": 0, "work": 1, "gpus": 2, "gpu_milli": 500})", "field gpu_milli"},
      {R"({"name": "a", "submit": 0, "work": 1, "gpu_milli": 0})", "field gpu_milli"},
      {R"({"name": "a", "submit": 0, "work": 1, "priority": "urgent"})", "field priority"},
      {R"({"name": "a", "submit": 0, "work": 1, "gpu_types": ["T4"]})", "field gpu_types"},
      {R"({"name": "a", "submit": 0, "work": 1, "cpu_milli": true})", "field cpu_milli"},
      {R"({"name": "a", "submit": 0, "work": 1, "restart_cost": -1})", "field restart_cost"},
  };
  for (const Case& c : cases) {
    const std::string e = err(c.line);
    EXPECT_TRUE(Contains(e, "w.csv:2")) << c.line;
    EXPECT_TRUE(Contains(e, c.field)) << c.line;
  }
  EXPECT_TRUE(Contains(err("{\"name\": \"a\""), "w.csv:2"));
  EXPECT_TRUE(Contains(err("[1, 2]"), "expected a JSON object"));
  EXPECT_TRUE(Contains(parse_error("# only a comment\n", TraceFormat::kJsonl), "empty"));
}

TEST(TraceReaderTest, UnknownAndAmbiguousGpuTypesAreRefusedWithTheKnownNames) {
  const GpuTypeTable types = GpuTypeTable::builtin();
  ReaderOptions opt;
  opt.gpu_types = &types;
  const std::string unknown =
      parse_error(R"({"name": "a", "submit": 0, "work": 1, "gpu_types": ["Hopper"]})",
                  TraceFormat::kJsonl, opt);
  EXPECT_TRUE(Contains(unknown, "w.csv:1"));
  EXPECT_TRUE(Contains(unknown, "unknown GPU type 'Hopper' (known: V100, K80"));
  const std::string ambiguous = parse_error(
      R"({"name": "a", "submit": 0, "work": 1, "gpu_types": ["a100"]})", TraceFormat::kJsonl, opt);
  EXPECT_TRUE(Contains(ambiguous, "ambiguous GPU type 'a100': say A100-40G or A100-80G"));
}

TEST(TraceReaderTest, WorkOnConvertsWorkToV100Seconds) {
  // `work` is V100-seconds, so ten hours timed on an H100 ran in 1.6 h there. `work_on` names
  // the type the work was timed on; it is converted with the type table's relative speeds.
  const GpuTypeTable types = GpuTypeTable::builtin();
  ReaderOptions opt;
  opt.gpu_types = &types;
  const Workload w = parse(R"({"name": "plain", "submit": 0, "work": 36000})"
                           "\n"
                           R"({"name": "h100", "submit": 1, "work": 36000, "work_on": "H100"})"
                           "\n"
                           R"({"name": "alias", "submit": 2, "work": 100, "work_on": "h100-80gb"})"
                           "\n"
                           R"({"name": "k80", "submit": 3, "work": 1000, "work_on": "K80"})"
                           "\n"
                           R"({"name": "v100", "submit": 4, "work": 50, "work_on": "V100"})",
                           TraceFormat::kJsonl, opt);
  ASSERT_EQ(w.jobs.size(), 5u);
  const double h100 = types.at(types.known("H100")).relative_speed;
  EXPECT_DOUBLE_EQ(w.jobs[0].work_seconds, 36000);
  EXPECT_DOUBLE_EQ(w.jobs[1].work_seconds, 36000 * h100);
  EXPECT_DOUBLE_EQ(w.jobs[2].work_seconds, 100 * h100);
  EXPECT_DOUBLE_EQ(w.jobs[3].work_seconds, 1000 * 0.297);
  EXPECT_DOUBLE_EQ(w.jobs[4].work_seconds, 50);
  // Without a table given, the built-in one converts.
  const Workload b =
      parse(R"({"name": "a", "submit": 0, "work": 10, "work_on": "B200"})", TraceFormat::kJsonl);
  EXPECT_DOUBLE_EQ(b.jobs[0].work_seconds, 10 * types.at(types.known("B200")).relative_speed);
}

TEST(TraceReaderTest, WorkOnErrorsNameTheLineAndFieldAndTheKnownTypes) {
  const GpuTypeTable types = GpuTypeTable::builtin();
  ReaderOptions opt;
  opt.gpu_types = &types;
  const auto err = [&](const std::string& line) {
    const std::string first = R"({"name": "ok", "submit": 0, "work": 1})";
    return parse_error(first + "\n" + line, TraceFormat::kJsonl, opt);
  };
  const std::string unknown = err(R"({"name": "a", "submit": 0, "work": 1, "work_on": "H800"})");
  EXPECT_TRUE(Contains(unknown, "w.csv:2")) << unknown;
  EXPECT_TRUE(Contains(unknown, "field work_on")) << unknown;
  EXPECT_TRUE(Contains(unknown, "unknown GPU type 'H800' (known: V100, K80")) << unknown;
  EXPECT_TRUE(Contains(unknown, "L40S")) << unknown;
  const std::string ambiguous = err(R"({"name": "a", "submit": 0, "work": 1, "work_on": "A100"})");
  EXPECT_TRUE(Contains(ambiguous, "field work_on")) << ambiguous;
  EXPECT_TRUE(Contains(ambiguous, "say A100-40G or A100-80G")) << ambiguous;
  const std::string no_work = err(R"({"name": "a", "submit": 0, "model": "imagenet",)"
                                  R"( "work_on": "H100"})");
  EXPECT_TRUE(Contains(no_work, "w.csv:2")) << no_work;
  EXPECT_TRUE(Contains(no_work, "field work_on: given without work")) << no_work;
  const std::string not_string = err(R"({"name": "a", "submit": 0, "work": 1, "work_on": 3})");
  EXPECT_TRUE(Contains(not_string, "field work_on: expected a string")) << not_string;
  const std::string service = err(R"({"name": "a", "submit": 0, "work": 1, "work_on": "H100",)"
                                  R"( "service": {"region": "east", "latency_slo_ms": 100}})");
  EXPECT_TRUE(Contains(service, "field work_on: not for a service")) << service;
  // A misspelt key is named with what was probably meant.
  const std::string typo = err(R"({"name": "a", "submit": 0, "work": 1, "work_onn": "H100"})");
  EXPECT_TRUE(Contains(typo, "field work_onn: unknown key (did you mean 'work_on'?)")) << typo;
}

TEST(TraceReaderTest, MaxJobs) {
  ReaderOptions opt;
  opt.max_jobs = 2;
  const Workload w = parse(
      "name,time,application,num_replicas,batch_size\n"
      "a,30,ncf,1,32\nb,20,ncf,1,32\nc,10,ncf,1,32\n",
      TraceFormat::kPollux, opt);
  ASSERT_EQ(w.jobs.size(), 2u);
  EXPECT_EQ(w.jobs[0].name, "b");
  EXPECT_EQ(w.jobs[1].name, "a");
}

TEST(TraceReaderTest, JsonlRoundTripWithGpuTypes) {
  const GpuTypeTable types = GpuTypeTable::builtin();
  ReaderOptions opt;
  opt.gpu_types = &types;
  const Workload w = parse(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
      "deletion_time,scheduled_time\n"
      "p1,6000,12288,1,460,T4|V100M16,BE,Running,427061,12902960,427063\n"
      "p2,8000,30517,0,0,,Burstable,Succeeded,100,200,150\n",
      TraceFormat::kAlibaba, opt);
  std::ostringstream out;
  EXPECT_THROW(write_jsonl(w, out), std::invalid_argument);
  out.str("");
  write_jsonl(w, out, &types);
  const Workload r = parse_workload(out.str(), "rt.jsonl", TraceFormat::kJsonl, opt);
  ASSERT_EQ(r.jobs.size(), w.jobs.size());
  for (size_t i = 0; i < w.jobs.size(); ++i) {
    EXPECT_EQ(r.jobs[i].name, w.jobs[i].name);
    EXPECT_EQ(r.jobs[i].demand, w.jobs[i].demand);
    EXPECT_EQ(r.jobs[i].allowed_types, w.jobs[i].allowed_types);
    EXPECT_EQ(r.jobs[i].priority, w.jobs[i].priority);
    EXPECT_EQ(r.jobs[i].submit_time, w.jobs[i].submit_time);
    EXPECT_EQ(r.jobs[i].work_seconds, w.jobs[i].work_seconds);
  }
  std::ostringstream again;
  write_jsonl(r, again, &types);
  EXPECT_EQ(again.str(), out.str());
}

// ---------------------------------------------------------------- the real traces

TEST(TraceReaderTest, RealPhilly) {
  const std::string path = kData + "/philly/pollux/philly.csv";
  if (!std::filesystem::exists(path)) GTEST_SKIP();
  ASSERT_EQ(guess_trace_format(path), TraceFormat::kPhilly);
  const auto start = std::chrono::steady_clock::now();
  const Workload w = read_workload(path, TraceFormat::kPhilly, {});
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("parse_seconds", std::to_string(secs));
  std::printf("philly.csv: %zu jobs parsed in %.3f s\n", w.jobs.size(), secs);
  ASSERT_EQ(w.jobs.size(), 82247u);
  EXPECT_GE(w.tenants.size(), 10u);
  EXPECT_EQ(w.jobs.front().submit_time, 0);
  for (size_t i = 1; i < w.jobs.size(); ++i) {
    ASSERT_LE(w.jobs[i - 1].submit_time, w.jobs[i].submit_time);
  }
  for (const JobSpec& j : w.jobs) {
    ASSERT_GT(j.work_seconds, 0);
    ASSERT_GE(j.min_members, 1);
  }
}

TEST(TraceReaderTest, RealPolluxAndSiaWorkloads) {
  const std::string one = kData + "/philly/pollux/workloads/workload-1.csv";
  if (!std::filesystem::exists(one)) GTEST_SKIP();
  const Workload w = read_workload(one, guess_trace_format(one), {});
  EXPECT_EQ(w.jobs.size(), 160u);
  size_t files = 0;
  for (const char* dir : {"/philly/pollux/workloads", "/philly/pollux/workloads-0.5",
                          "/philly/pollux/workloads-1.5", "/philly/pollux/workloads-2.0",
                          "/philly/pollux/workloads-realistic", "/philly/sia/philly"}) {
    if (!std::filesystem::exists(kData + dir)) continue;
    for (const auto& e : std::filesystem::directory_iterator(kData + dir)) {
      if (e.path().extension() != ".csv") continue;
      const std::string p = e.path().string();
      ASSERT_EQ(guess_trace_format(p), TraceFormat::kPollux) << p;
      const Workload x = read_workload(p, TraceFormat::kPollux, {});
      EXPECT_GT(x.jobs.size(), 0u) << p;
      ++files;
    }
  }
  EXPECT_GE(files, 40u);
}

TEST(TraceReaderTest, RealTiresias) {
  const std::string path = kData + "/philly/tiresias/60_job.csv";
  if (!std::filesystem::exists(path)) GTEST_SKIP();
  const Workload w = read_workload(path, guess_trace_format(path), {});
  EXPECT_EQ(w.jobs.size(), 60u);
  for (const JobSpec& j : w.jobs) EXPECT_EQ(model_of(w, j), "ResNet-50 (batch size 64)");
  const std::string tf = kData + "/philly/tiresias/tf_job.csv";
  const Workload t = read_workload(tf, guess_trace_format(tf), {});
  EXPECT_EQ(t.jobs.size(), 2u);
}

TEST(TraceReaderTest, RealAlibabaPodLists) {
  const std::string dir = kData + "/alibaba-gpu-2023";
  const std::string def = dir + "/openb_pod_list_default.csv";
  if (!std::filesystem::exists(def)) GTEST_SKIP();
  const GpuTypeTable types = GpuTypeTable::builtin();
  ReaderOptions opt;
  opt.gpu_types = &types;
  const Workload w = read_workload(def, guess_trace_format(def), opt);
  EXPECT_EQ(w.jobs.size(), 8152u);
  size_t cpu_only = 0, shared = 0;
  for (const JobSpec& j : w.jobs) {
    cpu_only += j.demand.gpus == 0;
    shared += j.demand.gpu_milli < 1000;
    ASSERT_GT(j.work_seconds, 0) << j.source;
  }
  EXPECT_GT(cpu_only, 0u);
  EXPECT_GT(shared, 0u);
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("openb_pod_list_", 0) != 0) continue;
    const Workload x = read_workload(e.path().string(), TraceFormat::kAlibaba, opt);
    EXPECT_GT(x.jobs.size(), 7000u) << name;
  }
}

}  // namespace
}  // namespace tessera

// End to end: `tessera serve` on loopback with virtual GPUs, two tenants, real processes.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include "cli_util.h"
#include "service_test_util.h"

namespace tessera {
namespace {

using testing::create_tenant;
using testing::eventually;
using testing::get_job;
using testing::job_in;
using testing::json_of;
using testing::kAdminToken;
using testing::ServerProcess;
using testing::submit;
using testing::TempDir;

TEST(ServiceE2E, TwoTenantsRunGangFractionalAndWaitingJobsAsProcesses) {
  TempDir dir("e2e");
  ServerProcess server(dir.str(), {"--virtual-gpus", "3", "--checkpoint-grace", "1"});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  const std::string token_a = create_tenant(admin, "team-a");
  const std::string token_b = create_tenant(admin, "team-b");
  ASSERT_FALSE(token_a.empty());
  ApiClient a = server.client(token_a);
  ApiClient b = server.client(token_b);

  // A gang of two whole GPUs (team-a), a half GPU (team-b), and a two-GPU job (team-b) that
  // must wait for the gang: 3 GPUs in all.
  const int64_t gang = submit(a, R"(name: gang
gang: {min: 2, max: 2}
resources: {gpus: 1}
command: ["sh", "-c", "echo rank=$RANK world=$WORLD_SIZE gpus=$CUDA_VISIBLE_DEVICES master=$MASTER_ADDR:$MASTER_PORT; sleep 1.5"]
)");
  const int64_t frac = submit(b, R"(name: half
resources: {gpus: 0.5}
command: ["sh", "-c", "echo fraction=$TESSERA_GPU_FRACTION gpus=$CUDA_VISIBLE_DEVICES pid=$$"]
)");
  ASSERT_TRUE(eventually([&] { return job_in(a, gang, "running"); }, 10));
  const int64_t waits = submit(b, R"(name: waits
resources: {gpus: 2}
command: ["sh", "-c", "echo done"]
)");
  ASSERT_GT(waits, 0);
  ASSERT_TRUE(eventually([&] { return !get_job(b, waits)["pending_reason"].is_null(); }, 5));
  const nlohmann::json pending = get_job(b, waits);
  EXPECT_EQ(pending["state"], "pending");
  EXPECT_NE(pending["pending_reason"].get<std::string>().find("GPUs"), std::string::npos)
      << pending.dump();

  // Isolation: team-b neither sees nor cancels team-a's job, nor submits in its name.
  EXPECT_EQ(b.get("/v1/jobs/" + std::to_string(gang)).status, 403);
  EXPECT_EQ(b.post("/v1/jobs/" + std::to_string(gang) + "/cancel", "", "application/json").status,
            403);
  EXPECT_EQ(
      b.post("/v1/jobs", "name: x\ntenant: team-a\ncommand: [true]\n", "application/yaml").status,
      403);
  const nlohmann::json listed = json_of(b.get("/v1/jobs"));
  for (const auto& j : listed["jobs"]) EXPECT_EQ(j["tenant"], "team-b");
  EXPECT_EQ(json_of(admin.get("/v1/jobs"))["jobs"].size(), 3u);

  // Bad requests name what is wrong; nothing is created for them.
  EXPECT_EQ(server.client("wrong-token").get("/v1/jobs").status, 401);
  const HttpResult bad =
      a.post("/v1/jobs", "name: x\nresources: {gpus: 1.5}\ncommand: [true]\n", "application/yaml");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(json_of(bad)["field"], "resources.gpus");
  const HttpResult never =
      a.post("/v1/jobs", R"({"name": "big", "resources": {"gpus": 4}, "command": ["true"]})",
             "application/json");
  EXPECT_EQ(never.status, 422) << never.body;
  EXPECT_EQ(a.post("/v1/jobs", std::string(2 << 20, 'x'), "application/yaml").status, 413);
  EXPECT_EQ(b.get("/v1/audit").status, 403);

  // Everything runs to completion, the waiting job after the gang.
  for (int64_t id : {gang, frac, waits}) {
    ASSERT_TRUE(eventually([&] { return job_in(admin, id, "succeeded"); }, 20))
        << get_job(admin, id).dump() << server.log();
  }
  const nlohmann::json g = get_job(a, gang), w = get_job(b, waits);
  EXPECT_GE(w["started_at"].get<double>(), g["finished_at"].get<double>() - 0.2);
  const std::string log0 = a.get("/v1/jobs/" + std::to_string(gang) + "/logs?rank=0").body;
  const std::string log1 = a.get("/v1/jobs/" + std::to_string(gang) + "/logs?rank=1").body;
  EXPECT_NE(log0.find("rank=0 world=2"), std::string::npos) << log0;
  EXPECT_NE(log1.find("rank=1 world=2"), std::string::npos) << log1;
  EXPECT_NE(log0.find("master=127.0.0.1:"), std::string::npos) << log0;
  // The two members hold different GPUs.
  EXPECT_NE(log0.substr(log0.find("gpus=")), log1.substr(log1.find("gpus=")));
  const std::string flog = b.get("/v1/jobs/" + std::to_string(frac) + "/logs").body;
  EXPECT_NE(flog.find("fraction=0.5"), std::string::npos) << flog;

  // A running job is cancelled: SIGTERM, and SIGKILL after the grace when it ignores TERM.
  const int64_t stubborn = submit(a, R"(name: stubborn
command: ["sh", "-c", "trap '' TERM; sleep 60"]
)");
  ASSERT_TRUE(eventually([&] { return job_in(a, stubborn, "running"); }, 10));
  const HttpResult cancelled =
      a.post("/v1/jobs/" + std::to_string(stubborn) + "/cancel", "", "application/json");
  EXPECT_EQ(cancelled.status, 200);
  EXPECT_EQ(json_of(cancelled)["state"], "cancelled");
  ASSERT_TRUE(eventually([&] { return get_job(a, stubborn)["finished_at"].is_number(); }, 10));
  EXPECT_EQ(
      a.post("/v1/jobs/" + std::to_string(stubborn) + "/cancel", "", "application/json").status,
      409);

  // The audit log has every mutating call, refused ones too, with who made it.
  const nlohmann::json audit = json_of(admin.get("/v1/audit?limit=1000"))["entries"];
  auto count = [&](const std::string& actor, const std::string& method, int status) {
    int n = 0;
    for (const auto& e : audit) {
      if (e["actor"] == actor && e["method"] == method && e["status"] == status) ++n;
    }
    return n;
  };
  EXPECT_EQ(count("admin", "POST", 201), 2);   // two tenants created
  EXPECT_EQ(count("team-a", "POST", 201), 2);  // gang, stubborn
  EXPECT_EQ(count("team-b", "POST", 201), 2);  // half, waits
  EXPECT_EQ(count("team-b", "POST", 403), 2);  // cancel of team-a's job, submit as team-a
  EXPECT_EQ(count("team-a", "POST", 422), 1);
  EXPECT_EQ(count("team-a", "POST", 200), 1);  // the cancel
  bool saw_refused_cancel = false;
  for (const auto& e : audit) {
    if (e["status"] == 403 && e["path"] == "/v1/jobs/" + std::to_string(gang) + "/cancel") {
      saw_refused_cancel = true;
    }
  }
  EXPECT_TRUE(saw_refused_cancel) << audit.dump();

  const std::string metrics = admin.get("/metrics").body;
  EXPECT_NE(metrics.find("tessera_queue_depth{tenant=\"team-a\"} 0"), std::string::npos);
  EXPECT_NE(metrics.find("tessera_cycle_seconds_count"), std::string::npos);
  EXPECT_NE(metrics.find("tessera_decisions_total{kind=\"start\"} 4"), std::string::npos)
      << metrics;
}

TEST(ServiceE2E, AReturningTenantReclaimsItsShareByPreemptingAWholeGang) {
  TempDir dir("reclaim");
  ServerProcess server(dir.str(), {"--virtual-gpus", "4", "--checkpoint-grace", "1"});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  ApiClient a = server.client(create_tenant(admin, "team-a"));
  ApiClient b = server.client(create_tenant(admin, "team-b"));
  // team-a borrows the whole cluster: two 2-member gangs, one that ignores SIGTERM.
  const int64_t polite = submit(a, R"(name: polite
gang: {min: 2, max: 2}
command: ["sh", "-c", "echo started; sleep 60"]
)");
  const int64_t stubborn = submit(a, R"(name: stubborn
gang: {min: 2, max: 2}
command: ["sh", "-c", "trap 'echo got TERM' TERM; echo ready; while true; do sleep 0.1; done"]
)");
  // Both members of the stubborn gang have set their trap (a SIGTERM before that would end
  // them at once, as it would any process).
  auto ready = [&](int rank) {
    return a.get("/v1/jobs/" + std::to_string(stubborn) + "/logs?rank=" + std::to_string(rank))
               .body.find("ready") != std::string::npos;
  };
  ASSERT_TRUE(eventually([&] { return job_in(a, polite, "running") && ready(0) && ready(1); }, 10))
      << get_job(a, polite).dump() << get_job(a, stubborn).dump() << server.log();
  // team-b's fair share is half the cluster: one of team-a's gangs gives way, whole.
  const int64_t mine = submit(b, R"(name: mine
gang: {min: 2, max: 2}
command: ["sh", "-c", "echo reclaimed; sleep 60"]
)");
  ASSERT_TRUE(eventually([&] { return job_in(b, mine, "running"); }, 10)) << server.log();
  const nlohmann::json p = get_job(a, polite), s = get_job(a, stubborn);
  const nlohmann::json& victim = p["preemptions"] == 1 ? p : s;
  EXPECT_EQ(p["preemptions"].get<int>() + s["preemptions"].get<int>(), 1) << p.dump() << s.dump();
  // The victim went back to the queue once all its members had exited (SIGKILL after the
  // grace for the one that ignores SIGTERM), and the reclaiming gang started after that.
  EXPECT_EQ(victim["state"], "pending") << victim.dump();
  EXPECT_NE(victim["message"].get<std::string>().find("preempted by job " + std::to_string(mine)),
            std::string::npos)
      << victim.dump();
  const nlohmann::json m = get_job(b, mine);
  EXPECT_EQ(m["allocation"].size(), 2u);
  if (victim["name"] == "stubborn") {
    EXPECT_GE(m["started_at"].get<double>() + 0.05, victim["submitted_at"].get<double>() + 1.0);
  }
  for (int64_t id : {polite, stubborn}) {
    a.post("/v1/jobs/" + std::to_string(id) + "/cancel", "", "application/json");
  }
  b.post("/v1/jobs/" + std::to_string(mine) + "/cancel", "", "application/json");
  for (int64_t id : {polite, stubborn, mine}) {
    EXPECT_TRUE(eventually([&] { return get_job(admin, id)["finished_at"].is_number(); }, 10));
  }
}

TEST(ServiceE2E, SchedulesTheGpusNvidiaSmiReportsByType) {
  TempDir dir("smi");
  // A stand-in nvidia-smi: GPUs 0 and 2 are H100s, GPU 1 an A100 80GB (CI has no GPU; the
  // real driver's output format is what parse_nvidia_smi_csv is tested on).
  const std::string smi = dir.file("nvidia-smi");
  std::ofstream(smi) << R"(#!/bin/sh
echo "0, GPU-a, NVIDIA H100 80GB HBM3, 81559, 0, 0, 0"
echo "1, GPU-b, NVIDIA A100-SXM4-80GB, 81920, 0, 0, 0"
echo "2, GPU-c, NVIDIA H100 80GB HBM3, 81559, 0, 0, 0"
)";
  std::filesystem::permissions(smi, std::filesystem::perms::owner_all);
  ServerProcess server(dir.str(), {"--nvidia-smi", smi});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  const nlohmann::json nodes = json_of(admin.get("/v1/nodes"))["nodes"];
  ASSERT_EQ(nodes.size(), 2u) << nodes.dump();
  std::map<std::string, std::vector<int>> by_type;
  for (const auto& n : nodes) {
    for (const auto& g : n["gpus"]) by_type[n["gpu_type"]].push_back(g["index"]);
  }
  EXPECT_EQ(by_type["H100"], (std::vector<int>{0, 2}));
  EXPECT_EQ(by_type["A100-80G"], (std::vector<int>{1}));
  // The host's CPUs are split by GPU count, so jobs on either type may ask for some.
  for (const auto& n : nodes) EXPECT_GT(n["cpu_milli"].get<int64_t>(), 0) << n.dump();
  // A job that asks for the A100 sees exactly that device.
  const int64_t id = submit(admin, R"(name: a100
tenant: lab
resources: {gpus: 1, gpu_types: [A100-80G]}
command: ["sh", "-c", "echo devices=$CUDA_VISIBLE_DEVICES"]
)");
  ASSERT_TRUE(eventually([&] { return job_in(admin, id, "succeeded"); }, 10));
  EXPECT_NE(admin.get("/v1/jobs/" + std::to_string(id) + "/logs").body.find("devices=1"),
            std::string::npos);
  const HttpResult unknown = admin.post(
      "/v1/jobs", "name: x\ntenant: lab\nresources: {gpu_types: [T4]}\ncommand: [true]\n",
      "application/yaml");
  EXPECT_EQ(unknown.status, 422);
  EXPECT_EQ(json_of(unknown)["field"], "resources.gpu_types");
}

// Serve's energy settings and what /metrics says of power and energy.
TEST(ServiceE2E, PowerAndEnergyMetricsFollowTheClustersSettings) {
  TempDir dir("energy");
  const std::string carbon = dir.file("carbon.csv");
  std::ofstream(carbon) << "time,g_per_kwh\n2024-03-01T00:00:00Z,120\n2024-03-01T01:00:00Z,90\n";
  ServerProcess server(dir.str(), {"--virtual-gpus", "2", "--virtual-gpu-type", "V100",
                                   "--node-power", "100", "--pue", "1.2", "--carbon", carbon});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  const int64_t id = submit(admin, R"(name: warm
tenant: lab
resources: {gpus: 1}
command: ["sleep", "1"]
)");
  ASSERT_TRUE(eventually([&] { return job_in(admin, id, "succeeded"); }, 10));
  const std::string metrics = admin.get("/metrics").body;
  EXPECT_NE(metrics.find("tessera_gpu_power_watts{node="), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("source=\"estimated\""), std::string::npos) << metrics;
  // Both GPUs idle again: (2 x idle + node base) x PUE, whatever the Zeus data says.
  EXPECT_NE(metrics.find("tessera_power_watts 203.4\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("tessera_energy_joules_total{tenant=\"lab\"}"), std::string::npos)
      << metrics;
  const nlohmann::json usage = json_of(admin.get("/v1/usage"))["usage"];
  ASSERT_EQ(usage.size(), 1u) << usage.dump();
  EXPECT_GT(usage[0]["energy_kwh"].get<double>(), 0) << usage.dump();
  EXPECT_GT(usage[0]["carbon_kg"].get<double>(), 0) << usage.dump();  // the last value, 90
  // A PUE below 1 is refused before anything starts.
  const testing::CmdResult refused =
      testing::run_tessera("serve --virtual-gpus 1 --pue 0.5 --db " + dir.file("other.db"));
  EXPECT_EQ(refused.status, 2) << refused.output;
  EXPECT_NE(refused.output.find("--pue"), std::string::npos) << refused.output;
}

// Power policies that cannot work are refused before the server starts, saying why.
TEST(ServiceE2E, PowerPolicyFlagsThatCannotWorkAreRefusedAtStartup) {
  TempDir dir("e2e-power");
  const auto serve = [&](const std::string& db, const std::string& flags) {
    return testing::run_tessera("serve --virtual-gpus 2 --virtual-gpu-type V100 --db " +
                                dir.file(db) + " " + flags);
  };
  const testing::CmdResult no_cap = serve("a.db", "--power-shifting");
  EXPECT_EQ(no_cap.status, 2) << no_cap.output;
  EXPECT_NE(no_cap.output.find("--power-cap"), std::string::npos) << no_cap.output;
  const testing::CmdResult low = serve("b.db", "--power-cap 0.01");
  EXPECT_EQ(low.status, 2) << low.output;
  EXPECT_NE(low.output.find("below this host's idle draw"), std::string::npos) << low.output;
  const testing::CmdResult virt = serve("c.db", "--apply-power-limits");
  EXPECT_EQ(virt.status, 2) << virt.output;
  EXPECT_NE(virt.output.find("--apply-power-limits: this server schedules virtual GPUs"),
            std::string::npos)
      << virt.output;
}

// The screens an operator reads every day, from a real server.
TEST(ServiceE2E, TheJobNodeAndTenantScreensSayWhatRunsWhereAndWhyOthersWait) {
  TempDir dir("screens");
  ServerProcess server(dir.str(), {"--virtual-gpus", "2"});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  const int64_t holder =
      submit(admin, "name: holder\ntenant: team-a\nresources: {gpus: 2}\ncommand: [sleep, '30']\n");
  ASSERT_TRUE(eventually([&] { return job_in(admin, holder, "running"); }));
  const int64_t waiter =
      submit(admin, "name: waiter\ntenant: team-a\nresources: {gpus: 2}\ncommand: [sleep, '1']\n");
  ASSERT_TRUE(eventually([&] { return get_job(admin, waiter)["reason"].is_string(); }));
  const std::string env = "TESSERA_ADDR=" + server.addr() + " TESSERA_TOKEN=" + kAdminToken + " ";
  const auto has = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  };
  const auto table = testing::run_tessera_env(env, "jobs");
  ASSERT_EQ(table.status, 0) << table.output;
  EXPECT_TRUE(has(table.output, "REASON")) << table.output;
  EXPECT_TRUE(has(table.output, "FairShare")) << table.output;  // serve orders by fair share
  // Newest first.
  EXPECT_LT(table.output.find("waiter"), table.output.find("holder")) << table.output;
  const auto running = testing::run_tessera_env(env, "jobs --state running,succeeded");
  EXPECT_TRUE(has(running.output, "holder")) << running.output;
  EXPECT_FALSE(has(running.output, "waiter")) << running.output;
  const auto page = testing::run_tessera_env(env, "job " + std::to_string(waiter));
  EXPECT_TRUE(has(page.output, "Reason:         FairShare: fair share")) << page.output;
  EXPECT_TRUE(has(page.output, "Queue:          team-a")) << page.output;
  const auto nodes = testing::run_tessera_env(env, "nodes");
  EXPECT_TRUE(has(nodes.output, "JOBS")) << nodes.output;
  EXPECT_TRUE(has(nodes.output, "  " + std::to_string(holder) + " ")) << nodes.output;
  // Job control from the CLI: hold shows as the reason, release lifts it.
  const auto hold = testing::run_tessera_env(env, "hold " + std::to_string(waiter));
  EXPECT_EQ(hold.status, 0) << hold.output;
  EXPECT_TRUE(has(hold.output, "pending (Held)")) << hold.output;
  EXPECT_TRUE(has(testing::run_tessera_env(env, "jobs --state pending").output, "Held"));
  const auto release = testing::run_tessera_env(env, "release " + std::to_string(waiter));
  EXPECT_EQ(release.status, 0) << release.output;
  const auto again = testing::run_tessera_env(env, "release " + std::to_string(waiter));
  EXPECT_EQ(again.status, 2);
  EXPECT_TRUE(has(again.output, "is not held")) << again.output;
  const auto update = testing::run_tessera_env(
      env, "update " + std::to_string(waiter) + " --time-limit 2h --priority-class best-effort");
  EXPECT_EQ(update.status, 0) << update.output;
  EXPECT_TRUE(has(update.output, "Time limit:     2h00m")) << update.output;
  EXPECT_TRUE(has(update.output, "Class:          best-effort")) << update.output;
  // The page's history: each step above, once, in order.
  const std::string history = testing::run_tessera_env(env, "job " + std::to_string(waiter)).output;
  const size_t events = history.find("Events:");
  ASSERT_NE(events, std::string::npos) << history;
  size_t seen = events;
  for (const char* step :
       {"Submitted", "by admin to queue team-a", "Pending", "FairShare", "Held", "held by admin",
        "Released", "Updated", "priority class best-effort, time limit 7200 s by admin"}) {
    const size_t next = history.find(step, seen);
    EXPECT_NE(next, std::string::npos) << step << " in\n" << history;
    if (next != std::string::npos) seen = next;
  }
  const HttpResult wrong =
      admin.patch("/v1/jobs/" + std::to_string(waiter), R"({"gang": 4})", "application/json");
  EXPECT_EQ(wrong.status, 400) << wrong.body;
  EXPECT_TRUE(has(wrong.body, "only priority_class and time_limit")) << wrong.body;
  // The audit log, filtered: what was done to the waiting job, and what was refused.
  const auto audit = testing::run_tessera_env(
      env, "audit --target 'job " + std::to_string(waiter) + "' --actor admin --since 1");
  EXPECT_EQ(audit.status, 0) << audit.output;
  EXPECT_TRUE(has(audit.output, "/hold")) << audit.output;
  EXPECT_TRUE(has(audit.output, "/release")) << audit.output;
  EXPECT_FALSE(has(audit.output, "/v1/tenants")) << audit.output;
  const auto refused = testing::run_tessera_env(env, "audit --refused");
  EXPECT_TRUE(has(refused.output, "409")) << refused.output;
  EXPECT_FALSE(has(refused.output, " 200 ")) << refused.output;
  const auto tenants = testing::run_tessera_env(env, "tenant list");
  EXPECT_TRUE(has(tenants.output, "team-a")) << tenants.output;
  const auto watch = testing::run_tessera_env("timeout 2 env " + env, "jobs --watch 0.5");
  size_t screens = 0;
  for (size_t at = watch.output.find("Every 0.5 s"); at != std::string::npos;
       at = watch.output.find("Every 0.5 s", at + 1)) {
    ++screens;
  }
  EXPECT_GE(screens, 2u) << watch.output;
}

TEST(ServiceE2E, LogsFollowInterleavesEveryRankUntilTheJobEnds) {
  TempDir dir("follow");
  ServerProcess server(dir.str(), {"--virtual-gpus", "2"});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  const int64_t id = submit(admin,
                            "name: chatty\ntenant: lab\ngang: 2\ncommand: [sh, -c, 'for i in 1 2 "
                            "3; do echo line$i; sleep 0.3; done']\n");
  const std::string env = "TESSERA_ADDR=" + server.addr() + " TESSERA_TOKEN=" + kAdminToken + " ";
  // Started at once: it waits for the job to start, prints as lines come, ends with the job.
  const auto out =
      testing::run_tessera_env("timeout 30 env " + env, "logs " + std::to_string(id) + " --follow");
  EXPECT_EQ(out.status, 0) << out.output;
  for (const char* line : {"[0] line1", "[0] line3", "[1] line1", "[1] line3"}) {
    EXPECT_NE(out.output.find(line), std::string::npos) << line << "\n" << out.output;
  }
  EXPECT_EQ(get_job(admin, id)["state"], "succeeded");
  const auto one =
      testing::run_tessera_env(env, "logs " + std::to_string(id) + " --follow --rank 1");
  EXPECT_EQ(one.output, "line1\nline2\nline3\n");
  // Without --follow too, every rank's lines by default, and one rank's alone when named.
  const auto all = testing::run_tessera_env(env, "logs " + std::to_string(id));
  EXPECT_EQ(all.output, "[0] line1\n[0] line2\n[0] line3\n[1] line1\n[1] line2\n[1] line3\n");
  EXPECT_EQ(testing::run_tessera_env(env, "logs " + std::to_string(id) + " --rank 0").output,
            "line1\nline2\nline3\n");
}

TEST(ServiceE2E, ARotatedTokenReplacesTheOldOneAndARevokedOneStopsWorking) {
  TempDir dir("tokens");
  ServerProcess server(dir.str(), {"--virtual-gpus", "1"});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  const std::string first = create_tenant(admin, "team-z");
  EXPECT_EQ(server.client(first).get("/v1/jobs").status, 200);
  const std::string env = "TESSERA_ADDR=" + server.addr() + " TESSERA_TOKEN=" + kAdminToken + " ";
  const auto rotated = testing::run_tessera_env(env, "token rotate team-z");
  ASSERT_EQ(rotated.status, 0) << rotated.output;
  const std::string second = rotated.output.substr(0, rotated.output.find('\n'));
  EXPECT_EQ(server.client(first).get("/v1/jobs").status, 401);
  EXPECT_EQ(server.client(second).get("/v1/jobs").status, 200);
  const auto revoked = testing::run_tessera_env(env, "token revoke team-z");
  EXPECT_EQ(revoked.status, 0) << revoked.output;
  EXPECT_EQ(server.client(second).get("/v1/jobs").status, 401);
  const auto again = testing::run_tessera_env(env, "token revoke team-z");
  EXPECT_EQ(again.status, 2);
  EXPECT_NE(again.output.find("has no token"), std::string::npos) << again.output;
  // A tenant may not rotate tokens, its own included.
  const std::string other = create_tenant(admin, "team-y");
  EXPECT_EQ(server.client(other).post("/v1/tenants/team-y/token", "", "application/json").status,
            403);
  // The tenant is still listed, without a token, and can be given one again.
  const auto list = testing::run_tessera_env(env, "tenant list");
  EXPECT_NE(list.output.find("team-z"), std::string::npos) << list.output;
  EXPECT_FALSE(create_tenant(admin, "team-z").empty());
  // Deleted, it leaves the list; a second delete is a 404 (exit 2, the server's words).
  const auto deleted = testing::run_tessera_env(env, "tenant delete team-y");
  EXPECT_EQ(deleted.status, 0) << deleted.output;
  EXPECT_EQ(server.client(other).get("/v1/jobs").status, 401);
  EXPECT_EQ(testing::run_tessera_env(env, "tenant list").output.find("team-y"), std::string::npos);
  const auto twice = testing::run_tessera_env(env, "tenant delete team-y");
  EXPECT_EQ(twice.status, 2);
  EXPECT_NE(twice.output.find("no tenant team-y"), std::string::npos) << twice.output;
  // Archiving from the CLI: nothing is old enough on a new server; inside the retention, refused.
  const auto archived = testing::run_tessera_env(env, "archive --older-than 48");
  EXPECT_EQ(archived.status, 0) << archived.output;
  EXPECT_NE(archived.output.find("0 jobs archived"), std::string::npos) << archived.output;
  const auto early = testing::run_tessera_env(env, "archive --older-than 1");
  EXPECT_EQ(early.status, 2) << early.output;
  EXPECT_NE(early.output.find("at least the retention"), std::string::npos) << early.output;
}

TEST(ServiceE2E, TheCliContractFromTheReadme) {
  TempDir dir("cli");
  ServerProcess server(dir.str(), {"--virtual-gpus", "2"});
  ASSERT_TRUE(server.up()) << server.log();
  const std::string spec = dir.file("hello.yaml");
  std::ofstream(spec) << R"(name: hello
tenant: team-a
gang: {min: 2, max: 2}
resources: {gpus: 1}
command: ["sh", "-c", "echo rank=$RANK world=$WORLD_SIZE; sleep 1"]
)";
  const std::string env = "TESSERA_ADDR=" + server.addr() + " TESSERA_TOKEN=" + kAdminToken + " ";
  const auto sub = testing::run_tessera_env(env, "submit " + spec);
  ASSERT_EQ(sub.status, 0) << sub.output;
  const int64_t id = std::stoll(sub.output);
  ASSERT_TRUE(eventually(
      [&] {
        const auto r = testing::run_tessera_env(env, "jobs --json");
        const auto j = nlohmann::json::parse(r.output, nullptr, false);
        return j.is_array() && j.size() == 1 && j[0]["state"] == "succeeded";
      },
      15));
  const auto jobs = nlohmann::json::parse(testing::run_tessera_env(env, "jobs --json").output);
  EXPECT_EQ(jobs[0]["id"], id);
  EXPECT_EQ(jobs[0]["name"], "hello");
  EXPECT_EQ(jobs[0]["tenant"], "team-a");
  const auto logs = testing::run_tessera_env(env, "logs " + std::to_string(id) + " --rank 1");
  EXPECT_NE(logs.output.find("rank=1 world=2"), std::string::npos) << logs.output;
  const auto table = testing::run_tessera_env(env, "jobs");
  EXPECT_NE(table.output.find("succeeded"), std::string::npos) << table.output;
  const auto queues = testing::run_tessera_env(env, "queues");
  EXPECT_NE(queues.output.find("team-a"), std::string::npos) << queues.output;
  const auto nodes = testing::run_tessera_env(env, "nodes --json");
  EXPECT_EQ(nlohmann::json::parse(nodes.output)[0]["gpus"].size(), 2u) << nodes.output;
  // A client error names the field; an unknown job is a clear 404.
  std::ofstream(dir.file("bad.yaml")) << "name: bad\ngang: {min: 3, max: 2}\ncommand: [true]\n";
  const auto bad = testing::run_tessera_env(env, "submit " + dir.file("bad.yaml"));
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.output.find("gang"), std::string::npos) << bad.output;
  const auto missing = testing::run_tessera_env(env, "job 999");
  EXPECT_NE(missing.output.find("404"), std::string::npos) << missing.output;
}

// A job array from the CLI on a real server: each task's process sees its index.
TEST(ServiceE2E, AnArraysTasksEachSeeTheirIndex) {
  TempDir dir("array");
  ServerProcess server(dir.str(), {"--virtual-gpus", "2"});
  ASSERT_TRUE(server.up()) << server.log();
  const std::string spec = dir.file("sweep.yaml");
  std::ofstream(spec) << R"(name: sweep
tenant: team-a
array: 0-3%2
resources: {gpus: 1}
command: ["sh", "-c", "echo index=$TESSERA_ARRAY_INDEX of $TESSERA_ARRAY_JOB_ID"]
)";
  const std::string env = "TESSERA_ADDR=" + server.addr() + " TESSERA_TOKEN=" + kAdminToken + " ";
  const auto sub = testing::run_tessera_env(env, "submit " + spec);
  ASSERT_EQ(sub.status, 0) << sub.output;
  const int64_t array = std::stoll(sub.output);
  EXPECT_NE(sub.output.find("(array 0-3%2: tessera jobs --array " + std::to_string(array)),
            std::string::npos)
      << sub.output;
  ApiClient admin = server.client(kAdminToken);
  for (int64_t k = 0; k < 4; ++k) {
    ASSERT_TRUE(eventually([&] { return job_in(admin, array + k, "succeeded"); }, 30))
        << "task " << k;
    const auto logs = testing::run_tessera_env(env, "logs " + std::to_string(array + k));
    EXPECT_NE(logs.output.find("index=" + std::to_string(k) + " of " + std::to_string(array)),
              std::string::npos)
        << logs.output;
  }
  const std::string a = std::to_string(array);
  const auto table = testing::run_tessera_env(env, "jobs --array " + a);
  EXPECT_NE(table.output.find("sweep[3]"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find(a + "_3 "), std::string::npos) << table.output;  // Slurm's id
  const auto page = testing::run_tessera_env(env, "job " + std::to_string(array + 1));
  EXPECT_NE(page.output.find("task 1 of array " + a + " (" + a + "_1) (at most 2 at once)"),
            std::string::npos)
      << page.output;
  // Every command takes a task as ARRAYID_INDEX.
  const auto by_index = testing::run_tessera_env(env, "logs " + a + "_2");
  EXPECT_NE(by_index.output.find("index=2 of " + a), std::string::npos) << by_index.output;
  EXPECT_NE(testing::run_tessera_env(env, "job " + a + "_3").output.find("task 3 of array"),
            std::string::npos);
  const auto missing = testing::run_tessera_env(env, "job " + a + "_9");
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.output.find("array " + a + " has no task 9 (4 tasks)"), std::string::npos)
      << missing.output;
  const auto bad = testing::run_tessera_env(env, "cancel 3-0");
  EXPECT_NE(bad.output.find("an array's task (ARRAYID_INDEX: 3_0)"), std::string::npos)
      << bad.output;
}

// --policy goodput over HTTP with a real process: the job reads its GPUs and batch from its
// environment, reports how it trains with the token it was given, and the next round restarts
// it on more GPUs; the token works for that job only, and a bad report is refused by field.
TEST(ServiceE2E, AnAdaptiveJobReportsOverHttpAndIsRestartedOnMoreGpus) {
  TempDir dir("goodput");
  // Jobs as the server's uid: they write what they were answered where the test reads it.
  ServerProcess server(dir.str(), {"--virtual-gpus", "8", "--policy", "goodput", "--goodput-round",
                                   "2", "--checkpoint-grace", "2", "--job-user", "server"});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  const std::string token = create_tenant(admin, "team-a");
  ApiClient a = server.client(token);
  // On fewer than 8 GPUs it reports a step that scales and a noisy gradient, then trains on;
  // on 8 it is done.
  const std::string out = dir.file("reports.txt");
  const int64_t id = submit(a, R"(name: adaptive
env: {OUT: ")" + out + R"("}
gang: {min: 1, max: 8}
resources: {gpus: 1}
checkpoint_grace: 2s
adaptive: {batch: 128, max_batch: 4096, per_gpu: {min: 8, max: 64}}
command:
  - /usr/bin/python3
  - -c
  - |
    import json, os, sys, time, urllib.request
    g = int(os.environ["TESSERA_GPUS"])
    if os.environ["RANK"] != "0":
        sys.exit(0) if g >= 8 else time.sleep(120)
    def say(*words):
        with open(os.environ["OUT"], "a") as f:
            print(*words, file=f)
    say("gpus=%d batch=%s micro=%s" % (g, os.environ["TESSERA_BATCH_SIZE"],
        os.environ["TESSERA_MICRO_BATCH"]))
    if g >= 8:
        sys.exit(0)
    def report(body, token=os.environ["TESSERA_REPORT_TOKEN"]):
        req = urllib.request.Request(os.environ["TESSERA_REPORT_URL"], json.dumps(body).encode(),
            {"Authorization": "Bearer " + token, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as e:
            return e.code, json.load(e)
    status, answer = report({"step": {"gpus": g, "per_gpu_batch": 32, "seconds": 0.2,
                                      "sync_seconds": 0.5}})
    say("bad", status, answer["field"])
    say("forged", report({"progress": {"done": 1, "total": 2}}, "x" * 64)[0])
    status, answer = report({"step": {"gpus": g, "per_gpu_batch": 32, "seconds": 0.2,
                                      "sync_seconds": 0.01},
                             "gradient": {"sqr": 1, "var": 500},
                             "progress": {"done": 100, "total": 1000000}})
    say("report", status, answer["profiled"], answer["gpus"], answer["round_gpus"])
    time.sleep(120)
)");
  ASSERT_GT(id, 0);
  const std::string path = "/v1/jobs/" + std::to_string(id);
  ASSERT_TRUE(eventually([&] { return get_job(a, id)["attempts"].get<int>() >= 2; }, 30))
      << get_job(a, id).dump() << server.log();
  ASSERT_TRUE(eventually([&] { return job_in(a, id, "succeeded"); }, 30))
      << get_job(a, id).dump() << server.log();
  const nlohmann::json done = get_job(a, id);
  EXPECT_EQ(done["allocation"].size(), 0u);
  const nlohmann::json events = json_of(a.get(path + "/events"))["events"];
  bool resized = false;
  for (const auto& e : events) {
    resized = resized || e["message"].get<std::string>().find(
                             "resized by the goodput round: 4 -> 8 GPUs") != std::string::npos;
  }
  EXPECT_TRUE(resized) << events.dump();
  std::ifstream in(out);
  const std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // First on 4 GPUs (never reported: 4 x one member) at the batch it was tuned for; a report
  // that cannot be true refused by its field, a forged token refused, its own report taken;
  // then on 8.
  EXPECT_NE(said.find("gpus=4 batch=128 micro=32\n"), std::string::npos) << said;
  EXPECT_NE(said.find("bad 400 step.sync_seconds\n"), std::string::npos) << said;
  EXPECT_NE(said.find("forged 401\n"), std::string::npos) << said;
  EXPECT_NE(said.find("report 200 True 4 4\n"), std::string::npos) << said;
  EXPECT_NE(said.find("gpus=8 batch="), std::string::npos) << said;
  const std::string metrics = admin.get("/metrics").body;
  EXPECT_NE(metrics.find("tessera_decisions_total{kind=\"resize\"} 1"), std::string::npos)
      << metrics;
  // Reports for a job that is not running are refused; so are unknown fields.
  const HttpResult late =
      a.post(path + "/report", R"({"progress": {"done": 1, "total": 2}})", "application/json");
  EXPECT_EQ(late.status, 409) << late.body;
  const HttpResult unknown = a.post(path + "/report", R"({"steps": {}})", "application/json");
  EXPECT_EQ(unknown.status, 400) << unknown.body;
  EXPECT_EQ(json_of(unknown)["field"], "steps");
}

// The dashboard's feeds: /v1/history over HTTP (its parameters checked, a tenant's view
// narrowed), /v1/whoami, and the dashboard's page itself at /ui/.
TEST(ServiceE2E, TheDashboardsHistoryWhoamiAndPageAreServed) {
  TempDir dir("dashboard-feeds");
  ServerProcess server(dir.str(), {"--virtual-gpus", "2", "--history-interval", "1"});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  ApiClient team_a = server.client(create_tenant(admin, "team-a"));
  submit(admin, "name: x\ntenant: team-b\nresources: {gpus: 1}\ncommand: [sleep, '30']\n");
  submit(team_a, "name: y\nresources: {gpus: 1}\ncommand: [sleep, '30']\n");
  nlohmann::json h;
  ASSERT_TRUE(eventually([&] {
    h = nlohmann::json::parse(admin.get("/v1/history?step=1").body);
    return !h["samples"].empty() && h["samples"].back()["tenants"].size() == 2;
  })) << h.dump();
  EXPECT_EQ(h["interval_s"], 1);
  EXPECT_EQ(h["samples"].back()["gpus_total"], 2);
  const nlohmann::json mine = nlohmann::json::parse(team_a.get("/v1/history?step=1").body);
  ASSERT_FALSE(mine["samples"].empty());
  for (const auto& s : mine["samples"]) {
    for (const auto& t : s["tenants"]) EXPECT_EQ(t["name"], "team-a") << s.dump();
  }
  // A day at a 1 s step would be 86,400 points: the step widens to at most 2,000.
  const nlohmann::json day =
      nlohmann::json::parse(admin.get("/v1/history?since=0&until=86400&step=1").body);
  EXPECT_EQ(day["step_s"], 44);
  const HttpResult bad = admin.get("/v1/history?since=10&until=5");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("since"), std::string::npos) << bad.body;
  EXPECT_EQ(admin.get("/v1/history?step=0").status, 400);
  EXPECT_EQ(admin.get("/v1/jobs?class=gold").status, 400);  // not a class: said, not empty
  EXPECT_EQ(server.client("wrong").get("/v1/history").status, 401);

  // Each GPU names its holder's tenant and share; a tenant sees another's share, not whose.
  const auto holders_seen_by = [](ApiClient& c) {
    std::map<std::string, int> by;  // tenant (or "?") -> milli
    const nlohmann::json nodes = nlohmann::json::parse(c.get("/v1/nodes").body);
    for (const auto& n : nodes["nodes"]) {
      for (const auto& g : n["gpus"]) {
        for (const auto& holder : g["holders"]) {
          by[holder["tenant"].is_null() ? "?" : holder["tenant"].get<std::string>()] +=
              holder["gpu_milli"].get<int>();
        }
      }
    }
    return by;
  };
  EXPECT_EQ(holders_seen_by(admin),
            (std::map<std::string, int>{{"team-a", 1000}, {"team-b", 1000}}));
  EXPECT_EQ(holders_seen_by(team_a), (std::map<std::string, int>{{"?", 1000}, {"team-a", 1000}}));

  // Which server this is, without a token (the dashboard asks before signing in).
  const nlohmann::json info = nlohmann::json::parse(server.client("").get("/v1/info").body);
  EXPECT_EQ(info["server"], "serve");
  EXPECT_EQ(info["token_required"], true);
  EXPECT_EQ(nlohmann::json::parse(team_a.get("/v1/whoami").body),
            (nlohmann::json{
                {"admin", false}, {"tenant", "team-a"}, {"user", nullptr}, {"role", "tenant"}}));
  EXPECT_EQ(nlohmann::json::parse(admin.get("/v1/whoami").body)["admin"], true);
  const HttpResult page = admin.get("/ui/");
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("chart.umd.min.js"), std::string::npos) << page.body;
  EXPECT_EQ(admin.get("/ui/vendor/chart.umd.min.js").status, 200);
  EXPECT_EQ(admin.get("/ui/no-such-file.js").status, 404);
  EXPECT_EQ(admin.get("/ui/../v1/jobs").status, 404);
}

}  // namespace
}  // namespace tessera

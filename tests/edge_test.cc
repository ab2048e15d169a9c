// Edge sites (docs/edge.md): the sites file and its connectivity series, what a request costs
// on each path, where routing sends a service, and what a simulation over sites counts.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli_util.h"
#include "engine/site_routing.h"
#include "model/input_error.h"
#include "model/sites.h"
#include "sim/edge_simulation.h"
#include "sim/trace_readers.h"

namespace tessera {
namespace {

// A main site of 2 x 8 GPUs and one edge site "east" of `edge_gpus` T4s; the link gives
// 10 Mbit/s with a 200 ms round trip and follows `csv` (a connectivity series, "" for none).
Sites two_sites(int edge_gpus, const std::string& csv = "") {
  // One folder per test: ctest runs tests in parallel processes, and each writes its own series.
  const std::string dir = ::testing::TempDir() + "edge_sites_" +
                          ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::filesystem::create_directories(dir);
  std::string link = "{bandwidth_mbps: 10, rtt_ms: 200}";
  if (!csv.empty()) {
    std::ofstream(dir + "/east.csv") << "time,up,bandwidth_mbps\n" << csv;
    link = "{bandwidth_mbps: 10, rtt_ms: 200, connectivity: east.csv}";
  }
  const std::string yaml =
      "sites:\n"
      "  - name: main\n"
      "    main: true\n"
      "    access_rtt_ms: 20\n"
      "    cluster: {racks: 1, nodes_per_rack: 2, node: {gpus: 8, gpu_type: A100-80G}}\n"
      "  - name: east\n"
      "    access_rtt_ms: 20\n"
      "    cluster: {nodes: [{name: e0, rack: r0, gpus: " +
      std::to_string(edge_gpus) +
      ", gpu_type: T4}]}\n"
      "    link: " +
      link + "\n";
  return parse_sites_yaml(yaml, dir + "/sites.yaml", dir);
}

// A service from `region`: 5 requests/s of 50 kB answered with 2 kB in 25 ms, SLO `slo` ms,
// serving for `work` seconds from `submit`.
std::string service_line(const std::string& name, double submit, double work,
                         const std::string& region = "east", double slo = 300) {
  std::ostringstream o;
  o << R"({"name":")" << name << R"(","submit":)" << submit << R"(,"gpus":1,"work":)" << work
    << R"(,"priority":"inference-critical","service":{"region":")" << region
    << R"(","latency_slo_ms":)" << slo
    << R"(,"request_rate":5,"request_kb":50,"response_kb":2,"service_ms":25}})"
    << "\n";
  return o.str();
}

Workload jobs(const std::string& jsonl) {
  return parse_workload(jsonl, "jobs.jsonl", TraceFormat::kJsonl, {});
}

const EdgeServiceResult& service(const EdgeResult& r, const std::string& name) {
  for (const EdgeServiceResult& s : r.services) {
    if (s.name == name) return s;
  }
  throw std::runtime_error("no service " + name);
}

TEST(Sites, ReadsSitesLinksAndTheConnectivitySeries) {
  const Sites s = two_sites(4, "0,1,10\n100,0,0\n200,1,0.3\n");
  ASSERT_EQ(s.sites.size(), 2u);
  EXPECT_EQ(s.main, 0u);
  EXPECT_EQ(s.sites[1].cluster.num_gpus(), 4u);
  const Site& east = s.sites[1];
  EXPECT_TRUE(east.link_at(50).up);
  EXPECT_DOUBLE_EQ(east.link_at(50).bandwidth_mbps, 10);
  EXPECT_FALSE(east.link_at(150).up);
  EXPECT_DOUBLE_EQ(east.link_at(250).bandwidth_mbps, 0.3);
  EXPECT_DOUBLE_EQ(east.link_at(250).rtt_ms, 200);
  EXPECT_DOUBLE_EQ(east.next_change_after(100), 200);
  EXPECT_TRUE(std::isinf(east.next_change_after(200)));
}

TEST(Sites, BadFilesAreErrorsNamingTheLineAndField) {
  const auto error = [](const std::string& yaml) {
    try {
      parse_sites_yaml(yaml, "s.yaml", "");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string main =
      "  - {name: main, main: true, cluster: {racks: 1, nodes_per_rack: 1, node: {gpus: 8}}}\n";
  EXPECT_NE(error("sites:\n" + main + main).find("duplicate site main"), std::string::npos);
  EXPECT_NE(error("sites:\n  - {name: e, cluster: {racks: 1, nodes_per_rack: 1, node: {gpus: "
                  "1}}, link: {bandwidth_mbps: 1, rtt_ms: 1}}\n")
                .find("exactly one site must be the main one"),
            std::string::npos);
  EXPECT_NE(error("sites:\n" + main +
                  "  - {name: e, cluster: {racks: 1, nodes_per_rack: 1, node: {gpus: 1}}}\n")
                .find("s.yaml:3: field sites[1].link: required for an edge site"),
            std::string::npos);
  EXPECT_NE(error("sites:\n" + main + "  - {name: e, colour: red}\n").find("colour"),
            std::string::npos);
  try {
    parse_connectivity_csv("time,up,bandwidth_mbps\n10,1,5\n5,1,5\n", "east.csv");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("east.csv:3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_connectivity_csv("time,up,bandwidth_mbps\n0,1,0\n", "c.csv"), InputError);
}

TEST(SiteRouting, ARequestCostsItsPathAndALinkItsLoad) {
  const Sites s = two_sites(4);
  std::vector<SiteView> v = site_views(s, 0);
  InferenceService sv{"east", 300, 5, 50, 2, 25};
  // At the edge: access and compute.
  const RequestOutcome edge = request_outcome(sv, v, 1, 1, false);
  EXPECT_TRUE(edge.reachable);
  EXPECT_DOUBLE_EQ(edge.latency_ms, 45);
  // At the main site: + 200 ms round trip + 52 kB at 10 Mbit/s (41.6 ms) over 1 - 2/10.
  EXPECT_DOUBLE_EQ(link_mbps_of(sv), 2.0);
  const RequestOutcome main = request_outcome(sv, v, 1, 0, false);
  EXPECT_NEAR(main.latency_ms, 20 + 25 + 200 + 41.6 / 0.8, 1e-9);
  EXPECT_DOUBLE_EQ(main.served_fraction, 1);
  // Others load the link with 6 Mbit/s: 41.6 / (1 - 0.8).
  v[1].link_load_mbps = 6;
  EXPECT_NEAR(request_outcome(sv, v, 1, 0, false).latency_ms, 245 + 41.6 / 0.2, 1e-9);
  // Past full: only 1/utilisation of the requests get through.
  v[1].link_load_mbps = 18;
  EXPECT_DOUBLE_EQ(request_outcome(sv, v, 1, 0, false).served_fraction, 0.5);
  // Down: nothing.
  v[1].link_load_mbps = 0;
  v[1].link.up = false;
  EXPECT_FALSE(request_outcome(sv, v, 1, 0, false).reachable);
}

TEST(SiteRouting, EdgeFirstFallsBackToMainOnlyWhileItsLinkMeetsTheSlo) {
  const Sites s = two_sites(4);
  std::vector<SiteView> v = site_views(s, 0);
  JobSpec j;
  InferenceService sv{"east", 300, 5, 50, 2, 25};
  SiteRoute r = route_job(j, &sv, v, 0, SitePolicy::kEdgeFirst);
  ASSERT_EQ(r.status, RouteStatus::kPlace);
  EXPECT_EQ(r.sites, (std::vector<uint32_t>{1, 0}));
  EXPECT_FALSE(r.link_blocked);
  // The link down: the edge only.
  v[1].link.up = false;
  r = route_job(j, &sv, v, 0, SitePolicy::kEdgeFirst);
  EXPECT_EQ(r.sites, (std::vector<uint32_t>{1}));
  EXPECT_TRUE(r.link_blocked);
  // Main-only ignores the link (the baseline).
  EXPECT_EQ(route_job(j, &sv, v, 0, SitePolicy::kMainOnly).sites, (std::vector<uint32_t>{0}));
  // An SLO of 40 ms: not even the edge (45 ms) can meet it, ever.
  InferenceService tight = sv;
  tight.latency_slo_ms = 40;
  r = route_job(j, &tight, v, 0, SitePolicy::kEdgeFirst);
  EXPECT_EQ(r.status, RouteStatus::kNever);
  EXPECT_NE(r.why.find("40 ms"), std::string::npos) << r.why;
  // A service its edge site cannot host (say, 8 GPUs) goes to the main site while the link
  // meets its SLO, and waits while the link is down.
  const bool hosts[] = {true, false};
  r = route_job(j, &sv, v, 0, SitePolicy::kEdgeFirst, hosts);
  EXPECT_EQ(r.status, RouteStatus::kWait);
  EXPECT_NE(r.why.find("link from east to the main site is down"), std::string::npos) << r.why;
  v[1].link.up = true;
  r = route_job(j, &sv, v, 0, SitePolicy::kEdgeFirst, hosts);
  EXPECT_EQ(r.sites, (std::vector<uint32_t>{0}));
  const bool none[] = {false, false};
  EXPECT_EQ(route_job(j, &sv, v, 0, SitePolicy::kEdgeFirst, none).status, RouteStatus::kNever);
  // A job pinned to a site runs there; other jobs at the main site.
  j.site = "east";
  EXPECT_EQ(route_job(j, nullptr, v, 0, SitePolicy::kEdgeFirst).sites, (std::vector<uint32_t>{1}));
  j.site = "";
  EXPECT_EQ(route_job(j, nullptr, v, 0, SitePolicy::kEdgeFirst).sites, (std::vector<uint32_t>{0}));
  j.site = "mars";
  EXPECT_EQ(route_job(j, nullptr, v, 0, SitePolicy::kEdgeFirst).status, RouteStatus::kNever);
}

TEST(EdgeSimulation, ServicesGoToTheirEdgeAndOverflowToMainWhileTheLinkHolds) {
  const Sites s = two_sites(1);
  const Workload w = jobs(service_line("a", 0, 1000) + service_line("b", 0, 1000));
  const EdgeResult r = run_edge_simulation(s, w, {});
  EXPECT_EQ(service(r, "a").first_site, "east");
  EXPECT_EQ(service(r, "b").first_site, "main");
  // 5 requests/s for 1000 s each, all answered: a at 45 ms, b at 245 + 41.6 / 0.8 = 297 ms.
  EXPECT_DOUBLE_EQ(r.total.requests, 10000);
  EXPECT_DOUBLE_EQ(r.total.served, 10000);
  EXPECT_DOUBLE_EQ(r.total.within_slo, 10000);
  EXPECT_NEAR(service(r, "a").tally.mean_latency_ms(), 45, 1e-9);
  EXPECT_NEAR(service(r, "b").tally.mean_latency_ms(), 297, 1e-9);
  EXPECT_EQ(r.starts_at_edge, 1);
  EXPECT_EQ(r.starts_at_main, 1);
}

TEST(EdgeSimulation, WithTheLinkDownAServiceWaitsAtItsEdgeInsteadOfStartingOutOfReach) {
  // The link is down from 0 to 500 s; a holds the only edge GPU until 300 s.
  const Sites s = two_sites(1, "0,0,0\n500,1,10\n");
  const Workload w = jobs(service_line("a", 0, 300) + service_line("b", 10, 1000));
  EdgeOptions opt;
  const EdgeResult edge = run_edge_simulation(s, w, opt);
  // b waits at the edge (SiteUnreachable) and starts there when a ends at 300 s.
  EXPECT_EQ(service(edge, "b").first_site, "east");
  EXPECT_DOUBLE_EQ(service(edge, "b").first_start, 300);
  EXPECT_DOUBLE_EQ(edge.site_unreachable_seconds(), 290);
  // Main-only never waits for a link: b starts at the main site on arrival.
  EXPECT_DOUBLE_EQ(to_json(edge)["wait_seconds_by_reason"]["SiteUnreachable"].get<double>(), 290);
  // Its requests before 300 s fail; after, all are answered at the edge.
  EXPECT_DOUBLE_EQ(service(edge, "b").tally.requests, 5000);
  EXPECT_DOUBLE_EQ(service(edge, "b").tally.served, 5 * 710);
  // Main-only: both start at the main site at once, and nothing is answered until 500 s.
  opt.placement = SitePolicy::kMainOnly;
  const EdgeResult main = run_edge_simulation(s, w, opt);
  EXPECT_EQ(service(main, "b").first_site, "main");
  EXPECT_DOUBLE_EQ(service(main, "a").tally.served, 0);
  EXPECT_DOUBLE_EQ(service(main, "b").tally.served, 5 * 510);
  // While the link was down: 100 % lost at main-only; edge-first answered a's.
  EXPECT_DOUBLE_EQ(main.degraded.served, 0);
  EXPECT_DOUBLE_EQ(edge.degraded.served, 5 * 300 + 5 * 200);
}

TEST(EdgePacking, AServiceAsksForItsBusyFractionWithHeadroomInEighths) {
  // 5 requests/s x 25 ms = 1/8 of a GPU busy; twice that: 250 milli.
  InferenceService sv{"east", 300, 5, 50, 2, 25};
  EXPECT_EQ(packed_service_milli(sv, 2, 0), 250);
  // 50 % slower beside others: 0.1875 busy, 0.375 with headroom: 3 eighths.
  EXPECT_EQ(packed_service_milli(sv, 2, 0.5), 375);
  sv.request_rate = 8;  // 0.2 busy, 0.4 with headroom: rounded up to 4 eighths
  EXPECT_EQ(packed_service_milli(sv, 2, 0), 500);
  sv.request_rate = 0.1;  // at least an eighth
  EXPECT_EQ(packed_service_milli(sv, 2, 0), 125);
  sv.request_rate = 100;  // at most the whole GPU
  EXPECT_EQ(packed_service_milli(sv, 2, 0), 1000);
}

TEST(EdgePacking, PackedServicesShareTheEdgeGpuAndPayForItInLatency) {
  // The link is down throughout; the edge site has 1 GPU; four services arrive at once.
  const Sites s = two_sites(1, "0,0,0\n");
  std::string lines;
  for (const char* n : {"a", "b", "c", "d"}) lines += service_line(n, 0, 100);
  const Workload w = jobs(lines);
  EdgeOptions opt;
  opt.placement = SitePolicy::kEdgeFirst;
  const EdgeResult whole = run_edge_simulation(s, w, opt);
  // Whole GPUs: one runs, the others wait for a link that never comes.
  EXPECT_EQ(whole.starts_at_edge, 1);
  EXPECT_DOUBLE_EQ(whole.total.served, 5 * 100);
  // Packed: 1/8 x 1.25 x 1.5 of a GPU each, rounded up to 2 eighths: all four fit.
  opt.pack = true;
  opt.pack_headroom = 1.5;
  opt.colocation_slowdown = 0.25;
  const EdgeResult packed = run_edge_simulation(s, w, opt);
  EXPECT_EQ(packed.starts_at_edge, 4);
  EXPECT_DOUBLE_EQ(packed.total.served, 4 * 5 * 100);
  EXPECT_DOUBLE_EQ(packed.total.within_slo, 4 * 5 * 100);
  // Each computes 25 ms x 1.25 beside the others, on a GPU busy 4 x 5/s x 31.25 ms = 62.5 %:
  // 20 ms access + 31.25 / (1 - 0.625).
  EXPECT_NEAR(packed.total.mean_latency_ms(), 20 + 31.25 / 0.375, 1e-9);
  EXPECT_DOUBLE_EQ(to_json(packed)["pack"]["colocation_slowdown"].get<double>(), 0.25);
  // Alone on its GPU a service pays its own queueing only: 20 + 25 / (1 - 0.125).
  const EdgeResult alone = run_edge_simulation(s, jobs(service_line("a", 0, 100)), opt);
  EXPECT_NEAR(alone.total.mean_latency_ms(), 20 + 25 / 0.875, 1e-9);
  // Headroom 2 asks for 3 eighths each: two fit, the others wait.
  opt.pack_headroom = 2;
  EXPECT_EQ(run_edge_simulation(s, w, opt).starts_at_edge, 2);
}

TEST(EdgePacking, AServiceBusierThanItsGpuAnswersOnlyWhatItCanCompute) {
  // 50 requests/s of 25 ms: 125 % of a GPU. Alone on a whole one, it answers 80 %, late.
  const Sites s = two_sites(1, "0,0,0\n");
  std::string line = service_line("hot", 0, 100);
  line.replace(line.find("\"request_rate\":5"), 16, "\"request_rate\":50");
  EdgeOptions opt;
  opt.pack = true;
  const EdgeResult r = run_edge_simulation(s, jobs(line), opt);
  EXPECT_EQ(r.starts_at_edge, 1);
  EXPECT_NEAR(r.total.served_fraction(), 0.8, 1e-9);
  EXPECT_DOUBLE_EQ(r.total.within_slo, 0);
}

TEST(EdgeSimulation, AServiceAtMainMovesToItsEdgeWhenItsUsersLoseTheLink) {
  // The link goes down at 400 s. a holds the edge until 200 s; b runs at the main site.
  const Sites s = two_sites(1, "0,1,10\n400,0,0\n");
  const Workload w = jobs(service_line("a", 0, 200) + service_line("b", 0, 1000));
  const EdgeResult r = run_edge_simulation(s, w, {});
  EXPECT_EQ(service(r, "b").first_site, "main");
  EXPECT_EQ(service(r, "b").migrations, 1);
  EXPECT_EQ(r.migrations, 1);
  // Answered throughout: at main to 400 s, then at the edge.
  EXPECT_DOUBLE_EQ(service(r, "b").tally.served, 5000);
}

TEST(EdgeSimulation, PreemptionAndQueuesApplyPerSite) {
  // Two research jobs pinned to the edge fill it; a service from east preempts one there, and
  // training at the main site is untouched.
  const Sites s = two_sites(2, "0,0,0\n");  // link down: the service must be served at east
  const Workload w = jobs(R"({"name":"r1","submit":0,"gpus":1,"work":5000,"site":"east"})"
                          "\n"
                          R"({"name":"r2","submit":0,"gpus":1,"work":5000,"site":"east"})"
                          "\n"
                          R"({"name":"t","submit":0,"gpus":8,"work":5000})"
                          "\n" +
                          service_line("svc", 10, 100));
  const EdgeResult r = run_edge_simulation(s, w, {});
  EXPECT_EQ(service(r, "svc").first_site, "east");
  EXPECT_DOUBLE_EQ(service(r, "svc").first_start, 10);
  EXPECT_EQ(r.preemptions, 1);
  for (const EdgeJobResult& j : r.jobs) {
    EXPECT_EQ(j.site, j.name == "t" ? "main" : "east") << j.name;
    EXPECT_GE(j.end, 5000) << j.name;  // every job finishes, the preempted one later
  }
}

TEST(EdgeSimulation, IsDeterministicAndNamesBadJobs) {
  const Sites s = two_sites(1, "0,1,10\n300,1,0.2\n600,0,0\n900,1,10\n");
  std::string lines;
  for (int i = 0; i < 12; ++i) lines += service_line("s" + std::to_string(i), i * 50, 400);
  const Workload w = jobs(lines);
  EXPECT_EQ(to_json(run_edge_simulation(s, w, {})).dump(),
            to_json(run_edge_simulation(s, w, {})).dump());
  try {
    run_edge_simulation(s, jobs(service_line("x", 0, 10, "mars")), {});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("jobs.jsonl:1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("mars"), std::string::npos);
  }
}

TEST(EdgeSimulation, ServiceFieldsRoundTripThroughJsonl) {
  const Workload w =
      jobs(service_line("a", 0, 100) + R"({"name":"t","submit":1,"work":5,"site":"east"})"
                                       "\n");
  std::ostringstream out;
  write_jsonl(w, out);
  const Workload back = jobs(out.str());
  ASSERT_EQ(back.services.size(), 1u);
  EXPECT_EQ(back.services[0].region, "east");
  EXPECT_DOUBLE_EQ(back.services[0].latency_slo_ms, 300);
  EXPECT_DOUBLE_EQ(back.services[0].request_kb, 50);
  EXPECT_EQ(back.jobs[1].site, "east");
  try {
    jobs(R"({"name":"x","submit":0,"work":5,"service":{"region":"east","latency_slo_ms":0}})");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("service.latency_slo_ms"), std::string::npos) << e.what();
  }
}

TEST(EdgeCommand, ComparesPlacementsAndRecordsItsInputs) {
  const std::string dir = ::testing::TempDir() + "edge_cmd";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/east.csv") << "time,up,bandwidth_mbps\n0,1,10\n100,0,0\n";
  std::ofstream(dir + "/sites.yaml")
      << "sites:\n"
         "  - {name: main, main: true, access_rtt_ms: 20, cluster: {racks: 1, nodes_per_rack: "
         "1, node: {gpus: 8, gpu_type: A100-80G}}}\n"
         "  - {name: east, access_rtt_ms: 20, cluster: {nodes: [{name: e0, rack: r0, gpus: 1, "
         "gpu_type: T4}]}, link: {bandwidth_mbps: 10, rtt_ms: 200, connectivity: east.csv}}\n";
  std::ofstream(dir + "/jobs.jsonl") << service_line("a", 0, 200);
  const auto r = testing::run_tessera("edge --sites " + dir + "/sites.yaml --workload " + dir +
                                      "/jobs.jsonl --json " + dir + "/out.json");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("main-only: 1000 requests, 50.0% answered"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("edge-first: 1000 requests, 100.0% answered"), std::string::npos)
      << r.output;
  std::ifstream in(dir + "/out.json");
  const auto doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["runs"].size(), 2u);
  EXPECT_TRUE(doc["connectivity"][0].contains("sha256"));
  EXPECT_TRUE(doc["sites"].contains("sha256"));
  // Packed, with the slowdown measured in the interference data (recorded with the result).
  const auto packed =
      testing::run_tessera("edge --sites " + dir + "/sites.yaml --workload " + dir +
                           "/jobs.jsonl --placement edge-first --pack --json " + dir + "/p.json");
  ASSERT_EQ(packed.status, 0) << packed.output;
  std::ifstream pin(dir + "/p.json");
  const auto pdoc = nlohmann::json::parse(pin);
  EXPECT_NE(pdoc["colocation_slowdown_from"].get<std::string>().find("interference"),
            std::string::npos);
  const double slowdown = pdoc["runs"][0]["pack"]["colocation_slowdown"].get<double>();
  EXPECT_GT(slowdown, 0.05);
  EXPECT_LT(slowdown, 2);
  const auto bad = testing::run_tessera("edge --sites " + dir + "/sites.yaml --workload " + dir +
                                        "/jobs.jsonl --placement nearest");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.output.find("--placement"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace tessera

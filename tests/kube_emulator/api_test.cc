// The emulated API's object semantics: resourceVersions, create/get/update/patch/delete and
// their Status errors, selectors, paging, discovery and server-side tables.
#include <set>

#include "kube_emulator/emulator_test_util.h"

namespace kube_emulator::testing {
namespace {

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    emu_ = std::make_unique<Emulator>(small_options());
    emu_->start();
    http_ = std::make_unique<Http>(emu_->port());
  }
  std::unique_ptr<Emulator> emu_;
  std::unique_ptr<Http> http_;
};

TEST_F(ApiTest, CreateGetAndTheRealNotFoundStatus) {
  auto created = http_->post("/api/v1/namespaces/default/pods", pod_json("a"));
  ASSERT_EQ(created.status, 201) << created.text;
  const json& pod = created.body;
  EXPECT_FALSE(pod["metadata"]["uid"].get<std::string>().empty());
  EXPECT_TRUE(pod["metadata"]["resourceVersion"].is_string());
  EXPECT_EQ(pod["status"]["phase"], "Pending");
  EXPECT_EQ(pod["spec"]["schedulerName"], "tessera");
  EXPECT_EQ(pod["spec"]["terminationGracePeriodSeconds"], 30);
  EXPECT_EQ(pod["spec"]["restartPolicy"], "Always");
  EXPECT_EQ(http_->get("/api/v1/namespaces/default/pods/a").body, pod);

  auto missing = http_->get("/api/v1/namespaces/default/pods/x");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body, json::parse(R"({"kind":"Status","apiVersion":"v1","metadata":{},
      "status":"Failure","message":"pods \"x\" not found","reason":"NotFound",
      "details":{"name":"x","kind":"pods"},"code":404})"));
  auto lease = http_->get("/apis/coordination.k8s.io/v1/namespaces/default/leases/l");
  EXPECT_EQ(lease.body["details"]["group"], "coordination.k8s.io");
  EXPECT_EQ(lease.body["message"], "leases.coordination.k8s.io \"l\" not found");

  auto dup = http_->post("/api/v1/namespaces/default/pods", pod_json("a"));
  EXPECT_EQ(dup.status, 409);
  EXPECT_EQ(dup.body["reason"], "AlreadyExists");
  auto no_ns = http_->post("/api/v1/namespaces/nope/pods", pod_json("a", "", "nope"));
  EXPECT_EQ(no_ns.status, 404);
  EXPECT_EQ(no_ns.body["message"], "namespaces \"nope\" not found");
}

TEST_F(ApiTest, ResourceVersionsIncreaseAcrossKinds) {
  std::vector<uint64_t> rvs;
  for (int i = 0; i < 5; ++i) {
    auto p = http_->post("/api/v1/namespaces/default/pods", pod_json("p" + std::to_string(i)));
    rvs.push_back(std::stoull(p.body["metadata"]["resourceVersion"].get<std::string>()));
    auto cm =
        http_->post("/api/v1/namespaces/default/configmaps",
                    {{"metadata", {{"name", "c" + std::to_string(i)}}}, {"data", {{"k", "v"}}}});
    ASSERT_EQ(cm.status, 201) << cm.text;
    rvs.push_back(std::stoull(cm.body["metadata"]["resourceVersion"].get<std::string>()));
  }
  for (size_t i = 1; i < rvs.size(); ++i) EXPECT_GT(rvs[i], rvs[i - 1]);
  auto list = http_->get("/api/v1/pods");
  EXPECT_EQ(std::stoull(list.body["metadata"]["resourceVersion"].get<std::string>()), rvs.back());
  EXPECT_EQ(list.body["kind"], "PodList");
}

TEST_F(ApiTest, GenerateNameAndInvalidNames) {
  json p = pod_json("");
  p["metadata"].erase("name");
  p["metadata"]["generateName"] = "train-";
  auto r = http_->post("/api/v1/namespaces/default/pods", p);
  ASSERT_EQ(r.status, 201);
  const std::string name = r.body["metadata"]["name"];
  EXPECT_EQ(name.size(), 11u);
  EXPECT_EQ(name.substr(0, 6), "train-");
  EXPECT_EQ(http_->post("/api/v1/namespaces/default/pods", pod_json("Bad_Name")).status, 422);
  // As the real server: generateName is validated itself, so one ending in '.' is refused
  // (client-go's event recorder names events POD.HEX instead).
  p["metadata"]["generateName"] = "train.";
  r = http_->post("/api/v1/namespaces/default/pods", p);
  EXPECT_EQ(r.status, 422);
  EXPECT_NE(r.body.value("message", "").find("metadata.generateName"), std::string::npos);
  p["metadata"].erase("generateName");
  EXPECT_EQ(http_->post("/api/v1/namespaces/default/pods", p).status, 422);
}

TEST_F(ApiTest, UpdateNeedsTheCurrentResourceVersion) {
  auto lease = http_->post("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
                           {{"apiVersion", "coordination.k8s.io/v1"},
                            {"kind", "Lease"},
                            {"metadata", {{"name", "tessera"}}},
                            {"spec", {{"holderIdentity", "a"}, {"leaseDurationSeconds", 15}}}});
  ASSERT_EQ(lease.status, 201) << lease.text;
  json a = lease.body, b = lease.body;
  a["spec"]["holderIdentity"] = "a2";
  auto first = http_->put("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/tessera", a);
  ASSERT_EQ(first.status, 200) << first.text;
  EXPECT_NE(first.body["metadata"]["resourceVersion"], lease.body["metadata"]["resourceVersion"]);
  b["spec"]["holderIdentity"] = "b";
  auto second = http_->put("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/tessera", b);
  EXPECT_EQ(second.status, 409);
  EXPECT_EQ(second.body["reason"], "Conflict");
  EXPECT_EQ(second.body["message"],
            "Operation cannot be fulfilled on leases.coordination.k8s.io \"tessera\": the object "
            "has been modified; please apply your changes to the latest version and try again");
  // Without a resourceVersion the update is unconditional; a no-op keeps the RV.
  b["metadata"].erase("resourceVersion");
  auto forced = http_->put("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/tessera", b);
  EXPECT_EQ(forced.status, 200);
  auto again =
      http_->put("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/tessera", forced.body);
  EXPECT_EQ(again.body["metadata"]["resourceVersion"], forced.body["metadata"]["resourceVersion"]);
}

TEST_F(ApiTest, PatchKinds) {
  ASSERT_EQ(http_->post("/api/v1/namespaces/default/pods", pod_json("p", "1")).status, 201);
  const std::string path = "/api/v1/namespaces/default/pods/p";
  auto merge = http_->patch(path, {{"metadata", {{"labels", {{"a", "1"}}}}}},
                            "application/merge-patch+json");
  ASSERT_EQ(merge.status, 200) << merge.text;
  EXPECT_EQ(merge.body["metadata"]["labels"]["a"], "1");
  // Strategic merge on pod status: conditions merge by type.
  auto s1 = http_->patch(
      path + "/status",
      {{"status",
        {{"conditions",
          {{{"type", "PodScheduled"}, {"status", "False"}, {"reason", "Unschedulable"}}}}}}},
      "application/strategic-merge-patch+json");
  ASSERT_EQ(s1.status, 200) << s1.text;
  auto s2 = http_->patch(
      path + "/status",
      {{"status", {{"conditions", {{{"type", "DisruptionTarget"}, {"status", "True"}}}}}}},
      "application/strategic-merge-patch+json");
  ASSERT_EQ(s2.body["status"]["conditions"].size(), 2u) << s2.text;
  EXPECT_EQ(s2.body["status"]["phase"], "Pending");
  // Containers merge by name; a main-resource patch cannot change status.
  auto img = http_->patch(path,
                          {{"spec", {{"containers", {{{"name", "main"}, {"image", "busybox:2"}}}}}},
                           {"status", {{"phase", "Running"}}}},
                          "application/strategic-merge-patch+json");
  ASSERT_EQ(img.status, 200) << img.text;
  EXPECT_EQ(img.body["spec"]["containers"].size(), 1u);
  EXPECT_EQ(img.body["spec"]["containers"][0]["image"], "busybox:2");
  EXPECT_EQ(img.body["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "1");
  EXPECT_EQ(img.body["status"]["phase"], "Pending");
  // Pod spec fields other than images are immutable, including nodeName.
  auto bind_by_patch = http_->patch(path, {{"spec", {{"nodeName", "gpu-node-0000"}}}},
                                    "application/merge-patch+json");
  EXPECT_EQ(bind_by_patch.status, 422);
  auto jp = http_->patch(
      path,
      json::array({{{"op", "add"}, {"path", "/metadata/annotations"}, {"value", {{"x", "y"}}}}}),
      "application/json-patch+json");
  EXPECT_EQ(jp.status, 200) << jp.text;
  EXPECT_EQ(jp.body["metadata"]["annotations"]["x"], "y");
  auto failed = http_->patch(
      path, json::array({{{"op", "test"}, {"path", "/metadata/name"}, {"value", "q"}}}),
      "application/json-patch+json");
  EXPECT_EQ(failed.status, 422);
  EXPECT_EQ(http_->patch(path, json::object(), "application/apply-patch+yaml").status, 415);
  auto stale =
      http_->patch(path, {{"metadata", {{"resourceVersion", "1"}, {"labels", {{"b", "2"}}}}}},
                   "application/merge-patch+json");
  EXPECT_EQ(stale.status, 409);
}

TEST_F(ApiTest, PodGroupsAreCustomResources) {
  const std::string base = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups";
  auto pg = http_->post(base, {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                               {"kind", "PodGroup"},
                               {"metadata", {{"name", "g"}}},
                               {"spec", {{"minMember", 4}}},
                               {"status", {{"phase", "Running"}}}});
  ASSERT_EQ(pg.status, 201) << pg.text;
  EXPECT_FALSE(pg.body.contains("status"));  // status is written through /status only
  auto st = http_->patch(base + "/g/status", {{"status", {{"phase", "Scheduling"}}}},
                         "application/merge-patch+json");
  ASSERT_EQ(st.status, 200);
  EXPECT_EQ(st.body["status"]["phase"], "Scheduling");
  EXPECT_EQ(st.body["spec"]["minMember"], 4);
  // Custom resources take no strategic merge patch (as the real server).
  EXPECT_EQ(http_
                ->patch(base + "/g", {{"spec", {{"minMember", 2}}}},
                        "application/strategic-merge-patch+json")
                .status,
            415);
  auto spec =
      http_->patch(base + "/g", {{"spec", {{"minMember", 2}}}}, "application/merge-patch+json");
  EXPECT_EQ(spec.body["metadata"]["generation"], 2);
}

TEST_F(ApiTest, LabelAndFieldSelectors) {
  for (int i = 0; i < 6; ++i) {
    json p = pod_json("p" + std::to_string(i));
    p["metadata"]["labels"] = {{"team", i % 2 ? "a" : "b"}, {"tier", std::to_string(i % 3)}};
    if (i == 5) p["spec"]["schedulerName"] = "other";
    ASSERT_EQ(http_->post("/api/v1/namespaces/default/pods", p).status, 201);
  }
  ASSERT_EQ(
      http_->post("/api/v1/namespaces/default/pods/p0/binding", binding_json("p0", "gpu-node-0001"))
          .status,
      201);
  const auto names = [&](const std::string& q) {
    std::set<std::string> out;
    auto r = http_->get("/api/v1/namespaces/default/pods?" + q);
    EXPECT_EQ(r.status, 200) << q << ": " << r.text;
    for (const auto& it : r.body["items"]) out.insert(it["metadata"]["name"].get<std::string>());
    return out;
  };
  EXPECT_EQ(names("labelSelector=team%3Da"), (std::set<std::string>{"p1", "p3", "p5"}));
  EXPECT_EQ(names("labelSelector=team%3D%3Da,tier!%3D1"), (std::set<std::string>{"p3", "p5"}));
  EXPECT_EQ(names("labelSelector=tier%20in%20(0,2)"),
            (std::set<std::string>{"p0", "p2", "p3", "p5"}));
  EXPECT_EQ(names("labelSelector=tier%20notin%20(0,2)"), (std::set<std::string>{"p1", "p4"}));
  EXPECT_EQ(names("labelSelector=!team").size(), 0u);
  EXPECT_EQ(names("labelSelector=team").size(), 6u);
  EXPECT_EQ(names("fieldSelector=spec.nodeName%3Dgpu-node-0001"), (std::set<std::string>{"p0"}));
  EXPECT_EQ(names("fieldSelector=spec.schedulerName%3Dtessera,spec.nodeName%3D"),
            (std::set<std::string>{"p1", "p2", "p3", "p4"}));
  EXPECT_EQ(names("fieldSelector=status.phase!%3DRunning,metadata.name%3Dp5"),
            (std::set<std::string>{"p5"}));
  auto bad = http_->get("/api/v1/pods?fieldSelector=spec.foo%3Dx");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["message"], "field label not supported: spec.foo");
  auto nodes = http_->get("/api/v1/nodes?fieldSelector=spec.unschedulable%3Dfalse");
  EXPECT_EQ(nodes.body["items"].size(), 4u);
}

TEST_F(ApiTest, PagingAndExpiredContinue) {
  for (int i = 0; i < 25; ++i) {
    ASSERT_EQ(http_
                  ->post("/api/v1/namespaces/default/configmaps",
                         {{"metadata", {{"name", "cm" + std::to_string(100 + i)}}}})
                  .status,
              201);
  }
  std::set<std::string> seen;
  std::string cont, first_rv;
  int pages = 0;
  do {
    auto r = http_->get("/api/v1/namespaces/default/configmaps?limit=10" +
                        (cont.empty() ? "" : "&continue=" + url_encode(cont)));
    ASSERT_EQ(r.status, 200) << r.text;
    if (first_rv.empty()) first_rv = r.body["metadata"]["resourceVersion"];
    EXPECT_EQ(r.body["metadata"]["resourceVersion"], first_rv);
    for (const auto& it : r.body["items"]) seen.insert(it["metadata"]["name"].get<std::string>());
    cont = r.body["metadata"].value("continue", "");
    ++pages;
  } while (!cont.empty());
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(seen.size(), 25u);
  auto r = http_->get("/api/v1/namespaces/default/configmaps?limit=10");
  const std::string token = r.body["metadata"]["continue"];
  emu_->compact();
  auto expired =
      http_->get("/api/v1/namespaces/default/configmaps?limit=10&continue=" + url_encode(token));
  EXPECT_EQ(expired.status, 410);
  EXPECT_EQ(expired.body["reason"], "Expired");
}

TEST_F(ApiTest, DeleteAndPreconditions) {
  auto cm = http_->post("/api/v1/namespaces/default/configmaps", {{"metadata", {{"name", "c"}}}});
  auto bad =
      http_->del("/api/v1/namespaces/default/configmaps/c", {{"preconditions", {{"uid", "nope"}}}});
  EXPECT_EQ(bad.status, 409);
  auto ok = http_->del("/api/v1/namespaces/default/configmaps/c");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body["status"], "Success");
  EXPECT_EQ(ok.body["details"]["uid"], cm.body["metadata"]["uid"]);
  EXPECT_EQ(http_->del("/api/v1/namespaces/default/configmaps/c").status, 404);
  // Finalizers hold the object until an update removes them.
  ASSERT_EQ(http_
                ->post("/api/v1/namespaces/default/configmaps",
                       {{"metadata", {{"name", "f"}, {"finalizers", {"x/y"}}}}})
                .status,
            201);
  auto held = http_->del("/api/v1/namespaces/default/configmaps/f");
  EXPECT_TRUE(held.body["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(http_
                ->patch("/api/v1/namespaces/default/configmaps/f",
                        {{"metadata", {{"finalizers", nullptr}}}}, "application/merge-patch+json")
                .status,
            200);
  EXPECT_EQ(http_->get("/api/v1/namespaces/default/configmaps/f").status, 404);
  // Deleting a namespace deletes what is in it.
  ASSERT_EQ(http_->post("/api/v1/namespaces", {{"metadata", {{"name", "team"}}}}).status, 201);
  EXPECT_EQ(http_->get("/api/v1/namespaces/team/serviceaccounts/default").status, 200);
  ASSERT_EQ(http_->post("/api/v1/namespaces/team/pods", pod_json("p", "", "team")).status, 201);
  EXPECT_EQ(http_->del("/api/v1/namespaces/team").status, 200);
  EXPECT_EQ(http_->get("/api/v1/namespaces/team/pods/p").status, 404);
}

TEST_F(ApiTest, Discovery) {
  auto api = http_->get("/api");
  EXPECT_EQ(api.body["versions"], json({"v1"}));
  auto core = http_->get("/api/v1");
  std::map<std::string, json> by_name;
  for (const auto& r : core.body["resources"]) by_name[r["name"]] = r;
  EXPECT_EQ(by_name["pods"]["shortNames"], json({"po"}));
  EXPECT_EQ(by_name["pods"]["namespaced"], true);
  EXPECT_EQ(by_name["nodes"]["namespaced"], false);
  EXPECT_EQ(by_name["pods/binding"]["kind"], "Binding");
  EXPECT_EQ(by_name["pods/eviction"]["group"], "policy");
  EXPECT_EQ(by_name["configmaps"]["shortNames"], json({"cm"}));
  auto groups = http_->get("/apis");
  std::set<std::string> names;
  for (const auto& g : groups.body["groups"]) names.insert(g["name"].get<std::string>());
  for (const char* g : {"apps", "batch", "coordination.k8s.io", "events.k8s.io", "policy",
                        "rbac.authorization.k8s.io", "scheduling.k8s.io", "apiextensions.k8s.io",
                        "scheduling.x-k8s.io", "scheduling.volcano.sh"}) {
    EXPECT_EQ(names.count(g), 1u) << g;
  }
  auto pg = http_->get("/apis/scheduling.x-k8s.io/v1alpha1");
  EXPECT_EQ(pg.body["resources"][0]["name"], "podgroups");
  EXPECT_EQ(http_->get("/version").body["major"], "1");
  // A CRD serves its resource once created.
  json crd = {{"apiVersion", "apiextensions.k8s.io/v1"},
              {"kind", "CustomResourceDefinition"},
              {"metadata", {{"name", "widgets.example.com"}}},
              {"spec",
               {{"group", "example.com"},
                {"scope", "Namespaced"},
                {"names", {{"plural", "widgets"}, {"kind", "Widget"}}},
                {"versions", {{{"name", "v1"}, {"served", true}, {"storage", true}}}}}}};
  ASSERT_EQ(http_->post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd).status,
            201);
  EXPECT_EQ(
      http_
          ->post("/apis/example.com/v1/namespaces/default/widgets", {{"metadata", {{"name", "w"}}}})
          .status,
      201);
}

TEST_F(ApiTest, TablesForKubectlGet) {
  ASSERT_EQ(http_->post("/api/v1/namespaces/default/pods", pod_json("p")).status, 201);
  ASSERT_EQ(
      http_->post("/api/v1/namespaces/default/pods/p/binding", binding_json("p", "gpu-node-0002"))
          .status,
      201);
  const std::string accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
  auto t = http_->get("/api/v1/namespaces/default/pods", accept);
  ASSERT_EQ(t.body["kind"], "Table") << t.text;
  std::vector<std::string> cols;
  for (const auto& c : t.body["columnDefinitions"]) cols.push_back(c["name"]);
  EXPECT_EQ(cols, (std::vector<std::string>{"Name", "Ready", "Status", "Restarts", "Age", "IP",
                                            "Node", "Nominated Node", "Readiness Gates"}));
  EXPECT_EQ(t.body["columnDefinitions"][6]["priority"], 1);
  EXPECT_EQ(t.body["rows"][0]["cells"][6], "gpu-node-0002");
  EXPECT_EQ(t.body["rows"][0]["object"]["kind"], "PartialObjectMetadata");
  auto n = http_->get("/api/v1/nodes", accept);
  EXPECT_EQ(n.body["rows"].size(), 4u);
  EXPECT_EQ(n.body["rows"][0]["cells"][1], "Ready");
  auto full = http_->get("/api/v1/nodes?includeObject=Object", accept);
  EXPECT_EQ(full.body["rows"][0]["object"]["kind"], "Node");
}

TEST_F(ApiTest, NodesCarryGpuAndTopologyLabels) {
  auto n = http_->get("/api/v1/nodes/gpu-node-0003");
  ASSERT_EQ(n.status, 200);
  const json& l = n.body["metadata"]["labels"];
  EXPECT_EQ(l["kubernetes.io/hostname"], "gpu-node-0003");
  EXPECT_EQ(l["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(l["nvidia.com/gpu.count"], "8");
  EXPECT_TRUE(l.contains("network.topology.nvidia.com/leaf"));
  EXPECT_TRUE(l.contains("network.topology.nvidia.com/spine"));
  EXPECT_EQ(n.body["status"]["allocatable"]["nvidia.com/gpu"], "8");
  emu_->add_nodes({parse_node_spec("2:4:NVIDIA-A100-SXM4-80GB")});
  auto a = http_->get("/api/v1/nodes/gpu-node-0005");
  EXPECT_EQ(a.body["metadata"]["labels"]["nvidia.com/gpu.product"], "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(a.body["status"]["capacity"]["nvidia.com/gpu"], "4");
}

}  // namespace
}  // namespace kube_emulator::testing

#include "backend/kube/object_path.h"

#include <stdexcept>

#include <gtest/gtest.h>

#include "backend/kube/kube_client.h"

namespace tessera::kube {
namespace {

TEST(ObjectPath, CoreAndGroups) {
  EXPECT_EQ(object_path(kPods, "ml", "train-0", "binding"),
            "/api/v1/namespaces/ml/pods/train-0/binding");
  EXPECT_EQ(object_path(kPods, "ml", "train-0"), "/api/v1/namespaces/ml/pods/train-0");
  EXPECT_EQ(object_path(kPodGroupsX, "ml", "job-a", "status"),
            "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ml/podgroups/job-a/status");
  EXPECT_EQ(collection_path(kNodes), "/api/v1/nodes");
  EXPECT_EQ(collection_path(kNodes, "ignored"), "/api/v1/nodes");
  EXPECT_EQ(object_path(kNodes, "", "gpu-17"), "/api/v1/nodes/gpu-17");
  EXPECT_EQ(collection_path(kPods), "/api/v1/pods");
  EXPECT_EQ(collection_path(kPods, "ml"), "/api/v1/namespaces/ml/pods");
  EXPECT_EQ(collection_path(kEvents, "ml"), "/apis/events.k8s.io/v1/namespaces/ml/events");
  EXPECT_EQ(object_path(kLeases, "kube-system", "tessera-scheduler"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/tessera-scheduler");
  ApiResource custom{"example.com", "v2", "widgets", false};
  EXPECT_EQ(collection_path(custom), "/apis/example.com/v2/widgets");
}

TEST(ObjectPath, Escaping) {
  EXPECT_EQ(object_path(kPods, "ml", "a b/c?d%"), "/api/v1/namespaces/ml/pods/a%20b%2Fc%3Fd%25");
  EXPECT_EQ(escape_path_segment("node.example_1~x"), "node.example_1~x");
  EXPECT_THROW(object_path(kPods, "", "x"), std::invalid_argument);
  EXPECT_THROW(object_path(kPods, "ml", ""), std::invalid_argument);
  EXPECT_THROW(object_path(kPods, "ml", ".."), std::invalid_argument);
  EXPECT_THROW(object_path(kNodes, "", "."), std::invalid_argument);
}

TEST(ObjectPath, Query) {
  EXPECT_EQ(escape_query("spec.schedulerName=tessera,spec.nodeName="),
            "spec.schedulerName%3Dtessera%2Cspec.nodeName%3D");
  EXPECT_EQ(escape_query("status.phase!=Failed"), "status.phase%21%3DFailed");
  std::string p = add_query(collection_path(kPods), "limit", "500");
  p = add_query(p, "labelSelector", "app in (a,b)");
  EXPECT_EQ(p, "/api/v1/pods?limit=500&labelSelector=app%20in%20%28a%2Cb%29");
}

}  // namespace
}  // namespace tessera::kube

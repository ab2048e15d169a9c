#include "backend/kube/field_mask.h"

#include <gtest/gtest.h>

namespace tessera::kube {
namespace {

using nlohmann::json;

const char* kPod = R"({
  "kind": "Pod",
  "metadata": {"name": "p", "uid": "u", "managedFields": [{"manager": "kubectl"}],
               "labels": {"app": "x"}},
  "spec": {"containers": [
             {"name": "a", "image": "i", "env": [{"name": "E"}],
              "resources": {"limits": {"nvidia.com/gpu": "1"}}},
             {"name": "b", "image": "j", "resources": {}}],
           "volumes": [{"name": "v"}], "priority": 5},
  "status": {"phase": "Running", "containerStatuses": [{"ready": true}]}
})";

TEST(FieldMask, KeepsTheNamedPathsWholeAndDropsTheRest) {
  const FieldMask m = FieldMask::of({"metadata.name", "metadata.labels",
                                     "spec.containers.resources", "spec.priority", "status.phase"});
  const json j = parse_masked(kPod, m);
  EXPECT_EQ(j, json::parse(R"({
    "metadata": {"name": "p", "labels": {"app": "x"}},
    "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}},
                            {"resources": {}}],
             "priority": 5},
    "status": {"phase": "Running"}})"));
}

TEST(FieldMask, AnEnvelopeKeepsItsOwnMembersAndMasksItsObjects) {
  const std::string list =
      std::string(R"({"kind":"PodList","metadata":{"continue":"t"},"items":[)") + kPod + "," +
      kPod + "]}";
  const json j = parse_masked(list, FieldMask::of({"metadata.uid"}).under("items"));
  EXPECT_EQ(j["kind"], "PodList");
  EXPECT_EQ(j["metadata"]["continue"], "t");
  ASSERT_EQ(j["items"].size(), 2u);
  EXPECT_EQ(j["items"][1], json::parse(R"({"metadata":{"uid":"u"}})"));
}

TEST(FieldMask, AnEmptyListOrAShorterPathKeepsEverythingBelow) {
  EXPECT_EQ(parse_masked(kPod, FieldMask::of({})), json::parse(kPod));
  const json j = parse_masked(kPod, FieldMask::of({"spec.containers.name", "spec"}));
  EXPECT_EQ(j["spec"], json::parse(kPod)["spec"]);
}

TEST(FieldMask, ValuesKeepTheirTypes) {
  const json j = parse_masked(
      R"({"a": -3, "b": 18446744073709551615, "c": 1.5, "d": true, "e": null, "f": "\u00e9\n"})",
      FieldMask::of({"a", "b", "c", "d", "e", "f"}));
  EXPECT_TRUE(j["a"].is_number_integer());
  EXPECT_EQ(j["a"], -3);
  EXPECT_EQ(j["b"].get<uint64_t>(), 18446744073709551615ULL);
  EXPECT_DOUBLE_EQ(j["c"].get<double>(), 1.5);
  EXPECT_EQ(j["d"], true);
  EXPECT_TRUE(j["e"].is_null());
  EXPECT_EQ(j["f"], "\u00e9\n");
}

TEST(FieldMask, WhatTheFastParserRefusesIsReadAsNlohmannWould) {
  // An integer beyond 64 bits: nlohmann reads it as a double.
  const json j =
      parse_masked(R"({"big": 123456789012345678901234567890, "drop": 1})", FieldMask::of({"big"}));
  ASSERT_TRUE(j.is_object());
  EXPECT_TRUE(j["big"].is_number_float());
  EXPECT_FALSE(j.contains("drop"));
}

TEST(FieldMask, MalformedTextIsDiscarded) {
  for (const char* bad : {"", "{", R"({"a":1,})", R"({"a": tru})", "[1, 2"}) {
    EXPECT_TRUE(parse_masked(bad, FieldMask::of({"a"})).is_discarded()) << bad;
  }
}

}  // namespace
}  // namespace tessera::kube

// What a new user's mistakes are told by tessera serve: a GPU type the host lacks (with the
// types it has, and the choices of an ambiguous name) and a member larger than the host (with
// what the host has).
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "service_fixture.h"

namespace tessera {
namespace {

class ServiceErrors : public ServiceTest {
 protected:
  std::unique_ptr<Service> make_typed(const std::string& type) {
    ServiceOptions o = options(4);
    o.virtual_gpu_type = type;
    auto b = std::make_unique<FakeBackend>();
    backend_ = b.get();
    return std::make_unique<Service>(o, std::move(b));
  }
  // "field: message" of the error submitting `yaml` raises; "" if accepted.
  std::string refusal(Service& s, const std::string& yaml) {
    try {
      s.submit(as("lab"), job(yaml), "", nullptr);
    } catch (const ServiceError& e) {
      return e.field() + ": " + e.what();
    }
    return "";
  }
};

TEST_F(ServiceErrors, AnUnknownGpuTypeListsTheHostsAndAnAmbiguousOneTheChoices) {
  auto s = make_typed("A100-80G");
  EXPECT_EQ(refusal(*s, "name: a\nresources: {gpus: 1, gpu_types: [A100-80GB]}\ncommand: [x]\n"),
            "");
  EXPECT_EQ(refusal(*s, "name: a\nresources: {gpus: 1, gpu_types: [a100]}\ncommand: [x]\n"),
            "resources.gpu_types: ambiguous GPU type 'a100': say A100-40G or A100-80G (this "
            "cluster has A100-80G)");
  EXPECT_EQ(refusal(*s, "name: a\nresources: {gpus: 1, gpu_types: [H100]}\ncommand: [x]\n"),
            "resources.gpu_types: GPU type \"H100\" does not exist in this cluster (this cluster "
            "has A100-80G)");
}

TEST_F(ServiceErrors, AMemberLargerThanTheHostSaysWhatTheHostHas) {
  auto s = make(2);
  const std::string why =
      refusal(*s, "name: big\nresources: {gpus: 1, cpu: 100000}\ncommand: [x]\n");
  EXPECT_NE(why.find("resources: can never run here: each member asks for 100000 CPUs, but the "
                     "largest node with a GPU of an allowed type has "),
            std::string::npos)
      << why;
}

}  // namespace
}  // namespace tessera

// The Kubernetes a kube test runs against: the in-process API-server emulator, or a real
// etcd + kube-apiserver + KWOK (tools/testcluster). One interface, so a test written once
// runs on both, and the real server decides.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kube_emulator/emulator.h"

namespace tessera::kube::testing {

enum class Target { kEmulator, kApiServer };
std::string to_string(Target t);  // "emulator" | "apiserver" (test-name suffixes)

class ClusterUnderTest {
 public:
  virtual ~ClusterUnderTest() = default;
  // A request as the cluster's administrator. PATCH bodies are merge patches unless
  // content_type says otherwise.
  virtual kube_emulator::Reply request(const std::string& method, const std::string& path,
                                       const std::string& body = "",
                                       const std::string& content_type = "application/json") = 0;
  // Every pods/binding request answered, in the order the server logged them.
  virtual std::vector<kube_emulator::BindRecord> bindings() = 0;
  // GPU nodes as kube_emulator::make_nodes builds them, Ready when this returns.
  virtual void add_nodes(const std::vector<kube_emulator::NodePool>& pools) = 0;
  virtual std::string kubeconfig_path() const = 0;  // the administrator's
  // Runs kubectl at the server's version with the administrator's kubeconfig; returns its
  // exit status and puts its output (stdout and stderr) in *out.
  virtual int kubectl(const std::string& args, std::string* out) = 0;
  // Where the cluster let a node hold more GPUs than it has (empty: never). On the
  // emulator its kubelet fails such pods (OutOfnvidia.com/gpu) instead.
  virtual std::vector<std::string> overcommits() = 0;
  virtual void stop() = 0;
};

// A started emulator, which the caller owns and keeps for its test-only hooks.
std::unique_ptr<ClusterUnderTest> make_emulator_cluster(kube_emulator::Emulator& emu,
                                                        const std::filesystem::path& dir);

}  // namespace tessera::kube::testing

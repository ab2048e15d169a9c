// A real Kubernetes control plane for a test: `testcluster up` (etcd in its process;
// kube-apiserver, kube-controller-manager and KWOK as its children) in a directory of the
// test's own, stopped with the test. The audit log of the API server is the binding log.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/kube/kube_client.h"
#include "kube/support/cluster_under_test.h"

namespace tessera::kube::testing {

struct RealClusterOptions {
  bool watch_cache = true;
  bool kwok = true;
  bool no_fsync = true;  // tests do not survive host crashes; the benchmark keeps fsync
  std::vector<std::string> apiserver_args;           // extra --flag=value
  std::vector<std::string> controller_manager_args;  // extra --flag=value
  std::vector<std::string> kwok_args;                // extra --flag=value (a later one wins)
  // Run the workload controllers (JobSet, LeaderWorkerSet, training-operator, KubeRay) that
  // scripts/setup.sh builds into tools/workloads/bin (workloads_dir()).
  bool workloads = false;
  kube_emulator::NodeLayout layout;
};

class RealCluster : public ClusterUnderTest {
 public:
  // tools/testcluster/bin/testcluster, which scripts/setup.sh builds; throws naming that
  // command when it is missing.
  static std::string binary();
  // tools/workloads/bin, where scripts/setup.sh builds the workload controllers; throws naming
  // that command when they are missing.
  static std::string workloads_dir();

  RealCluster(std::filesystem::path dir, RealClusterOptions opt);
  ~RealCluster() override;
  RealCluster(const RealCluster&) = delete;
  RealCluster& operator=(const RealCluster&) = delete;

  void start();  // throws std::runtime_error with the log's tail when it does not come up
  void stop() override;

  kube_emulator::Reply request(const std::string& method, const std::string& path,
                               const std::string& body = "",
                               const std::string& content_type = "application/json") override;
  std::vector<kube_emulator::BindRecord> bindings() override;
  void add_nodes(const std::vector<kube_emulator::NodePool>& pools) override;
  std::string kubeconfig_path() const override { return (dir_ / "admin.kubeconfig").string(); }
  int kubectl(const std::string& args, std::string* out) override;
  std::vector<std::string> overcommits() override;

  // The audit log's events (writes only: the policy logs no reads or watches).
  std::vector<nlohmann::json> audit();
  std::string server() const { return server_; }
  std::string etcd_url() const { return etcd_; }
  const std::filesystem::path& dir() const { return dir_; }
  pid_t apiserver_pid() const;  // 0 while it is down
  // A child of `up` (kube-apiserver, kube-controller-manager, kwok); 0 while it is down.
  pid_t component_pid(const std::string& name) const;
  // Compacts etcd at its current revision: watches and lists from older resourceVersions
  // then answer 410 Gone (with the watch cache off).
  void compact_etcd();
  // Waits until /readyz answers 200 (after an API server restart).
  bool wait_ready(double seconds);

 private:
  void watch_pods();

  std::filesystem::path dir_;
  RealClusterOptions opt_;
  pid_t pid_ = 0;
  std::string server_, etcd_;
  std::unique_ptr<Client> client_;
  int nodes_made_ = 0;

  // The over-commit ledger: pods and nodes as a watch of pods saw them.
  std::mutex mu_;
  std::map<std::string, int> node_gpus_;                         // capacity
  std::map<std::string, std::pair<std::string, int>> pod_gpus_;  // uid -> node, GPUs
  std::vector<std::string> overcommits_;
  std::atomic<bool> stop_watch_{false};
  std::thread watcher_;
};

}  // namespace tessera::kube::testing

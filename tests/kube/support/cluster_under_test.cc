#include "kube/support/cluster_under_test.h"

#include <cstdlib>
#include <fstream>

namespace tessera::kube::testing {

std::string to_string(Target t) {
  return t == Target::kEmulator ? "emulator" : "apiserver";
}

namespace {

// The emulator in this process: its own binding log, its kubelet judging over-commits.
class EmulatorCluster : public ClusterUnderTest {
 public:
  EmulatorCluster(kube_emulator::Emulator& emu, std::filesystem::path dir)
      : emu_(emu), dir_(std::move(dir)) {
    std::ofstream(kubeconfig_path()) << emu_.kubeconfig();
  }

  kube_emulator::Reply request(const std::string& method, const std::string& path,
                               const std::string& body, const std::string& content_type) override {
    const std::string type = method == "PATCH" && content_type == "application/json"
                                 ? "application/merge-patch+json"
                                 : content_type;
    return emu_.request(method, path, body, type);
  }
  std::vector<kube_emulator::BindRecord> bindings() override { return emu_.bindings(); }
  void add_nodes(const std::vector<kube_emulator::NodePool>& pools) override {
    emu_.add_nodes(pools);
  }
  std::string kubeconfig_path() const override { return (dir_ / "kubeconfig").string(); }
  int kubectl(const std::string& args, std::string* out) override {
    // The machine's kubectl (1.27-1.33) talks to the emulator, which reports 1.31.
    const std::string file = (dir_ / "kubectl.out").string();
    const std::string cmd = "HOME=" + dir_.string() + " kubectl --kubeconfig " + kubeconfig_path() +
                            " " + args + " > " + file + " 2>&1";
    const int status = std::system(cmd.c_str());
    std::ifstream in(file);
    if (out) out->assign(std::istreambuf_iterator<char>(in), {});
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::vector<std::string> overcommits() override { return {}; }
  void stop() override { emu_.stop(); }

 private:
  kube_emulator::Emulator& emu_;
  std::filesystem::path dir_;
};

}  // namespace

std::unique_ptr<ClusterUnderTest> make_emulator_cluster(kube_emulator::Emulator& emu,
                                                        const std::filesystem::path& dir) {
  return std::make_unique<EmulatorCluster>(emu, dir);
}

}  // namespace tessera::kube::testing

// The fixture of the tests that only a real kube-apiserver can judge: the real target, the
// shipped deploy/kubernetes objects, ServiceAccount tokens and kubectl.
#pragma once

#include <cctype>
#include <fstream>
#include <string>

#include "kube/kube_env.h"

namespace tessera::kube {

class KubeRealServer : public testing::KubeEnv {
 protected:
  testing::Target target() const override { return testing::Target::kApiServer; }
  testing::RealClusterOptions real_options() override { return real_options_; }
  testing::RealClusterOptions real_options_;

  // A kubeconfig with the tessera-scheduler ServiceAccount's token (kubectl create token), as
  // a pod of the Deployment would have it mounted; deploy/kubernetes's namespace and RBAC
  // applied first.
  std::string service_account_kubeconfig() {
    const std::string dir = std::string(TESSERA_SOURCE_DIR) + "/deploy/kubernetes";
    for (const char* f : {"00-namespace.yaml", "02-rbac.yaml", "03-config.yaml"}) {
      kubectl_ok("apply -f " + dir + "/" + f);
    }
    const std::string token = token_of("tessera-system", "tessera-scheduler");
    const std::string path = (dir_ / "sa.kubeconfig").string();
    std::ofstream(path) << "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
                        << "    server: " << real_->server() << "\n"
                        << "    certificate-authority: " << (dir_ / "cluster" / "ca.crt").string()
                        << "\n"
                        << "users:\n- name: u\n  user:\n    token: " << token << "\n"
                        << "contexts:\n- name: c\n  context: {cluster: c, user: u}\n"
                        << "current-context: c\n";
    return path;
  }

  // A fresh token of ServiceAccount ns/name (kubectl create token), without its newline.
  std::string token_of(const std::string& ns, const std::string& name) {
    std::string token = kubectl_ok("create token " + name + " -n " + ns + " --duration=1h");
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) {
      token.pop_back();
    }
    return token;
  }

  std::string kubectl_ok(const std::string& args) {
    std::string out;
    const int rc = cluster_->kubectl(args, &out);
    EXPECT_EQ(rc, 0) << "kubectl " << args << "\n" << out;
    return out;
  }
};

}  // namespace tessera::kube

// tessera-kube-emulator: a Kubernetes API server emulator with fake GPU nodes and a KWOK-style
// kubelet, for tests, benchmarks and trying `tessera kube` and kubectl without a cluster
// (docs/kube-emulator.md). Serves kube_emulator::Emulator until SIGINT/SIGTERM. Its own
// executable: the emulator stands for the cluster and is no part of the `tessera` product.
#include <sys/stat.h>

#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "apps/listen.h"
#include "kube_emulator/emulator.h"

namespace tessera {
namespace {

struct KubeEmulatorArgs {
  std::string listen = "127.0.0.1:6443";
  std::string addr_file;
  std::string kubeconfig_out;  // empty: print the kubeconfig on stdout
  int nodes = 16;
  int gpus_per_node = 8;
  std::string gpu_product = "NVIDIA-H100-80GB-HBM3";
  std::string cpu_per_node = "96";
  std::string memory_per_node = "1536Gi";
  std::vector<std::string> node_specs;  // COUNT:GPUS:PRODUCT[:CPU[:MEMORY]]; replace --nodes
  int racks = 0;
  int racks_per_spine = 4;
  std::string spine_label = "network.topology.nvidia.com/spine";
  std::string leaf_label = "network.topology.nvidia.com/leaf";
  std::string node_prefix = "gpu-node-";
  bool tls = false;
  std::string tls_cert, tls_key, client_ca;
  std::vector<std::string> tokens;
  std::string state;
  double state_interval = 5;
  std::string binding_log;
  size_t history = 10000;
  double bookmark_interval = 60;
  double watch_timeout = 0;
  bool watch_expired_http = false;
  std::string kubelet_start_delay = "100ms";
  bool no_kubelet = false;
  uint64_t seed = 1;
  int threads = 256;
};

void add_options(CLI::App& app, KubeEmulatorArgs& a) {
  CLI::App* s = &app;
  s->add_option("--listen", a.listen, "host:port to serve on (port 0: any free port)");
  s->add_option("--addr-file", a.addr_file, "write host:port here once listening");
  s->add_option("--kubeconfig-out", a.kubeconfig_out,
                "write a kubeconfig for this server here (default: print it on stdout)");
  s->add_option("--nodes", a.nodes, "number of GPU nodes")->check(CLI::Range(0, 100000));
  s->add_option("--gpus-per-node", a.gpus_per_node, "GPUs per node (nvidia.com/gpu)")
      ->check(CLI::Range(0, 1024));
  s->add_option("--gpu-product", a.gpu_product, "nvidia.com/gpu.product label");
  s->add_option("--cpu-per-node", a.cpu_per_node, "allocatable cpu per node");
  s->add_option("--memory-per-node", a.memory_per_node, "allocatable memory per node");
  s->add_option("--node-spec", a.node_specs,
                "a node pool COUNT:GPUS:PRODUCT[:CPU[:MEMORY]] (repeatable; replaces --nodes)");
  s->add_option("--racks", a.racks, "leaf switches (racks) the nodes spread over (0: 8 nodes each)")
      ->check(CLI::Range(0, 100000));
  s->add_option("--racks-per-spine", a.racks_per_spine, "racks under one spine")
      ->check(CLI::Range(1, 100000));
  s->add_option("--spine-label", a.spine_label, "node label key of the spine (coarsest) level");
  s->add_option("--leaf-label", a.leaf_label, "node label key of the leaf (rack) level");
  s->add_option("--node-prefix", a.node_prefix, "node name prefix");
  s->add_flag("--tls", a.tls,
              "serve HTTPS with a generated CA, server and client certificate (in the kubeconfig)");
  s->add_option("--tls-cert", a.tls_cert, "serve HTTPS with this certificate (PEM)");
  s->add_option("--tls-key", a.tls_key, "... and this private key (PEM)");
  s->add_option("--client-ca", a.client_ca, "accept client certificates signed by this CA (PEM)");
  s->add_option("--token", a.tokens, "accepted bearer token (repeatable; then auth is required)");
  s->add_option("--state", a.state, "state file: loaded at start, saved when changed and at exit");
  s->add_option("--state-interval", a.state_interval, "seconds between state saves when changed")
      ->check(CLI::Range(0.01, 86400.0));
  s->add_option("--binding-log", a.binding_log, "append every bind attempt here (JSON lines)");
  s->add_option("--history", a.history, "watch history per resource (events)")
      ->check(CLI::Range(size_t{1}, size_t{100000000}));
  s->add_option("--bookmark-interval", a.bookmark_interval, "seconds between watch bookmarks")
      ->check(CLI::Range(0.01, 86400.0));
  s->add_option("--watch-timeout", a.watch_timeout,
                "seconds a watch without timeoutSeconds lasts (0: 30-60 min, jittered)")
      ->check(CLI::Range(0.0, 86400.0));
  s->add_flag("--watch-expired-http", a.watch_expired_http,
              "answer a watch from a too-old resourceVersion with HTTP 410 (default: an "
              "in-stream ERROR event, as the watch cache)");
  s->add_option("--kubelet-start-delay", a.kubelet_start_delay,
                "time from bind to Running (Go duration, e.g. 100ms, 0s)");
  s->add_flag("--no-kubelet", a.no_kubelet, "no fake kubelet: bound pods stay Pending");
  s->add_option("--seed", a.seed, "seed for UIDs and generated names");
  s->add_option("--threads", a.threads, "HTTP worker threads (one per open watch or connection)")
      ->check(CLI::Range(4, 4096));
}

int run(const KubeEmulatorArgs& a) {
  kube_emulator::Options opt;
  split_listen(a.listen, opt.host, opt.port);
  if (a.node_specs.empty()) {
    kube_emulator::NodePool p;
    p.count = a.nodes;
    p.gpus = a.gpus_per_node;
    p.product = a.gpu_product;
    p.cpu = a.cpu_per_node;
    p.memory = a.memory_per_node;
    opt.nodes.push_back(p);
  } else {
    for (const auto& s : a.node_specs) opt.nodes.push_back(kube_emulator::parse_node_spec(s));
  }
  opt.layout.racks = a.racks;
  opt.layout.racks_per_spine = a.racks_per_spine;
  opt.layout.spine_key = a.spine_label;
  opt.layout.leaf_key = a.leaf_label;
  opt.layout.name_prefix = a.node_prefix;
  if (a.tls && !a.tls_cert.empty()) {
    throw std::invalid_argument("--tls generates certificates; do not combine it with --tls-cert");
  }
  if (a.tls_cert.empty() != a.tls_key.empty()) {
    throw std::invalid_argument("--tls-cert and --tls-key go together");
  }
  opt.generate_tls = a.tls;
  opt.tls_cert_file = a.tls_cert;
  opt.tls_key_file = a.tls_key;
  opt.client_ca_file = a.client_ca;
  opt.tokens = a.tokens;
  opt.state_file = a.state;
  opt.state_interval = std::chrono::milliseconds(static_cast<int64_t>(a.state_interval * 1000));
  opt.binding_log_file = a.binding_log;
  opt.history = a.history;
  opt.bookmark_interval =
      std::chrono::milliseconds(static_cast<int64_t>(a.bookmark_interval * 1000));
  opt.watch_timeout = std::chrono::seconds(static_cast<int64_t>(a.watch_timeout));
  opt.watch_expired_as_http_410 = a.watch_expired_http;
  const auto delay = kube_emulator::parse_go_duration(a.kubelet_start_delay);
  if (!delay) {
    throw std::invalid_argument("--kubelet-start-delay: bad duration '" + a.kubelet_start_delay +
                                "'");
  }
  opt.kubelet.start_delay = *delay;
  opt.kubelet.enabled = !a.no_kubelet;
  opt.seed = a.seed;
  opt.threads = a.threads;

  const sigset_t stop_signals = block_stop_signals();

  kube_emulator::Emulator emu(opt);
  emu.start();
  const std::string addr = opt.host + ":" + std::to_string(emu.port());
  if (!a.kubeconfig_out.empty()) {
    const std::string tmp = a.kubeconfig_out + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << emu.kubeconfig();
      if (!out) throw std::runtime_error("cannot write the kubeconfig " + tmp);
    }
    chmod(tmp.c_str(), S_IRUSR | S_IWUSR);
    if (std::rename(tmp.c_str(), a.kubeconfig_out.c_str()) != 0) {
      throw std::runtime_error("cannot write the kubeconfig " + a.kubeconfig_out);
    }
  } else {
    std::cout << emu.kubeconfig() << std::flush;
  }
  write_addr_file(a.addr_file, addr);
  const auto stats = emu.stats();
  std::cerr << "tessera-kube-emulator: serving " << emu.url() << " ("
            << stats["objects"].value("/nodes", 0) << " nodes)"
            << (a.kubeconfig_out.empty() ? "" : "; kubeconfig in " + a.kubeconfig_out) << "\n";
  int sig = 0;
  sigwait(&stop_signals, &sig);
  emu.stop();
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  CLI::App app{
      "tessera-kube-emulator: a Kubernetes API server emulator with fake GPU nodes (tests, demos)"};
  tessera::KubeEmulatorArgs args;
  tessera::add_options(app, args);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    return tessera::run(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera-kube-emulator: error: %s\n", e.what());
    return 2;
  }
}

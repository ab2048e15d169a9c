// `tessera kube`: the Kubernetes scheduler (control/kube) with its read API (api/kube_api).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "apps/goodput_options.h"

namespace tessera {

struct KubeArgs {
  std::string kubeconfig;  // empty: KUBECONFIG, else in-cluster config
  std::string context;
  std::vector<std::string> scheduler_names{"tessera"};
  std::string queues;
  std::string queues_from = "file";  // file (--queues, or one queue per name) | crd
  std::vector<std::string> topology_labels;
  std::string policy = "fair";
  GoodputArgs goodput;  // --policy goodput
  double locality_wait = 0;
  int prestage_datasets = 0;
  bool leader_elect = false;
  std::string lease_namespace = "kube-system";
  std::string lease_name = "tessera-scheduler";
  std::string identity;  // empty: hostname_pid
  std::string listen = "127.0.0.1:10259";
  std::string read_auth;  // kubernetes | none; empty: none on a loopback --listen, else kubernetes
  std::string tls_cert, tls_key;
  std::string addr_file;
  double checkpoint_grace = 30;
  double gang_timeout = 30;
  int bind_workers = 48;
  double status_qps = 200;
  double history_interval = 10;  // --history-interval
  double history_hours = 24;     // --history-hours
  double usage_save_interval = 60;
  // Power policies, as serve's flags (docs/kubernetes.md, "Power and energy").
  std::string data_dir;  // --data-dir
  double node_power = 0;
  std::string power_cap;
  bool power_shifting = false;
  double energy_weight = 0;
  std::string carbon;
};
CLI::App* add_kube_command(CLI::App& app, KubeArgs& args);
int run_kube(const KubeArgs& args);

}  // namespace tessera

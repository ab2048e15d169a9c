// Readers for Alibaba's GPU-sharing trace (cluster-trace-gpu-v2023, the FGD paper's "openb"):
// the node list (sn,cpu_milli,memory_mib,gpu,model) and a pod list
// (name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,qos,pod_phase,creation_time,
// deletion_time,scheduled_time]). Errors are InputErrors naming the file, line and column.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/frag.h"

namespace tessera {

struct AlibabaCluster {
  std::vector<std::string> models;  // GPU model names; NodeSpec::model indexes this
  std::vector<std::string> node_names;
  std::vector<frag::NodeSpec> nodes;
  int64_t total_gpus() const;
};

struct AlibabaPods {
  std::vector<std::string> names;
  std::vector<frag::PodSpec> pods;
};

// `origin` names the text in error messages (normally its path).
AlibabaCluster parse_alibaba_nodes(std::string_view text, const std::string& origin);
// Pod GPU models (gpu_spec, '|'-separated) are matched against cluster.models; a model the
// cluster does not have is ignored, so a pod that accepts only absent models can never run.
AlibabaPods parse_alibaba_pods(std::string_view text, const std::string& origin,
                               const AlibabaCluster& cluster);

AlibabaCluster read_alibaba_nodes(const std::string& path);
AlibabaPods read_alibaba_pods(const std::string& path, const AlibabaCluster& cluster);

}  // namespace tessera

#include "insight/parallelism_advisor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "model/gpu_type.h"
#include "model/input_error.h"

namespace tessera {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// Mixed-precision Adam (ZeRO paper, §3.1): fp16 weights 2 + fp16 gradients 2 + fp32 master
// weights, momentum and variance 12 bytes per parameter.
constexpr double kWeightBytes = 2, kGradBytes = 2, kOptimizerBytes = 12;
constexpr double kActivationBytes = 2;  // fp16 activations
// The share of a GPU's NIC bandwidth ZeRO-3's per-layer gathers and reduce-scatters reach,
// fitted to Megatron's Table 2 (175B, ZeRO-3 without model parallelism, batch 1536: 88 and 44
// TFLOP/s per GPU on 768 and 1536 A100s, i.e. the same network-bound step time).
constexpr double kZero3LinkEfficiency = 0.64;
// ... and the share of them prefetching cannot hide even when compute is longer (the first
// gather and last reduce-scatter of a step, and waits between layers): the same table's 144
// TFLOP/s on 384 GPUs, where compute alone would take longer than the collectives.
constexpr double kZero3MinExposed = 0.2;

// Servers a GPU type usually comes in (docs/advisor.md): dense fp16/bf16 tensor peak, NVLink
// per GPU per direction (0: PCIe only), NICs per node.
struct GpuServer {
  const char* name;
  double peak_tflops;
  double nvlink_gbps;  // 0: no NVLink; GPUs talk over PCIe
  double pcie_gbps;
  double nic_gbps;  // per node, GB/s per direction
};
constexpr GpuServer kServers[] = {
    // DGX A100: NVLink 3 through NVSwitch, 8 x 200 Gb/s HDR InfiniBand (Megatron's Selene).
    {"A100-80G", 312, 300, 32, 200},
    {"A100-40G", 312, 300, 32, 200},
    // DGX H100: NVLink 4 through NVSwitch (450 GB/s per direction), 8 x 400 Gb/s NDR.
    {"H100", 989, 450, 64, 400},
    // DGX-1 V100: 6 NVLink 2 links x 25 GB/s (hybrid cube mesh), 4 x 100 Gb/s EDR.
    {"V100", 125, 150, 16, 50},
    {"V100-32G", 125, 150, 16, 50},
    {"V100M16", 125, 150, 16, 50},
    {"V100M32", 125, 150, 16, 50},
    // DGX-1 P100: 4 NVLink 1 links x 20 GB/s, 4 x 100 Gb/s EDR.
    {"P100", 21.2, 80, 16, 50},
    // PCIe cards in cloud servers with a 100 Gb/s NIC.
    {"T4", 65, 0, 16, 12.5},
    {"A10", 125, 0, 32, 12.5},
    {"K80", 4.4, 0, 16, 12.5},
};
constexpr double kNvlinkLatencyUs = 1, kPcieLatencyUs = 2, kNicLatencyUs = 5;

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

int heads_of(const ModelSpec& m) {
  return m.heads > 0 ? m.heads : m.hidden / 128;
}

int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

void check_options(const HardwareSpec& hw, const AdvisorOptions& o) {
  if (hw.gpus_per_node < 1) throw InputError("--gpus-per-node must be at least 1");
  if (!(hw.memory_gib > 0)) throw InputError("--gpu-memory-gib must be positive");
  if (!(hw.peak_tflops > 0)) throw InputError("--peak-tflops must be positive");
  if (o.gpus < 0) throw InputError(fmt::format("--gpus must be positive, got {}", o.gpus));
  if (o.max_gpus < 1) throw InputError("--max-gpus must be at least 1");
  if (o.max_step_s < 0) throw InputError("--max-step-s must not be negative");
  if (o.max_zero < 0 || o.max_zero > 3) {
    throw InputError(fmt::format("--max-zero must be 0, 1, 2 or 3, got {}", o.max_zero));
  }
  if (!(o.efficiency > 0 && o.efficiency <= 1)) {
    throw InputError(fmt::format("--efficiency must be in (0, 1], got {}", o.efficiency));
  }
  if (!(o.memory_reserve >= 0 && o.memory_reserve < 1)) {
    throw InputError(fmt::format("--reserve must be in [0, 1), got {}", o.memory_reserve));
  }
}

// What crossing nodes costs when a collective spans `nodes` nodes of the job.
LinkCost inter_node(const HardwareSpec& hw, int nodes) {
  if (hw.nodes_per_rack <= 0 || nodes <= hw.nodes_per_rack) return hw.links.at(Level::kRack);
  if (hw.racks_per_spine <= 0 || nodes <= hw.nodes_per_rack * hw.racks_per_spine) {
    return hw.links.at(Level::kSpine);
  }
  return hw.links.at(Level::kCluster);
}

// What a collective among `gpus` GPUs of one node runs over.
LinkCost intra_node(const HardwareSpec& hw, int gpus) {
  return gpus <= hw.gpus_per_nvl_domain ? hw.links.at(Level::kNvlDomain)
                                        : hw.links.at(Level::kNode);
}

// One all-reduce among the t GPUs of a tensor-parallel group. Beyond a node the group is
// whole nodes, so the hierarchical algorithm applies, every GPU of a node carrying a shard.
double tensor_allreduce_s(const HardwareSpec& hw, double bytes, int t, int job_nodes) {
  const int g = hw.gpus_per_node;
  if (t <= g) return ring_allreduce_s(bytes, t, intra_node(hw, t));
  return hierarchical_allreduce_s(bytes, g, ceil_div(t, g), intra_node(hw, g),
                                  shared(inter_node(hw, job_nodes), g));
}

}  // namespace

std::string advisor_gpu_types() {
  std::string s;
  for (const GpuServer& g : kServers) s += (s.empty() ? "" : ", ") + std::string(g.name);
  return s;
}

HardwareSpec hardware_for(std::string_view gpu_type, int gpus_per_node) {
  const GpuServer* server = nullptr;
  for (const GpuServer& g : kServers) {
    if (iequal(g.name, gpu_type)) server = &g;
  }
  if (server == nullptr) {
    throw InputError(
        fmt::format("--gpu: unknown GPU type '{}' (known: {})", gpu_type, advisor_gpu_types()));
  }
  const GpuTypeTable types = GpuTypeTable::builtin();
  HardwareSpec hw;
  hw.gpu_type = server->name;
  hw.memory_gib = static_cast<double>(types.at(*types.find(server->name)).memory_mib) / 1024.0;
  hw.peak_tflops = server->peak_tflops;
  hw.gpus_per_node = gpus_per_node;
  hw.gpus_per_nvl_domain = server->nvlink_gbps > 0 ? gpus_per_node : 1;
  InterconnectSpec ic;
  ic.nvlink = {server->nvlink_gbps > 0 ? server->nvlink_gbps : server->pcie_gbps,
               server->nvlink_gbps > 0 ? kNvlinkLatencyUs : kPcieLatencyUs};
  ic.pcie = {server->pcie_gbps, kPcieLatencyUs};
  // A non-blocking fat tree (as Selene's): every level beyond the node runs at the NICs' speed.
  ic.node_nic = ic.rack_uplink = ic.spine = {server->nic_gbps, kNicLatencyUs};
  ic.rack_oversubscription = ic.spine_oversubscription = 1;
  hw.links = comm_levels(ic);
  return hw;
}

HardwareSpec hardware_of(const Cluster& c, std::string_view gpu_type) {
  const GpuTypeTable& types = c.gpu_types();
  const Node* node = nullptr;
  for (const Node& n : c.nodes()) {
    if (n.num_gpus > 0 && (gpu_type.empty() || iequal(types.at(n.gpu_type).name, gpu_type))) {
      node = &n;
      break;
    }
  }
  if (node == nullptr) {
    throw InputError(gpu_type.empty()
                         ? std::string("--cluster: the cluster has no node with GPUs")
                         : fmt::format("--gpu: the cluster has no node of type '{}'", gpu_type));
  }
  HardwareSpec hw = hardware_for(types.at(node->gpu_type).name, node->num_gpus);
  hw.memory_gib = static_cast<double>(types.at(node->gpu_type).memory_mib) / 1024.0;
  hw.gpus_per_nvl_domain =
      node->gpus_per_nvl_domain > 0 ? node->gpus_per_nvl_domain : node->num_gpus;
  hw.links = comm_levels(c);
  const Rack& rack = c.racks()[node->rack];
  hw.nodes_per_rack = static_cast<int>(rack.num_nodes);
  hw.racks_per_spine = static_cast<int>(c.spines()[rack.spine].num_racks);
  return hw;
}

void validate(const ModelSpec& m) {
  if (!(m.params > 0) || !std::isfinite(m.params)) {
    throw InputError(
        fmt::format("--params must be a positive number of parameters, got {}", m.params));
  }
  const auto positive = [](int v, const char* flag) {
    if (v < 1) throw InputError(fmt::format("{} must be a positive integer, got {}", flag, v));
  };
  positive(m.layers, "--layers");
  positive(m.hidden, "--hidden");
  positive(m.seq, "--seq");
  positive(m.vocab, "--vocab");
  positive(m.global_batch, "--global-batch");
  if (m.heads < 0) throw InputError(fmt::format("--heads must be positive, got {}", m.heads));
  if (m.heads == 0 && m.hidden % 128 != 0) {
    throw InputError(fmt::format(
        "--heads is needed: --hidden {} is not a multiple of 128 (the default head size)",
        m.hidden));
  }
  if (m.hidden % heads_of(m) != 0) {
    throw InputError(
        fmt::format("--hidden {} is not divisible by --heads {}", m.hidden, heads_of(m)));
  }
}

double model_flops_per_step(const ModelSpec& m, bool recompute) {
  const double B = m.global_batch, s = m.seq, l = m.layers, h = m.hidden, V = m.vocab;
  const double factor = recompute ? 96 : 72;
  return factor * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
}

ParallelPlan evaluate_plan(const ModelSpec& m, const HardwareSpec& hw, const AdvisorOptions& o,
                           int t, int p, int d, int z, int b) {
  ParallelPlan plan;
  plan.tensor = t;
  plan.pipeline = p;
  plan.data = d;
  plan.zero_stage = z;
  plan.micro_batch = b;
  plan.gpus = t * p * d;
  plan.microbatches = std::max(1, m.global_batch / (d * b));
  plan.layers_per_stage = ceil_div(m.layers, p);
  const int g = hw.gpus_per_node;
  const int N = plan.gpus;
  const int job_nodes = ceil_div(N, g);
  const int per_node = std::min(g, N);  // GPUs of the job on each node
  plan.tensor_crosses_nodes = t > g;
  plan.pipeline_crosses_nodes = p > 1 && N > g;
  const int mb = plan.microbatches;
  const double L = plan.layers_per_stage;
  const double s = m.seq, h = m.hidden, a = heads_of(m), V = m.vocab;
  const double sbh = s * b * h;

  // Memory of the fullest GPU: the first stage (most microbatches in flight) or the last
  // (the logits). Parameters are spread over layers; a stage holds ceil(l/p) of them.
  const double phi = m.params * (L / m.layers) / t;  // parameters one GPU holds a shard of
  MemoryPerGpu& mem = plan.memory;
  mem.weights = kWeightBytes * phi / (z >= 3 ? d : 1);
  mem.gradients = kGradBytes * phi / (z >= 2 ? d : 1);
  mem.optimizer = kOptimizerBytes * phi / (z >= 1 ? d : 1);
  // Korthikanti et al. 2022, tensor parallel without sequence parallelism: one layer's
  // activations are s·b·h·(10 + 24/t + 5·a·s/(h·t)) bytes; with full recomputation only each
  // layer's fp16 input is kept, and one layer's full set exists at a time during backward.
  const double layer_full = sbh * (10 + 24.0 / t + 5 * a * s / (h * t));
  const double layer_input = kActivationBytes * sbh;
  const double kept_per_microbatch = o.recompute ? L * layer_input : L * layer_full;
  const double working = o.recompute ? layer_full : 0;
  const double logits = 6 * s * b * V / t;            // fp16 logits + fp32 softmax, vocab-parallel
  const int in_flight = p > 1 ? std::min(p, mb) : 1;  // 1F1B: stage 0 holds p microbatches
  const double first_stage = in_flight * kept_per_microbatch + working + (p == 1 ? logits : 0);
  const double last_stage = kept_per_microbatch + working + logits;
  mem.activations = std::max(first_stage, last_stage);
  // ZeRO-3 gathers each layer's weights before use; two layers (one prefetched) at a time.
  if (z >= 3) mem.activations += 2 * kWeightBytes * 12 * h * h / t;
  mem.total = mem.weights + mem.gradients + mem.optimizer + mem.activations;
  mem.usable = hw.memory_gib * kGiB * (1 - o.memory_reserve);
  plan.fits = mem.total <= mem.usable;

  // Time. One microbatch's forward+backward on one stage, at the sustained rate.
  StepTime& time = plan.time;
  const double flops = model_flops_per_step(m, o.recompute);
  const double rate = hw.peak_tflops * 1e12 * o.efficiency;
  // Megatron's formula splits into the layers (1 + s/6h) and the output layer (V/16lh). The
  // pipeline runs at the pace of its slowest stage: the last, holding the output layer too.
  const double s6h = s / (6 * h), v16 = V / (16.0 * m.layers * h);
  const double layer_share = (1 + s6h) / (1 + s6h + v16);
  const double stage_share = layer_share * (L / m.layers) + (1 - layer_share);
  const double t_compute =
      flops * (static_cast<double>(b) / m.global_batch) * stage_share / t / rate;
  // Tensor parallel: 2 all-reduces in the forward and 2 in the backward of every layer
  // (Megatron, §2.3), 2 more when the forward is recomputed; on the critical path.
  const int allreduces = o.recompute ? 6 : 4;
  const double t_tensor =
      t > 1 ? L * allreduces * tensor_allreduce_s(hw, kActivationBytes * sbh, t, job_nodes) : 0;
  // Pipeline: each slot sends a microbatch's activations forward and gradients backward,
  // 2·b·s·h bytes each, split over the t ranks (Megatron's scatter/gather, §4.1). Across nodes
  // a node's NICs carry the messages of all its GPUs.
  double t_pipe = 0;
  if (p > 1) {
    const double per_gpu = kActivationBytes * sbh / t;
    if (N <= g) {
      t_pipe = 2 * intra_node(hw, N).message_s(per_gpu);
    } else {
      t_pipe = 2 * inter_node(hw, job_nodes).message_s(per_gpu * per_node);
    }
  }
  const double slot = t_compute + t_tensor + t_pipe;
  time.compute = mb * t_compute;
  time.tensor_comm = mb * t_tensor;
  time.pipeline_comm = mb * t_pipe;
  time.bubble = (p - 1) * slot;

  // Data parallel: fp16 gradients of one model shard, hierarchical all-reduce over the d
  // replicas: k of them share a node (tensor rank innermost, then data, then pipeline, as
  // Megatron orders ranks), each GPU's shard crosses the NICs with every other GPU's.
  const double grad_bytes = kGradBytes * phi;
  const int k = t <= g ? std::max(1, std::min(d, g / t)) : 1;
  const int replica_nodes = ceil_div(d, k);
  const double t_allreduce =
      d > 1 ? hierarchical_allreduce_s(grad_bytes, k, replica_nodes, intra_node(hw, k * t),
                                       shared(inter_node(hw, job_nodes), per_node))
            : 0;
  // The last microbatch's backward (3/4 of its work with recomputation, 2/3 without) hides
  // the exchange of gradients already computed (PyTorch DDP's bucketed overlap).
  const double window = (o.recompute ? 0.75 : 2.0 / 3.0) * t_compute;
  switch (z) {
    case 0:
      time.data_comm = t_allreduce;
      time.data_comm_exposed = std::max(0.0, t_allreduce - window);
      break;
    case 1:  // reduce-scatter hidden like DDP's; the all-gather of new weights after the step
      time.data_comm = t_allreduce;
      time.data_comm_exposed = std::max(0.0, t_allreduce / 2 - window) + t_allreduce / 2;
      break;
    case 2:  // gradients reduce-scattered after every microbatch (DeepSpeed), weights gathered
      time.data_comm = mb * t_allreduce / 2 + t_allreduce / 2;
      time.data_comm_exposed = t_allreduce / 2;
      time.zero_comm_exposed = mb * std::max(0.0, t_allreduce / 2 - window);
      break;
    default: {  // 3: weights gathered for forward and backward, gradients reduce-scattered,
                // every microbatch, layer by layer (each paying the latency); prefetching
                // hides them behind that microbatch's compute. DeepSpeed's ZeRO-3 runs these
                // over the whole data-parallel group, not hierarchically, so every GPU's
                // shard crosses its share of the NIC, and its per-layer messages reach only
                // part of the link: kZero3LinkEfficiency, calibrated on Megatron's Table 2
                // (docs/advisor.md), where 175B on 768 and 1536 A100s was network-bound at
                // the same step time.
      const LinkCost nic = shared(inter_node(hw, job_nodes), per_node);
      const LinkCost slow{nic.alpha_s, nic.beta_s_per_byte / kZero3LinkEfficiency};
      const double per_layer =
          d > 1 ? (job_nodes > 1 ? ring_allreduce_s(grad_bytes / L, d, slow)
                                 : ring_allreduce_s(grad_bytes / L, d, intra_node(hw, d * t)))
                : 0;
      const double z3 = 1.5 * L * per_layer;
      time.data_comm = mb * z3;
      time.zero_comm_exposed = mb * std::max(z3 - t_compute, kZero3MinExposed * z3);
      break;
    }
  }
  time.total = time.compute + time.bubble + time.tensor_comm + time.pipeline_comm +
               time.data_comm_exposed + time.zero_comm_exposed;
  plan.model_tflops_per_gpu = flops / (N * time.total) / 1e12;
  return plan;
}

namespace {

// Estimates closer than this are treated as equal (docs/advisor.md): the published
// throughputs of configurations the model treats alike vary by more (44-52 % of peak).
constexpr double kNearTie = 0.05;

// Better first: shorter step; then less model parallelism, lower ZeRO stage, smaller t,
// larger micro-batch (deterministic order for equal estimates).
bool faster(const ParallelPlan& x, const ParallelPlan& y) {
  if (x.time.total != y.time.total) return x.time.total < y.time.total;
  if (x.tensor * x.pipeline != y.tensor * y.pipeline) {
    return x.tensor * x.pipeline < y.tensor * y.pipeline;
  }
  if (x.zero_stage != y.zero_stage) return x.zero_stage < y.zero_stage;
  if (x.tensor != y.tensor) return x.tensor < y.tensor;
  return x.micro_batch > y.micro_batch;
}

// Among near-equal plans, Megatron's takeaways (SC'21 §5.4): the least model parallelism
// (t·p), then tensor parallelism before pipeline parallelism, then the lower ZeRO stage.
bool preferred(const ParallelPlan& x, const ParallelPlan& y) {
  if (x.tensor * x.pipeline != y.tensor * y.pipeline) {
    return x.tensor * x.pipeline < y.tensor * y.pipeline;
  }
  if (x.pipeline != y.pipeline) return x.pipeline < y.pipeline;
  if (x.zero_stage != y.zero_stage) return x.zero_stage < y.zero_stage;
  return faster(x, y);
}

// Sorts by step time, then moves the preferred of the near-fastest plans to the front.
void rank_by_time(std::vector<ParallelPlan>& plans) {
  std::sort(plans.begin(), plans.end(), faster);
  if (plans.empty()) return;
  const double limit = plans.front().time.total * (1 + kNearTie);
  auto pick = plans.begin();
  for (auto it = plans.begin(); it != plans.end() && it->time.total <= limit; ++it) {
    if (preferred(*it, *pick)) pick = it;
  }
  std::rotate(plans.begin(), pick, pick + 1);
}

double gpu_seconds(const ParallelPlan& p) {
  return p.gpus * p.time.total;
}

// Sorts by GPU-seconds per step (fewer GPUs on equal cost), then moves the fastest of those
// within kNearTie of the cheapest to the front: scaling out is worth it while nearly free.
void rank_by_cost(std::vector<ParallelPlan>& plans) {
  std::sort(plans.begin(), plans.end(), [](const ParallelPlan& x, const ParallelPlan& y) {
    if (gpu_seconds(x) != gpu_seconds(y)) return gpu_seconds(x) < gpu_seconds(y);
    if (x.gpus != y.gpus) return x.gpus < y.gpus;
    return faster(x, y);
  });
  if (plans.empty()) return;
  const double limit = gpu_seconds(plans.front()) * (1 + kNearTie);
  auto pick = plans.begin();
  for (auto it = plans.begin(); it != plans.end() && gpu_seconds(*it) <= limit; ++it) {
    if (it->time.total < pick->time.total) pick = it;
  }
  std::rotate(plans.begin(), pick, pick + 1);
}

std::vector<int> gang_sizes(const AdvisorOptions& o, int gpus_per_node) {
  if (o.gpus > 0) return {o.gpus};
  // Powers of two times 1, 3, 5 or 7 (Megatron's 1536, 1920, 2520 are of this form), whole
  // nodes once beyond one node.
  std::vector<int> sizes;
  for (int f : {1, 3, 5, 7}) {
    for (long n = f; n <= o.max_gpus; n *= 2) {
      if (n <= gpus_per_node || n % gpus_per_node == 0) sizes.push_back(static_cast<int>(n));
    }
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

struct Search {
  std::vector<ParallelPlan> fitting;
  ParallelPlan least_memory;  // of those that do not fit
  bool any = false;
  long evaluated = 0;
};

Search search(const ModelSpec& m, const HardwareSpec& hw, const AdvisorOptions& o, int max_t,
              const std::vector<int>& sizes) {
  Search r;
  const int heads = heads_of(m);
  std::vector<int> tensors, pipelines;
  for (int t = 1; t <= max_t; t *= 2) {
    if (heads % t == 0 && m.hidden % t == 0) tensors.push_back(t);
  }
  for (int p = 1; p <= m.layers; ++p) {
    if (m.layers % p == 0) pipelines.push_back(p);
  }
  for (int N : sizes) {
    for (int t : tensors) {
      if (N % t != 0) continue;
      for (int p : pipelines) {
        if ((N / t) % p != 0) continue;
        const int d = N / (t * p);
        if (m.global_batch % d != 0) continue;
        for (int z = 0; z <= o.max_zero; ++z) {
          if (z >= 1 && d == 1) break;  // nothing to shard over
          if (z >= 2 && p > 1) break;   // DeepSpeed: ZeRO-2/3 without pipeline parallelism
          for (int b = 1; b <= m.global_batch / d; b *= 2) {
            if (m.global_batch % (d * b) != 0) break;
            ParallelPlan plan = evaluate_plan(m, hw, o, t, p, d, z, b);
            ++r.evaluated;
            if (plan.fits) {
              r.fitting.push_back(plan);
            } else {
              if (!r.any || plan.memory.total < r.least_memory.memory.total) {
                r.least_memory = plan;
                r.any = true;
              }
              break;  // a larger micro-batch needs more memory still
            }
          }
        }
      }
    }
  }
  return r;
}

}  // namespace

Advice advise(const ModelSpec& m, const HardwareSpec& hw, const AdvisorOptions& o) {
  validate(m);
  check_options(hw, o);
  const std::vector<int> sizes = gang_sizes(o, hw.gpus_per_node);
  Advice advice;
  advice.gang_chosen = o.gpus == 0;
  Search s = search(m, hw, o, hw.gpus_per_node, sizes);
  advice.evaluated = s.evaluated;
  if (s.fitting.empty()) {
    // Last resort: tensor parallelism across nodes, over the NICs.
    int max_t = 1;
    while (max_t * 2 <= heads_of(m) && max_t * 2 <= std::max(o.max_gpus, o.gpus)) max_t *= 2;
    if (max_t > hw.gpus_per_node) {
      Search wide = search(m, hw, o, max_t, sizes);
      advice.evaluated += wide.evaluated;
      if (!wide.fitting.empty()) advice.tensor_beyond_node = true;
      if (wide.any && (!s.any || wide.least_memory.memory.total < s.least_memory.memory.total)) {
        s.least_memory = wide.least_memory;
        s.any = true;
      }
      s.fitting = std::move(wide.fitting);
    }
  }
  if (s.fitting.empty()) {
    if (!s.any) {
      throw InputError(fmt::format(
          "no split of {} GPUs into tensor x pipeline x data parallel degrees exists: t must be "
          "a power of two dividing --heads {} and --hidden {}, p must divide --layers {}, and d "
          "must divide --global-batch {}",
          o.gpus > 0 ? std::to_string(o.gpus) : "any gang size tried", heads_of(m), m.hidden,
          m.layers, m.global_batch));
    }
    const ParallelPlan& q = s.least_memory;
    throw InputError(fmt::format(
        "no configuration fits in memory: the smallest needs {:.1f} GiB per GPU (tensor {}, "
        "pipeline {}, data {}, ZeRO-{}, micro-batch {} on {} GPUs) but the {} has {:.1f} GiB "
        "usable ({:g} GiB less the {:g} % reserve); use more GPUs ({}){} or a GPU with more "
        "memory",
        q.memory.total / kGiB, q.tensor, q.pipeline, q.data, q.zero_stage, q.micro_batch, q.gpus,
        hw.gpu_type, q.memory.usable / kGiB, hw.memory_gib, o.memory_reserve * 100,
        o.gpus > 0 ? "--gpus" : "--max-gpus", o.max_zero < 3 ? ", allow ZeRO (--max-zero 3)" : ""));
  }
  std::vector<ParallelPlan> plans;
  if (advice.gang_chosen) {
    // The recommended plan at each gang size, then the gang sizes ranked by cost.
    for (int N : sizes) {
      std::vector<ParallelPlan> at;
      for (const ParallelPlan& p : s.fitting) {
        if (p.gpus == N) at.push_back(p);
      }
      if (o.max_step_s > 0) {
        std::erase_if(at, [&](const ParallelPlan& p) { return p.time.total > o.max_step_s; });
      }
      if (at.empty()) continue;
      rank_by_time(at);
      advice.gangs.push_back({N, at.front()});
      plans.push_back(at.front());
    }
    if (plans.empty()) {
      throw InputError(fmt::format(
          "no gang size up to --max-gpus {} gives a step of at most --max-step-s {:g} s",
          o.max_gpus, o.max_step_s));
    }
    rank_by_cost(plans);
  } else {
    plans = std::move(s.fitting);
    rank_by_time(plans);
  }
  if (plans.size() > o.keep) plans.resize(std::max<size_t>(1, o.keep));
  advice.plans = std::move(plans);
  return advice;
}

}  // namespace tessera

// The parallelism advisor: for a transformer model, a global batch and a GPU type, which
// tensor (t), pipeline (p) and data (d) parallel degrees, ZeRO stage and micro-batch fit in
// GPU memory and give the shortest estimated step, and how many GPUs to ask for.
//
// The estimate follows Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
// Clusters Using Megatron-LM" (SC'21): Megatron's FLOPs per step at a sustained fraction of
// peak, tensor-parallel all-reduces on the critical path of every layer, the 1F1B pipeline
// bubble (p−1)/m, point-to-point activations between stages, and a data-parallel gradient
// all-reduce partly hidden behind the last backward pass; memory follows ZeRO (Rajbhandari et
// al., SC'20) for model states and Korthikanti et al. (2022) for activations. Every constant,
// its source and the simplifications are in docs/advisor.md. Pure functions throughout.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "insight/comm_cost.h"

namespace tessera {

// A GPT-style transformer and its training batch.
struct ModelSpec {
  double params = 0;  // total parameters
  int layers = 0;
  int hidden = 0;
  int heads = 0;  // 0: hidden / 128 (GPT-3's head size)
  int seq = 2048;
  int vocab = 51200;  // Megatron's padded GPT-2 vocabulary
  int global_batch = 0;
};

// The GPUs and how they are connected.
struct HardwareSpec {
  std::string gpu_type;
  double memory_gib = 0;
  double peak_tflops = 0;  // dense fp16/bf16 tensor-core peak per GPU
  int gpus_per_node = 8;
  int gpus_per_nvl_domain = 8;  // GPUs one NVLink/NVSwitch domain connects
  // Per level: kNvlDomain per GPU, kNode (PCIe between domains) per GPU, kRack/kSpine/kCluster
  // per node (what one node's NICs give traffic crossing that level).
  CommLevels links;
  int nodes_per_rack = 0;   // 0: every node in one rack (a flat non-blocking fabric)
  int racks_per_spine = 0;  // 0: every rack under one spine
};

// Peak throughput and the usual interconnect of a GPU type's servers (docs/advisor.md); memory
// from the model's GPU type table. Throws InputError naming --gpu for an unknown type.
HardwareSpec hardware_for(std::string_view gpu_type, int gpus_per_node);
// A cluster's GPUs and links (docs/advisor.md): the first node of `gpu_type` (empty: the first
// node with GPUs) gives the GPUs per node and NVLink domain, its rack and spine the nodes per
// rack and racks per spine, the cluster's links every level's α and β; the peak comes from
// hardware_for's table. Throws InputError when the cluster has no such node.
HardwareSpec hardware_of(const Cluster& cluster, std::string_view gpu_type);
// The GPU types hardware_for knows, comma separated (for help and error messages).
std::string advisor_gpu_types();

struct AdvisorOptions {
  int gpus = 0;                  // the gang size; 0: the advisor chooses it
  int max_gpus = 4096;           // largest gang considered when choosing
  double max_step_s = 0;         // when choosing the gang: only plans this fast (0: any)
  int max_zero = 3;              // highest ZeRO stage considered (0 = Megatron's 2021 setting)
  double efficiency = 0.55;      // sustained fraction of peak in compute kernels
  double memory_reserve = 0.10;  // share of GPU memory kept free (allocator, workspace, NCCL)
  bool recompute = true;         // full activation recomputation, as Megatron's Table 1
  size_t keep = 10;              // ranked plans returned
};

struct MemoryPerGpu {  // bytes on the fullest GPU
  double weights = 0, gradients = 0, optimizer = 0, activations = 0;
  double total = 0;
  double usable = 0;  // GPU memory less the reserve
};

struct StepTime {                // seconds per optimizer step
  double compute = 0;            // m microbatches of forward+backward (with recomputation)
  double bubble = 0;             // (p−1) pipeline slots of fill and drain
  double tensor_comm = 0;        // tensor-parallel all-reduces of m microbatches
  double pipeline_comm = 0;      // stage-to-stage activations and gradients of m microbatches
  double data_comm = 0;          // the data-parallel gradient exchange, whole
  double data_comm_exposed = 0;  // the part not hidden behind the last backward pass
  double zero_comm_exposed = 0;  // ZeRO-2/3 per-microbatch exchanges not hidden behind compute
  double total = 0;
};

struct ParallelPlan {
  int tensor = 1, pipeline = 1, data = 1;
  int zero_stage = 0;
  int micro_batch = 1;
  int microbatches = 1;  // per pipeline per step: global_batch / (data · micro_batch)
  int gpus = 1;
  int layers_per_stage = 1;
  bool tensor_crosses_nodes = false;
  bool pipeline_crosses_nodes = false;
  bool fits = false;
  MemoryPerGpu memory;
  StepTime time;
  double model_tflops_per_gpu = 0;  // Megatron's FLOPs per step / (gpus · step time)
};

struct GangOption {  // the best plan at one gang size (when the advisor chooses it)
  int gpus = 0;
  ParallelPlan best;
};

struct Advice {
  std::vector<ParallelPlan> plans;  // fitting plans, best first (at most options.keep)
  bool gang_chosen = false;         // the advisor chose the gang size
  std::vector<GangOption> gangs;    // when chosen: the best plan per gang size, ascending
  long evaluated = 0;               // configurations evaluated
  bool tensor_beyond_node = false;  // nothing fitted with t <= GPUs per node
};

// Rejects a model no plan can describe; messages name the command-line flag.
void validate(const ModelSpec& model);
// Megatron's FLOPs per step, 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) with full recomputation
// (its forward pass counted twice), 72·... without.
double model_flops_per_step(const ModelSpec& model, bool recompute);
// One configuration's memory and step time (fits says whether it fits). t·p·d GPUs; the
// global batch must divide by d·micro_batch.
ParallelPlan evaluate_plan(const ModelSpec& model, const HardwareSpec& hw,
                           const AdvisorOptions& options, int tensor, int pipeline, int data,
                           int zero_stage, int micro_batch);
// The search (docs/advisor.md). Throws InputError when nothing fits, saying how much memory per
// GPU the smallest configuration needs.
Advice advise(const ModelSpec& model, const HardwareSpec& hw, const AdvisorOptions& options);

}  // namespace tessera

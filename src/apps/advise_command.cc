// tessera advise: which tensor / pipeline / data parallel degrees and ZeRO stage to train a
// transformer with, the memory per GPU and step time they give, and the gang size to request.
#include "apps/advise_command.h"

#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "insight/parallelism_advisor.h"
#include "model/cluster_spec.h"
#include "model/input_error.h"

namespace tessera {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

nlohmann::ordered_json plan_json(const ParallelPlan& p) {
  nlohmann::ordered_json j;
  j["tensor_parallel"] = p.tensor;
  j["pipeline_parallel"] = p.pipeline;
  j["data_parallel"] = p.data;
  j["zero_stage"] = p.zero_stage;
  j["gpus"] = p.gpus;
  j["micro_batch"] = p.micro_batch;
  j["microbatches_per_pipeline"] = p.microbatches;
  j["layers_per_stage"] = p.layers_per_stage;
  j["memory_per_gpu_gib"] = p.memory.total / kGiB;
  j["memory_gib"] = {{"weights", p.memory.weights / kGiB},
                     {"gradients", p.memory.gradients / kGiB},
                     {"optimizer", p.memory.optimizer / kGiB},
                     {"activations", p.memory.activations / kGiB},
                     {"usable", p.memory.usable / kGiB}};
  j["step_time_s"] = p.time.total;
  j["step_time_breakdown_s"] = {{"compute", p.time.compute},
                                {"pipeline_bubble", p.time.bubble},
                                {"tensor_parallel_comm", p.time.tensor_comm},
                                {"pipeline_p2p", p.time.pipeline_comm},
                                {"data_parallel_comm", p.time.data_comm},
                                {"data_parallel_comm_exposed", p.time.data_comm_exposed},
                                {"zero_comm_exposed", p.time.zero_comm_exposed}};
  j["gpu_seconds_per_step"] = p.gpus * p.time.total;
  j["model_tflops_per_gpu"] = p.model_tflops_per_gpu;
  j["tensor_crosses_nodes"] = p.tensor_crosses_nodes;
  j["pipeline_crosses_nodes"] = p.pipeline_crosses_nodes;
  return j;
}

std::string plan_row(const ParallelPlan& p) {
  return fmt::format("{:>5} {:>3} {:>3} {:>5} {:>4} {:>3} {:>7.1f} {:>9.2f} {:>10.0f} {:>7.0f}",
                     p.gpus, p.tensor, p.pipeline, p.data, p.zero_stage, p.micro_batch,
                     p.memory.total / kGiB, p.time.total, p.gpus * p.time.total,
                     p.model_tflops_per_gpu);
}

const char* const kRowHeader = " gpus   t   p     d zero   b mem GiB    step s  GPU-s/step TF/GPU";

}  // namespace

CLI::App* add_advise_command(CLI::App& app, AdviseArgs& a) {
  CLI::App* s = app.add_subcommand(
      "advise",
      "Choose tensor/pipeline/data parallel degrees and ZeRO stage for a transformer, with "
      "memory per GPU, step time and the gang size to request (docs/advisor.md)");
  s->add_option("--params", a.params, "total parameters, e.g. 175e9")->required();
  s->add_option("--layers", a.layers, "transformer layers")->required();
  s->add_option("--hidden", a.hidden, "hidden size")->required();
  s->add_option("--heads", a.heads, "attention heads (default: hidden / 128)");
  s->add_option("--seq", a.seq, "sequence length");
  s->add_option("--vocab", a.vocab, "vocabulary size (default 51200, Megatron's GPT-2)");
  s->add_option("--global-batch", a.global_batch, "sequences per optimizer step")->required();
  s->add_option("--gpu", a.gpu, "GPU type (default A100-80G): " + advisor_gpu_types());
  s->add_option("--cluster", a.cluster,
                "cluster spec (YAML/CSV, as simulate's) whose GPUs per node, NVLink domains and "
                "links to use");
  s->add_option("--gpus-per-node", a.gpus_per_node, "GPUs per node");
  s->add_option("--gpus", a.gpus, "gang size (default: the advisor chooses it)");
  s->add_option("--max-gpus", a.max_gpus, "largest gang considered when choosing");
  s->add_option("--max-step-s", a.max_step_s,
                "when choosing the gang: only plans with a step this short (seconds)");
  s->add_option("--max-zero", a.max_zero,
                "highest ZeRO stage considered (0: Megatron-LM's 2021 setting)");
  s->add_option("--efficiency", a.efficiency, "sustained fraction of peak in compute kernels");
  s->add_option("--reserve", a.reserve, "share of GPU memory kept free");
  s->add_flag("--no-recompute", a.no_recompute, "keep activations instead of recomputing");
  s->add_option("--nvlink-gbps", a.nvlink_gbps,
                "NVLink GB/s per GPU per direction (default: the GPU type's usual server)");
  s->add_option("--nic-gbps", a.nic_gbps,
                "network GB/s per node per direction (default: the GPU type's usual server)");
  s->add_option("--gpu-memory-gib", a.gpu_memory_gib, "override the GPU's memory");
  s->add_option("--peak-tflops", a.peak_tflops, "override the GPU's fp16/bf16 peak");
  s->add_option("--top", a.top, "alternatives to print");
  s->add_option("--json", a.json_out, "write the advice as JSON here");
  return s;
}

int run_advise(const AdviseArgs& a) {
  ModelSpec model;
  model.params = a.params;
  model.layers = a.layers;
  model.hidden = a.hidden;
  model.heads = a.heads;
  model.seq = a.seq;
  model.vocab = a.vocab;
  model.global_batch = a.global_batch;
  validate(model);
  if (a.gpus_per_node < 1) {
    throw InputError(fmt::format("--gpus-per-node must be at least 1, got {}", a.gpus_per_node));
  }
  HardwareSpec hw = a.cluster.empty()
                        ? hardware_for(a.gpu.empty() ? "A100-80G" : a.gpu, a.gpus_per_node)
                        : hardware_of(load_cluster(a.cluster), a.gpu);
  if (a.gpu_memory_gib > 0) hw.memory_gib = a.gpu_memory_gib;
  if (a.peak_tflops > 0) hw.peak_tflops = a.peak_tflops;
  if (a.nvlink_gbps < 0 || a.nic_gbps < 0) {
    throw InputError("--nvlink-gbps and --nic-gbps must be positive");
  }
  if (a.nvlink_gbps > 0) {
    hw.links.level[static_cast<size_t>(Level::kNvlDomain)].beta_s_per_byte =
        1 / (a.nvlink_gbps * 1e9);
  }
  if (a.nic_gbps > 0) {
    for (Level l : {Level::kRack, Level::kSpine, Level::kCluster}) {
      hw.links.level[static_cast<size_t>(l)].beta_s_per_byte = 1 / (a.nic_gbps * 1e9);
    }
  }
  AdvisorOptions opt;
  opt.gpus = a.gpus;
  opt.max_gpus = a.max_gpus;
  opt.max_step_s = a.max_step_s;
  opt.max_zero = a.max_zero;
  opt.efficiency = a.efficiency;
  opt.memory_reserve = a.reserve;
  opt.recompute = !a.no_recompute;
  opt.keep = static_cast<size_t>(std::max(1, a.top));
  const auto t0 = std::chrono::steady_clock::now();
  const Advice advice = advise(model, hw, opt);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const ParallelPlan& best = advice.plans.front();
  const int nodes = (best.gpus + hw.gpus_per_node - 1) / hw.gpus_per_node;

  if (!a.json_out.empty()) {
    nlohmann::ordered_json j = plan_json(best);
    j["gang_chosen_by_advisor"] = advice.gang_chosen;
    j["nodes"] = nodes;
    j["model"] = {{"params", model.params},
                  {"layers", model.layers},
                  {"hidden", model.hidden},
                  {"heads", model.heads ? model.heads : model.hidden / 128},
                  {"seq", model.seq},
                  {"vocab", model.vocab},
                  {"global_batch", model.global_batch}};
    j["hardware"] = {{"gpu", hw.gpu_type},
                     {"memory_gib", hw.memory_gib},
                     {"peak_tflops", hw.peak_tflops},
                     {"gpus_per_node", hw.gpus_per_node},
                     {"efficiency", opt.efficiency},
                     {"memory_reserve", opt.memory_reserve},
                     {"max_zero", opt.max_zero},
                     {"recompute", opt.recompute}};
    nlohmann::ordered_json alts = nlohmann::ordered_json::array();
    for (const ParallelPlan& p : advice.plans) alts.push_back(plan_json(p));
    j["alternatives"] = alts;
    if (advice.gang_chosen) {
      nlohmann::ordered_json gangs = nlohmann::ordered_json::array();
      for (const GangOption& g : advice.gangs) gangs.push_back(plan_json(g.best));
      j["gang_sizes"] = gangs;
    }
    j["configurations_evaluated"] = advice.evaluated;
    std::ofstream out(a.json_out);
    if (!out) throw std::runtime_error(a.json_out + ": cannot write");
    out << j.dump(2) << '\n';
  }

  std::cout << fmt::format(
      "model: {:.4g}B parameters, {} layers, hidden {}, {} heads, sequence {}, global batch {}\n"
      "GPU: {} ({:g} GiB, {:g} TFLOP/s peak at {:.0f} % sustained), {} per node\n",
      model.params / 1e9, model.layers, model.hidden,
      model.heads ? model.heads : model.hidden / 128, model.seq, model.global_batch, hw.gpu_type,
      hw.memory_gib, hw.peak_tflops, opt.efficiency * 100, hw.gpus_per_node);
  std::cout << fmt::format(
      "plan: tensor {} x pipeline {} x data {} = {} GPUs, ZeRO-{}, micro-batch {} ({} per "
      "pipeline per step, {} layers per stage)\n",
      best.tensor, best.pipeline, best.data, best.gpus, best.zero_stage, best.micro_batch,
      best.microbatches, best.layers_per_stage);
  if (advice.tensor_beyond_node) {
    std::cout << "warning: nothing fits with tensor parallelism inside a node; this plan runs "
                 "tensor-parallel all-reduces over the network\n";
  }
  const MemoryPerGpu& m = best.memory;
  std::cout << fmt::format(
      "memory per GPU: {:.1f} GiB of {:.1f} usable (weights {:.1f}, gradients {:.1f}, optimizer "
      "{:.1f}, activations {:.1f})\n",
      m.total / kGiB, m.usable / kGiB, m.weights / kGiB, m.gradients / kGiB, m.optimizer / kGiB,
      m.activations / kGiB);
  const StepTime& t = best.time;
  std::cout << fmt::format(
      "step time: {:.2f} s = compute {:.2f} + pipeline bubble {:.2f} + tensor-parallel comm "
      "{:.2f} + pipeline p2p {:.2f} + data-parallel comm {:.2f} (of {:.2f}, the rest hidden) + "
      "ZeRO comm {:.2f}; {:.0f} TFLOP/s per GPU\n",
      t.total, t.compute, t.bubble, t.tensor_comm, t.pipeline_comm, t.data_comm_exposed,
      t.data_comm, t.zero_comm_exposed, best.model_tflops_per_gpu);
  std::cout << fmt::format("request: a gang of {} GPUs ({} node{} x {}){}\n", best.gpus, nodes,
                           nodes == 1 ? "" : "s", std::min(best.gpus, hw.gpus_per_node),
                           advice.gang_chosen
                               ? ", chosen by the advisor for the fewest GPU-seconds per "
                                 "step (--gpus N fixes it)"
                               : "");
  if (advice.gang_chosen) {
    std::cout << "\nbest plan per gang size (* = chosen: the fastest within 5 % of the fewest "
                 "GPU-seconds per step):\n"
              << kRowHeader << '\n';
    for (const GangOption& g : advice.gangs) {
      std::cout << plan_row(g.best) << (g.gpus == best.gpus ? " *" : "") << '\n';
    }
  } else {
    std::cout << "\nalternatives:\n" << kRowHeader << '\n';
    for (const ParallelPlan& p : advice.plans) std::cout << plan_row(p) << '\n';
  }
  std::cout << fmt::format("({} configurations in {:.2f} ms)\n", advice.evaluated, secs * 1e3);
  return 0;
}

}  // namespace tessera

#include "apps/goodput_options.h"

#include <iostream>

namespace tessera {

void add_goodput_options(CLI::App& cmd, GoodputArgs& a) {
  cmd.add_option("--goodput-service-scale", a.allocation.service_scale,
                 "--policy goodput: GPU-seconds of remaining work (srpt) or of attained service "
                 "(las) at which a job's weight halves (docs/goodput.md)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e9));
  cmd.add_option("--goodput-priority", a.priority,
                 "--policy goodput: whose speedup counts most: las (least attained service) or "
                 "srpt (shortest remaining, from the jobs' progress reports)")
      ->capture_default_str()
      ->check(CLI::IsMember({"las", "srpt"}));
  cmd.add_option("--goodput-exponent", a.allocation.service_exponent,
                 "--policy goodput: how steeply the weight falls with remaining work or "
                 "attained service (0: every job weighs the same)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 10.0));
  cmd.add_option("--goodput-restart-penalty", a.allocation.max_restart_penalty,
                 "--policy goodput: the most a restart may cost a job, as a fraction of its "
                 "speedup, when a round weighs a change of its GPU count (30 s / time it has run, "
                 "up to this)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.99));
  cmd.add_option("--goodput-explore", a.allocation.exploration,
                 "--policy goodput: a job is offered at most this many times the GPUs it has "
                 "reported from (Pollux: 2)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 64.0));
  cmd.add_option("--goodput-min-restart-penalty", a.allocation.min_restart_penalty,
                 "--policy goodput: the least a restart costs a job, however long it has run")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.99));
}

void add_goodput_round_option(CLI::App& cmd, GoodputArgs& a) {
  cmd.add_option("--goodput-round", a.round_seconds,
                 "--policy goodput: seconds between rounds, each re-planning every adaptive "
                 "job's GPUs and batch from what the jobs report (docs/goodput.md)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 86400.0));
}

void warn_unused_goodput_options(const std::string& command, const std::string& policy,
                                 const GoodputArgs& a) {
  if (policy.substr(0, policy.find('+')) == "goodput") return;
  if (goodput_options_given(a) || a.round_seconds != GoodputArgs{}.round_seconds) {
    std::cerr << "tessera " << command
              << ": warning: the --goodput-* options have no effect without --policy goodput\n";
  }
}

GoodputAllocationOptions goodput_allocation(const GoodputArgs& a) {
  GoodputAllocationOptions o = a.allocation;
  o.priority =
      a.priority == "srpt" ? GoodputPriority::kShortestRemaining : GoodputPriority::kLeastAttained;
  return o;
}

bool goodput_options_given(const GoodputArgs& a) {
  const GoodputAllocationOptions d;
  const GoodputAllocationOptions& o = a.allocation;
  return o.service_scale != d.service_scale || o.service_exponent != d.service_exponent ||
         o.max_restart_penalty != d.max_restart_penalty ||
         o.min_restart_penalty != d.min_restart_penalty || o.exploration != d.exploration ||
         a.priority != GoodputArgs{}.priority;
}

nlohmann::ordered_json goodput_run_json(const GoodputArgs& a) {
  const GoodputAllocationOptions& o = a.allocation;
  return {{"priority", a.priority},
          {"service_scale", o.service_scale},
          {"service_exponent", o.service_exponent},
          {"max_restart_penalty", o.max_restart_penalty},
          {"min_restart_penalty", o.min_restart_penalty},
          {"exploration", o.exploration},
          {"restart_seconds", o.restart_seconds}};
}

}  // namespace tessera

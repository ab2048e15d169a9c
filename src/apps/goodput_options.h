// The options of --policy goodput (docs/goodput.md) that tessera simulate and tessera serve
// share: how a round weighs jobs and charges restarts.
#pragma once

#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>
#include <string>

#include "engine/goodput_allocation.h"

namespace tessera {

struct GoodputArgs {
  GoodputAllocationOptions allocation;  // how GPUs are shared out
  std::string priority = "srpt";        // las | srpt
  double round_seconds = 60;            // serve and kube: --goodput-round
};

void add_goodput_options(CLI::App& cmd, GoodputArgs& a);
// serve and kube: --goodput-round.
void add_goodput_round_option(CLI::App& cmd, GoodputArgs& a);
// serve and kube: a warning on stderr ("tessera COMMAND: warning: ...") when --goodput-* options
// were given to a policy other than goodput.
void warn_unused_goodput_options(const std::string& command, const std::string& policy,
                                 const GoodputArgs& a);

// The allocation options the arguments say.
GoodputAllocationOptions goodput_allocation(const GoodputArgs& a);

// Whether any --goodput-* option differs from its default (said to have no effect without
// --policy goodput).
bool goodput_options_given(const GoodputArgs& a);

// The options as a result file records them.
nlohmann::ordered_json goodput_run_json(const GoodputArgs& a);

}  // namespace tessera

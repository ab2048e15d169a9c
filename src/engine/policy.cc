#include "engine/policy.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>

namespace tessera {

std::string_view to_string(Backfill b) {
  switch (b) {
    case Backfill::kNone:
      return "none";
    case Backfill::kEasy:
      return "easy";
    case Backfill::kGreedy:
      return "greedy";
  }
  return "easy";
}

std::string Policy::name() const {
  return std::string(goodput ? "goodput" : order->name()) + "+" + std::string(scorer->name());
}

Policy make_policy(std::string_view spec, uint64_t seed) {
  const auto plus = spec.find('+');
  std::string_view order_name = spec.substr(0, plus);
  Policy p;
  p.seed = seed;
  // goodput is not a queue order: its rounds decide who runs; jobs wait in las order.
  if (order_name == "goodput") {
    p.goodput = true;
    order_name = "las";
  }
  p.order = make_queue_order(order_name);
  if (!p.order) {
    throw std::invalid_argument(fmt::format("unknown policy '{}': queue orders are {}", order_name,
                                            fmt::join(queue_order_names(), ", ")) +
                                ", or goodput");
  }
  std::string_view scorer_name = order_name == "las" && !p.goodput ? "spread" : "bestfit";
  if (plus != std::string_view::npos) scorer_name = spec.substr(plus + 1);
  p.scorer = make_scorer(scorer_name);
  if (!p.scorer) {
    throw std::invalid_argument(
        fmt::format("unknown placement '{}' in policy '{}': placements are {}", scorer_name, spec,
                    fmt::join(scorer_names(), ", ")));
  }
  p.backfill = order_name == "las" ? Backfill::kGreedy : Backfill::kEasy;
  p.reclaim = order_name == "fair";
  return p;
}

}  // namespace tessera

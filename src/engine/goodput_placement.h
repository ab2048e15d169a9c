// Where a goodput round's GPU counts become placements (docs/goodput.md), shared by the
// simulator's rounds, `tessera serve` and the Kubernetes scheduler: the speedup curve a gang of
// whole members offers the round, and the size, up to what the round gave it, whose actual
// placement trains fastest.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/goodput_model.h"
#include "engine/placement.h"
#include "engine/rng.h"
#include "model/allocation.h"
#include "model/cluster_state.h"
#include "model/job.h"

namespace tessera {

// The speedup curve (element k: k GPUs, packed on nodes of `gpus_per_node`) of a job whose GPUs
// come in members of `gpus_per_member` and that runs on at least `min_gpus`: a count that is no
// whole number of members is worth what the members it holds are (the allocation looks past
// such flats to the next member), and counts below `min_gpus` are worth 0.
std::vector<double> member_speedup_curve(const GoodputModel& m, int max_gpus, int gpus_per_node,
                                         int gpus_per_member, int min_gpus);

// How fast a job trains on `nodes` nodes and `gpus` GPUs, relative to one GPU.
using SpeedupOf = std::function<double(int nodes, int gpus)>;

// Where job `s` goes with between `min_members` and `max_members` members: of the sizes that
// fit `state` now, the one whose placement `speedup` rates best (where free GPUs are scattered,
// fewer GPUs on fewer nodes may train faster than more spread out); ties go to the larger.
// Leaves `state` as it found it. False when no size fits.
bool place_best_size(ClusterState& state, const JobSpec& s, int min_members, int max_members,
                     const PlacementScorer& scorer, Rng& rng, const SpeedupOf& speedup,
                     Allocation& out);

// How many distinct nodes an allocation's members are on.
int nodes_of(const Allocation& a);

}  // namespace tessera

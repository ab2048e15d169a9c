// One scheduling cycle as a pure function: no clock, no I/O, no global state. Given the same
// snapshot and policy (seed included) it returns the same decisions, so the simulator and the
// service backends run exactly the same scheduling code.
#pragma once

#include "engine/decisions.h"
#include "engine/policy.h"
#include "engine/snapshot.h"

namespace tessera {

// Decides which pending gangs start where, which running gangs are preempted for them, and
// why every other pending gang waits. Guarantees:
//  - every start holds all its members (between min and max), never part of a gang;
//  - applying the preemptions and then the starts to snap.state never over-commits a GPU;
//  - a job is preempted only for a job of strictly higher rank (QueueOrder::rank), and only
//    if that job then starts in this cycle.
Decisions schedule_cycle(const Snapshot& snap, const Policy& policy);

}  // namespace tessera

// The state file: every object of every collection plus the resourceVersion counter, written
// atomically (temporary file + rename). After a load the watch history is empty, so a client
// resuming from an older resourceVersion gets 410 Expired, as from a restarted apiserver.
#pragma once

#include <string>

#include "kube_emulator/cluster.h"

namespace kube_emulator {

// Throws std::runtime_error when the file cannot be written.
void save_state(Cluster& cluster, const std::string& path);
// false when the file does not exist; throws std::runtime_error when it is malformed.
bool load_state(Cluster& cluster, const std::string& path);

}  // namespace kube_emulator

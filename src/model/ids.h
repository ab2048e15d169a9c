// Integer ids used across the model. Strings (names, tenants) are interned to these at the
// edges so the hot paths compare and index integers.
#pragma once

#include <cstdint>
#include <limits>

namespace tessera {

using GpuId = uint32_t;     // index into Cluster::gpus()
using NodeId = uint32_t;    // index into Cluster::nodes()
using RackId = uint32_t;    // index into Cluster::racks()
using SpineId = uint32_t;   // index into Cluster::spines()
using JobId = uint32_t;     // index into Workload::jobs
using TenantId = uint32_t;  // index into the tenant interner
using GpuTypeId = uint8_t;  // index into GpuTypeTable

inline constexpr uint32_t kNoId = std::numeric_limits<uint32_t>::max();
inline constexpr GpuTypeId kNoGpuType = std::numeric_limits<GpuTypeId>::max();  // none

}  // namespace tessera

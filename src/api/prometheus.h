// The service's metrics in the Prometheus text exposition format (version 0.0.4).
#pragma once

#include <string>

#include "control/service.h"

namespace tessera {

std::string render_prometheus(const ServiceMetrics& m);

}  // namespace tessera

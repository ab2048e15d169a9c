// The service's metrics in the Prometheus text exposition format (version 0.0.4).
#pragma once

#include <string>

#include "api/guarded_http_server.h"
#include "control/read_model.h"

namespace tessera {

std::string render_prometheus(const ServiceMetrics& m);
// The HTTP front end's connections and what it refused before any handler ran.
std::string render_http_front(const HttpFrontStats& s);

}  // namespace tessera

// What a latency-bound inference job serves (docs/edge.md): requests from the users of one
// region, each with a latency objective. Sizes in kilobytes (10^3 bytes), times in ms.
#pragma once

#include <string>

namespace tessera {

struct InferenceService {
  std::string region;         // where its requests come from: a site's name (model/sites.h)
  double latency_slo_ms = 0;  // a request answered later than this misses the SLO
  double request_rate = 1;    // requests per second while the service exists
  double request_kb = 0;      // sent with each request
  double response_kb = 0;     // sent back
  double service_ms = 0;      // compute time of one request on the job's GPUs
};

}  // namespace tessera

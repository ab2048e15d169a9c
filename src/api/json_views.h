// The JSON shapes of the service API (docs/openapi.yaml): one function per object, so the
// server and the tests agree on them.
#pragma once

#include <nlohmann/json.hpp>

#include "control/service.h"

namespace tessera {

nlohmann::json to_json(const JobView& v);
nlohmann::json to_json(const QueueView& v);
nlohmann::json to_json(const NodeView& v);
nlohmann::json to_json(const AuditEntry& e);
nlohmann::json to_json(const JobEvent& e);

}  // namespace tessera

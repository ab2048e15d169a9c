// The JSON shapes of the service API (docs/openapi.yaml): one function per object, so the
// server and the tests agree on them.
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "control/read_model.h"

namespace tessera {

// `v` if it is an object with no key but those in `known`; else FieldError naming `field` (or,
// for an unknown key, field.KEY) with a did-you-mean and the known keys.
const nlohmann::json& object_of(const nlohmann::json& v, const std::string& field,
                                std::initializer_list<std::string_view> known);

nlohmann::json to_json(const JobView& v);
nlohmann::json to_json(const QueueView& v);
// A reservation: tenant, user and created_by null where the caller may not know them.
nlohmann::json to_json(const ReservationView& v);
nlohmann::json to_json(const NodeView& v);
nlohmann::json to_json(const AuditEntry& e);
nlohmann::json to_json(const JobEvent& e);
nlohmann::json to_json(const JobReportView& v);
// POST /v1/jobs/ID/report's body:
//   {"step": {"gpus": 4, "nodes": 1, "per_gpu_batch": 32, "seconds": 0.41, "sync_seconds": 0.05},
//    "gradient": {"sqr": 0.012, "var": 2.3}, "progress": {"done": 1200, "total": 50000}}
// each part optional, at least one; FieldError naming the field when malformed.
JobReport job_report_from_json(const nlohmann::json& j);

}  // namespace tessera

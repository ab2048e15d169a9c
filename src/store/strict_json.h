// JSON from outside, parsed strictly. nlohmann's parser accepts what a careful API should not:
// an object with the same key twice (the last wins, silently, where YAML refuses it), and a
// number too small or too large for a double (1e-400 becomes 0, so `gpus: 1e-400` asked for no
// GPU). Those are refused here, with nesting bounded first (model/json_depth.h).
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace tessera {

// Throws FieldError (store/job_request.h; field "", or the duplicated key) saying what is wrong and
// where (byte offset or key).
nlohmann::json parse_json_strict(std::string_view text);

}  // namespace tessera

// How deeply a JSON text nests, found without parsing it. Parsers and printers of JSON values
// recurse (nlohmann's dump, our readers, error messages that show a value), so input from
// outside is refused above a nesting limit before it is parsed: a 200 KB body nested 100,000
// levels deep must get a 400, not a stack overflow.
#pragma once

#include <cstddef>
#include <string_view>

namespace tessera {

// Nesting that real requests never approach (a job spec nests 3 levels, a Kubernetes object
// about 10); far below what a thread's stack survives.
inline constexpr size_t kMaxJsonDepth = 64;

// Whether `text` opens more than `limit` arrays/objects inside one another. Brackets inside
// strings (escapes included) do not count; the text need not be valid JSON.
bool json_nesting_exceeds(std::string_view text, size_t limit = kMaxJsonDepth);

}  // namespace tessera

// UTF-8 validity of text from outside (request bodies, paths, names). JSON output must be
// valid UTF-8, so text that is not is refused where it enters (400 naming where), and text
// that must be kept anyway (an audit entry of the refused request) is repaired.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace tessera {

// The offset of the first byte that does not start a well-formed UTF-8 sequence (RFC 3629:
// no overlong forms, no surrogates, nothing above U+10FFFF), or nullopt if all of it is valid.
std::optional<size_t> invalid_utf8_at(std::string_view text);

// `text` with each ill-formed sequence replaced by U+FFFD.
std::string to_valid_utf8(std::string_view text);

}  // namespace tessera

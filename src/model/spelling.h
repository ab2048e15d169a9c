// What a user most likely meant by a word the program does not know: a command, a flag, a
// key of a file or request, an enumerated value.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

// The candidate a user most likely meant by `word` (a small edit distance, or a unique prefix);
// "" when none is close, or two are equally close.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

// " (did you mean 'resources'?)" for a close candidate, else "": appended to an error.
std::string did_you_mean(std::string_view word, std::initializer_list<std::string_view> known);

}  // namespace tessera

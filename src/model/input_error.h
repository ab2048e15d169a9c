// The error every reader throws for bad input: the message names the file, line and field,
// e.g. "workload.csv:12: field num_gpus: expected a positive integer, got 'x'".
#pragma once

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tessera {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "origin:line: field F: message" (line 0 or empty field are left out).
// Names listed for an error message ("known: a, b, c"), separated by `sep`.
std::string join_names(std::initializer_list<std::string_view> names, std::string_view sep = ", ");

// `value` quoted for an error message: at most `max` bytes of it (cut at a character
// boundary, then "..."), control characters shown as '?', so that a hostile 200 KB value is
// never echoed whole into a response, a log line or an object's status.
std::string quote_prefix(std::string_view value, size_t max = 40);

std::string input_error_message(const std::string& origin, size_t line, const std::string& field,
                                const std::string& message);

}  // namespace tessera

// How the tessera command line behaves as a whole, whatever the subcommand: every
// error reads "tessera: error: ..." and exits 2, a misspelt command or flag gets "did you
// mean", every --help shows each option's default, `tessera --version` prints the build.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/spelling.h"

namespace tessera {

inline constexpr int kErrorExit = 2;  // every error: usage, input, or a failed request

// Call on the top-level app before any subcommand or option is added (they copy its defaults).
void prepare_app(CLI::App& app);

// Parses argv. nullopt: go on and run the selected command. Otherwise the exit status: 0 after
// --help or --version (printed to stdout), kErrorExit after a usage error (printed to stderr).
std::optional<int> parse_command_line(CLI::App& app, int argc, const char* const* argv);

// Option checks with plain messages ("--tick: must be more than 0, got 0"); CLI11's own
// PositiveNumber prints the range up to DBL_MAX.
CLI::Validator positive_number();
CLI::Validator non_negative_number();

// The full name of the command `app` is ("tessera", "tessera tenant create").
std::string command_path(const CLI::App& app);

}  // namespace tessera

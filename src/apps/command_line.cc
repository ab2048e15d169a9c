#include "apps/command_line.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "model/version.h"

namespace tessera {

namespace {

// The deepest subcommand the parse selected (the app itself when none).
const CLI::App* selected_command(const CLI::App& app) {
  const CLI::App* at = &app;
  for (;;) {
    const std::vector<const CLI::App*> subs =
        at->get_subcommands([](const CLI::App* s) { return s->parsed(); });
    if (subs.empty()) return at;
    at = subs.front();
  }
}

std::vector<std::string> flag_names(const CLI::App& command) {
  std::vector<std::string> out;
  for (const CLI::Option* o : command.get_options()) {
    for (const std::string& l : o->get_lnames()) out.push_back("--" + l);
    for (const std::string& s : o->get_snames()) out.push_back("-" + s);
  }
  return out;
}

std::vector<std::string> subcommand_names(const CLI::App& command) {
  std::vector<std::string> out;
  for (const CLI::App* s : command.get_subcommands({})) out.push_back(s->get_name());
  return out;
}

// The words CLI11's ExtrasError lists after "...not expected: ".
std::vector<std::string> unexpected_words(const std::string& message) {
  std::vector<std::string> out;
  const size_t colon = message.find(": ");
  if (colon == std::string::npos) return out;
  std::string rest = message.substr(colon + 2);
  size_t start = 0;
  while (start < rest.size()) {
    size_t end = rest.find(' ', start);
    if (end == std::string::npos) end = rest.size();
    if (end > start) out.push_back(rest.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string describe_extras(const CLI::App& command, const std::string& message) {
  std::string out;
  std::vector<std::string> words = unexpected_words(message);
  std::reverse(words.begin(), words.end());  // CLI11 lists them last first
  bool after_unknown_flag = false;
  for (const std::string& word : words) {
    const bool flag = word.size() > 1 && word[0] == '-';
    if (!flag && after_unknown_flag) {  // the value of the flag just reported
      after_unknown_flag = false;
      continue;
    }
    after_unknown_flag = flag && word.find('=') == std::string::npos;
    // "--flag=value": the flag is the part before '='.
    const std::string name = flag ? word.substr(0, word.find('=')) : word;
    const std::vector<std::string> subs = subcommand_names(command);
    std::string line;
    if (flag) {
      line = fmt::format("unknown option {} for '{}'", name, command_path(command));
      if (const std::string guess = closest_match(name, flag_names(command)); !guess.empty()) {
        line += fmt::format(" (did you mean {}?)", guess);
      }
    } else if (!subs.empty()) {
      line = fmt::format("unknown command '{}' for '{}'", word, command_path(command));
      if (const std::string guess = closest_match(word, subs); !guess.empty()) {
        line += fmt::format(" (did you mean '{}'?)", guess);
      }
    } else {
      line = fmt::format("unexpected argument '{}' for '{}'", word, command_path(command));
    }
    out += (out.empty() ? "" : "\ntessera: error: ") + line;
  }
  return out.empty() ? message : out;
}

}  // namespace

std::string command_path(const CLI::App& app) {
  std::string path = app.get_name();
  for (const CLI::App* p = app.get_parent(); p != nullptr; p = p->get_parent()) {
    path = p->get_name() + (path.empty() ? "" : " " + path);
  }
  return path;
}

namespace {

CLI::Validator number_check(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v)) return "expected a number, got '" + text + "'";
        if (allow_zero ? !(v >= 0) : !(v > 0)) {
          return std::string(allow_zero ? "must be 0 or more" : "must be more than 0") + ", got " +
                 text;
        }
        return "";
      },
      allow_zero ? ">= 0" : "> 0");
}

}  // namespace

CLI::Validator positive_number() {
  return number_check(false);
}

CLI::Validator non_negative_number() {
  return number_check(true);
}

void prepare_app(CLI::App& app) {
  app.option_defaults()->always_capture_default();
  app.set_version_flag("--version",
                       fmt::format("tessera {} ({})", tessera_version(), tessera_commit()),
                       "Print the version and the commit it was built from");
  app.footer("Run 'tessera COMMAND --help' for a command's options. Errors exit with status 2.");
}

std::optional<int> parse_command_line(CLI::App& app, int argc, const char* const* argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();  // CLI11 delegates to the selected subcommand
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what() << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    const CLI::App& command = *selected_command(app);
    if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr &&
        !subcommand_names(command).empty() && command.get_subcommands().empty()) {
      // `tessera tenant crate`: CLI11 says only that a subcommand is required.
      const std::vector<std::string> left = command.remaining();
      std::string line = left.empty() ? fmt::format("'{}' needs a command", command_path(command))
                                      : fmt::format("unknown command '{}' for '{}'", left.front(),
                                                    command_path(command));
      if (!left.empty()) {
        if (const std::string guess = closest_match(left.front(), subcommand_names(command));
            !guess.empty()) {
          line += fmt::format(" (did you mean '{}'?)", guess);
        }
      }
      std::string names;
      for (const std::string& n : subcommand_names(command))
        names += (names.empty() ? "" : ", ") + n;
      std::fprintf(stderr, "tessera: error: %s; its commands: %s\nRun '%s --help' for usage.\n",
                   line.c_str(), names.c_str(), command_path(command).c_str());
      return kErrorExit;
    }
    // (CLI11 names an ExtrasError after the app that threw it, so its type tells it apart.)
    const std::string message = dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr
                                    ? describe_extras(command, e.what())
                                    : std::string(e.what());
    std::fprintf(stderr, "tessera: error: %s\nRun '%s --help' for usage.\n", message.c_str(),
                 command_path(command).c_str());
    return kErrorExit;
  }
  if (app.get_subcommands().empty()) {  // bare `tessera`: what it can do, not a simulation
    std::cout << app.help();
    return 0;
  }
  return std::nullopt;
}

}  // namespace tessera

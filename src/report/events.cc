#include "report/events.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace tessera::report {

EventsDigest digest_events(std::istream& in, const std::string& name) {
  EventsDigest d;
  struct Seen {
    double submit = -1, first_start = -1;
  };
  std::unordered_map<std::string, Seen> jobs;  // by the job's name as the log gives it
  std::string line;
  size_t number = 0;
  bool any = false;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    const nlohmann::json e = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!e.is_object() || !e.contains("t") || !e["t"].is_number() || !e.contains("type") ||
        !e["type"].is_string() || !e.contains("job")) {
      throw std::runtime_error(name + " line " + std::to_string(number) +
                               ": not a simulate --events line (a JSON object with t, type, job)");
    }
    const double t = e["t"].get<double>();
    const std::string type = e["type"].get<std::string>();
    const std::string job = e["job"].is_string() ? e["job"].get<std::string>() : e["job"].dump();
    if (!any) d.first = d.last = t;
    any = true;
    d.first = std::min(d.first, t);
    d.last = std::max(d.last, t);
    ++d.lines;
    Seen& s = jobs[job];
    if (type == "submit") {
      s.submit = t;
    } else if (type == "start") {
      if (s.first_start < 0) {
        s.first_start = t;
        if (s.submit >= 0) d.wait.push_back(t - s.submit);
      }
    } else if (type == "finish") {
      if (s.submit >= 0) d.jct.push_back(t - s.submit);
    } else if (type == "preempt") {
      d.preemptions.push_back(t);
    } else if (type == "fail") {
      d.failures.push_back(t);
    }
  }
  if (in.bad()) throw std::runtime_error(name + ": cannot read");
  return d;
}

}  // namespace tessera::report

#include "model/job.h"

#include <algorithm>

namespace tessera {

std::string_view to_string(PriorityClass p) {
  switch (p) {
    case PriorityClass::kBestEffort:
      return "best-effort";
    case PriorityClass::kResearch:
      return "research";
    case PriorityClass::kProduction:
      return "production";
    case PriorityClass::kInferenceCritical:
      return "inference-critical";
  }
  return "research";
}

bool parse_priority_class(std::string_view s, PriorityClass& out) {
  for (auto p : {PriorityClass::kBestEffort, PriorityClass::kResearch, PriorityClass::kProduction,
                 PriorityClass::kInferenceCritical}) {
    if (to_string(p) == s) {
      out = p;
      return true;
    }
  }
  return false;
}

void sort_by_submit(Workload& w) {
  std::stable_sort(w.jobs.begin(), w.jobs.end(), [](const JobSpec& a, const JobSpec& b) {
    return a.submit_time < b.submit_time;
  });
}

}  // namespace tessera

// tessera classify: workload-classification accuracy on a labelled trace (docs/classifier.md).
#pragma once

#include <CLI/CLI.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace tessera {

struct ClassifyArgs {
  std::string trace;
  std::vector<std::string> classifiers = {"logistic", "majority", "threshold"};
  size_t max_jobs = 0;
  size_t skip = 0;
  std::string json_out;
  bool quiet = false;
};
CLI::App* add_classify_command(CLI::App& app, ClassifyArgs& args);
int run_classify(const ClassifyArgs& args);

}  // namespace tessera

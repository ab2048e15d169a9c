// tessera predict: runtime-prediction accuracy on a trace (docs/prediction.md).
#pragma once

#include <CLI/CLI.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace tessera {

struct PredictArgs {
  std::string workload;
  std::string format;  // empty: guessed from the file
  std::vector<std::string> predictors = {"mean", "quantile", "gbt"};
  size_t max_jobs = 0;
  size_t skip = 0;
  std::string json_out;
  bool quiet = false;
};
CLI::App* add_predict_command(CLI::App& app, PredictArgs& args);
int run_predict(const PredictArgs& args);

}  // namespace tessera

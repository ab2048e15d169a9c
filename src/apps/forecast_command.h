// tessera forecast: how well Holt-Winters predicts a cluster's arrival series (the forecast
// that pre-reserves capacity for latency-bound work), against naive forecasts.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace tessera {

struct ForecastArgs {
  std::string series;  // CSV; empty: Helios' venus_cluster_throughput.csv in the data folder
  std::string column = "submit_gpu_job";
  size_t period = 144;  // steps per season (a day of 10-minute buckets)
  double train_periods = 28;
  double test_periods = 7;
  std::string json_out;
  std::string data_dir;
};
CLI::App* add_forecast_command(CLI::App& app, ForecastArgs& args);
int run_forecast(const ForecastArgs& args);

}  // namespace tessera

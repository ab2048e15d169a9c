#include "apps/forecast_command.h"
#include "apps/json_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <span>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "apps/data_dir.h"
#include "insight/holt_winters.h"
#include "sim/series_reader.h"

namespace tessera {

CLI::App* add_forecast_command(CLI::App& app, ForecastArgs& a) {
  CLI::App* s = app.add_subcommand(
      "forecast", "Holt-Winters forecast of an arrival series against naive forecasts");
  s->add_option("--series", a.series,
                "time series CSV (default: helios/venus_cluster_throughput.csv)");
  s->add_option("--column", a.column, "the column to forecast");
  s->add_option("--period", a.period, "steps per season (144: a day of 10-minute steps)");
  s->add_option("--train", a.train_periods, "periods to fit on");
  s->add_option("--test", a.test_periods, "periods to forecast one step ahead");
  s->add_option("--json", a.json_out, "write the errors as JSON to this file");
  s->add_option("--data-dir", a.data_dir,
                "measured data (default: $TESSERA_DATA or ../shared/data)");
  return s;
}

int run_forecast(const ForecastArgs& a) {
  const std::string path =
      a.series.empty() ? data_dir_or_default(a.data_dir) + "/helios/venus_cluster_throughput.csv"
                       : a.series;
  const std::vector<double> x = read_series_column(path, a.column);
  const auto train = static_cast<size_t>(a.train_periods * static_cast<double>(a.period));
  const auto test = static_cast<size_t>(a.test_periods * static_cast<double>(a.period));
  if (a.period < 1 || train < 2 * a.period || test < 1) {
    throw std::invalid_argument("--train must cover at least 2 periods and --test at least 1 step");
  }
  if (x.size() < train + test) {
    throw std::invalid_argument(fmt::format("{}: {} has {} values, --train and --test need {}",
                                            path, a.column, x.size(), train + test));
  }
  const std::span<const double> all(x);
  const ForecastErrors e =
      evaluate_holt_winters(all.first(train), all.subspan(train, test), a.period);
  nlohmann::ordered_json j;
  j["series"] = path;
  j["column"] = a.column;
  j["period"] = a.period;
  j["train_points"] = train;
  j["test_points"] = e.points;
  j["params"] = {{"alpha", e.params.alpha}, {"beta", e.params.beta}, {"gamma", e.params.gamma}};
  j["holt_winters"] = {{"mae", e.mae}, {"rmse", e.rmse}};
  j["seasonal_naive"] = {{"mae", e.seasonal_naive_mae}, {"rmse", e.seasonal_naive_rmse}};
  j["train_mean"] = {{"mae", e.mean_mae}, {"rmse", e.mean_rmse}};
  write_json_file(a.json_out, j);
  std::cout << fmt::format(
      "{} of {}: fitted on {} steps, one step ahead over the next {}\n"
      "Holt-Winters (alpha {:g}, beta {:g}, gamma {:g}): MAE {:.3f}  RMSE {:.3f}\n"
      "seasonal naive (one period earlier):       MAE {:.3f}  RMSE {:.3f}\n"
      "training mean:                             MAE {:.3f}  RMSE {:.3f}\n",
      a.column, path, train, e.points, e.params.alpha, e.params.beta, e.params.gamma, e.mae, e.rmse,
      e.seasonal_naive_mae, e.seasonal_naive_rmse, e.mean_mae, e.mean_rmse);
  return 0;
}

}  // namespace tessera

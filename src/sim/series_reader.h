// Reads one numeric column of a time series CSV (e.g. Helios' venus_cluster_throughput.csv:
// time, submit_gpu_job, ... per 10 minutes), in file order.
#pragma once

#include <string>
#include <vector>

namespace tessera {

// Throws InputError naming the file, line and column for a missing column or a bad value.
std::vector<double> parse_series_column(const std::string& text, const std::string& origin,
                                        const std::string& column);
std::vector<double> read_series_column(const std::string& path, const std::string& column);

}  // namespace tessera

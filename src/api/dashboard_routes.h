// What `tessera serve` and `tessera kube` both answer for the dashboard: its files at /ui/ and
// the history its charts draw (GET /v1/history).
#pragma once

#include <httplib.h>

#include <functional>
#include <string>
#include <vector>

#include "control/dashboard_samples.h"

namespace tessera {

// /ui/PATH: "" is the dashboard's page, vendor/... the chart library, the rest the dashboard's
// files; from `ui_dir`/dashboard when set (development), else the copy built in.
void serve_dashboard_file(const httplib::Request& req, httplib::Response& res,
                          const std::string& path, const std::string& ui_dir);

// GET /v1/info, asked without a token: which server this is, so that the dashboard knows
// whether to ask for one (`tessera kube` is read-only, and takes a Kubernetes token unless its
// read API is open).
void send_server_info(httplib::Response& res, const std::string& server, bool read_only,
                      bool token_required);

// GET /v1/history?since=&until=&step=: the samples in [since, until] (unix seconds; the last
// hour by default) averaged over buckets of `step` seconds (the sample interval by default),
// widened so that no answer has more than 2,000 samples. `read(since, until, step)` gives them.
using HistoryReader = std::function<std::vector<HistorySample>(double, double, double)>;
void send_history(const httplib::Request& req, httplib::Response& res, double now, double interval,
                  double window, const HistoryReader& read);

}  // namespace tessera

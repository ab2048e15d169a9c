// The read API both servers answer alike, registered once over a ReadModel: GET /v1/jobs,
// /v1/jobs/ID, /v1/queues, /v1/nodes, /v1/history, /v1/info and the dashboard's files at /ui/.
// Each server brings how it registers a route, who a request is from, and how it answers errors.
#pragma once

#include <httplib.h>

#include <functional>
#include <string>

#include "control/read_model.h"

namespace tessera {

struct ReadRoutes {
  // Registers a GET route (serve also remembers its pattern, to answer other methods 405).
  std::function<void(const std::string& pattern, httplib::Server::Handler)> get;
  // Wraps a handler with the server's error answers (JSON; the headers its auth asks for).
  std::function<httplib::Server::Handler(httplib::Server::Handler)> guard;
  // Who sent the request; throws ServiceError to refuse it. `cluster_wide`: the route shows the
  // cluster (queues, nodes, the history) rather than jobs.
  std::function<Reader(const httplib::Request&, bool cluster_wide)> reader;
  std::string ui_dir;  // the dashboard's files from here ("": those built in)
  // GET /v1/info, asked without a token: which server this is, whether it is read-only, and
  // whether the dashboard must ask for a token.
  std::string server;
  bool read_only = false;
  bool token_required = true;
};

void add_read_routes(const ReadModel& model, const ReadRoutes& routes);

}  // namespace tessera

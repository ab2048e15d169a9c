#include "api/read_routes.h"

#include <nlohmann/json.hpp>

#include "api/dashboard_routes.h"
#include "api/http_util.h"
#include "api/json_views.h"

namespace tessera {

void add_read_routes(const ReadModel& model, const ReadRoutes& routes) {
  const ReadModel& m = model;  // outlives the server
  auto reader = routes.reader;
  routes.get("/v1/jobs",
             routes.guard([&m, reader](const httplib::Request& req, httplib::Response& res) {
               const Reader r = reader(req, false);
               const JobFilter f = job_filter(req);
               const auto jobs = m.jobs(r, f);
               nlohmann::json arr = nlohmann::json::array();
               for (const JobView& v : jobs) arr.push_back(to_json(v));
               nlohmann::json out{{"jobs", std::move(arr)}};
               add_next_page(out, jobs, f);
               res.set_content(json_text(out), kJson);
             }));
  routes.get(R"(/v1/jobs/([^/]+))",
             routes.guard([&m, reader](const httplib::Request& req, httplib::Response& res) {
               const Reader r = reader(req, false);
               res.set_content(json_text(to_json(m.job(r, path_id(req)))), kJson);
             }));
  // A job's history (tessera job ID): serve's from submission to its end (each change of why it
  // waits, where it started, who preempted it); kube's what the scheduler told its pods.
  routes.get(R"(/v1/jobs/([^/]+)/events)",
             routes.guard([&m, reader](const httplib::Request& req, httplib::Response& res) {
               nlohmann::json arr = nlohmann::json::array();
               for (const JobEvent& e : m.job_events(reader(req, false), path_id(req))) {
                 arr.push_back(to_json(e));
               }
               res.set_content(json_text(nlohmann::json{{"events", std::move(arr)}}), kJson);
             }));
  routes.get("/v1/queues",
             routes.guard([&m, reader](const httplib::Request& req, httplib::Response& res) {
               nlohmann::json arr = nlohmann::json::array();
               for (const QueueView& q : m.queues(reader(req, true))) arr.push_back(to_json(q));
               res.set_content(json_text(nlohmann::json{{"queues", arr}}), kJson);
             }));
  routes.get("/v1/nodes",
             routes.guard([&m, reader](const httplib::Request& req, httplib::Response& res) {
               nlohmann::json arr = nlohmann::json::array();
               for (const NodeView& n : m.nodes(reader(req, true))) arr.push_back(to_json(n));
               res.set_content(json_text(nlohmann::json{{"nodes", arr}}), kJson);
             }));
  // The dashboard's charts.
  routes.get("/v1/history",
             routes.guard([&m, reader](const httplib::Request& req, httplib::Response& res) {
               const Reader r = reader(req, true);
               send_history(req, res, m.clock_now(), m.history_interval(), m.history_window(),
                            [&](double since, double until, double step) {
                              return m.history(r, since, until, step);
                            });
             }));
  // The dashboard: static pages built into the binary. They sign in with a token and read the
  // same API as the CLI, so a page shows what that token may see and nothing more.
  routes.get("/ui", [](const httplib::Request&, httplib::Response& res) {
    res.status = 308;
    res.set_header("Location", "/ui/");
  });
  routes.get(R"(/ui/(.*))",
             [ui_dir = routes.ui_dir](const httplib::Request& req, httplib::Response& res) {
               serve_dashboard_file(req, res, req.matches[1], ui_dir);
             });
  routes.get("/v1/info", [server = routes.server, read_only = routes.read_only,
                          token_required = routes.token_required](const httplib::Request&,
                                                                  httplib::Response& res) {
    send_server_info(res, server, read_only, token_required);
  });
}

}  // namespace tessera

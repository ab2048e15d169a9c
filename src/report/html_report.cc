#include "report/html_report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>

#include "report/downsample.h"
#include "assets/web_assets.h"

namespace tessera::report {

namespace {

using Json = nlohmann::ordered_json;

// ---- checking a result's fields ----

const Json* find(const Json& j, std::string_view path) {
  const Json* at = &j;
  while (!path.empty()) {
    const size_t dot = path.find('.');
    const std::string key(path.substr(0, dot));
    if (!at->is_object() || !at->contains(key)) return nullptr;
    at = &(*at)[key];
    path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
  }
  return at;
}

[[noreturn]] void bad_field(const std::string& file, std::string_view path, const char* what) {
  throw ReportError(file + ": field '" + std::string(path) + "' " + what);
}

double number(const Json& j, std::string_view path, const std::string& file) {
  const Json* v = find(j, path);
  if (v == nullptr) bad_field(file, path, "is missing");
  if (!v->is_number()) bad_field(file, path, "is not a number");
  return v->get<double>();
}

// A number, or null when the field is absent or null (old results, undefined metrics).
Json optional_number(const Json& j, std::string_view path, int digits = 4) {
  const Json* v = find(j, path);
  if (v == nullptr || !v->is_number()) return nullptr;
  return round_to(v->get<double>(), digits);
}

std::string text(const Json& j, std::string_view path, const std::string& file) {
  const Json* v = find(j, path);
  if (v == nullptr) bad_field(file, path, "is missing");
  if (!v->is_string()) bad_field(file, path, "is not a string");
  return v->get<std::string>();
}

std::string optional_text(const Json& j, std::string_view path) {
  const Json* v = find(j, path);
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

const Json& array(const Json& j, std::string_view path, const std::string& file) {
  const Json* v = find(j, path);
  if (v == nullptr) bad_field(file, path, "is missing");
  if (!v->is_array()) bad_field(file, path, "is not an array");
  return *v;
}

std::vector<double> numbers(const Json& arr, const std::string& file, const std::string& path) {
  std::vector<double> out;
  out.reserve(arr.size());
  for (const Json& v : arr) {
    if (!v.is_number()) bad_field(file, path, "holds something that is not a number");
    out.push_back(v.get<double>());
  }
  return out;
}

std::string base_name(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

// ---- the plots' data: short numbers, bounded lengths ----

Json rounded(const std::vector<double>& v, int digits) {
  Json out = Json::array();
  for (double x : v) out.push_back(round_to(x, digits));
  return out;
}

// A line: {x0, dx, y} when regular and short enough, else {x, y} downsampled.
Json line(const std::vector<double>& y, double x0, double dx, int digits = 3) {
  if (y.size() <= kMaxSeriesPoints) {
    return {{"x0", round_to(x0, 4)}, {"dx", round_to(dx, 6)}, {"y", rounded(y, digits)}};
  }
  Series s;
  for (size_t i = 0; i < y.size(); ++i) {
    s.x.push_back(x0 + dx * static_cast<double>(i));
    s.y.push_back(y[i]);
  }
  s = downsample(s, kMaxSeriesPoints);
  return {{"x", rounded(s.x, 4)}, {"y", rounded(s.y, digits)}};
}

// A CDF in hours (x) and percent of jobs (y) from quantiles at even probabilities.
Json cdf_from_quantiles(const std::vector<double>& q) {
  std::vector<double> x, y;
  // More quantiles than the page needs are thinned to every k-th, the last one kept.
  const size_t k = (q.size() + kMaxCdfPoints - 2) / (kMaxCdfPoints - 1);
  for (size_t i = 0; i < q.size(); i += std::max<size_t>(k, 1)) {
    x.push_back(q[i] / 3600.0);
    y.push_back(100.0 * static_cast<double>(i) / static_cast<double>(q.size() - 1));
  }
  if (!q.empty() && (q.size() - 1) % std::max<size_t>(k, 1) != 0) {
    x.push_back(q.back() / 3600.0);
    y.push_back(100.0);
  }
  return {{"x", rounded(x, 5)}, {"y", rounded(y, 2)}};
}

Json counts_timeline(std::vector<double> preempt, std::vector<double> fail, double interval_h,
                     const char* fail_label) {
  size_t k = 1;
  const size_t n = std::max(preempt.size(), fail.size());
  preempt.resize(n, 0.0);
  fail.resize(n, 0.0);
  const std::vector<double> p = rebin_sum(preempt, kMaxSeriesPoints, &k);
  const std::vector<double> f = rebin_sum(fail, kMaxSeriesPoints, &k);
  double total_p = 0, total_f = 0;
  for (double v : p) total_p += v;
  for (double v : f) total_f += v;
  return {{"x0", 0.0},
          {"dx", round_to(interval_h * static_cast<double>(k), 6)},
          {"preemptions", rounded(p, 0)},
          {"failures", rounded(f, 0)},
          {"failure_label", fail_label},
          {"total_preemptions", total_p},
          {"total_failures", total_f}};
}

std::vector<double> bucket(const std::vector<double>& times, double start, double interval,
                           size_t n) {
  std::vector<double> out(n, 0.0);
  for (double t : times) {
    const double b = std::floor((t - start) / interval);
    out[static_cast<size_t>(std::clamp(b, 0.0, static_cast<double>(n - 1)))] += 1;
  }
  return out;
}

Json simulate_data(const ResultInput& in) {
  const Json& r = in.result;
  const std::string& f = in.name;
  Json d;
  d["file"] = base_name(f);
  d["policy"] = text(r, "policy", f);
  d["backfill"] = optional_text(r, "run.policy.backfill");
  d["workload"] = optional_text(r, "workload");
  d["seed"] = optional_number(r, "seed", 0);
  d["jobs"] = number(r, "jobs", f);
  d["finished"] = number(r, "finished", f);
  const double gpus = number(r, "cluster.gpus", f);
  d["cluster"] = {{"nodes", optional_number(r, "cluster.nodes", 0)}, {"gpus", gpus}};
  for (const char* k : {"jct", "queueing_delay"}) {
    Json s;
    for (const char* p : {"mean", "p50", "p95", "p99"}) {
      s[p] = round_to(number(r, std::string(k) + "." + p, f), 1);
    }
    d[k] = s;
  }
  d["makespan"] = round_to(number(r, "makespan", f), 1);
  d["gpu_allocation"] = round_to(number(r, "gpu_allocation", f), 5);
  d["effective_utilisation"] = optional_number(r, "effective_utilisation", 5);
  d["jain"] = optional_number(r, "fairness.jain", 4);
  d["sla"] = optional_number(r, "sla.satisfaction", 4);
  d["preemptions"] = optional_number(r, "preemptions", 0);
  d["lost_gpu_hours"] = optional_number(r, "lost_gpu_hours", 2);
  d["node_failures"] = optional_number(r, "failures.node_failures", 0);

  // CDFs: the result's quantiles, else the event log's jobs, else none (the page says so).
  for (const auto& [key, field] :
       {std::pair{"jct_cdf", "jct"}, std::pair{"wait_cdf", "queueing_delay"}}) {
    const Json* q = find(r, std::string(field) + ".cdf");
    if (q != nullptr && q->is_array() && !q->empty()) {
      d[key] = cdf_from_quantiles(numbers(*q, f, std::string(field) + ".cdf"));
      d[key]["source"] = "result";
    } else if (in.events != nullptr) {
      const auto& v = std::string(field) == "jct" ? in.events->jct : in.events->wait;
      d[key] = v.empty() ? Json() : cdf_from_quantiles(quantiles(v, kMaxCdfPoints));
      if (!v.empty()) d[key]["source"] = "events";
    } else {
      d[key] = nullptr;
    }
  }

  // GPU allocation over time and each queue's share against its entitlement.
  d["allocation"] = nullptr;
  d["shares"] = nullptr;
  if (const Json* ss = find(r, "share_series"); ss != nullptr && ss->is_object()) {
    const double interval_h = number(r, "share_series.interval_s", f) / 3600.0;
    const Json* queues = find(*ss, "queues");
    if (queues == nullptr || !queues->is_object())
      bad_field(f, "share_series.queues", "is missing");
    std::vector<double> total;
    Json shares = Json::array();
    for (const auto& [name, q] : queues->items()) {
      const std::string path = "share_series.queues." + name;
      const std::vector<double> held = numbers(array(q, "gpus", f + " (" + path + ")"), f, path);
      const Json* ent = find(q, "entitled");
      const std::vector<double> entitled = ent != nullptr && ent->is_array()
                                               ? numbers(*ent, f, path + ".entitled")
                                               : std::vector<double>();
      if (total.size() < held.size()) total.resize(held.size(), 0.0);
      for (size_t b = 0; b < held.size(); ++b) total[b] += held[b];
      shares.push_back({{"queue", name},
                        {"gpus", line(held, 0, interval_h)},
                        {"entitled", entitled.empty() ? Json() : line(entitled, 0, interval_h)}});
    }
    std::vector<double> pct(total.size());
    for (size_t b = 0; b < total.size(); ++b) pct[b] = gpus > 0 ? 100.0 * total[b] / gpus : 0.0;
    if (!pct.empty()) d["allocation"] = line(pct, 0, interval_h, 2);
    if (!shares.empty()) d["shares"] = shares;
  }

  // Preemptions and failures over time.
  d["timeline"] = nullptr;
  if (const Json* tl = find(r, "timeline"); tl != nullptr && tl->is_object()) {
    const double interval_h = number(r, "timeline.interval_s", f) / 3600.0;
    const Json* nf = find(*tl, "node_failures");
    d["timeline"] =
        counts_timeline(numbers(array(r, "timeline.preemptions", f), f, "timeline.preemptions"),
                        nf != nullptr && nf->is_array() ? numbers(*nf, f, "timeline.node_failures")
                                                        : std::vector<double>(),
                        interval_h, "node failures");
  } else if (in.events != nullptr && in.events->lines > 0) {
    const EventsDigest& e = *in.events;
    const double interval = 3600;
    const auto n =
        static_cast<size_t>(std::max(1.0, std::ceil((e.last - e.first) / interval + 1e-9)));
    d["timeline"] = counts_timeline(bucket(e.preemptions, e.first, interval, n),
                                    bucket(e.failures, e.first, interval, n), 1.0,
                                    "jobs stopped by node failures");
  }

  Json tenants = Json::array();
  if (const Json* pt = find(r, "per_tenant"); pt != nullptr && pt->is_object()) {
    for (const auto& [name, t] : pt->items()) {
      tenants.push_back({{"tenant", name},
                         {"jobs", optional_number(t, "jobs", 0)},
                         {"jct_mean", optional_number(t, "jct.mean", 1)},
                         {"jct_p50", optional_number(t, "jct.p50", 1)},
                         {"jct_p95", optional_number(t, "jct.p95", 1)},
                         {"wait_mean", optional_number(t, "queueing_delay.mean", 1)},
                         {"gpu_hours", optional_number(t, "gpu_hours", 1)},
                         {"preemptions", optional_number(t, "preemptions", 0)}});
    }
  }
  d["per_tenant"] = tenants;
  return d;
}

Json frag_data(const ResultInput& in, const std::map<std::string, FragBaselines>& fgd) {
  const Json& r = in.result;
  const std::string& f = in.name;
  Json d;
  d["file"] = base_name(f);
  d["policy"] = text(r, "policy", f);
  d["total_gpus"] = number(r, "total_gpus", f);
  const Json* seeds = find(r, "seeds");
  d["seeds"] = seeds != nullptr && seeds->is_array() ? seeds->size() : 0;
  d["workload"] = frag_workload(r);
  d["workload_known"] = find(r, "pods") != nullptr;
  std::vector<double> arrived, allocated, frag;
  const Json& curve = array(r, "curve", f);
  if (curve.empty()) bad_field(f, "curve", "is empty");
  for (size_t i = 0; i < curve.size(); ++i) {
    const std::string at = "curve[" + std::to_string(i) + "]";
    arrived.push_back(number(curve[i], "arrived_pct", f + " " + at));
    allocated.push_back(number(curve[i], "allocated_pct", f + " " + at));
    frag.push_back(number(curve[i], "frag_ratio_pct", f + " " + at));
  }
  d["curve"] = {{"arrived", rounded(arrived, 2)},
                {"allocated", rounded(allocated, 3)},
                {"frag_ratio", rounded(frag, 3)}};
  d["end"] = {{"arrived", round_to(arrived.back(), 2)},
              {"allocated", round_to(allocated.back(), 2)},
              {"frag_ratio", round_to(frag.back(), 2)}};
  double failed = 0, arrivals = 0;
  if (const Json* runs = find(r, "runs"); runs != nullptr && runs->is_array()) {
    for (const Json& run : *runs) {
      failed += run.value("pods_failed", 0.0);
      arrivals += run.value("pods_arrived", 0.0);
    }
  }
  d["pods_failed"] = failed;
  d["pods_arrived"] = arrivals;
  const auto it = fgd.find(d["workload"].get<std::string>());
  d["baselines"] = nullptr;
  if (it != fgd.end() && !it->second.allocation.empty()) {
    Json b = Json::array();
    for (const PublishedCurve& c : it->second.allocation) {
      Json one = {{"policy", c.policy},
                  {"arrived", rounded(c.arrived, 2)},
                  {"allocated", rounded(c.values, 3)},
                  {"frag_ratio", nullptr}};
      for (const PublishedCurve& fr : it->second.frag_ratio) {
        if (fr.policy == c.policy) {
          one["frag_ratio"] = {{"arrived", rounded(fr.arrived, 2)},
                               {"values", rounded(fr.values, 3)}};
        }
      }
      b.push_back(one);
    }
    d["baselines"] = b;
  }
  return d;
}

Json colocate_data(const ResultInput& in) {
  const Json& r = in.result;
  const std::string& f = in.name;
  Json d;
  d["file"] = base_name(f);
  d["sources"] = optional_text(r, "sources");
  d["seeds"] = optional_number(r, "seeds", 0);
  Json policies = Json::array();
  const Json& ps = array(r, "policies", f);
  for (size_t i = 0; i < ps.size(); ++i) {
    const std::string at = f + " policies[" + std::to_string(i) + "]";
    policies.push_back({{"name", text(ps[i], "name", at)},
                        {"indsd_pct", round_to(number(ps[i], "indsd_pct", at), 3)},
                        {"indsd_colocated_pct", optional_number(ps[i], "indsd_colocated_pct", 3)},
                        {"pacsav_pct", optional_number(ps[i], "pacsav_pct", 3)},
                        {"pacsav_pairs_pct", optional_number(ps[i], "pacsav_pairs_pct", 3)},
                        {"makespan_s", optional_number(ps[i], "makespan_s", 0)},
                        {"mean_jct_s", optional_number(ps[i], "mean_jct_s", 0)}});
  }
  d["policies"] = policies;
  Json gains = Json::array();
  if (const Json* im = find(r, "improvements"); im != nullptr && im->is_object()) {
    for (const auto& [key, g] : im->items()) {
      gains.push_back({{"key", key},
                       {"policy", optional_text(g, "policy")},
                       {"baseline", optional_text(g, "baseline")},
                       {"metric", optional_text(g, "metric")},
                       {"ours_pp", optional_number(g, "ours_pp", 3)},
                       {"ours_pp_stderr", optional_number(g, "ours_pp_stderr", 3)},
                       {"ours_relative_pct", optional_number(g, "ours_relative_pct", 2)},
                       {"published_pct", optional_number(g, "published_pct", 2)}});
    }
  }
  d["improvements"] = gains;
  return d;
}

Json predict_data(const ResultInput& in) {
  const Json& r = in.result;
  const std::string& f = in.name;
  Json d;
  d["file"] = base_name(f);
  d["workload"] = optional_text(r, "workload");
  d["jobs"] = optional_number(r, "jobs", 0);
  Json rows = Json::array();
  const Json& ps = array(r, "predictors", f);
  for (size_t i = 0; i < ps.size(); ++i) {
    const std::string at = f + " predictors[" + std::to_string(i) + "]";
    rows.push_back({{"predictor", text(ps[i], "predictor", at)},
                    {"jobs", optional_number(ps[i], "jobs", 0)},
                    {"median_rel_error", round_to(number(ps[i], "median_rel_error", at), 4)},
                    {"p90_rel_error", optional_number(ps[i], "p90_rel_error")},
                    {"mean_rel_error", optional_number(ps[i], "mean_rel_error")},
                    {"median_abs_log_ratio", optional_number(ps[i], "median_abs_log_ratio")},
                    {"within_2x", optional_number(ps[i], "within_2x")},
                    {"interval_coverage", optional_number(ps[i], "interval_coverage")},
                    {"under_estimated", optional_number(ps[i], "under_estimated")}});
  }
  d["predictors"] = rows;
  return d;
}

// Each run's label: its policy, with the file's name when two runs share a policy.
void label_runs(Json& runs) {
  std::map<std::string, int> seen;
  for (const Json& r : runs) seen[r["policy"].get<std::string>()]++;
  for (Json& r : runs) {
    const std::string p = r["policy"].get<std::string>();
    r["label"] = seen[p] > 1 ? p + " (" + r["file"].get<std::string>() + ")" : p;
  }
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string_view asset(std::string_view path) {
  const auto a = web_asset(path);
  if (!a) throw std::logic_error("web asset " + std::string(path) + " is not built in");
  return a->body;
}

// An inline script must not hold "</script" (it would end the element early); the assets are
// ours and checked here rather than rewritten.
std::string_view inline_script(std::string_view path) {
  const std::string_view body = asset(path);
  std::string lower(body);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower.find("</script") != std::string::npos || lower.find("<!--") != std::string::npos) {
    throw std::logic_error("web asset " + std::string(path) +
                           " cannot be inlined: it holds </script or <!--");
  }
  return body;
}

}  // namespace

ResultKind classify(const Json& r, const std::string& name) {
  if (!r.is_object()) {
    throw ReportError(name +
                      ": not a Tessera result (expected a JSON object, the --json of "
                      "simulate, frag, colocate or predict)");
  }
  const std::string command = optional_text(r, "command");
  const std::string run_command = optional_text(r, "run.command");
  if (r.contains("curve") && r.contains("total_gpus")) return ResultKind::kFrag;
  if (command == "colocate" || (r.contains("policies") && r.contains("improvements"))) {
    return ResultKind::kColocate;
  }
  if (r.contains("predictors")) return ResultKind::kPredict;
  if (run_command == "simulate" || r.contains("jct") || r.contains("makespan")) {
    return ResultKind::kSimulate;
  }
  throw ReportError(name +
                    ": not a Tessera result: expected the --json of simulate (with 'jct' and "
                    "'makespan'), frag ('curve'), colocate ('policies') or predict ('predictors')");
}

std::string frag_workload(const Json& r) {
  const std::string pods = optional_text(r, "pods");
  if (pods.empty()) return "openb_pod_list_default";
  return std::filesystem::path(pods).stem().string();
}

Json report_data(const ReportInput& in) {
  Json sims = Json::array(), frags = Json::array(), colocs = Json::array(),
       predicts = Json::array();
  for (const ResultInput& r : in.results) {
    switch (classify(r.result, r.name)) {
      case ResultKind::kSimulate:
        sims.push_back(simulate_data(r));
        break;
      case ResultKind::kFrag:
        frags.push_back(frag_data(r, in.fgd));
        break;
      case ResultKind::kColocate:
        colocs.push_back(colocate_data(r));
        break;
      case ResultKind::kPredict:
        predicts.push_back(predict_data(r));
        break;
    }
  }
  label_runs(sims);
  label_runs(frags);
  Json d;
  d["title"] = in.title;
  d["generator"] = in.generator;
  d["simulate"] = sims;
  d["frag"] = frags;
  d["colocate"] = colocs;
  d["predict"] = predicts;
  return d;
}

std::string escape_script_json(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '\xE2' && i + 2 < json.size() && json[i + 1] == '\x80' &&
               (json[i + 2] == '\xA8' || json[i + 2] == '\xA9')) {
      out += json[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";  // line separators end JS lines
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

std::string build_report_html(const ReportInput& in) {
  const Json data = report_data(in);
  const std::string block =
      escape_script_json(data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  const std::map<std::string, std::string_view, std::less<>> values = {
      {"title", ""},  // escaped below
      {"css", asset("report/report.css")},
      {"chart_js", inline_script("vendor/chart.umd.min.js")},
      {"report_js", inline_script("report/report.js")},
      {"data", block},
  };
  const std::string title = html_escape(in.title);
  // Placeholders are filled in one pass over the template only, so text inside a filled-in
  // value (the chart library, the data) is never taken for a placeholder.
  const std::string_view tpl = asset("report/report.html");
  std::string out;
  out.reserve(tpl.size() + block.size() + 260000);
  size_t at = 0;
  while (true) {
    const size_t open = tpl.find("{{", at);
    if (open == std::string_view::npos) break;
    const size_t close = tpl.find("}}", open);
    if (close == std::string_view::npos) break;
    const std::string_view key = tpl.substr(open + 2, close - open - 2);
    out.append(tpl.substr(at, open - at));
    if (key == "title") {
      out += title;
    } else if (const auto it = values.find(key); it != values.end()) {
      out.append(it->second);
    } else {
      throw std::logic_error("report/report.html: unknown placeholder {{" + std::string(key) +
                             "}}");
    }
    at = close + 2;
  }
  out.append(tpl.substr(at));
  return out;
}

}  // namespace tessera::report

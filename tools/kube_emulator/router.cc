#include "kube_emulator/router.h"

#include <stdexcept>

namespace kube_emulator {

ApiResponse json_response(int code, const json& body) {
  ApiResponse r;
  r.code = code;
  r.body = body.dump();
  return r;
}

namespace {

ApiResponse status_response(int code, const std::string& message, const std::string& name = "",
                            const std::string& qualified = "") {
  return json_response(code, status_failure(code, reason_for_code(code), message, name, qualified));
}

ApiResponse not_found_page() {
  json s = status_failure(404, "NotFound", "the server could not find the requested resource");
  s["details"] = json::object();
  return json_response(404, s);
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    const size_t j = path.find('/', i);
    if (i < path.size()) out.push_back(path.substr(i, j - i));
    if (j == std::string::npos) break;
    i = j;
  }
  return out;
}

bool truthy(const std::string& v) {
  return v == "1" || v == "true" || v == "True";
}

}  // namespace

Router::Router(Cluster& cluster, RouterOptions opt, uint64_t seed)
    : cluster_(cluster), opt_(std::move(opt)), rng_(seed ^ 0x5eed) {}

ApiResponse Router::handle(const ApiRequest& req) {
  const auto segs = split_path(req.path);
  Registry& reg = cluster_.registry();
  if (segs.empty()) {
    json paths = {"/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"};
    return json_response(200, {{"paths", paths}});
  }
  if (segs[0] == "emulator") {
    if (hooks) return hooks(req);
    return not_found_page();
  }
  if (req.method == "GET") {
    if (segs.size() == 1 && (segs[0] == "healthz" || segs[0] == "livez" || segs[0] == "readyz")) {
      ApiResponse r;
      r.content_type = "text/plain; charset=utf-8";
      r.body = "ok";
      return r;
    }
    if (segs.size() == 1 && segs[0] == "version") return json_response(200, reg.version_info());
    if (segs.size() == 2 && segs[0] == "openapi" && segs[1] == "v2") {
      // A schema-less OpenAPI v2 document: kubectl's client-side validation finds no schema
      // for any kind and skips it (as for a CRD without one), so `kubectl create -f` works
      // without --validate=false. kubectl asks for protobuf: Document{swagger, info, paths,
      // definitions}, hand-encoded.
      ApiResponse r;
      if (req.accept.find("protobuf") != std::string::npos) {
        static const std::string info = std::string("\x0a\x0aKubernetes\x12\x07v1.31.0", 21);
        r.content_type = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
        r.body = std::string(
                     "\x0a\x03"
                     "2.0",
                     5) +
                 "\x12" + static_cast<char>(info.size()) + info +
                 std::string("\x42\x00\x4a\x00", 4);
        return r;
      }
      return json_response(200, {{"swagger", "2.0"},
                                 {"info", {{"title", "Kubernetes"}, {"version", "v1.31.0"}}},
                                 {"paths", json::object()},
                                 {"definitions", json::object()}});
    }
    if (segs[0] == "openapi") return not_found_page();
    if (segs.size() == 1 && segs[0] == "api") {
      return json_response(200, reg.core_versions(opt_.server_address));
    }
    if (segs.size() == 2 && segs[0] == "api") {
      const auto l = reg.resource_list("", segs[1]);
      return l ? json_response(200, *l) : not_found_page();
    }
    if (segs.size() == 1 && segs[0] == "apis") return json_response(200, reg.group_list());
    if (segs.size() == 2 && segs[0] == "apis") {
      const auto g = reg.group(segs[1]);
      return g ? json_response(200, *g) : not_found_page();
    }
    if (segs.size() == 3 && segs[0] == "apis") {
      const auto l = reg.resource_list(segs[1], segs[2]);
      return l ? json_response(200, *l) : not_found_page();
    }
  }
  if ((segs[0] == "api" && segs.size() >= 3) || (segs[0] == "apis" && segs.size() >= 4)) {
    return resource_request(req, segs);
  }
  return not_found_page();
}

ApiResponse Router::respond(const ResourceInfo& r, const Result& res, const ApiRequest& req) {
  ApiResponse out;
  out.code = res.code;
  if (!res.obj) {
    out.body = res.body.dump();
    return out;
  }
  const bool table = req.accept.find("as=Table") != std::string::npos;
  if (table && res.ok() && req.method == "GET") {
    const json obj = cluster_.view(r, res.obj->j());
    out.body = make_table(r, {&obj}, include_object_of(req.param("includeObject")),
                          std::to_string(res.obj->rv()), "")
                   .dump();
    return out;
  }
  if (req.accept.find("as=PartialObjectMetadata") != std::string::npos) {
    out.body = partial_metadata(res.obj->j()).dump();
    return out;
  }
  out.body = cluster_.has_view(r) ? cluster_.view(r, res.obj->j()).dump() : res.obj->text();
  return out;
}

ApiResponse Router::resource_request(const ApiRequest& req, const std::vector<std::string>& segs) {
  std::string group, version;
  size_t i = 0;
  if (segs[0] == "api") {
    version = segs[1];
    i = 2;
  } else {
    group = segs[1];
    version = segs[2];
    i = 3;
  }
  std::vector<std::string> rest(segs.begin() + static_cast<std::ptrdiff_t>(i), segs.end());
  bool watch = truthy(req.param("watch"));
  if (!rest.empty() && rest[0] == "watch") {  // deprecated /watch/ paths
    watch = true;
    rest.erase(rest.begin());
  }
  std::string ns;
  if (rest.size() >= 3 && rest[0] == "namespaces" &&
      !(rest.size() == 3 && (rest[2] == "status" || rest[2] == "finalize"))) {
    ns = rest[1];
    rest.erase(rest.begin(), rest.begin() + 2);
  }
  if (rest.empty() || rest.size() > 3) return not_found_page();
  const ResourceInfo* info = cluster_.registry().find(group, version, rest[0]);
  if (info == nullptr) return not_found_page();
  const ResourceInfo& r = *info;
  if (!ns.empty() && !r.namespaced) return not_found_page();
  const std::string name = rest.size() > 1 ? rest[1] : "";
  const std::string sub = rest.size() > 2 ? rest[2] : "";
  if (!sub.empty() && !r.has_subresource(sub)) return not_found_page();
  if (r.namespaced && !name.empty() && ns.empty()) return not_found_page();
  const bool dry_run = req.param("dryRun") == "All";
  const auto parse_body = [&](json& out) -> std::optional<ApiResponse> {
    const std::string ct = req.content_type.substr(0, req.content_type.find(';'));
    if (!ct.empty() && ct != "application/json" && req.method != "PATCH") {
      return status_response(415,
                             "the body of the request was in an unknown format - accepted "
                             "media types include: application/json");
    }
    out = json::parse(req.body, nullptr, false);
    if (out.is_discarded()) {
      return status_response(400, "the body of the request could not be decoded as JSON");
    }
    return std::nullopt;
  };
  cluster_.count_request(req.method == "GET" ? (watch          ? "watch"
                                                : name.empty() ? "list"
                                                               : "get")
                                             : req.method);

  if (req.method == "GET") {
    if (sub == "log") return status_response(404, "pod logs are not emulated", name, "pods");
    if (!name.empty()) return respond(r, cluster_.get(r, ns, name), req);
    if (!watch) return list(r, ns, req);
    WatchPlan plan;
    plan.resource = info;
    plan.ns = ns;
    try {
      plan.labels = LabelSelector::parse(req.param("labelSelector"));
      plan.fields = FieldSelector::parse(req.param("fieldSelector"), r);
    } catch (const std::invalid_argument& e) {
      return status_response(400, e.what());
    }
    const std::string rv = req.param("resourceVersion");
    plan.from_now = rv.empty() || rv == "0";
    if (!plan.from_now) {
      try {
        plan.rv = std::stoull(rv);
      } catch (const std::exception&) {
        return status_response(400, "invalid resource version: " + rv);
      }
    }
    plan.send_initial = truthy(req.param("sendInitialEvents"));
    plan.bookmarks = truthy(req.param("allowWatchBookmarks"));
    const std::string ts = req.param("timeoutSeconds");
    if (!ts.empty()) {
      plan.timeout = std::chrono::seconds(std::atol(ts.c_str()));
    } else if (opt_.watch_timeout.count() > 0) {
      plan.timeout = opt_.watch_timeout;
    } else {
      std::lock_guard<std::mutex> lock(rng_mu_);
      plan.timeout = std::chrono::milliseconds(1800000 + rng_.next() % 1800000);
    }
    plan.table = req.accept.find("as=Table") != std::string::npos;
    plan.include = include_object_of(req.param("includeObject"));
    if (!plan.from_now && opt_.watch_expired_as_http_410) {
      std::lock_guard<std::mutex> lock(cluster_.store().mutex());
      const uint64_t floor = cluster_.store().collection(r.storage).floor;
      if (plan.rv < floor) {
        return status_response(
            410, "too old resource version: " + rv + " (" + std::to_string(floor) + ")");
      }
    }
    ApiResponse out;
    out.watch = std::move(plan);
    return out;
  }
  if (req.method == "POST") {
    json body;
    if (auto bad = parse_body(body)) return *bad;
    if (r.is("", "bindings")) {
      return respond(r, cluster_.bind(ns, string_at(body, "metadata.name"), body), req);
    }
    if (sub == "binding") return respond(r, cluster_.bind(ns, name, body), req);
    if (sub == "eviction") return respond(r, cluster_.evict(ns, name, body), req);
    if (!name.empty())
      return status_response(405,
                             "the server does not allow this method on the requested resource");
    return respond(r, cluster_.create(r, ns, std::move(body), dry_run), req);
  }
  if (name.empty() && req.method != "DELETE") {
    return status_response(405, "the server does not allow this method on the requested resource");
  }
  if (!sub.empty() && sub != "status") return not_found_page();
  if (req.method == "PUT") {
    json body;
    if (auto bad = parse_body(body)) return *bad;
    return respond(r, cluster_.update(r, ns, name, std::move(body), sub == "status", dry_run), req);
  }
  if (req.method == "PATCH") {
    const json p = json::parse(req.body, nullptr, false);
    if (p.is_discarded()) {
      if (req.content_type.find("apply-patch") != std::string::npos) {
        return respond(r, cluster_.patch(r, ns, name, req.content_type, json(), false), req);
      }
      return status_response(400, "the body of the request could not be decoded as JSON");
    }
    return respond(r, cluster_.patch(r, ns, name, req.content_type, p, sub == "status", dry_run),
                   req);
  }
  if (req.method == "DELETE") {
    json options = req.body.empty() ? json::object() : json::parse(req.body, nullptr, false);
    if (options.is_discarded() || !options.is_object()) options = json::object();
    if (req.has("gracePeriodSeconds")) {
      options["gracePeriodSeconds"] = std::atoll(req.param("gracePeriodSeconds").c_str());
    }
    if (name.empty()) {
      ListQuery q;
      try {
        q.labels = LabelSelector::parse(req.param("labelSelector"));
        q.fields = FieldSelector::parse(req.param("fieldSelector"), r);
      } catch (const std::invalid_argument& e) {
        return status_response(400, e.what());
      }
      return respond(r, cluster_.remove_collection(r, ns, q, options), req);
    }
    return respond(r, cluster_.remove(r, ns, name, options, dry_run), req);
  }
  return status_response(405, "the server does not allow this method on the requested resource");
}

ApiResponse Router::list(const ResourceInfo& r, const std::string& ns, const ApiRequest& req) {
  ListQuery q;
  try {
    q.labels = LabelSelector::parse(req.param("labelSelector"));
    q.fields = FieldSelector::parse(req.param("fieldSelector"), r);
  } catch (const std::invalid_argument& e) {
    return status_response(400, e.what());
  }
  const std::string limit = req.param("limit");
  if (!limit.empty()) q.limit = static_cast<size_t>(std::max(0LL, std::atoll(limit.c_str())));
  q.cont = req.param("continue");
  ListResult l = cluster_.list(r, ns, q);
  if (l.code != 200) return json_response(l.code, l.error);
  const std::string rv = std::to_string(l.rv);
  ApiResponse out;
  if (req.accept.find("as=Table") != std::string::npos) {
    std::vector<json> views;
    views.reserve(l.items.size());
    for (const auto& o : l.items) views.push_back(cluster_.view(r, o->j()));
    std::vector<const json*> ptrs;
    for (const auto& v : views) ptrs.push_back(&v);
    out.body =
        make_table(r, ptrs, include_object_of(req.param("includeObject")), rv, l.cont).dump();
    return out;
  }
  const bool partial = req.accept.find("as=PartialObjectMetadataList") != std::string::npos;
  std::string& b = out.body;
  b.reserve(64 + l.items.size() * 1024);
  if (partial) {
    b +=
        R"({"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":")";
  } else {
    b += "{\"kind\":\"" + r.list_kind() + "\",\"apiVersion\":\"" + r.group_version() +
         "\",\"metadata\":{\"resourceVersion\":\"";
  }
  b += rv;
  b += '"';
  if (!l.cont.empty()) b += ",\"continue\":\"" + l.cont + "\"";
  b += "},\"items\":[";
  bool first = true;
  for (const auto& o : l.items) {
    if (!first) b += ',';
    first = false;
    if (partial) {
      b += partial_metadata(o->j()).dump();
    } else if (cluster_.has_view(r)) {
      b += cluster_.view(r, o->j()).dump();
    } else {
      b += o->text();
    }
  }
  b += "]}";
  return out;
}

}  // namespace kube_emulator

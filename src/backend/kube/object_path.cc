#include "backend/kube/object_path.h"

#include <stdexcept>

#include "backend/kube/kube_client.h"

namespace tessera::kube {
namespace {

void check_segment(std::string_view what, std::string_view value) {
  if (value.empty() || value == "." || value == "..") {
    throw std::invalid_argument("kubernetes path: invalid " + std::string(what) + " \"" +
                                std::string(value) + "\"");
  }
}

}  // namespace

std::string escape_path_segment(std::string_view segment) {
  return escape_query(segment);  // the same unreserved set: A-Z a-z 0-9 - . _ ~
}

std::string api_prefix(const ApiResource& r) {
  if (r.group.empty()) return "/api/" + r.version;
  return "/apis/" + r.group + "/" + r.version;
}

std::string collection_path(const ApiResource& r, std::string_view ns) {
  std::string p = api_prefix(r);
  if (r.namespaced && !ns.empty()) {
    check_segment("namespace", ns);
    p += "/namespaces/";
    p += escape_path_segment(ns);
  }
  p += "/";
  p += r.resource;
  return p;
}

std::string object_path(const ApiResource& r, std::string_view ns, std::string_view name,
                        std::string_view subresource) {
  if (r.namespaced) check_segment("namespace", ns);
  check_segment("name", name);
  std::string p = collection_path(r, r.namespaced ? ns : std::string_view());
  p += "/";
  p += escape_path_segment(name);
  if (!subresource.empty()) {
    p += "/";
    p += escape_path_segment(subresource);
  }
  return p;
}

std::string add_query(std::string path, std::string_view key, std::string_view value) {
  path += path.find('?') == std::string::npos ? '?' : '&';
  path += key;
  path += '=';
  path += escape_query(value);
  return path;
}

}  // namespace tessera::kube

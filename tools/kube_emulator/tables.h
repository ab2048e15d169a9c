// Server-side printing: meta.k8s.io/v1 Table answers for `kubectl get` (pods and nodes with the
// real server's columns, Name/Age for other kinds), and PartialObjectMetadata.
#pragma once

#include <string>
#include <vector>

#include "kube_emulator/registry.h"
#include "kube_emulator/util.h"

namespace kube_emulator {

enum class IncludeObject { None, Metadata, Object };
IncludeObject include_object_of(const std::string& param);  // "" = Metadata (the default)

json table_columns(const ResourceInfo& r);
json table_row(const ResourceInfo& r, const json& obj, IncludeObject include);
// A whole Table; rows are the objects' rows in order.
json make_table(const ResourceInfo& r, const std::vector<const json*>& objs, IncludeObject include,
                const std::string& rv, const std::string& cont, bool with_columns = true);
json partial_metadata(const json& obj);

}  // namespace kube_emulator

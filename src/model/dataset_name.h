// The one rule for a dataset's name, in `tessera serve` and `tessera kube` alike. A name
// becomes a directory of the dataset cache and a Kubernetes annotation key, so each part is a
// single path component: a letter or digit first and last, letters, digits, '.', '_' and '-'
// between, at most 63 characters (an annotation key's name part). "..", "." and "/" can
// therefore never reach a path.
#pragma once

#include <string>
#include <string_view>

namespace tessera {

// Why `part` is not one component of a dataset name, or "" when it is.
std::string dataset_component_problem(std::string_view part);

// Why `name` is not a dataset name, or "" when it is: a shared dataset "NAME", or, where
// `allow_owner`, a private one "TENANT/NAME" (the tenant's queue path, then the name).
std::string dataset_name_problem(std::string_view name, bool allow_owner);

// A private dataset's owner ("research/nlp" of "research/nlp/imagenet"); "" for a shared one.
// Only for names dataset_name_problem accepted with allow_owner.
std::string_view dataset_owner(std::string_view name);

}  // namespace tessera

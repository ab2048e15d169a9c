#include "kube_emulator/selectors.h"

#include <algorithm>
#include <stdexcept>

namespace kube_emulator {

namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return s.substr(b, e - b);
}

// Splits on commas outside parentheses.
std::vector<std::string> split_terms(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (const char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!trim(cur).empty() || !out.empty()) out.push_back(trim(cur));
  return out;
}

bool valid_label_value(const std::string& v) {
  if (v.size() > 63) return false;
  return std::all_of(v.begin(), v.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.';
  });
}

bool valid_label_key(const std::string& k) {
  if (k.empty() || k.size() > 317) return false;
  return std::all_of(k.begin(), k.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '/';
  });
}

}  // namespace

LabelSelector LabelSelector::parse(const std::string& text) {
  LabelSelector sel;
  if (trim(text).empty()) return sel;
  for (const auto& term : split_terms(text)) {
    if (term.empty()) throw std::invalid_argument("found '', expected: identifier");
    Req r;
    const auto bad = [&](const std::string& why) {
      throw std::invalid_argument("unable to parse requirement: " + why + " in '" + term + "'");
    };
    if (term[0] == '!') {
      r.key = trim(term.substr(1));
      r.op = Op::NotExists;
    } else if (const auto sp = term.find_first_of(" \t");
               sp != std::string::npos && term.find('=') == std::string::npos) {
      r.key = trim(term.substr(0, sp));
      std::string rest = trim(term.substr(sp));
      std::string word;
      if (starts_with(rest, "notin")) {
        r.op = Op::NotIn;
        word = "notin";
      } else if (starts_with(rest, "in")) {
        r.op = Op::In;
        word = "in";
      } else {
        bad("unknown operator");
      }
      rest = trim(rest.substr(word.size()));
      if (rest.size() < 2 || rest.front() != '(' || rest.back() != ')') bad("expected (values)");
      std::string inner = rest.substr(1, rest.size() - 2);
      size_t start = 0;
      while (true) {
        const auto comma = inner.find(',', start);
        const std::string v = trim(inner.substr(start, comma - start));
        if (!valid_label_value(v)) bad("invalid label value: \"" + v + "\"");
        r.values.push_back(v);
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else if (const auto ne = term.find("!="); ne != std::string::npos) {
      r.key = trim(term.substr(0, ne));
      r.op = Op::NotEq;
      r.values.push_back(trim(term.substr(ne + 2)));
    } else if (const auto eq = term.find('='); eq != std::string::npos) {
      r.key = trim(term.substr(0, eq));
      r.op = Op::Eq;
      const size_t skip = (eq + 1 < term.size() && term[eq + 1] == '=') ? 2 : 1;
      r.values.push_back(trim(term.substr(eq + skip)));
    } else {
      r.key = term;
      r.op = Op::Exists;
    }
    if (!valid_label_key(r.key)) bad("invalid label key \"" + r.key + "\"");
    for (const auto& v : r.values) {
      if (!valid_label_value(v)) bad("invalid label value: \"" + v + "\"");
    }
    sel.reqs_.push_back(std::move(r));
  }
  return sel;
}

std::optional<LabelSelector> LabelSelector::from_json(const json& s) {
  LabelSelector sel;
  if (!s.is_object()) return sel;
  if (const auto it = s.find("matchLabels"); it != s.end() && it->is_object()) {
    for (const auto& [k, v] : it->items()) {
      if (!v.is_string()) return std::nullopt;
      sel.reqs_.push_back({k, Op::Eq, {v.get<std::string>()}});
    }
  }
  if (const auto it = s.find("matchExpressions"); it != s.end() && it->is_array()) {
    for (const auto& e : *it) {
      Req r;
      r.key = e.value("key", "");
      const std::string op = e.value("operator", "");
      if (op == "In") {
        r.op = Op::In;
      } else if (op == "NotIn") {
        r.op = Op::NotIn;
      } else if (op == "Exists") {
        r.op = Op::Exists;
      } else if (op == "DoesNotExist") {
        r.op = Op::NotExists;
      } else {
        return std::nullopt;
      }
      if (const auto v = e.find("values"); v != e.end() && v->is_array()) {
        for (const auto& x : *v) r.values.push_back(x.get<std::string>());
      }
      sel.reqs_.push_back(std::move(r));
    }
  }
  return sel;
}

bool LabelSelector::matches(const json& labels) const {
  for (const auto& r : reqs_) {
    const json* v = nullptr;
    if (labels.is_object()) {
      const auto it = labels.find(r.key);
      if (it != labels.end() && it->is_string()) v = &*it;
    }
    const std::string val = v != nullptr ? v->get<std::string>() : "";
    switch (r.op) {
      case Op::Eq:
        if (v == nullptr || val != r.values[0]) return false;
        break;
      case Op::NotEq:
        if (v != nullptr && val == r.values[0]) return false;
        break;
      case Op::In:
        if (v == nullptr || std::find(r.values.begin(), r.values.end(), val) == r.values.end())
          return false;
        break;
      case Op::NotIn:
        if (v != nullptr && std::find(r.values.begin(), r.values.end(), val) != r.values.end())
          return false;
        break;
      case Op::Exists:
        if (v == nullptr) return false;
        break;
      case Op::NotExists:
        if (v != nullptr) return false;
        break;
    }
  }
  return true;
}

namespace {

const std::vector<std::string>& pod_fields() {
  static const std::vector<std::string> f = {
      "spec.nodeName",    "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
      "spec.hostNetwork", "status.phase",       "status.podIP",       "status.nominatedNodeName"};
  return f;
}

const std::vector<std::string>& event_fields() {
  static const std::vector<std::string> f = {"involvedObject.kind",
                                             "involvedObject.namespace",
                                             "involvedObject.name",
                                             "involvedObject.uid",
                                             "involvedObject.apiVersion",
                                             "involvedObject.resourceVersion",
                                             "involvedObject.fieldPath",
                                             "reason",
                                             "reportingComponent",
                                             "source",
                                             "type"};
  return f;
}

// events.k8s.io/v1 field labels, mapped to the stored (core/v1) fields.
std::optional<std::string> events_v1_field(const std::string& f) {
  if (starts_with(f, "regarding.")) return "involvedObject." + f.substr(10);
  if (f == "reportingController") return "reportingComponent";
  if (f == "reason" || f == "type") return f;
  if (f == "deprecatedSource") return "source";
  return std::nullopt;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

bool field_supported(const ResourceInfo& info, const std::string& field) {
  if (field == "metadata.name") return true;
  if (field == "metadata.namespace" && info.namespaced) return true;
  if (info.is("", "pods")) return contains(pod_fields(), field);
  if (info.is("", "nodes")) return field == "spec.unschedulable";
  if (info.is("", "namespaces")) return field == "status.phase";
  if (info.is("", "secrets")) return field == "type";
  if (info.is("", "events")) return contains(event_fields(), field);
  if (info.is("events.k8s.io", "events")) return events_v1_field(field).has_value();
  if (info.is("batch", "jobs")) return field == "status.successful";
  if (info.is("", "replicationcontrollers")) return field == "status.replicas";
  return false;
}

std::optional<std::string> field_value(const ResourceInfo& info, const json& obj,
                                       const std::string& field) {
  if (!field_supported(info, field)) return std::nullopt;
  std::string f = field;
  if (info.is("events.k8s.io", "events") && !starts_with(f, "metadata.")) {
    f = *events_v1_field(field);
  }
  if (f == "source") return string_at(obj, "source.component");
  if (f == "spec.hostNetwork" || f == "spec.unschedulable") {
    const json* v = find_path(obj, f);
    return (v != nullptr && v->is_boolean() && v->get<bool>()) ? "true" : "false";
  }
  if (f == "status.successful") return string_at(obj, f, "0");
  return string_at(obj, f);
}

FieldSelector FieldSelector::parse(const std::string& text, const ResourceInfo& info) {
  FieldSelector sel;
  sel.info_ = &info;
  if (trim(text).empty()) return sel;
  // Values may escape ',', '=' and '!' with a backslash.
  std::vector<std::string> terms;
  std::string cur;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      cur += text[i];
      cur += text[++i];
    } else if (text[i] == ',') {
      terms.push_back(cur);
      cur.clear();
    } else {
      cur += text[i];
    }
  }
  terms.push_back(cur);
  const auto unescape = [](const std::string& s) {
    std::string o;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\\' && i + 1 < s.size()) ++i;
      o += s[i];
    }
    return o;
  };
  for (const auto& t : terms) {
    Req r;
    size_t op = std::string::npos;
    size_t skip = 0;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] == '\\') {
        ++i;
        continue;
      }
      if (t[i] == '!' && i + 1 < t.size() && t[i + 1] == '=') {
        op = i;
        skip = 2;
        r.negate = true;
        break;
      }
      if (t[i] == '=') {
        op = i;
        skip = (i + 1 < t.size() && t[i + 1] == '=') ? 2 : 1;
        r.negate = false;
        break;
      }
    }
    if (op == std::string::npos) {
      throw std::invalid_argument("invalid selector: '" + text + "'; can't understand '" + t + "'");
    }
    r.field = trim(t.substr(0, op));
    r.value = unescape(t.substr(op + skip));
    if (!field_supported(info, r.field)) {
      throw std::invalid_argument("field label not supported: " + r.field);
    }
    sel.reqs_.push_back(std::move(r));
  }
  return sel;
}

bool FieldSelector::matches(const json& obj) const {
  for (const auto& r : reqs_) {
    const auto v = field_value(*info_, obj, r.field);
    const bool eq = v.has_value() && *v == r.value;
    if (eq == r.negate) return false;
  }
  return true;
}

std::optional<std::string> FieldSelector::equals(const std::string& field) const {
  for (const auto& r : reqs_) {
    if (r.field == field && !r.negate) return r.value;
  }
  return std::nullopt;
}

}  // namespace kube_emulator

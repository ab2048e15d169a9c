#include "model/yaml_util.h"

#include <cmath>
#include <limits>

#include "model/csv.h"
#include "model/input_error.h"
#include "model/spelling.h"

namespace tessera {

namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

}  // namespace

std::vector<YAML::Node> load_yaml_documents(std::string_view text) {
  std::vector<YAML::Node> docs;
  auto is_marker = [](std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.substr(0, 3) != "---" && line.substr(0, 3) != "...") return false;
    return line.size() == 3 || line[3] == ' ' || line[3] == '\t';
  };
  size_t start = 0;       // of the current document's text
  size_t start_line = 0;  // its first line, 0-based
  size_t line_no = 0;
  auto flush = [&](size_t end) {
    if (end <= start) return;
    // Blank lines in front keep the marks' line numbers those of the whole stream.
    std::string piece(start_line, '\n');
    piece.append(text.substr(start, end - start));
    YAML::Node n = YAML::Load(piece);
    if (!n.IsNull()) docs.push_back(std::move(n));
  };
  for (size_t pos = 0; pos <= text.size();) {
    const size_t nl = text.find('\n', pos);
    const size_t end = nl == std::string_view::npos ? text.size() : nl;
    const std::string_view line = text.substr(pos, end - pos);
    if (is_marker(line)) {
      flush(pos);
      // "---" begins the next document (and may carry its content); "..." only ends one.
      start = line[0] == '-' ? pos : end;
      start_line = line_no;
    }
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
    ++line_no;
  }
  flush(text.size());
  return docs;
}

size_t line_of(const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  return m.is_null() ? 0 : static_cast<size_t>(m.line) + 1;
}

[[noreturn]] void yaml_fail(const std::string& origin, const YAML::Node& n,
                            const std::string& field, const std::string& msg) {
  throw InputError(input_error_message(origin, line_of(n), field, msg));
}

std::string scalar_of(const std::string& origin, const YAML::Node& n, const std::string& field,
                      const char* what) {
  if (!n.IsScalar()) yaml_fail(origin, n, field, std::string("expected ") + what);
  return n.Scalar();
}

int64_t yaml_int(const std::string& origin, const YAML::Node& n, const std::string& field,
                 int64_t min, int64_t max) {
  const std::string s = scalar_of(origin, n, field, "an integer");
  int64_t v = 0;
  if (!csv::parse_int(s, v)) yaml_fail(origin, n, field, "expected an integer, got '" + s + "'");
  if (v < min || v > max) {
    const std::string range = max == kInt64Max
                                  ? ">= " + std::to_string(min)
                                  : "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
    yaml_fail(origin, n, field, "expected an integer " + range + ", got " + s);
  }
  return v;
}

double yaml_number(const std::string& origin, const YAML::Node& n, const std::string& field,
                   bool strictly_positive) {
  const std::string s = scalar_of(origin, n, field, "a number");
  double v = 0;
  if (!csv::parse_double(s, v)) yaml_fail(origin, n, field, "expected a number, got '" + s + "'");
  if (v < 0 || (strictly_positive && v == 0)) {
    yaml_fail(origin, n, field,
              std::string("expected a ") + (strictly_positive ? "positive" : "non-negative") +
                  " number, got " + s);
  }
  return v;
}

std::string yaml_string(const std::string& origin, const YAML::Node& n, const std::string& field) {
  std::string s = scalar_of(origin, n, field, "a string");
  if (s.empty()) yaml_fail(origin, n, field, "must not be empty");
  return s;
}

std::string yaml_excerpt(std::string_view text, const YAML::Mark& mark) {
  if (mark.is_null() || mark.line < 0 || mark.column < 0) return "";
  size_t start = 0;
  for (int line = 0; line < mark.line; ++line) {
    start = text.find('\n', start);
    if (start == std::string_view::npos) return "";
    ++start;
  }
  size_t end = text.find('\n', start);
  if (end == std::string_view::npos) end = text.size();
  std::string_view row = text.substr(start, end - start);
  if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
  auto column = static_cast<size_t>(mark.column);
  // A long line is shown around the column.
  constexpr size_t kWidth = 120;
  size_t from = 0;
  if (column > kWidth - 20) from = column - (kWidth - 20);
  std::string shown(row.substr(std::min(from, row.size()), kWidth));
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20 && c != '\t') c = '?';
  }
  std::string caret(column - from, ' ');
  // Tabs keep their width above the caret.
  for (size_t i = 0; i < caret.size() && i < shown.size(); ++i) {
    if (shown[i] == '\t') caret[i] = '\t';
  }
  const std::string number = std::to_string(mark.line + 1);
  return "\n  " + number + " | " + shown + "\n  " + std::string(number.size(), ' ') + " | " +
         caret + "^";
}

std::string yaml_syntax_message(std::string_view text, const YAML::Exception& e) {
  return "YAML: " + e.msg + yaml_excerpt(text, e.mark);
}

// Unknown keys are errors: a misspelt key would otherwise silently take its default.
void check_keys(const std::string& origin, const YAML::Node& map, const std::string& where,
                std::initializer_list<std::string_view> known) {
  if (!map.IsMap()) yaml_fail(origin, map, where, "expected a mapping");
  for (const auto& kv : map) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
    bool ok = false;
    for (std::string_view k : known) ok = ok || k == key;
    if (!ok) {
      const std::string field = where.empty() ? key : where + "." + key;
      yaml_fail(origin, kv.first, field,
                "unknown key" + did_you_mean(key, known) + " (known: " + join_names(known) + ")");
    }
  }
}

namespace {
// The largest number of cores or MiB a quantity may name: 10^15, far beyond any machine and
// safely inside int64 after scaling to milli-units.
constexpr double kMaxQuantityUnits = 1e15;
}  // namespace

bool parse_cpu_quantity(std::string_view s, int64_t& milli) {
  if (!s.empty() && s.back() == 'm') return csv::parse_int(s.substr(0, s.size() - 1), milli);
  double cores = 0;
  if (!csv::parse_double(s, cores)) return false;
  // Beyond any machine (and beyond int64 once in milli-cores): not a quantity.
  if (!(std::abs(cores) <= kMaxQuantityUnits)) return false;
  milli = std::llround(cores * 1000.0);
  return true;
}

bool parse_memory_quantity(std::string_view s, int64_t& mib) {
  struct Suffix {
    std::string_view text;
    double bytes;
  };
  static constexpr Suffix kSuffixes[] = {
      {"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0}, {"Ti", 1099511627776.0},
      {"k", 1e3},     {"M", 1e6},        {"G", 1e9},           {"T", 1e12},
  };
  double factor = 1.0;
  for (const Suffix& suf : kSuffixes) {
    if (s.size() > suf.text.size() && s.substr(s.size() - suf.text.size()) == suf.text) {
      factor = suf.bytes;
      s.remove_suffix(suf.text.size());
      break;
    }
  }
  double v = 0;
  if (!csv::parse_double(s, v) || v < 0) return false;
  const double in_mib = std::floor(v * factor / 1048576.0);
  if (!(in_mib <= kMaxQuantityUnits)) return false;  // beyond any machine, and beyond int64
  mib = static_cast<int64_t>(in_mib);
  return true;
}

bool parse_duration(std::string_view s, double& seconds) {
  double factor = 1;
  if (!s.empty()) {
    switch (s.back()) {
      case 's':
        factor = 1;
        break;
      case 'm':
        factor = 60;
        break;
      case 'h':
        factor = 3600;
        break;
      case 'd':
        factor = 86400;
        break;
      default:
        factor = 0;  // no suffix: plain seconds
    }
    if (factor != 0) s.remove_suffix(1);
  }
  double v = 0;
  if (!csv::parse_double(s, v) || v < 0) return false;
  const double out = v * (factor == 0 ? 1 : factor);
  if (!std::isfinite(out) || out > kMaxDurationSeconds) return false;
  seconds = out;
  return true;
}

}  // namespace tessera

#include "model/csv.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "model/input_error.h"

namespace tessera::csv {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(input_error_message(path, 0, "", "cannot open"));
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) throw InputError(input_error_message(path, 0, "", "cannot read"));
  return std::move(buf).str();
}

bool LineReader::next(std::string_view& line) {
  if (pos_ >= text_.size()) return false;
  size_t end = text_.find('\n', pos_);
  if (end == std::string_view::npos) end = text_.size();
  line = text_.substr(pos_, end - pos_);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  pos_ = end + 1;
  ++line_;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

bool is_blank(std::string_view s) {
  return trim(s).empty();
}

void split(std::string_view line, std::vector<std::string_view>& out) {
  out.clear();
  size_t start = 0;
  bool quoted = false;
  for (size_t i = 0; i <= line.size(); ++i) {
    if (i < line.size()) {
      const char c = line[i];
      if (c == '"') quoted = !quoted;
      if (c != ',' || quoted) continue;
    }
    std::string_view f = trim(line.substr(start, i - start));
    if (f.size() >= 2 && f.front() == '"' && f.back() == '"') f = f.substr(1, f.size() - 2);
    out.push_back(f);
    start = i + 1;
  }
}

bool parse_int(std::string_view s, int64_t& out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && p == end;
}

bool parse_double(std::string_view s, double& out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && p == end && std::isfinite(out);
}

namespace {

bool contains(std::initializer_list<std::string_view> names, std::string_view n) {
  for (std::string_view x : names) {
    if (x == n) return true;
  }
  return false;
}

}  // namespace

Header::Header(std::string_view line, std::initializer_list<std::string_view> required,
               std::initializer_list<std::string_view> optional, const std::string& origin,
               size_t line_number, std::string_view format) {
  std::vector<std::string_view> fields;
  split(line, fields);
  auto expected = [&] {
    std::string msg =
        "not a " + std::string(format) + " header: expected columns " + join_names(required, ",");
    if (optional.size() > 0) msg += " (optional: " + join_names(optional, ",") + ")";
    return msg + ", got '" + std::string(line) + "'";
  };
  for (std::string_view f : fields) {
    if (!contains(required, f) && !contains(optional, f)) {
      throw InputError(input_error_message(origin, line_number, std::string(f),
                                           "unknown column; " + expected()));
    }
    for (const std::string& seen : names_) {
      if (seen == f) {
        throw InputError(
            input_error_message(origin, line_number, std::string(f), "column appears twice"));
      }
    }
    names_.emplace_back(f);
  }
  for (std::string_view r : required) {
    if (index(r) < 0) {
      throw InputError(input_error_message(origin, line_number, std::string(r),
                                           "missing column; " + expected()));
    }
  }
}

int Header::index(std::string_view name) const {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return static_cast<int>(i);
  }
  return -1;
}

void Row::reset(std::string_view text, size_t line_number) {
  line_ = line_number;
  split(text, fields_);
  if (fields_.size() != header_.size()) {
    throw InputError(input_error_message(origin_, line_, "",
                                         "expected " + std::to_string(header_.size()) +
                                             " columns, got " + std::to_string(fields_.size())));
  }
}

void Row::fail(int col, const std::string& message) const {
  const std::string field = col >= 0 ? header_.name(static_cast<size_t>(col)) : std::string();
  throw InputError(input_error_message(origin_, line_, field, message));
}

int64_t Row::integer(int col, int64_t min, int64_t max) const {
  int64_t v = 0;
  const std::string_view s = str(col);
  if (!parse_int(s, v)) fail(col, "expected an integer, got '" + std::string(s) + "'");
  if (v < min || v > max) {
    const std::string range = max == std::numeric_limits<int64_t>::max()
                                  ? ">= " + std::to_string(min)
                                  : "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
    fail(col, "expected an integer " + range + ", got " + std::string(s));
  }
  return v;
}

double Row::number(int col, double min, double max) const {
  double v = 0;
  const std::string_view s = str(col);
  if (!parse_double(s, v)) fail(col, "expected a number, got '" + std::string(s) + "'");
  if (v < min || v > max) {
    std::ostringstream range;
    range << "expected a number ";
    if (max == std::numeric_limits<double>::max()) {
      range << ">= " << min;
    } else {
      range << "in [" << min << ", " << max << "]";
    }
    range << ", got " << s;
    fail(col, range.str());
  }
  return v;
}

}  // namespace tessera::csv

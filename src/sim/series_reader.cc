#include "sim/series_reader.h"

#include <limits>

#include "model/csv.h"
#include "model/input_error.h"

namespace tessera {

std::vector<double> parse_series_column(const std::string& text, const std::string& origin,
                                        const std::string& column) {
  csv::LineReader lines(text);
  std::string_view line;
  if (!lines.next(line)) throw InputError(origin + ": empty file (no header)");
  std::vector<std::string_view> names;
  csv::split(line, names);
  int col = -1;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == column) col = static_cast<int>(i);
  }
  if (col < 0) {
    std::string known;
    for (auto n : names) known += (known.empty() ? "" : ", ") + std::string(n);
    throw InputError(input_error_message(origin, 1, column, "no such column (has " + known + ")"));
  }
  std::vector<double> out;
  std::vector<std::string_view> f;
  while (lines.next(line)) {
    if (csv::is_blank(line)) continue;
    csv::split(line, f);
    double v = 0;
    if (static_cast<size_t>(col) >= f.size() ||
        !csv::parse_double(f[static_cast<size_t>(col)], v)) {
      throw InputError(input_error_message(
          origin, lines.line_number(), column,
          "expected a number, got '" +
              (static_cast<size_t>(col) < f.size() ? std::string(f[static_cast<size_t>(col)])
                                                   : std::string()) +
              "'"));
    }
    out.push_back(v);
  }
  return out;
}

std::vector<double> read_series_column(const std::string& path, const std::string& column) {
  return parse_series_column(csv::read_file(path), path, column);
}

}  // namespace tessera

// Small, fast helpers for the line- and comma-separated inputs the readers parse (traces,
// cluster lists): whole-file reading, line iteration, CSV splitting with a checked header,
// and strict number parsing (std::from_chars, no locale, no trailing garbage).
// Every failure is an InputError naming the file, line and field.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::csv {

// Reads a whole file; throws InputError "<path>: cannot open" when it cannot be read.
std::string read_file(const std::string& path);

// Iterates the lines of a text. Line numbers are 1-based; "\r\n" endings lose their '\r'.
class LineReader {
 public:
  explicit LineReader(std::string_view text) : text_(text) {}
  // Stores the next line in `line` and returns true, or returns false at the end.
  bool next(std::string_view& line);
  size_t line_number() const { return line_; }

 private:
  std::string_view text_;
  size_t pos_ = 0;
  size_t line_ = 0;
};

std::string_view trim(std::string_view s);
bool is_blank(std::string_view s);

// Splits one CSV line at commas into `out` (cleared first). Fields are trimmed; a field in
// double quotes may contain commas (the quotes are removed; "" inside is not unescaped, the
// traces never use it).
void split(std::string_view line, std::vector<std::string_view>& out);

// Strict parsers: the whole of `s` must be the number.
bool parse_int(std::string_view s, int64_t& out);
bool parse_double(std::string_view s, double& out);  // finite values only

// A header line checked against the columns a format knows. Column order is free; every
// required column must be present, and a column that is neither required nor optional is an
// error (it catches a file of another format, or a typo).
class Header {
 public:
  Header(std::string_view line, std::initializer_list<std::string_view> required,
         std::initializer_list<std::string_view> optional, const std::string& origin,
         size_t line_number, std::string_view format);
  // Index of a column, or -1 when the file has no such (optional) column.
  int index(std::string_view name) const;
  size_t size() const { return names_.size(); }
  const std::string& name(size_t i) const { return names_[i]; }

 private:
  std::vector<std::string> names_;
};

// One data row: fields plus what an error message needs.
class Row {
 public:
  Row(const std::string& origin, const Header& header) : origin_(origin), header_(header) {}
  // Splits `text` (line `line_number`); throws when the column count differs from the header.
  void reset(std::string_view text, size_t line_number);
  size_t line() const { return line_; }
  const std::string& origin() const { return origin_; }

  bool has(int col) const { return col >= 0; }
  std::string_view str(int col) const { return fields_[static_cast<size_t>(col)]; }
  bool empty(int col) const { return col < 0 || str(col).empty(); }
  // Integers and numbers in [min, max]; the message names the range.
  int64_t integer(int col, int64_t min, int64_t max) const;
  double number(int col, double min, double max) const;

  [[noreturn]] void fail(int col, const std::string& message) const;

 private:
  const std::string& origin_;
  const Header& header_;
  std::vector<std::string_view> fields_;
  size_t line_ = 0;
};

}  // namespace tessera::csv

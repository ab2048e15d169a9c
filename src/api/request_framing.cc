#include "api/request_framing.h"

#include <algorithm>
#include <charconv>
#include <optional>

namespace tessera {
namespace {

bool is_tchar(char c) {
  static constexpr std::string_view kExtra = "!#$%&'*+-.^_`|~";
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         kExtra.find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!is_tchar(c)) return false;
  }
  return true;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Framing refuse(int status, std::string reason) {
  Framing f;
  f.kind = Framing::kRefused;
  f.status = status;
  f.reason = std::move(reason);
  return f;
}

// "METHOD SP request-target SP HTTP/1.x".
std::optional<Framing> check_request_line(std::string_view line) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos ||
      !is_token(line.substr(0, sp1)) || sp2 == sp1 + 1) {
    return refuse(400, "malformed request line");
  }
  // CONNECT (a tunnel), TRACE and methods nobody serves: refused before a handler, closing.
  static constexpr std::string_view kServed[] = {"GET",    "HEAD",  "POST",   "PUT",
                                                 "DELETE", "PATCH", "OPTIONS"};
  if (std::find(std::begin(kServed), std::end(kServed), line.substr(0, sp1)) == std::end(kServed)) {
    return refuse(501, "method not served");
  }
  const std::string_view version = line.substr(sp2 + 1);
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    return refuse(505, "only HTTP/1.1 and HTTP/1.0 are served");
  }
  return std::nullopt;
}

}  // namespace

size_t leading_empty_lines(std::string_view buffered) {
  size_t n = 0;
  while (n < buffered.size() && (buffered[n] == '\r' || buffered[n] == '\n')) ++n;
  return n;
}

namespace {

// What the audit of a refused request needs from what was read of it.
struct Seen {
  std::string_view method, target, authorization;
};

Framing frame(std::string_view buffered, const FramingLimits& limits, Seen& seen) {
  std::optional<size_t> content_length;
  size_t pos = 0;
  bool first = true;
  for (;;) {
    const size_t nl = buffered.find('\n', pos);
    if (nl == std::string_view::npos) {
      if (buffered.size() > limits.max_header_bytes) {
        return refuse(431, "request header section larger than " +
                               std::to_string(limits.max_header_bytes) + " bytes");
      }
      return Framing{};
    }
    std::string_view line = buffered.substr(pos, nl - pos);
    // The HTTP parser behind the framer answers a bare LF with 400 and would keep the
    // connection open: refused here, where every refusal closes it.
    if (line.empty() || line.back() != '\r') return refuse(400, "lines must end in CR LF");
    line.remove_suffix(1);
    pos = nl + 1;
    if (pos > limits.max_header_bytes) {
      return refuse(431, "request header section larger than " +
                             std::to_string(limits.max_header_bytes) + " bytes");
    }
    if (first) {
      if (auto bad = check_request_line(line)) return *bad;
      const size_t sp1 = line.find(' ');
      const size_t sp2 = line.find(' ', sp1 + 1);
      seen.method = line.substr(0, sp1);
      seen.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
      first = false;
      continue;
    }
    if (line.empty()) break;  // the end of the header section
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || !is_token(line.substr(0, colon))) {
      return refuse(400, "malformed header field");
    }
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = trim(line.substr(colon + 1));
    if (iequals(name, "Authorization")) seen.authorization = value;
    if (iequals(name, "Transfer-Encoding")) {
      return refuse(411,
                    "request bodies must carry Content-Length (Transfer-Encoding is not "
                    "accepted)");
    }
    if (iequals(name, "Content-Length")) {
      size_t n = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (value.empty() || end != value.data() + value.size() ||
          ec == std::errc::invalid_argument) {
        return refuse(400, "Content-Length is not a number");
      }
      if (ec == std::errc::result_out_of_range || n > limits.max_body_bytes) {
        return refuse(
            413, "request body larger than " + std::to_string(limits.max_body_bytes) + " bytes");
      }
      if (content_length && *content_length != n) {
        return refuse(400, "conflicting Content-Length fields");
      }
      content_length = n;
    }
  }
  Framing f;
  f.headers_done = true;
  f.length = pos + content_length.value_or(0);
  if (buffered.size() >= f.length) f.kind = Framing::kComplete;
  return f;
}

}  // namespace

Framing frame_request(std::string_view buffered, const FramingLimits& limits) {
  Seen seen;
  Framing f = frame(buffered, limits, seen);
  if (f.kind == Framing::kRefused) {
    f.method = seen.method;
    f.target = seen.target;
    f.authorization = seen.authorization;
  }
  return f;
}

void drop_brotli(std::string& request) {
  static constexpr std::string_view kField = "accept-encoding:";
  // Header lines end in CRLF (the framer refuses a bare LF, but this copes with one); the
  // first empty line ends them. The request line is skipped.
  size_t line = request.find('\n');
  while (line != std::string::npos && line + 1 < request.size()) {
    const size_t start = line + 1;
    size_t end = request.find('\n', start);
    if (end == std::string::npos) return;
    if (end > start && request[end - 1] == '\r') --end;  // the value ends before CR LF
    if (end == start) return;                            // the empty line: no such field
    if (end - start >= kField.size() &&
        iequals(std::string_view(request).substr(start, kField.size()), kField)) {
      // Every coding but br (with or without a weight), in order.
      const size_t value = start + kField.size();
      std::string kept;
      for (size_t from = value; from < end;) {
        size_t comma = request.find(',', from);
        if (comma == std::string::npos || comma > end) comma = end;
        std::string_view item(request.data() + from, comma - from);
        item.remove_prefix(std::min(item.size(), item.find_first_not_of(" \t")));
        if (!item.empty() && !iequals(item.substr(0, item.find_first_of(" \t;")), "br")) {
          kept += kept.empty() ? " " : ", ";
          kept += item;
        }
        from = comma + 1;
      }
      request.replace(value, end - value, kept);
      return;
    }
    line = request.find('\n', start);
  }
}

}  // namespace tessera

// Where one HTTP/1.1 request ends in the bytes read so far, and whether to refuse it before a
// handler sees it. The server reads each request whole, with a size limit and a deadline,
// before a worker thread touches it (GuardedHttpServer), so it must know where a request ends
// without trusting the client: the header section ends at the first empty line and may not
// exceed a limit; the body is exactly Content-Length bytes (none without it), at most a
// limit. A chunked body (Transfer-Encoding) is refused with 411: its length is unknown until
// its end, which is how an unbounded body got past the size limit.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tessera {

struct FramingLimits {
  size_t max_header_bytes = 64 * 1024;  // request line and header fields
  size_t max_body_bytes = 1 << 20;
};

struct Framing {
  enum Kind {
    kIncomplete,  // more bytes are needed
    kComplete,    // the first `length` bytes are one request
    kRefused,     // answer `status` with `reason` and close the connection
  };
  Kind kind = kIncomplete;
  // kComplete: the first `length` bytes are the request. kIncomplete with headers_done: the
  // request will be `length` bytes (its body is still arriving).
  size_t length = 0;
  bool headers_done = false;
  int status = 0;      // kRefused: 400, 411, 413, 431 or 505
  std::string reason;  // kRefused
  // kRefused, as far as they were read (else empty): for the audit of the refused request.
  std::string method, target, authorization;
};

// `buffered` starts at the first byte of a request (empty lines before it already skipped).
Framing frame_request(std::string_view buffered, const FramingLimits& limits);

// Empty lines a client may send before a request line (RFC 9112, 2.2): how many bytes of
// `buffered` they take.
size_t leading_empty_lines(std::string_view buffered);

// Removes "br" from the Accept-Encoding field of `request` (a whole request as framed), so
// that responses are gzipped instead: httplib 0.11 compresses brotli at its slowest quality
// (0.7 s for the dashboard's 200 kB chart library, 150 ms for a page of 50 jobs, against 36 ms
// and 3 ms gzipped), and browsers offer br first.
void drop_brotli(std::string& request);

}  // namespace tessera

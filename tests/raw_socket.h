// A raw TCP client for tests that must send what no HTTP library would: slow headers, idle
// connections, chunked or oversized requests.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

namespace tessera::testing {

class RawSocket {
 public:
  // Connects to `addr` ("127.0.0.1:PORT") from source address `from` (any 127/8 address
  // works on Linux, which lets a test play several clients).
  explicit RawSocket(const std::string& addr, const std::string& from = "127.0.0.1") {
    const size_t colon = addr.rfind(':');
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(std::stoi(addr.substr(colon + 1))));
    inet_pton(AF_INET, addr.substr(0, colon).c_str(), &to.sin_addr);
    sockaddr_in src{};
    src.sin_family = AF_INET;
    inet_pton(AF_INET, from.c_str(), &src.sin_addr);
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&src), sizeof(src)) != 0 ||
        ::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawSocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;
  RawSocket(RawSocket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }

  bool ok() const { return fd_ >= 0; }
  // Sends all of `data`; false if the connection refused it (closed, reset).
  bool send(const std::string& data) {
    size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = ::send(fd_, data.data() + done, data.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  // What arrives within `timeout`, until the peer closes or `until` appears in it.
  std::string receive(std::chrono::milliseconds timeout, const std::string& until = "") {
    std::string out;
    const auto end = std::chrono::steady_clock::now() + timeout;
    char buf[65536];
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
      if (!until.empty() && out.find(until) != std::string::npos) break;
    }
    return out;
  }
  // Whether the peer has closed the connection (reads EOF or an error within `timeout`).
  bool closed_by_peer(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
    char c = 0;
    return ::recv(fd_, &c, 1, MSG_PEEK) <= 0;
  }

 private:
  int fd_ = -1;
};

// The status code of the first response in `raw` ("HTTP/1.1 408 ..." -> 408), or 0.
inline int status_of(const std::string& raw) {
  if (raw.size() < 12 || raw.compare(0, 5, "HTTP/") != 0) return 0;
  return std::atoi(raw.c_str() + 9);
}

}  // namespace tessera::testing

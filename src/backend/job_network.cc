#include "backend/job_network.h"

#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>

namespace tessera {

namespace {

std::string error(const std::string& step) {
  return step + ": " + std::strerror(errno);
}

// Runs `body` on a thread of its own and returns what it said went wrong ("" if nothing). A
// thread's network namespace is its own: entering or making one there leaves the server's
// other threads where they are, and the namespace outlives the thread through the
// descriptors opened in it.
std::string on_own_thread(const std::function<std::string()>& body) {
  std::string why;
  std::thread t([&] { why = body(); });
  t.join();
  return why;
}

std::string loopback_up() {
  const UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return error("socket");
  struct ifreq ifr {};
  std::memcpy(ifr.ifr_name, "lo", 3);
  if (::ioctl(s.get(), SIOCGIFFLAGS, &ifr) != 0) return error("read loopback's flags");
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
  if (::ioctl(s.get(), SIOCSIFFLAGS, &ifr) != 0) return error("bring loopback up");
  return "";
}

std::string listen_on(int port, UniqueFd& out) {
  if (port <= 0) return "";
  UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return error("socket");
  const int one = 1;
  ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    return error("bind 127.0.0.1:" + std::to_string(port));
  }
  if (::listen(s.get(), 64) != 0) return error("listen");
  out = std::move(s);
  return "";
}

ino_t netns_inode(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

}  // namespace

JobNetwork JobNetwork::create(int listen_port) {
  JobNetwork n;
  const std::string why = on_own_thread([&]() -> std::string {
    if (::unshare(CLONE_NEWNET) != 0) return error("unshare(CLONE_NEWNET)");
    n.ns_.reset(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    if (!n.ns_.valid()) return error("open /proc/thread-self/ns/net");
    if (std::string e = loopback_up(); !e.empty()) return e;
    return listen_on(listen_port, n.listener_);
  });
  if (!why.empty()) throw std::runtime_error("a network namespace for the job: " + why);
  return n;
}

std::optional<JobNetwork> JobNetwork::of_process(int64_t pid, int listen_port) {
  const std::string path = "/proc/" + std::to_string(pid) + "/ns/net";
  const ino_t theirs = netns_inode(path);
  if (theirs == 0 || theirs == netns_inode("/proc/self/ns/net")) return std::nullopt;
  JobNetwork n;
  n.ns_.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!n.ns_.valid()) return std::nullopt;
  const std::string why = on_own_thread([&]() -> std::string {
    if (::setns(n.ns_.get(), CLONE_NEWNET) != 0) return error("setns");
    return listen_on(listen_port, n.listener_);
  });
  if (!why.empty()) {
    throw std::runtime_error("the network namespace of process " + std::to_string(pid) + ": " +
                             why);
  }
  return n;
}

}  // namespace tessera

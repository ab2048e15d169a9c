#include "api/extra_listeners.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace tessera {

ExtraListeners::ExtraListeners(std::function<void(int)> serve)
    : serve_(std::move(serve)), wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  thread_ = std::thread([this] { loop(); });
}

ExtraListeners::~ExtraListeners() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  const uint64_t one = 1;
  (void)::write(wake_.get(), &one, sizeof one);
  thread_.join();
}

void ExtraListeners::add(int fd) {
  UniqueFd copy(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
  if (!copy.valid()) return;
  ::fcntl(copy.get(), F_SETFL, ::fcntl(copy.get(), F_GETFL, 0) | O_NONBLOCK);
  {
    std::lock_guard lock(mu_);
    fds_[fd] = std::move(copy);
  }
  const uint64_t one = 1;
  (void)::write(wake_.get(), &one, sizeof one);
}

void ExtraListeners::remove(int fd) {
  UniqueFd gone;
  {
    std::lock_guard lock(mu_);
    const auto it = fds_.find(fd);
    if (it == fds_.end()) return;
    gone = std::move(it->second);
    fds_.erase(it);
  }
  const uint64_t one = 1;
  (void)::write(wake_.get(), &one, sizeof one);
  // `gone` closes here: a poll in flight on it returns (POLLNVAL) and the loop re-reads the set.
}

size_t ExtraListeners::size() const {
  std::lock_guard lock(mu_);
  return fds_.size();
}

void ExtraListeners::loop() {
  for (;;) {
    std::vector<pollfd> polled{{wake_.get(), POLLIN, 0}};
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      for (const auto& [key, fd] : fds_) polled.push_back({fd.get(), POLLIN, 0});
    }
    if (::poll(polled.data(), polled.size(), 1000) < 0 && errno != EINTR) continue;
    if ((polled[0].revents & POLLIN) != 0) {
      uint64_t n = 0;
      (void)::read(wake_.get(), &n, sizeof n);
    }
    std::lock_guard lock(mu_);
    for (size_t i = 1; i < polled.size(); ++i) {
      if ((polled[i].revents & POLLIN) == 0) continue;
      // Still in the set (not removed, its number not reused by another's copy meanwhile).
      bool live = false;
      for (const auto& [key, fd] : fds_) live = live || fd.get() == polled[i].fd;
      if (!live) continue;
      for (;;) {
        const int c = ::accept4(polled[i].fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) break;
        serve_(c);
      }
    }
  }
}

}  // namespace tessera

#include "backend/log_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tessera {

struct LogFile::Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

namespace {

std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "/") + p;
  return out;
}

}  // namespace

LogFile LogFile::open_under(const std::string& root, const std::vector<std::string>& relative) {
  const std::string name = joined(relative);
  if (relative.empty()) throw std::invalid_argument("LogFile: empty path under " + root);
  for (const std::string& p : relative) {
    if (p.empty() || p == "." || p == ".." || p.find('/') != std::string::npos) {
      throw std::invalid_argument("LogFile: bad path component in " + name);
    }
  }
  Fd dir(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.fd < 0) {
    throw std::runtime_error("cannot open log root " + root + ": " + std::strerror(errno));
  }
  auto refuse = [&](const std::string& why) {
    return LogFileError("the log " + name + " " + why + "; the server will not read it");
  };
  // Directories: O_NOFOLLOW | O_DIRECTORY fails with ELOOP or ENOTDIR on a link or a file.
  for (size_t i = 0; i + 1 < relative.size(); ++i) {
    const int next =
        ::openat(dir.fd, relative[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) {
      if (errno == ENOENT) return LogFile{};
      if (errno == ELOOP || errno == ENOTDIR) {
        throw refuse("lies under " + relative[i] + ", which is not a directory");
      }
      throw std::runtime_error("cannot open " + relative[i] + " on the way to log " + name + ": " +
                               std::strerror(errno));
    }
    ::close(dir.fd);
    dir.fd = next;
  }
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  auto file = std::make_shared<Fd>(
      ::openat(dir.fd, relative.back().c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (file->fd < 0) {
    if (errno == ENOENT) return LogFile{};
    if (errno == ELOOP) throw refuse("is a symbolic link");
    throw std::runtime_error("cannot open log " + name + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(file->fd, &st) != 0) {
    throw std::runtime_error("cannot stat log " + name + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) throw refuse("is not a regular file");
  // A second name means the file was linked in from elsewhere (another job's log, a secret);
  // a log the member's shell created has exactly one.
  if (st.st_nlink != 1) throw refuse("has " + std::to_string(st.st_nlink) + " names");
  LogFile out;
  out.fd_ = std::move(file);
  out.size_ = static_cast<int64_t>(st.st_size);
  return out;
}

size_t LogFile::read_at(int64_t offset, char* buf, size_t n) const {
  if (!fd_ || offset >= size_) return 0;
  n = std::min(n, static_cast<size_t>(size_ - offset));
  for (;;) {
    const ssize_t got = ::pread(fd_->fd, buf, n, static_cast<off_t>(offset));
    if (got >= 0) return static_cast<size_t>(got);
    if (errno != EINTR) throw std::runtime_error(std::string("log read: ") + std::strerror(errno));
  }
}

}  // namespace tessera

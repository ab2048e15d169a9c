// A member's log, opened for reading without trusting what the member may have done to it.
//
// A job's processes run in the directory that holds their logs, as the server's user (or, in
// a sandbox, with write access to their own directory), so by the time a tenant asks for a
// log the path may name a FIFO (an open that never returns, a read that blocks a worker
// forever), a symbolic link to a file the tenant must not read, or a hard link to one. The
// file is therefore opened component by component from a trusted root without following a
// link, without blocking, and kept only if it is a regular file with one link; it is read in
// bounded pieces at an offset, so a log of any size costs a fixed amount of memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessera {

// The log exists but is not something the server will read (a link, a FIFO, a directory).
class LogFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class LogFile {
 public:
  // An empty log (the member has written nothing yet, or the backend keeps no logs).
  LogFile() = default;

  // Opens `root`/`relative` (relative: components separated by '/', none of them "..").
  // `root` is trusted (the operator chose it); no component below it may be a symbolic link.
  // A missing file gives an empty log; anything but a regular file with one link throws
  // LogFileError naming `relative`; other failures throw std::runtime_error.
  static LogFile open_under(const std::string& root, const std::vector<std::string>& relative);

  // Size when opened: a log still being written is served up to this point, so that a
  // response's Content-Length holds.
  int64_t size() const { return size_; }

  // Reads up to `n` bytes at `offset` (< size()); returns how many were read (0 at the end).
  size_t read_at(int64_t offset, char* buf, size_t n) const;

 private:
  struct Fd;
  std::shared_ptr<const Fd> fd_;  // shared: a response streams from it after the handler ends
  int64_t size_ = 0;
};

}  // namespace tessera

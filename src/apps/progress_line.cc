#include "apps/progress_line.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace tessera {

namespace {

std::string clock_text(double seconds) {
  const auto s = static_cast<int64_t>(seconds);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s % 3600 / 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

}  // namespace

bool ProgressLine::stderr_is_terminal() {
  return isatty(STDERR_FILENO) == 1;
}

ProgressLine::ProgressLine(std::string label, bool enabled)
    : label_(std::move(label)),
      enabled_(enabled),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

ProgressLine::~ProgressLine() {
  if (drawn_) std::fputs("\r\033[K", stderr);  // leave the terminal as it was
}

ProgressFn ProgressLine::callback() {
  if (!enabled_) return nullptr;
  return [this](const Progress& p) { update(p); };
}

void ProgressLine::update(const Progress& p) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_ < std::chrono::milliseconds(250)) return;
  last_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  std::string line = label_ + ": ";
  if (p.total > 0) {
    line += fmt::format("{:.0f}% ({:.0f}/{:.0f})", 100 * p.done / p.total, p.done, p.total);
  } else {
    line += fmt::format("{:.0f}", p.done);
  }
  if (!p.detail.empty()) line += " " + p.detail;
  if (elapsed > 0.5 && p.done > 0) {
    const double rate = p.done / elapsed;
    line += fmt::format(" | {:.0f}/s", rate);
    if (p.total > p.done) line += " | ETA " + clock_text((p.total - p.done) / rate);
  }
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace tessera

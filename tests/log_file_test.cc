// LogFile: what stands at a log's path is read only if it is the log the member wrote.
#include "backend/log_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "service_test_util.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::string read_all(const LogFile& f, size_t piece) {
  std::string out;
  std::string buf(piece, '\0');
  for (int64_t off = 0; off < f.size();) {
    const size_t got = f.read_at(off, buf.data(), buf.size());
    if (got == 0) break;
    out.append(buf.data(), got);
    off += static_cast<int64_t>(got);
  }
  return out;
}

TEST(LogFile, ReadsARegularFileInPiecesAndAMissingOneAsEmpty) {
  TempDir dir("logfile");
  fs::create_directories(dir.file("jobs/1"));
  std::ofstream(dir.file("jobs/1/rank-0.log")) << "hello, world\n";
  const LogFile f = LogFile::open_under(dir.str(), {"jobs", "1", "rank-0.log"});
  EXPECT_EQ(f.size(), 13);
  EXPECT_EQ(read_all(f, 5), "hello, world\n");
  EXPECT_EQ(LogFile::open_under(dir.str(), {"jobs", "1", "rank-1.log"}).size(), 0);
  EXPECT_EQ(LogFile::open_under(dir.str(), {"jobs", "2", "rank-0.log"}).size(), 0);
  EXPECT_THROW(LogFile::open_under(dir.str(), {"jobs", "..", "x"}), std::invalid_argument);
}

TEST(LogFile, RefusesLinksFifosAndLinkedDirectories) {
  TempDir dir("logfile-attacks");
  std::ofstream(dir.file("secret")) << "secret\n";
  fs::create_directories(dir.file("jobs/1"));
  fs::create_symlink(dir.file("secret"), dir.file("jobs/1/symlink.log"));
  fs::create_hard_link(dir.file("secret"), dir.file("jobs/1/hardlink.log"));
  ASSERT_EQ(mkfifo(dir.file("jobs/1/fifo.log").c_str(), 0600), 0);
  fs::create_directories(dir.file("jobs/1/dir.log"));
  fs::create_directories(dir.file("elsewhere"));
  std::ofstream(dir.file("elsewhere/rank-0.log")) << "secret\n";
  fs::create_directory_symlink(dir.file("elsewhere"), dir.file("jobs/2"));
  for (const char* name : {"symlink.log", "hardlink.log", "fifo.log", "dir.log"}) {
    EXPECT_THROW(LogFile::open_under(dir.str(), {"jobs", "1", name}), LogFileError) << name;
  }
  EXPECT_THROW(LogFile::open_under(dir.str(), {"jobs", "2", "rank-0.log"}), LogFileError);
}

}  // namespace
}  // namespace tessera

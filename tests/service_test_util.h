// Runs `tessera serve` as a real process on loopback for end-to-end tests, and talks to it
// through the API client.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/client.h"

namespace tessera::testing {

// A fresh directory under the system temp dir, removed at destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    path_ = std::filesystem::temp_directory_path() /
            ("tessera-" + tag + "-" + std::to_string(getpid()) + "-" +
             std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Polls `cond` every 20 ms until it holds or `seconds` pass.
inline bool eventually(const std::function<bool()>& cond, double seconds = 20) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

// Whether a process has ended: no /proc entry, or a zombie that its parent (here an adopting
// init, which in a container may never reap it) has not reaped.
inline bool process_gone(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return true;
  std::string line;
  std::getline(in, line);
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

// Resident memory of a process, in MiB (VmRSS of /proc/PID/status).
inline int64_t rss_mib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  int64_t kib = 0;
  while (in >> key) {
    if (key == "VmRSS:") {
      in >> kib;
      break;
    }
  }
  return kib / 1024;
}

inline const char* kAdminToken = "admin-secret-for-tests";

// `tessera serve --listen 127.0.0.1:0 --db DIR/tessera.db --admin-token ... EXTRA`; the server's
// stderr goes to DIR/serve.log.
class ServerProcess {
 public:
  ServerProcess(const std::string& dir, std::vector<std::string> extra) : dir_(dir) {
    std::filesystem::remove(addr_file());
    std::vector<std::string> args = {TESSERA_BINARY,  "serve",     "--listen",    "127.0.0.1:0",
                                     "--admin-token", kAdminToken, "--addr-file", addr_file()};
    // DIR/tessera.db unless EXTRA names the database.
    if (std::find(extra.begin(), extra.end(), "--db") == extra.end()) {
      args.insert(args.end(), {"--db", dir + "/tessera.db"});
    }
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string log = dir + "/serve.log";
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = std::freopen(log.c_str(), "a", stderr);
      (void)f;
      execv(argv[0], argv.data());
      _exit(127);
    }
    eventually([&] { return std::filesystem::exists(addr_file()); }, 20);
    std::ifstream in(addr_file());
    in >> addr_;
  }
  ~ServerProcess() { kill(SIGKILL); }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  const std::string& addr() const { return addr_; }
  pid_t pid() const { return pid_; }
  bool up() const { return !addr_.empty(); }
  // Sends `sig` and waits for the process to end.
  void kill(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  std::string log() const {
    std::ifstream in(dir_ + "/serve.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  ApiClient client(const std::string& token, int attempts = 1) const {
    ClientOptions o;
    o.addr = addr_;
    o.token = token;
    o.attempts = attempts;
    return ApiClient(o);
  }

 private:
  std::string addr_file() const { return dir_ + "/addr"; }
  std::string dir_;
  std::string addr_;
  pid_t pid_ = -1;
};

inline nlohmann::json json_of(const HttpResult& r) {
  try {
    return nlohmann::json::parse(r.body);
  } catch (const std::exception&) {
    return nlohmann::json{{"unparsed", r.body}, {"status", r.status}, {"error", r.error}};
  }
}

// GET /v1/jobs/ID as JSON.
inline nlohmann::json get_job(ApiClient& c, int64_t id) {
  return json_of(c.get("/v1/jobs/" + std::to_string(id)));
}

// POST /v1/tenants as the admin; returns the new tenant's token.
inline std::string create_tenant(ApiClient& admin, const std::string& name) {
  const HttpResult r =
      admin.post("/v1/tenants", nlohmann::json{{"name", name}}.dump(), "application/json");
  EXPECT_EQ(r.status, 201) << r.body;
  return json_of(r).value("token", "");
}

inline bool job_in(ApiClient& c, int64_t id, const std::string& state) {
  return get_job(c, id).value("state", "") == state;
}

// POST /v1/jobs with a YAML spec; returns the job's id (-1 if refused).
inline int64_t submit(ApiClient& c, const std::string& yaml, int expect_status = 201) {
  const HttpResult r = c.post("/v1/jobs", yaml, "application/yaml");
  EXPECT_EQ(r.status, expect_status) << r.body;
  return json_of(r).value("id", int64_t{-1});
}

}  // namespace tessera::testing

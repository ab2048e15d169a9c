#include "apps/listen.h"

#include <pthread.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace tessera {

void split_listen(const std::string& listen, std::string& host, int& port,
                  const std::string& flag) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos) {
    throw std::invalid_argument(flag + ": expected HOST:PORT, got '" + listen + "'");
  }
  host = listen.substr(0, colon);
  try {
    size_t used = 0;
    port = std::stoi(listen.substr(colon + 1), &used);
    if (used != listen.size() - colon - 1 || port < 0 || port > 65535) throw std::exception();
  } catch (const std::exception&) {
    throw std::invalid_argument(flag + ": bad port in '" + listen + "'");
  }
}

sigset_t block_stop_signals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return stop_signals;
}

void write_addr_file(const std::string& path, const std::string& addr) {
  if (path.empty()) return;
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << addr << "\n";
  std::rename(tmp.c_str(), path.c_str());
}

void add_tls_options(CLI::App& app, std::string& cert, std::string& key, const std::string& what) {
  app.add_option("--tls-cert", cert, what + " with this certificate chain (PEM)")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-key", key, "the private key of --tls-cert (PEM)")->check(CLI::ExistingFile);
}

void check_tls_pair(const std::string& cert, const std::string& key) {
  if (cert.empty() != key.empty()) throw std::runtime_error("--tls-cert and --tls-key go together");
}

}  // namespace tessera

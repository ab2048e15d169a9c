// --listen HOST:PORT and --addr-file, as every serving command (serve, kube, and
// tessera-kube-emulator) takes them.
#pragma once

#include <CLI/CLI.hpp>
#include <csignal>
#include <string>

namespace tessera {

// Splits "HOST:PORT" (port 0: any free port); std::invalid_argument naming `flag` otherwise.
void split_listen(const std::string& listen, std::string& host, int& port,
                  const std::string& flag = "--listen");
// Blocks SIGINT and SIGTERM in this thread (so in every thread started after it) and ignores
// SIGPIPE; returns the set, for one thread to sigwait() on and stop the server.
sigset_t block_stop_signals();
// --tls-cert and --tls-key (both PEM files), `what` saying what the certificate serves.
void add_tls_options(CLI::App& app, std::string& cert, std::string& key, const std::string& what);
// Throws std::runtime_error unless both or neither are given.
void check_tls_pair(const std::string& cert, const std::string& key);
// Writes "addr\n" to `path` atomically (readers never see half an address); no-op for "".
void write_addr_file(const std::string& path, const std::string& addr);

}  // namespace tessera

// A network namespace of its own for one gang on this host (`tessera serve --job-network
// isolated`): its members reach each other on 127.0.0.1 and nothing else of the host's network,
// so one tenant's job cannot find or talk to another's listeners (an unauthenticated PyTorch
// rendezvous would take its data). What the job is given on purpose is brought in: a listening
// socket made inside the namespace on 127.0.0.1:PORT, whose connections the server serves as
// its own API's (the job's TESSERA_REPORT_URL). The dataset cache is a filesystem, reached as
// before.
#pragma once

#include <cstdint>
#include <optional>

#include "backend/unique_fd.h"

namespace tessera {

class JobNetwork {
 public:
  // A new namespace with loopback up and, with `listen_port` > 0, a socket listening on
  // 127.0.0.1:listen_port inside it. Needs CAP_SYS_ADMIN (root). Throws std::runtime_error
  // saying which step failed.
  static JobNetwork create(int listen_port);
  // The namespace of process `pid`, with a listener as above, when it is not this process's
  // own (a gang adopted after a restart); nullopt when it shares ours or is gone.
  static std::optional<JobNetwork> of_process(int64_t pid, int listen_port);

  int netns_fd() const { return ns_.get(); }
  int listener_fd() const { return listener_.get(); }

 private:
  UniqueFd ns_, listener_;
};

}  // namespace tessera

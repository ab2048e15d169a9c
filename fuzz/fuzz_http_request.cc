// `tessera serve`'s HTTP surface from bytes to response: the front end's framing, httplib's
// parsing and routing, authentication, every handler, the service and its database. Whatever
// arrives, the answer is an HTTP response (or nothing, for bytes that are not a whole request
// yet), and the process survives.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "api/http_server.h"
#include "backend/backend.h"
#include "control/serve/service.h"

namespace {

// Starts nothing: the fuzzer exercises the API, not processes.
class NullBackend final : public tessera::Backend {
 public:
  std::vector<tessera::MemberHandle> launch(const tessera::LaunchSpec& spec) override {
    std::vector<tessera::MemberHandle> out;
    for (const auto& m : spec.members) out.push_back({m.rank, 0, 0});
    return out;
  }
  std::vector<tessera::MemberStatus> poll(uint64_t, uint32_t,
                                          const std::vector<tessera::MemberHandle>& ms) override {
    std::vector<tessera::MemberStatus> out;
    for (const auto& m : ms) out.push_back({m.rank, tessera::MemberPhase::kExited, 0});
    return out;
  }
  void signal(uint64_t, uint32_t, const std::vector<tessera::MemberHandle>&, int) override {}
  std::vector<tessera::MemberHandle> discover(uint64_t, uint32_t, int32_t) override { return {}; }
  tessera::LogFile open_log(uint64_t, uint32_t, int32_t) const override { return {}; }
};

struct Harness {
  std::string dir;
  std::unique_ptr<tessera::Service> service;
  std::unique_ptr<tessera::ApiServer> api;
  Harness() {
    dir = (std::filesystem::temp_directory_path() /
           ("tessera-fuzz-http-" + std::to_string(::getpid())))
              .string();
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    tessera::ServiceOptions opt;
    opt.db_path = dir + "/fuzz.db";
    opt.work_dir = dir + "/jobs";
    opt.virtual_gpus = 4;
    service = std::make_unique<tessera::Service>(opt, std::make_unique<NullBackend>());
    service->set_admin_token("fuzz-admin");
    api = std::make_unique<tessera::ApiServer>(*service);
  }
  ~Harness() {
    api.reset();
    service.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness h;
  const std::string response =
      h.api->respond(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!response.empty() && response.rfind("HTTP/1.1 ", 0) != 0) std::abort();
  // Now and then the scheduler runs over what the requests queued.
  static unsigned calls = 0;
  if (++calls % 64 == 0) h.service->tick();
  return 0;
}

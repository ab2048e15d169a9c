// A run's allocation and member processes as its job row stores them (JSON text), so that a
// restarted server knows what each running job holds and which processes are its.
#include "control/serve/service.h"

#include <nlohmann/json.hpp>

#include "control/serve/job.h"

namespace tessera {

std::string encode_allocation(const Allocation& a) {
  if (a.empty()) return "";
  nlohmann::json members = nlohmann::json::array();
  const size_t gpm = static_cast<size_t>(a.gpus_per_member);
  for (size_t m = 0; m < a.member_node.size(); ++m) {
    nlohmann::json shares = nlohmann::json::array();
    for (size_t k = 0; k < gpm; ++k) {
      const GpuShare& s = a.shares[m * gpm + k];
      shares.push_back({s.gpu, s.milli});
    }
    members.push_back({a.member_node[m], shares});
  }
  return nlohmann::json{{"gpus_per_member", a.gpus_per_member},
                        {"cpu_milli", a.cpu_milli_per_member},
                        {"mem_mib", a.mem_mib_per_member},
                        {"members", members}}
      .dump();
}

Allocation decode_allocation(const std::string& text) {
  Allocation a;
  if (text.empty()) return a;
  const auto j = nlohmann::json::parse(text);
  a.gpus_per_member = j.at("gpus_per_member").get<int32_t>();
  a.cpu_milli_per_member = j.at("cpu_milli").get<int64_t>();
  a.mem_mib_per_member = j.at("mem_mib").get<int64_t>();
  for (const auto& m : j.at("members")) {
    a.member_node.push_back(m.at(0).get<NodeId>());
    for (const auto& s : m.at(1))
      a.shares.push_back({s.at(0).get<GpuId>(), s.at(1).get<int32_t>()});
  }
  return a;
}

std::string encode_members(const std::vector<MemberHandle>& ms) {
  if (ms.empty()) return "";
  nlohmann::json j = nlohmann::json::array();
  for (const MemberHandle& m : ms) j.push_back({m.rank, m.pid, m.start_ticks});
  return j.dump();
}

std::vector<MemberHandle> decode_members(const std::string& text) {
  std::vector<MemberHandle> out;
  if (text.empty()) return out;
  for (const auto& m : nlohmann::json::parse(text)) {
    out.push_back({m.at(0).get<int32_t>(), m.at(1).get<int64_t>(), m.at(2).get<int64_t>()});
  }
  return out;
}

}  // namespace tessera

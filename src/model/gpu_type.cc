#include "model/gpu_type.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace tessera {

namespace {

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// Other spellings of the built-in types, as vendors and clusters write them. An alias with
// several targets is ambiguous and never resolved: the user must say which.
struct Alias {
  std::string_view alias;
  std::vector<std::string_view> types;
};
const std::vector<Alias>& aliases() {
  static const std::vector<Alias> a = {
      {"A100", {"A100-40G", "A100-80G"}},
      {"A100-40GB", {"A100-40G"}},
      {"A100-80GB", {"A100-80G"}},
      {"V100-16G", {"V100"}},
      {"V100-16GB", {"V100"}},
      {"V100-32GB", {"V100-32G"}},
      {"H100-80G", {"H100"}},
      {"H100-80GB", {"H100"}},
      {"H200-141G", {"H200"}},
      {"H200-141GB", {"H200"}},
      {"L40S-48G", {"L40S"}},
      {"L40S-48GB", {"L40S"}},
      {"B200-180G", {"B200"}},
      {"B200-180GB", {"B200"}},
      {"B200-192G", {"B200"}},
      {"B200-192GB", {"B200"}},
      {"MI300X-192G", {"MI300X"}},
      {"MI300X-192GB", {"MI300X"}},
  };
  return a;
}

const Alias* alias_of(std::string_view name) {
  for (const Alias& a : aliases()) {
    if (iequal(a.alias, name)) return &a;
  }
  return nullptr;
}

}  // namespace

GpuTypeTable GpuTypeTable::builtin() {
  GpuTypeTable t;
  // name, memory MiB, speed relative to V100. K80/P100: geometric mean of Gavel's measured
  // single-GPU throughputs over the 26 model/batch configurations measured on all three types
  // (K80 0.297, P100 0.943). The rest: dense FP32/TF32 vendor figures relative to V100's 15.7
  // TFLOPS, a documented approximation (docs/execution-model.md). L40S, B200, GB200 and MI300X
  // take their dense TF32 figure's ratio to the H100's (494.7 TFLOPS) times the H100's 6.3, so
  // that they rank against the types above as the vendor figures say (the literal ratio to
  // 15.7 would make an L40S nearly twice an H100). They come last: a GpuTypeId is an index
  // here, and masks, per-type vectors and recorded results rely on the existing ones.
  t.types_ = {
      {"V100", 16384, 1.0},     {"K80", 12288, 0.297},   {"P100", 16384, 0.943},
      {"V100M16", 16384, 1.0},  {"V100M32", 32768, 1.0}, {"V100-32G", 32768, 1.0},
      {"T4", 15360, 0.52},      {"A10", 24576, 1.99},    {"A100-40G", 40960, 2.5},
      {"A100-80G", 81920, 2.5}, {"H100", 81920, 6.3},    {"H200", 143771, 6.3},
      {"G2", 16384, 1.0},       {"G3", 32768, 1.0},      {"L40S", 49152, 2.33},
      {"B200", 183359, 14.3},   {"GB200", 190464, 15.9}, {"MI300X", 196608, 8.32},
  };
  return t;
}

std::optional<GpuTypeId> GpuTypeTable::find(std::string_view name) const {
  for (size_t i = 0; i < types_.size(); ++i) {
    if (iequal(types_[i].name, name)) return static_cast<GpuTypeId>(i);
  }
  if (const Alias* a = alias_of(name); a != nullptr && a->types.size() == 1) {
    return find(a->types.front());
  }
  return std::nullopt;
}

GpuTypeId GpuTypeTable::known(std::string_view name) const {
  if (const std::optional<GpuTypeId> id = find(name)) return *id;
  const std::string quoted = "'" + std::string(name) + "'";
  if (const Alias* a = alias_of(name); a != nullptr && a->types.size() > 1) {
    std::string choices;
    for (size_t i = 0; i < a->types.size(); ++i) {
      choices += std::string(i == 0                     ? ""
                             : i + 1 == a->types.size() ? " or "
                                                        : ", ") +
                 std::string(a->types[i]);
    }
    throw std::invalid_argument("ambiguous GPU type " + quoted + ": say " + choices);
  }
  throw std::invalid_argument("unknown GPU type " + quoted + " (known: " + names() + ")");
}

std::string GpuTypeTable::names() const {
  std::string out;
  for (const GpuType& t : types_) out += (out.empty() ? "" : ", ") + t.name;
  return out;
}

GpuTypeId GpuTypeTable::intern(std::string_view name) {
  if (auto id = find(name)) return *id;
  if (types_.size() >= 64) throw std::runtime_error("more than 64 GPU types");
  types_.push_back(GpuType{std::string(name), 16384, 1.0});
  return static_cast<GpuTypeId>(types_.size() - 1);
}

}  // namespace tessera

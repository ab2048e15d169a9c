// The trace readers (Pollux, Philly, Tiresias, Alibaba, JSONL): a workload, or an InputError
// naming the line.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "model/gpu_type.h"
#include "model/input_error.h"
#include "sim/trace_readers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const tessera::GpuTypeTable types = tessera::GpuTypeTable::builtin();
  constexpr tessera::TraceFormat kFormats[] = {
      tessera::TraceFormat::kPollux, tessera::TraceFormat::kPhilly, tessera::TraceFormat::kTiresias,
      tessera::TraceFormat::kAlibaba, tessera::TraceFormat::kJsonl};
  const tessera::TraceFormat format = kFormats[data[0] % 5];
  tessera::ReaderOptions opt;
  opt.gpu_types = &types;
  try {
    const tessera::Workload w = tessera::parse_workload(
        std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1), "fuzz", format, opt);
    (void)w;
  } catch (const tessera::InputError&) {
  }
  return 0;
}

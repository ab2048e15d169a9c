#!/usr/bin/env bash
# Device check for what touches real GPUs: discovery (`tessera gpus`) and black-box profiling
# (`tessera profile`) against the real driver. Run on a machine with an NVIDIA GPU:
#   scripts/gpu_check.sh "TESSERA COMMAND" OUTDIR
# It loads the GPU with PyTorch when available (a compute-bound and a memory-bound job), else
# with a small CUDA program when nvcc is there, else profiles an idle job; OUTDIR gets the raw
# nvidia-smi output and the JSON results. TESSERA_DATA (if set) is where `tessera profile`
# finds interference/ to place each job in the knowledge base.
set -u
T="$1"
OUT="$2"
mkdir -p "$OUT"
Q=index,uuid,name,memory.total,memory.used,utilization.gpu,utilization.memory
echo "== nvidia-smi"
nvidia-smi -L
nvidia-smi --query-gpu=$Q --format=csv,noheader,nounits | tee "$OUT/nvidia_smi_query.csv"
echo "== tessera gpus"
$T gpus --json "$OUT/gpus.json"
$T gpus --cluster-yaml | tee "$OUT/host_cluster.yaml"
printf '%s\n' '{"name":"a","submit":0,"members":1,"work":600}' \
  '{"name":"b","submit":5,"members":1,"work":600}' > "$OUT/one_gpu_jobs.jsonl"
$T simulate --cluster "$OUT/host_cluster.yaml" --workload "$OUT/one_gpu_jobs.jsonl" --quiet \
  --json "$OUT/sim_on_host.json" && echo "simulate on the host's cluster spec: ok"

WORK=$(mktemp -d)
LOAD=()
LOAD2=()
if python3 -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  cat > "$WORK/load.py" <<'PY'
# A compute-bound job (fp32 matmuls on ~30 % of the GPU's memory) or a memory-bound one
# (device-to-device copies of a 4 GiB buffer), for `secs` seconds.
import sys, time, torch
mode, secs = sys.argv[1], float(sys.argv[2]); d = torch.device("cuda")
free, total = torch.cuda.mem_get_info()
t0 = time.time()
if mode == "compute":
    n = 8192
    a = torch.randn(n, n, device=d); b = torch.randn(n, n, device=d)
    hold = torch.empty(int(0.3 * total) // 4, dtype=torch.float32, device=d)
    while time.time() - t0 < secs:
        c = a @ b
        torch.cuda.synchronize()  # keep the launch queue short
else:
    x = torch.empty(1 << 30, device=d); y = torch.empty_like(x)
    while time.time() - t0 < secs:
        y.copy_(x)
        torch.cuda.synchronize()
PY
  LOAD=(python3 "$WORK/load.py" compute 40)
  LOAD2=(python3 "$WORK/load.py" memory 40)
  echo "load: PyTorch $(python3 -c 'import torch; print(torch.__version__)')"
elif command -v nvcc >/dev/null 2>&1; then
  cat > "$WORK/load.cu" <<'CU'
// Half compute-bound (a long FMA chain per element), half memory-bound (copies).
#include <chrono>
#include <cstdlib>
#include <cuda_runtime.h>
__global__ void fma_chain(float* a, size_t n) {
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < n) { float x = a[i]; for (int k = 0; k < 4096; ++k) x = x * 1.0001f + 0.5f; a[i] = x; }
}
int main(int argc, char** argv) {
  double secs = argc > 1 ? atof(argv[1]) : 40;
  size_t free_b, total_b; cudaMemGetInfo(&free_b, &total_b);
  size_t n = (size_t(0.3 * total_b) / sizeof(float)) / 2;
  float *a, *b; cudaMalloc(&a, n * sizeof(float)); cudaMalloc(&b, n * sizeof(float));
  auto t0 = std::chrono::steady_clock::now();
  auto el = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  while (el() < secs / 2) { fma_chain<<<(n + 255) / 256, 256>>>(a, n); cudaDeviceSynchronize(); }
  while (el() < secs) { cudaMemcpy(b, a, n * sizeof(float), cudaMemcpyDeviceToDevice); cudaDeviceSynchronize(); }
  return 0;
}
CU
  nvcc -O2 -o "$WORK/load" "$WORK/load.cu" && LOAD=("$WORK/load" 40)
  echo "load: CUDA $(nvcc --version | tail -1)"
fi
if [ ${#LOAD[@]} -eq 0 ]; then
  echo "load: none available (no PyTorch, no nvcc): profiling an idle job"
  LOAD=(sleep 40)
fi
echo "== tessera profile (idle job, 6 s)"
$T profile --window 6 --interval 0.5 --json "$OUT/profile_idle.json" -- sleep 30
echo "== tessera profile (${LOAD[*]})"
$T profile --window 25 --interval 0.5 --json "$OUT/profile_load.json" -- "${LOAD[@]}"
if [ ${#LOAD2[@]} -gt 0 ]; then
  echo "== tessera profile (${LOAD2[*]})"
  $T profile --window 25 --interval 0.5 --json "$OUT/profile_memory.json" -- "${LOAD2[@]}"
fi
echo "== nvidia-smi after"
nvidia-smi --query-gpu=$Q --format=csv,noheader,nounits

#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan, UBSan; the `fuzz` preset) and runs each for
# SECONDS (default 10) from its committed corpus, fuzz/corpus/<target>. Exits non-zero on the
# first crash, leak or timeout, leaving the input in build/fuzz/artifacts/ (add it to the
# target's corpus once fixed: the GCC build replays the corpus as CTest tests).
#   scripts/fuzz.sh [SECONDS] [TARGET...]      targets: see fuzz/CMakeLists.txt
# New inputs the fuzzer finds go to build/fuzz/found/<target>, not into the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-10}
shift || true
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
  TARGETS=(job_spec strict_json queue_tree cluster trace http_request)
fi
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j"$(nproc)"
mkdir -p build/fuzz/artifacts
for t in "${TARGETS[@]}"; do
  found="build/fuzz/found/$t"
  mkdir -p "$found"
  echo "== fuzz_$t: ${SECONDS_EACH}s"
  # -timeout: one input taking longer is a finding (a hang); -rss_limit_mb: so is a blow-up.
  if ! "build/fuzz/fuzz/fuzz_$t" -max_total_time="$SECONDS_EACH" -timeout=10 \
      -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="build/fuzz/artifacts/$t-" "$found" "fuzz/corpus/$t" \
      >"build/fuzz/$t.log" 2>&1; then
    tail -n 60 "build/fuzz/$t.log"
    echo "fuzz_$t FAILED; input in build/fuzz/artifacts/" >&2
    exit 1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb|Done" "build/fuzz/$t.log" | tr '\n' ' '
  echo
done

#!/usr/bin/env bash
# The reference runs a refactoring must leave unchanged: their event logs and result files,
# hashed (SHA-256; a result file without its build-identifying `tessera` keys).
#
#   scripts/reference_runs.sh                  # prints "HASH  run/file" lines
#   scripts/reference_runs.sh --save FILE      # ... and writes them to FILE
#   scripts/reference_runs.sh --check FILE     # exit 1, naming each file that differs
#   scripts/reference_runs.sh --instructions   # the hot paths' instruction counts (callgrind)
#
# Runs: frag (FGD and best-fit) on Alibaba's openb; Pollux's eight workloads under las and
# goodput; Philly under fifo, las and fair on 32 x 4 V100 and on 2,048 GPUs (256 x 8); the
# edge and data experiments. About 20 s on two cores (release build).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tessera="${TESSERA:-$root/build/release/src/tessera}"
data="${DATA:-$root/../shared/data}"
out="${OUT:-/tmp/tessera-reference-runs}"
mode="" file=""
case "${1:-}" in
  --save | --check) mode="$1" file="$(realpath -m "$2")" ;;
  --instructions) mode="$1" ;;
  "") ;;
  *) echo "usage: $0 [--save FILE | --check FILE]" >&2; exit 2 ;;
esac
[ -x "$tessera" ] || { echo "$tessera is missing: build first" >&2; exit 1; }
if [ "$mode" = --instructions ]; then
  # Instructions executed, whole process (a refactoring keeps them within 2 %): two cycles of
  # `tessera bench` and one replay.
  for args in "bench --nodes 5000 --pending 10000 --repeat 1" \
    "bench --nodes 2000 --pending 5000 --gang 8 --policy fair+topology --repeat 1" \
    "simulate --workload $data/philly/pollux/workloads/workload-1.csv --cluster $data/philly/tiresias/cluster_spec.csv --policy las --quiet"; do
    # shellcheck disable=SC2086
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$tessera" $args > /dev/null \
      2> "${TMPDIR:-/tmp}/reference-callgrind.err"
    echo "$(grep -o 'Collected : [0-9]*' "${TMPDIR:-/tmp}/reference-callgrind.err" | cut -c13-)  ${args%% --workload*}"
  done
  exit 0
fi
rm -rf "$out" && mkdir -p "$out"/{frag,pollux,philly,edge,data}
cd "$out"  # the result files record the paths they were given: keep them the same each run

for p in fgd bestfit; do
  "$tessera" frag --policy "$p" --seeds 1 --quiet --json "frag/$p.json" > /dev/null
done

for w in "$data"/philly/pollux/workloads/workload-*.csv; do
  n="$(basename "$w" .csv)"
  for p in las goodput; do
    "$tessera" simulate --workload "$w" --cluster "$data/philly/tiresias/cluster_spec.csv" \
      --policy "$p" --quiet --json "pollux/$n.$p.json" --events "pollux/$n.$p.events.jsonl"
  done
done

echo '{racks: 1, nodes_per_rack: 32, node: {gpus: 4, gpu_type: V100}}' > philly/c32x4.yaml
echo '{racks: 8, nodes_per_rack: 32, node: {gpus: 8, gpu_type: V100}}' > philly/c2048.yaml
for c in c32x4 c2048; do
  for p in fifo las fair; do
    "$tessera" simulate --workload "$data/philly/pollux/philly.csv" --cluster "philly/$c.yaml" \
      --policy "$p" --quiet --json "philly/$c.$p.json" --events "philly/$c.$p.events.jsonl"
  done
done

python3 "$root/scripts/edge_experiment.py" --tessera "$tessera" --out edge > /dev/null
python3 "$root/scripts/data_experiment.py" --tessera "$tessera" --data "$data" --out data \
  > /dev/null

# A result file's hash leaves out every "tessera" key (the version and commit that built it).
hashes="$(python3 - <<'PY'
import hashlib, json, pathlib

def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k != "tessera"}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v

for f in sorted(pathlib.Path(".").rglob("*")):
    if f.suffix == ".jsonl":
        b = f.read_bytes()
    elif f.suffix == ".json":
        b = json.dumps(strip(json.loads(f.read_text())), sort_keys=True).encode()
    else:
        continue
    print(hashlib.sha256(b).hexdigest() + "  " + str(f))
PY
)"
[ "$mode" = --check ] || echo "$hashes"
case "$mode" in
  --save) echo "$hashes" > "$file" ;;
  --check)
    if diff <(cat "$file") <(echo "$hashes") > "$out/diff.txt"; then
      echo "identical: $(wc -l < "$file") files"
    else
      echo "differ:" >&2
      grep '^[<>]' "$out/diff.txt" >&2
      exit 1
    fi ;;
esac

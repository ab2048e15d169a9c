#!/usr/bin/env bash
# tessera kube beside kube-scheduler on one real API server (tools/testcluster: etcd,
# kube-apiserver, KWOK nodes of 8 GPUs), each run on a fresh cluster, in one go. Prints one
# JSON line a run and a markdown table at the end.
#
#   bench/kube_real.sh                      # 1,000 nodes, 10,000 pods
#   NODES=100 PODS=800 bench/kube_real.sh   # a quick look
#   ONLY="ceiling tessera" bench/kube_real.sh
#   NODES=5000 HEARTBEAT=slow RESTART_PENDING=10100 \
#     ONLY="ceiling ceiling-events tessera kube-scheduler-5000 restart" \
#     bench/kube_real.sh    # 5,000 nodes; the restart among 50,000 pods
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tc="$root/tools/testcluster/bin/testcluster"
tessera="${TESSERA:-$root/build/release/src/tessera}"
NODES="${NODES:-1000}"
PODS="${PODS:-10000}"
GANG_PODS="${GANG_PODS:-16000}"   # 2,000 gangs of 8
RESTART_PENDING="${RESTART_PENDING:-100}"  # pending pods beside a full cluster (100 of them fit)
# Extra `testcluster up` flags. At 5,000 nodes the fake kubelets' Lease renewals (every 10 s,
# 500 writes/s) alone saturate a 2-core API server; HEARTBEAT=slow renews every 150 s and lets
# the node lifecycle wait 10 minutes, as scheduler_perf runs without kubelets. The controller
# manager's client gets QPS 500 (default 20): at 20 a second, lifting 5,000 new nodes'
# not-ready taints alone takes 4 minutes.
UP_ARGS="${UP_ARGS:-}"
if [ "${HEARTBEAT:-}" = slow ]; then
  UP_ARGS="$UP_ARGS --kwok-arg=--node-lease-duration-seconds=600 --controller-manager-arg=--node-monitor-grace-period=10m"
  UP_ARGS="$UP_ARGS --controller-manager-arg=--kube-api-qps=500 --controller-manager-arg=--kube-api-burst=1000"
fi
# The bare client's binding goroutines: as many as tessera kube's default bind workers, so the
# ceiling has the same number of binds in flight to spend.
CEILING_THREADS="${CEILING_THREADS:-48}"
ONLY="${ONLY:-ceiling ceiling-events tessera kube-scheduler-50 kube-scheduler-5000 latency gangs restart}"
work="${WORK:-$(mktemp -d /tmp/tessera-kube-real-bench.XXXXXX)}"
mkdir -p "$work"
out="${OUT:-$work/results.jsonl}"
[ -x "$tc" ] || { echo "$tc is missing: run scripts/setup.sh" >&2; exit 1; }
[ -x "$tessera" ] || { echo "$tessera is missing: build first" >&2; exit 1; }
: > "$out"

run() {  # NAME BENCH-ARGS...
  local name="$1"; shift
  local dir="$work/$name"
  rm -rf "$dir"
  # shellcheck disable=SC2086
  "$tc" up --dir "$dir" --background $UP_ARGS > /dev/null
  "$tc" kubectl --kubeconfig "$dir/admin.kubeconfig" apply \
    -f "$root/deploy/kubernetes/01-podgroup-crd.yaml" > /dev/null
  if "$tc" bench --dir "$dir" --tessera "$tessera" "$@" | tee -a "$out"; then :; else
    echo "{\"run\":\"$name\",\"failed\":true}" | tee -a "$out"
  fi
  "$tc" down --dir "$dir"
}

# The ceiling first: the latency runs arrive at half of it.
ceiling=""
for what in $ONLY; do
  case "$what" in
    ceiling) run ceiling --scheduler bare --threads "$CEILING_THREADS" --nodes "$NODES" --pods "$PODS"
             ceiling="$(tail -1 "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("binds_per_s", 0))')" ;;
    # The ceiling of a scheduler that also says Scheduled: a Binding and an Event per pod.
    ceiling-events) run ceiling-events --scheduler bare --events --threads "$CEILING_THREADS" --nodes "$NODES" --pods "$PODS" ;;
    tessera) run tessera --scheduler tessera --nodes "$NODES" --pods "$PODS" ;;
    kube-scheduler-50) run ks50 --scheduler kube-scheduler --qps 50 --burst 100 --nodes "$NODES" --pods "$PODS" ;;
    kube-scheduler-5000) run ks5000 --scheduler kube-scheduler --qps 5000 --burst 5000 --nodes "$NODES" --pods "$PODS" ;;
    latency)
      rate="$(python3 -c "print(max(1.0, float('${ceiling:-200}') / 2))")"
      run lat-tessera --scheduler tessera --mode latency --rate "$rate" --nodes "$NODES" --pods "$(( PODS / 4 ))"
      run lat-ks5000 --scheduler kube-scheduler --qps 5000 --burst 5000 --mode latency --rate "$rate" --nodes "$NODES" --pods "$(( PODS / 4 ))" ;;
    gangs) run gangs --scheduler tessera --mode gangs --gang-size 8 --nodes "$NODES" --pods "$GANG_PODS" ;;
    restart) run restart --scheduler tessera --mode restart --nodes "$NODES" --pods "$RESTART_PENDING" ;;
  esac
done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("| scheduler | mode | nodes | pods bound | start->first bind s | start->all bound s | binds/s | p50 s | p99 s | partial gangs |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    if r.get("failed"):
        print(f"| {r['run']} | failed | | | | | | | | |"); continue
    name = r["scheduler"] + (f" (QPS {r['client_qps']:g})" if r.get("client_qps") else "") + (" + events" if r.get("events") else "")
    f = lambda k: f"{r[k]:.2f}" if k in r else ""
    print(f"| {name} | {r['mode']} | {r['nodes']} | {r['bound']} | {f('start_to_first_bind_s')} | "
          f"{f('start_to_all_bound_s')} | {r['binds_per_s']:.0f} | {f('create_to_bind_p50_s')} | "
          f"{f('create_to_bind_p99_s')} | {r.get('partial_gangs', '')} |")
PY

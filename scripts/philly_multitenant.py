#!/usr/bin/env python3
"""Multi-tenant fairness experiment on Philly (issue 3).

Philly's virtual clusters are the tenants. For each tenant count N, the N virtual clusters
with the most jobs in the window share one cluster sized below their average GPU demand
(--load of it, so demand exceeds capacity). The smallest ceil(N/5) of them also serve: their
short 1-GPU jobs (--inference-max), every k-th of them (--inference-every), are
`inference-critical` with a maximum queueing delay (--sla seconds). Every
policy replays the same workload; the table gives Jain's index, SLA satisfaction and mean JCT.

    scripts/philly_multitenant.py --tessera build/release/src/tessera \
        --trace ../shared/data/philly/pollux/philly.csv --out /tmp/mt

Writes per N: workload.jsonl, queues.yaml, cluster.yaml and one --json per policy under --out.
"""
import argparse
import concurrent.futures
import datetime
import json
import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from philly_trace import read_philly  # noqa: E402


def load(trace, start, days):
    return read_philly(trace, start, days)


def prepare(jobs, n, args, out):
    counts = {}
    for j in jobs:
        counts[j["vc"]] = counts.get(j["vc"], 0) + 1
    tenants = sorted(counts, key=lambda v: (-counts[v], v))[:n]
    serving = set(tenants[-max(1, math.ceil(n / 5)):])
    mine = [j for j in jobs if j["vc"] in tenants]
    horizon = args.days * 86400.0
    demand = sum(j["gpus"] * min(j["work"], horizon - j["submit"]) for j in mine) / horizon
    node = 8
    largest = max(j["gpus"] for j in mine)
    gpus = max(args.load * demand, largest)
    nodes = int(math.ceil(gpus / node))
    os.makedirs(out, exist_ok=True)
    candidates = 0
    with open(os.path.join(out, "workload.jsonl"), "w") as f:
        for k, j in enumerate(mine):
            o = {"name": f"philly-{j['line']}", "tenant": j["vc"], "submit": j["submit"],
                 "members": j["gpus"], "gpus": 1, "work": j["work"],
                 "duration_estimate": j["work"], "model": "ResNet-50 (batch size 64)"}
            if j["vc"] in serving and j["gpus"] == 1 and j["work"] <= args.inference_max:
                # Philly's short jobs come in bursts of hundreds (sweeps); every k-th one is
                # an inference job, so the inference load is one a cluster could serve.
                if candidates % args.inference_every == 0:
                    o["priority"] = "inference-critical"
                    o["sla"] = args.sla
                candidates += 1
            f.write(json.dumps(o) + "\n")
    with open(os.path.join(out, "queues.yaml"), "w") as f:
        f.write("# equal weights, no guarantees: every tenant is entitled to 1/N of the cluster\n")
        pre = []
        if args.reclaim_min_runtime > 0:
            pre.append(f"reclaim_min_runtime: {args.reclaim_min_runtime:g}s")
        if args.reclaim_after > 0:
            pre.append(f"reclaim_after: {args.reclaim_after:g}s")
        if args.reclaim_tolerance > 0:
            pre.append(f"reclaim_tolerance: {args.reclaim_tolerance:g}")
        if args.reclaim_cost_ratio > 0:
            pre.append(f"reclaim_cost_ratio: {args.reclaim_cost_ratio:g}")
        if args.borrow_max_runtime > 0:
            pre.append(f"borrow_max_runtime: {args.borrow_max_runtime:g}s")
        if pre:
            f.write("preemption: {" + ", ".join(pre) + "}\n")
        f.write("queues:\n")
        for t in tenants:
            f.write(f"  - name: {t}\n")
    with open(os.path.join(out, "cluster.yaml"), "w") as f:
        f.write(f"racks: {int(math.ceil(nodes / 8))}\nnodes_per_rack: 8\n")
        f.write(f"node: {{gpus: {node}, gpu_type: V100}}\n")
    return {"tenants": tenants, "serving": sorted(serving), "jobs": len(mine),
            "demand_gpus": demand, "cluster_gpus": int(math.ceil(nodes / 8)) * 8 * node}


def run(args, out, policy):
    res = os.path.join(out, f"{policy}.json")
    cmd = [args.tessera, "simulate", "--workload", os.path.join(out, "workload.jsonl"),
           "--cluster", os.path.join(out, "cluster.yaml"), "--queues",
           os.path.join(out, "queues.yaml"), "--policy", policy, "--json", res, "--quiet",
           "--series-interval", "0"]
    if args.predictor != "none":
        cmd += ["--predictor", args.predictor]
    if args.restart_overhead > 0:
        cmd += ["--restart-overhead", str(args.restart_overhead)]
    if args.checkpoint_gb > 0:
        cmd += ["--checkpoint-gb", str(args.checkpoint_gb)]
    t = time.time()
    subprocess.run(cmd, check=True)
    secs = time.time() - t
    with open(res) as f:
        r = json.load(f)
    return {"policy": policy, "jain": r["fairness"]["jain"], "sla": r["sla"]["satisfaction"],
            "jct_h": r["jct"]["mean"] / 3600, "wait_h": r["queueing_delay"]["mean"] / 3600,
            "preemptions": r["preemptions"], "lost_gpu_h": r["lost_gpu_hours"],
            "reclaims": r["preemptions_by_cause"]["reclaim"],
            "grace_gpu_h": r["preemption_grace_gpu_hours"],
            "restart_gpu_h": r["restart_overhead_gpu_hours"],
            "cost_pct": 100 * r["preemption_cost_gpu_hours"]
            / max(1e-9, sum(t["gpu_hours"] for t in r["per_tenant"].values())),
            "alloc": r["gpu_allocation"], "seconds": secs}


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessera", required=True)
    p.add_argument("--trace", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--tenants", default="2,4,6,8,10")
    p.add_argument("--policies", default="fifo,drf,fair")
    p.add_argument("--start", default="2017-10-09", help="window start (date)")
    p.add_argument("--days", type=float, default=14)
    p.add_argument("--load", type=float, default=0.8,
                   help="cluster GPUs as a fraction of the average GPU demand")
    p.add_argument("--sla", type=float, default=600, help="max queueing delay, seconds")
    p.add_argument("--inference-max", type=float, default=1800,
                   help="a serving tenant's 1-GPU jobs at most this long (s) are inference")
    p.add_argument("--inference-every", type=int, default=10,
                   help="every k-th such job is an inference job")
    p.add_argument("--reclaim-min-runtime", type=float, default=0,
                   help="queue tree preemption.reclaim_min_runtime, seconds (0: none)")
    p.add_argument("--reclaim-after", type=float, default=0,
                   help="preemption.reclaim_after (s): reclaim only for jobs that waited this long")
    p.add_argument("--reclaim-tolerance", type=float, default=0,
                   help="preemption.reclaim_tolerance: queues within (1 + this) x their share "
                        "are not reclaimed from")
    p.add_argument("--borrow-max-runtime", type=float, default=0,
                   help="preemption.borrow_max_runtime (s): past its share a queue starts only "
                        "jobs expected to end within this")
    p.add_argument("--predictor", default="none",
                   help="simulate --predictor: duration estimates learnt online (mean, quantile, "
                        "gbt) instead of the trace's exact run times")
    p.add_argument("--reclaim-cost-ratio", type=float, default=0,
                   help="preemption.reclaim_cost_ratio: reclaim only when the GPU time the "
                   "queue would go without waiting is at least this x the victims' price")
    p.add_argument("--restart-overhead", type=float, default=0,
                   help="simulate --restart-overhead: seconds each restart after a preemption "
                   "re-initialises")
    p.add_argument("--checkpoint-gb", type=float, default=0,
                   help="simulate --checkpoint-gb: checkpoint read back at each such restart")
    p.add_argument("--jobs", type=int, default=2, help="simulations in parallel")
    args = p.parse_args()
    jobs = load(args.trace, args.start, args.days)
    print(f"window {args.start} + {args.days:g} days: {len(jobs)} jobs", file=sys.stderr)
    print("| tenants | jobs | demand GPUs | cluster GPUs | policy | Jain | SLA met | mean JCT h "
          "| mean wait h | preemptions | of which reclaim | lost GPU-h | grace GPU-h | restart GPU-h "
          "| preemption cost (% of GPU-h) | GPU alloc "
          "| sim s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in [int(x) for x in args.tenants.split(",")]:
        out = os.path.join(args.out, f"n{n}")
        info = prepare(jobs, n, args, out)
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
            rows = list(ex.map(lambda pol: run(args, out, pol), args.policies.split(",")))
        for r in rows:
            jain = "n/a" if r["jain"] is None else f"{r['jain']:.3f}"
            sla = "n/a" if r["sla"] is None else f"{100 * r['sla']:.1f} %"
            print(f"| {n} | {info['jobs']} | {info['demand_gpus']:.0f} | {info['cluster_gpus']} "
                  f"| {r['policy']} | {jain} | {sla} | {r['jct_h']:.2f} | {r['wait_h']:.2f} "
                  f"| {r['preemptions']} | {r['reclaims']} | {r['lost_gpu_h']:.1f} "
                  f"| {r['grace_gpu_h']:.1f} | {r['restart_gpu_h']:.1f} | {r['cost_pct']:.2f} % "
                  f"| {100 * r['alloc']:.1f} % "
                  f"| {r['seconds']:.1f} |", flush=True)


if __name__ == "__main__":
    main()

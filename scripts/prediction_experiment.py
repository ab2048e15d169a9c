#!/usr/bin/env python3
"""Predicted-duration scheduling on Philly (issue 6, docs/prediction.md).

Replays Philly's philly.csv (every virtual cluster, or a window of it) on one cluster and
compares, on mean JCT:
  fifo            FIFO + EASY backfill (backfill with the trace's durations, as today)
  fifo/pred       FIFO + EASY backfill planning with predicted durations
  sjf/perfect     shortest job first, knowing every duration (duration_estimate = actual)
  sjf/pred        shortest job first on predicted durations
  qssf/perfect    Helios' quasi-shortest-service-first (GPUs x duration), perfect knowledge
  qssf/pred       QSSF on predicted durations
The predictions come from `tessera simulate --predictor` (learnt online from the jobs that
finished so far in the simulation; no peeking).

    scripts/prediction_experiment.py --tessera build/release/src/tessera \
        --trace ../shared/data/philly/pollux/philly.csv --out /tmp/pred

Writes workload.jsonl, cluster.yaml and one --json per run under --out, and prints the table.
"""
import argparse
import concurrent.futures
import datetime
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from philly_trace import read_philly  # noqa: E402


def load(trace, start, days):
    jobs = read_philly(trace, start, days)
    if not jobs:
        sys.exit(f"{trace}: no jobs")
    return jobs


def write_inputs(jobs, args):
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "workload.jsonl"), "w") as f:
        for j in jobs:
            # The name carries nothing (Philly's public trace has no job names or users): the
            # predictor sees the virtual cluster (tenant), the GPU count and the submit time.
            f.write(json.dumps({"name": f"philly-{j['line']}", "tenant": j["vc"],
                                "submit": j["submit"], "members": j["gpus"], "gpus": 1,
                                "work": j["work"], "duration_estimate": j["work"],
                                "model": "ResNet-50 (batch size 64)"}) + "\n")
    with open(os.path.join(args.out, "cluster.yaml"), "w") as f:
        f.write(f"racks: {args.racks}\nnodes_per_rack: {args.nodes_per_rack}\n"
                f"node: {{gpus: 8}}\n")


RUNS = [
    ("fifo", "fifo", "none"),
    ("fifo/pred", "fifo", "PRED"),
    ("sjf/perfect", "sjf", "none"),
    ("sjf/pred", "sjf", "PRED"),
    ("qssf/perfect", "qssf", "none"),
    ("qssf/pred", "qssf", "PRED"),
]


def run(args, label, policy, predictor):
    res = os.path.join(args.out, label.replace("/", "_") + ".json")
    cmd = [args.tessera, "simulate", "--workload", os.path.join(args.out, "workload.jsonl"),
           "--cluster", os.path.join(args.out, "cluster.yaml"), "--policy", policy,
           "--predictor", predictor, "--backfill", args.backfill, "--json", res, "--quiet",
           "--series-interval", "0"]
    t = time.time()
    subprocess.run(cmd, check=True)
    with open(res) as f:
        r = json.load(f)
    return label, r, time.time() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tessera", default="build/release/src/tessera")
    ap.add_argument("--trace", default="../shared/data/philly/pollux/philly.csv")
    ap.add_argument("--out", default="/tmp/tessera-prediction")
    ap.add_argument("--start", default="", help="window start (default: the first job)")
    ap.add_argument("--days", type=float, default=0, help="window length (0: everything)")
    ap.add_argument("--racks", type=int, default=1)
    ap.add_argument("--nodes-per-rack", type=int, default=96)
    ap.add_argument("--predictor", default="quantile", help="quantile|gbt|mean")
    ap.add_argument("--backfill", default="easy", help="none|easy|greedy")
    ap.add_argument("--jobs", type=int, default=2, help="runs in parallel")
    args = ap.parse_args()

    jobs = load(args.trace, args.start, args.days)
    write_inputs(jobs, args)
    gpus = args.racks * args.nodes_per_rack * 8
    print(f"{len(jobs)} jobs, {len(set(j['vc'] for j in jobs))} virtual clusters, "
          f"{gpus} GPUs, predictor {args.predictor}, backfill {args.backfill}")
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as ex:
        futures = [ex.submit(run, args, label, policy,
                             args.predictor if pred == "PRED" else "none")
                   for label, policy, pred in RUNS]
        for fut in futures:
            label, r, secs = fut.result()
            results[label] = (r, secs)
    fifo = results["fifo"][0]["jct"]["mean"]
    print(f"{'run':<14}{'mean JCT h':>12}{'p50 JCT h':>11}{'p95 JCT h':>11}"
          f"{'mean queue h':>14}{'fifo/run':>10}{'secs':>7}")
    summary = []
    for label, _, _ in RUNS:
        r, secs = results[label]
        jct = r["jct"]
        print(f"{label:<14}{jct['mean'] / 3600:>12.2f}{jct['p50'] / 3600:>11.2f}"
              f"{jct['p95'] / 3600:>11.2f}{r['queueing_delay']['mean'] / 3600:>14.2f}"
              f"{fifo / jct['mean']:>10.2f}{secs:>7.1f}")
        summary.append({"run": label, "mean_jct": jct["mean"], "p50_jct": jct["p50"],
                        "p95_jct": jct["p95"], "mean_queueing": r["queueing_delay"]["mean"],
                        "fifo_over_run": fifo / jct["mean"]})
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump({"jobs": len(jobs), "gpus": gpus, "predictor": args.predictor,
                   "backfill": args.backfill, "runs": summary}, f, indent=2)


if __name__ == "__main__":
    main()

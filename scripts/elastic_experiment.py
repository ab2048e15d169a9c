#!/usr/bin/env python3
"""Elastic gangs against fixed-size gangs on Pollux's workloads.

Each Pollux job (name,time,application,num_replicas,batch_size) becomes a JSONL job of the
same application and global batch. Fixed: exactly num_replicas GPUs. Elastic: between
ceil(min_frac x num_replicas) and max_mult x num_replicas GPUs (--elastic: it starts with what
fits, grows into idle GPUs, shrinks before anything is preempted). Both run on the Tiresias
cluster spec (64 GPUs) with the same order; a resize costs --restart seconds. Prints mean JCT,
GPU allocation and resizes per workload and their means.

  scripts/elastic_experiment.py --tessera build/release/src/tessera \\
      --workloads ../shared/data/philly/pollux/workloads --out /tmp/elastic
"""
import argparse, csv, json, math, os, subprocess, sys


def convert(src, dst, elastic, args):
    with open(src) as f, open(dst, "w") as out:
        for row in csv.DictReader(f):
            n = int(row["num_replicas"])
            o = {"name": row["name"], "submit": float(row["time"]), "model": row["application"],
                 "batch_size": int(row["batch_size"]), "restart_cost": args.restart}
            if elastic:
                o["min_members"] = max(1, math.ceil(args.min_frac * n))
                o["max_members"] = max(o["min_members"], min(args.max_gpus, args.max_mult * n))
            else:
                o["members"] = n
            out.write(json.dumps(o) + "\n")


def run(args, workload, elastic, out):
    res = out + (".elastic.json" if elastic else ".fixed.json")
    cmd = [args.tessera, "simulate", "--workload", workload, "--cluster", args.cluster,
           "--policy", args.policy, "--json", res, "--quiet", "--series-interval", "0"]
    if elastic:
        cmd.append("--elastic")
    subprocess.run(cmd, check=True)
    with open(res) as f:
        r = json.load(f)
    return (r["jct"]["mean"] / 3600, r["gpu_allocation"], r["resizes"], r["preemptions"],
            r["makespan"] / 3600, r["effective_utilisation"])


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessera", required=True)
    p.add_argument("--workloads", required=True, help="folder of Pollux workload-N.csv")
    p.add_argument("--cluster", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                     "shared", "data", "philly", "tiresias",
                                                     "cluster_spec.csv"))
    p.add_argument("--out", required=True)
    p.add_argument("--policy", default="fifo")
    p.add_argument("--min-frac", type=float, default=0.5)
    p.add_argument("--max-mult", type=int, default=2)
    p.add_argument("--max-gpus", type=int, default=16)
    p.add_argument("--restart", type=float, default=30, help="seconds per (re)start or resize")
    p.add_argument("--count", type=int, default=8, help="workloads to run")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    names = sorted((f for f in os.listdir(args.workloads) if f.endswith(".csv")),
                   key=lambda f: int("".join(c for c in f if c.isdigit()) or 0))[:args.count]
    print("| workload | mean JCT h fixed / elastic | GPU allocation | effective utilisation "
          "| makespan h | resizes |")
    print("|---|---|---|---|---|---|")
    tot = [0.0] * 8
    for name in names:
        base = os.path.join(args.out, name[:-4])
        rows = []
        for elastic in (False, True):
            jl = base + (".elastic.jsonl" if elastic else ".fixed.jsonl")
            convert(os.path.join(args.workloads, name), jl, elastic, args)
            rows.append(run(args, jl, elastic, base))
        (fj, fa, _, _, fm, fe), (ej, ea, er, _, em, ee) = rows
        for i, v in enumerate((fj, ej, fa, ea, fe, ee, fm, em)):
            tot[i] += v
        print(f"| {name} | {fj:.2f} / {ej:.2f} | {100 * fa:.1f} / {100 * ea:.1f} % "
              f"| {100 * fe:.1f} / {100 * ee:.1f} % | {fm:.1f} / {em:.1f} | {er} |")
    t = [v / len(names) for v in tot]
    print(f"| mean | {t[0]:.2f} / {t[1]:.2f} | {100 * t[2]:.1f} / {100 * t[3]:.1f} % "
          f"| {100 * t[4]:.1f} / {100 * t[5]:.1f} % | {t[6]:.1f} / {t[7]:.1f} | |")


if __name__ == "__main__":
    sys.exit(main())

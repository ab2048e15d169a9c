#!/usr/bin/env python3
"""Heterogeneity-aware placement against type-blind placement (Gavel's comparison).

Philly jobs (submit time, duration, GPUs) from a window of `philly.csv`, each given a model
measured by Gavel on K80, P100 and V100 (seeded draw), on a cluster of equal numbers of K80,
P100 and V100 servers (4 GPUs each) sized at --load x the window's average GPU demand.
Every job's work is its Philly duration on a V100; on the other types it runs at Gavel's
measured relative throughput. Runs each order type-blind and with --hetero and prints mean JCT.

  scripts/hetero_experiment.py --tessera build/release/src/tessera \\
      --trace ../shared/data/philly/pollux/philly.csv --gavel \\
      ../shared/data/philly/gavel/simulation_throughputs.json --out /tmp/hetero
"""
import argparse, json, math, os, random, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from philly_trace import read_philly  # noqa: E402


def gavel_models(path):
    """Models measured at scale 1 on all three types, with their K80/P100/V100 throughputs."""
    d = json.load(open(path))
    out = {}
    for key, v in d["v100"].items():
        name, scale = eval(key)  # keys are Python tuple literals: "('ResNet-50 (batch size 64)', 1)"
        if scale != 1:
            continue
        try:
            k, p, v1 = (d[t][key]["null"] for t in ("k80", "p100", "v100"))
        except KeyError:
            continue
        if k > 0 and p > 0 and v1 > 0:
            out[name] = (k / v1, p / v1)
    return out


def load(trace, start, days, max_gpus):
    """(submit, line, work, gpus) of the jobs of at most max_gpus GPUs with a duration."""
    return [(j["submit"], j["line"], j["work"], j["gpus"]) for j in read_philly(trace, start, days)
            if j["gpus"] <= max_gpus and j["work"] > 0]


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessera", required=True)
    p.add_argument("--trace", required=True)
    p.add_argument("--gavel", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--start", default="2017-10-09")
    p.add_argument("--days", type=float, default=3)
    p.add_argument("--load", type=float, default=1.0,
                   help="cluster GPUs (V100-equivalent) as a fraction of average demand")
    p.add_argument("--max-gpus", type=int, default=4, help="largest job kept (one server)")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--orders", default="fifo,las")
    p.add_argument("--rounds", type=float, default=0,
                   help="also run round-based scheduling (simulate --rounds S), type-blind "
                        "and heterogeneity-aware (Gavel's LP), and print them beside")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    models = gavel_models(args.gavel)
    names = sorted(models)
    jobs = load(args.trace, args.start, args.days, args.max_gpus)
    horizon = args.days * 86400
    demand = sum(g * min(w, horizon - s) for s, _, w, g in jobs) / horizon
    # Capacity in V100-equivalents: a K80 server counts for its mean speed, etc.
    k_speed = sum(m[0] for m in models.values()) / len(models)
    p_speed = sum(m[1] for m in models.values()) / len(models)
    per_type = max(1, math.ceil(args.load * demand / (4 * (1 + k_speed + p_speed))))
    with open(os.path.join(args.out, "cluster.yaml"), "w") as f:
        f.write("nodes:\n")
        for t in ("V100", "P100", "K80"):
            for i in range(per_type):
                f.write(f"  - {{name: {t.lower()}-{i}, rack: {t.lower()}, spine: s0, gpus: 4, "
                        f"gpu_type: {t}}}\n")
    print(f"{len(jobs)} jobs, average demand {demand:.0f} GPUs, cluster {per_type} servers x 4 "
          f"GPUs of each of V100, P100, K80 ({len(names)} Gavel models)", file=sys.stderr)
    if args.rounds > 0:
        print("| order | seed | type-blind mean JCT h | hetero mean JCT h | ratio | rounds, "
              "type-blind | rounds, Gavel LP | ratio | Gavel LP vs type-blind event-driven |")
        print("|---|---|---|---|---|---|---|---|---|")
    else:
        print("| order | seed | type-blind mean JCT h | hetero mean JCT h | ratio |")
        print("|---|---|---|---|---|")
    for order in args.orders.split(","):
        ratios = []
        for seed in range(1, args.seeds + 1):
            rng = random.Random(seed)
            wl = os.path.join(args.out, f"w{seed}.jsonl")
            with open(wl, "w") as f:
                for s, line, w, g in jobs:
                    f.write(json.dumps({"name": f"philly-{line}", "submit": s, "members": g,
                                        "work": w, "model": rng.choice(names)}) + "\n")
            res = []
            for rounds in ((0, args.rounds) if args.rounds > 0 else (0,)):
                for hetero in (False, True):
                    out = os.path.join(args.out, f"{order}-{seed}-{int(hetero)}-{rounds:g}.json")
                    cmd = [args.tessera, "simulate", "--workload", wl, "--cluster",
                           os.path.join(args.out, "cluster.yaml"), "--policy", order, "--json",
                           out, "--quiet", "--series-interval", "0"]
                    if hetero:
                        cmd.append("--hetero")
                    if rounds > 0:
                        cmd += ["--rounds", f"{rounds:g}", "--no-preemption"]
                    subprocess.run(cmd, check=True)
                    res.append(json.load(open(out))["jct"]["mean"] / 3600)
            ratios.append(res[0] / res[1])
            line = f"| {order} | {seed} | {res[0]:.2f} | {res[1]:.2f} | {res[0] / res[1]:.2f}x |"
            if args.rounds > 0:
                line += (f" {res[2]:.2f} | {res[3]:.2f} | {res[2] / res[3]:.2f}x | "
                         f"{res[0] / res[3]:.2f}x |")
            print(line, flush=True)
        print(f"| {order} | mean | | | {sum(ratios) / len(ratios):.2f}x |")


if __name__ == "__main__":
    sys.exit(main())

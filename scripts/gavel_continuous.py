#!/usr/bin/env python3
"""Gavel's continuous-single experiment (OSDI'20, section 7.2) on Tessera's round-based scheduling.

Gavel generates jobs as its simulator does: Poisson arrivals at --rate jobs per hour, each job a
model drawn uniformly from those its throughputs file measured on K80, P100 and V100 at scale 1,
and a duration on a V100 drawn from Philly's distribution (with probability 0.8, 10^U(1.5, 3)
minutes, else 10^U(3, 4) minutes). The cluster is theirs: 36 V100, 36 P100 and 36 K80. Mean JCT
is measured over a window of jobs in steady state (--window, by arrival index), as Gavel does.
Each rate runs type-blind rounds and rounds with Gavel's heterogeneity-aware LP (both
`simulate --rounds 360`, las), and event-driven type-blind las for reference.

  scripts/gavel_continuous.py --tessera build/release/src/tessera \\
      --gavel ../shared/data/philly/gavel/simulation_throughputs.json --out /tmp/gavel
"""
import argparse, json, math, os, random, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hetero_experiment import gavel_models  # noqa: E402


def generate(models, rate, jobs, seed):
    rng = random.Random(seed)
    names = sorted(models)
    t = 0.0
    out = []
    for i in range(jobs):
        t += rng.expovariate(rate / 3600.0)
        if rng.random() >= 0.8:
            minutes = 10 ** rng.uniform(3, 4)
        else:
            minutes = 10 ** rng.uniform(1.5, 3)
        out.append({"name": f"job-{i}", "submit": round(t, 3), "members": 1,
                    "work": round(60 * minutes, 3), "model": rng.choice(names)})
    return out


def window_jct(events, lo, hi):
    submit, finish = {}, {}
    for line in open(events):
        e = json.loads(line)
        if e["type"] == "submit":
            submit[e["job"]] = e["t"]
        elif e["type"] == "finish":
            finish[e["job"]] = e["t"]
    jcts = [finish[f"job-{i}"] - submit[f"job-{i}"] for i in range(lo, hi)]
    return sum(jcts) / len(jcts) / 3600


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessera", required=True)
    p.add_argument("--gavel", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--rates", default="1,2,3,4,5,5.5,6", help="jobs per hour")
    p.add_argument("--jobs", type=int, default=6000,
                   help="jobs generated; more than the window's end, so that arrivals go on "
                   "while the window's jobs run")
    p.add_argument("--window", default="4000,5000", help="arrival indices measured, [lo, hi)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--round", type=float, default=360)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    models = gavel_models(args.gavel)
    lo, hi = (int(x) for x in args.window.split(","))
    cluster = os.path.join(args.out, "cluster.yaml")
    with open(cluster, "w") as f:
        f.write("nodes:\n")
        for t in ("V100", "P100", "K80"):
            for i in range(9):
                f.write(f"  - {{name: {t.lower()}-{i}, rack: {t.lower()}, spine: s0, gpus: 4, "
                        f"gpu_type: {t}}}\n")
    print("| jobs/h | event-driven las | rounds, type-blind | rounds, Gavel LP | LP vs blind rounds "
          "| LP vs event-driven |")
    print("|---|---|---|---|---|---|")
    for rate in (float(x) for x in args.rates.split(",")):
        wl = os.path.join(args.out, f"w-{rate:g}.jsonl")
        with open(wl, "w") as f:
            for j in generate(models, rate, args.jobs, args.seed):
                f.write(json.dumps(j) + "\n")
        res = []
        for extra in ([], ["--rounds", f"{args.round:g}", "--no-preemption"],
                      ["--rounds", f"{args.round:g}", "--no-preemption", "--hetero"]):
            ev = os.path.join(args.out, f"e-{rate:g}-{len(res)}.jsonl")
            cmd = [args.tessera, "simulate", "--workload", wl, "--cluster", cluster, "--policy",
                   "las", "--quiet", "--series-interval", "0", "--events", ev] + extra
            subprocess.run(cmd, check=True)
            res.append(window_jct(ev, lo, hi))
        print(f"| {rate:g} | {res[0]:.2f} | {res[1]:.2f} | {res[2]:.2f} | {res[1] / res[2]:.2f}x "
              f"| {res[0] / res[2]:.2f}x |", flush=True)


if __name__ == "__main__":
    sys.exit(main())

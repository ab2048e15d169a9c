#!/usr/bin/env python3
"""Goodput-aware scheduling against Pollux (OSDI'21) on Pollux's own workloads.

Runs `tessera simulate` on workloads 1-8 of each relative load (workloads-0.5, workloads,
workloads-1.5, workloads-2.0 under philly/pollux) on Pollux's cluster (16 nodes x 4 GPUs, the
Tiresias cluster spec), with las and with --policy goodput (srpt and las priorities), and prints
the mean JCT beside the means of Pollux's published runs (results-jobload/<policy>-<load>/
summary.json: Pollux, its Tiresias and Optimus baselines). Then, at load 1.0, the mean JCT per
application beside Pollux's. Nothing is written outside --out.

  scripts/goodput_experiment.py --tessera build/release/src/tessera --data ../shared/data \\
      --out /tmp/goodput
"""
import argparse, collections, concurrent.futures, json, os, subprocess, sys

LOADS = [("0.5", "workloads-0.5"), ("1.0", "workloads"), ("1.5", "workloads-1.5"),
         ("2.0", "workloads-2.0")]
PUBLISHED = ["pollux", "tiresias", "optimus"]


def simulate(args, load_dir, i, name, extra):
    pollux = os.path.join(args.data, "philly", "pollux")
    out = os.path.join(args.out, f"{name}-{load_dir}-{i}")
    cmd = [args.tessera, "simulate", "--workload",
           os.path.join(pollux, load_dir, f"workload-{i}.csv"), "--cluster",
           os.path.join(args.data, "philly", "tiresias", "cluster_spec.csv"), "--data-dir",
           args.data, "--json", out + ".json", "--events", out + ".jsonl", "--quiet",
           "--series-interval", "0"] + extra
    subprocess.run(cmd, check=True)
    with open(out + ".json") as f:
        r = json.load(f)
    jct = {}
    sub = {}
    with open(out + ".jsonl") as f:
        for line in f:
            e = json.loads(line)
            if e["type"] == "submit":
                sub[e["job"]] = e["t"]
            elif e["type"] == "finish":
                jct[e["job"]] = e["t"] - sub[e["job"]]
    return r["jct"]["mean"], r["resizes"], r["preemptions"], jct


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessera", required=True)
    p.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                  "shared", "data"))
    p.add_argument("--out", required=True)
    p.add_argument("--jobs", type=int, default=2, help="simulations at once")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    runs = {"las": ["--policy", "las"],
            "goodput (srpt)": ["--policy", "goodput"],
            "goodput (las)": ["--policy", "goodput", "--goodput-priority", "las",
                              "--goodput-service-scale", "7200", "--goodput-exponent", "0.5"]}
    results = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {}
        for load, load_dir in LOADS:
            for name, extra in runs.items():
                for i in range(1, 9):
                    key = (load, name, i)
                    futures[key] = pool.submit(simulate, args, load_dir, i,
                                               name.replace(" ", "").replace("(", "-")
                                               .replace(")", ""), extra)
        for key, fut in futures.items():
            results[key] = fut.result()

    print("Mean JCT (s) over workloads 1-8, 16 x 4 GPUs; published runs from "
          "results-jobload/<policy>-<load>/summary.json\n")
    head = ["load"] + [f"{q} (published)" for q in PUBLISHED] + list(runs)
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for load, _ in LOADS:
        row = [load]
        for q in PUBLISHED:
            path = os.path.join(args.data, "philly", "pollux", "results-jobload",
                                f"{q}-{load}", "summary.json")
            with open(path) as f:
                row.append(f"{json.load(f)['mean']:,.0f}")
        for name in runs:
            mean = sum(results[(load, name, i)][0] for i in range(1, 9)) / 8
            resizes = sum(results[(load, name, i)][1] for i in range(1, 9)) / 8
            prem = sum(results[(load, name, i)][2] for i in range(1, 9)) / 8
            row.append(f"{mean:,.0f}" + (f" ({resizes:.0f} resizes, {prem:.0f} suspensions "
                                         "per workload)" if name != "las" else ""))
        print("| " + " | ".join(row) + " |")

    print("\nLoad 1.0, mean JCT (s) per application (jobs over workloads 1-8)\n")
    path = os.path.join(args.data, "philly", "pollux", "results-jobload", "pollux-1.0",
                        "summary.json")
    with open(path) as f:
        published = dict(json.load(f)["jcts"])
    per_app = collections.defaultdict(lambda: collections.defaultdict(list))
    for i in range(1, 9):
        for job, jct in published[f"workload-{i}"].items():
            per_app[job.split("-")[0]]["pollux (published)"].append(jct)
        for name in runs:
            for job, jct in results[("1.0", name, i)][3].items():
                per_app[job.split("-")[0]][name].append(jct)
    cols = ["pollux (published)"] + list(runs)
    print("| application | jobs | " + " | ".join(cols) + " |")
    print("|" + "---|" * (len(cols) + 2))
    for app in sorted(per_app):
        v = per_app[app]
        print(f"| {app} | {len(v['pollux (published)'])} | " +
              " | ".join(f"{sum(v[c]) / len(v[c]):,.0f}" for c in cols) + " |")


if __name__ == "__main__":
    sys.exit(main())

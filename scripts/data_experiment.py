#!/usr/bin/env python3
"""Dataset-aware staging across storage tiers (docs/data.md): blind placement, locality, and
locality + pre-staging, on two experiments.

A. Pollux's workloads 1-8 at load 1.0 (philly/pollux/workloads) on 16 nodes x 4 V100 in 4 racks,
   each application reading its published dataset (--pollux-datasets).
B. A hyper-parameter sweep: 100 trials of ResNet-50 on one ImageNet copy (4 GPUs, 1 hour of work
   each, all submitted at once) on the same 64 GPUs, beside Pollux's workload 1 as background
   load; time-to-solution is from the sweep's submission to its last trial's end.

Storage (both): an object store of 1 GB/s in all, 0.25 GB/s per transfer; a 400 GB cache per
rack at 1 GB/s; 160 GB of NVMe per node at 2 GB/s (ImageNet, 144 GB, fits one node's NVMe
alone). Prints markdown tables; writes the runs' JSON under --out.

  python3 scripts/data_experiment.py --tessera build/release/src/tessera --data ../shared/data \\
      --out /tmp/data
"""
import argparse
import concurrent.futures
import csv
import json
import os
import subprocess

CLUSTER = """racks: 4
nodes_per_rack: 4
node: {gpus: 4, gpu_type: V100}
storage:
  object_store: {bandwidth_gbs: 1, per_job_gbs: 0.25}
  cache: {per: rack, capacity_gb: 400, bandwidth_gbs: 1}
  nvme: {capacity_gb: 160, bandwidth_gbs: 2}
"""

# C: the sweep alone, I/O-bound without local copies: the object store (6 GB/s, 1 GB/s a
# stream) feeds 16 trials reading 0.53 GB/s each at 71 % of what they read; with tiers, each node
# copies ImageNet once (through its rack's cache) and reads it locally.
OBJECT_ONLY = """racks: 4
nodes_per_rack: 4
node: {gpus: 4, gpu_type: V100}
storage:
  object_store: {bandwidth_gbs: 6, per_job_gbs: 1}
"""
TIERS = OBJECT_ONLY + """  cache: {per: rack, capacity_gb: 400, bandwidth_gbs: 2}
  nvme: {capacity_gb: 200, bandwidth_gbs: 3}
"""

CONFIGS = [
    ("blind", []),
    ("locality", ["--data-locality"]),
    ("locality, wait 10 min", ["--data-locality", "--locality-wait", "600"]),
    ("locality + pre-staging", ["--data-locality", "--prestage", "--prestage-gbs", "0.5"]),
    ("locality + pre-staging, queue-aware eviction",
     ["--data-locality", "--prestage", "--prestage-gbs", "0.5", "--cache-eviction", "queue"]),
    ("locality + pre-staging + residency",
     ["--data-locality", "--prestage", "--prestage-gbs", "0.5", "--residency"]),
]

APP_DATASET = {"bert": "squad", "cifar10": "cifar10", "deepspeech2": "librispeech",
               "imagenet": "imagenet", "ncf": "movielens", "yolov3": "coco"}


def run(args, workload, tag, extra, events=False, cluster="cluster.yaml"):
    out = os.path.join(args.out, tag + ".json")
    cmd = [args.tessera, "simulate", "--workload", workload, "--cluster",
           os.path.join(args.out, cluster), "--data-dir", args.data, "--policy", "las",
           "--json", out, "--quiet"] + extra
    ev = os.path.join(args.out, tag + ".events.jsonl")
    if events:
        cmd += ["--events", ev]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        r = json.load(f)
    if events:
        r["_events"] = ev
    return r


def sweep_workload(args, background=True):
    """100 ImageNet trials at t=0, with Pollux workload 1 (its jobs' datasets) beside them."""
    path = os.path.join(args.out, "sweep.jsonl" if background else "sweep-alone.jsonl")
    with open(path, "w") as f:
        for i in range(100):
            f.write(json.dumps({"name": f"trial-{i}", "tenant": "sweep", "submit": 0, "members": 4,
                                "gpus": 1, "work": 3600, "duration_estimate": 3600,
                                "dataset": "imagenet"}) + "\n")
        if not background:
            return path
        src = os.path.join(args.data, "philly", "pollux", "workloads", "workload-1.csv")
        with open(src) as g:
            for row in csv.DictReader(g):
                f.write(json.dumps({"name": row["name"], "tenant": "others",
                                    "submit": float(row["time"]),
                                    "members": int(row["num_replicas"]), "gpus": 1,
                                    "model": row["application"],
                                    "batch_size": int(row["batch_size"]),
                                    "dataset": APP_DATASET[row["application"]]}) + "\n")
    return path


def sweep_time(events_path):
    start, end = None, 0.0
    with open(events_path) as f:
        for line in f:
            e = json.loads(line)
            if not str(e.get("job", "")).startswith("trial-"):
                continue
            if e["type"] == "submit":
                start = e["t"] if start is None else min(start, e["t"])
            if e["type"] == "finish":
                end = max(end, e["t"])
    return (end - start) / 3600


def row(name, d, extra):
    nvme = d.get("nvme_hit_rate") or 0
    cache = d.get("cache_hit_rate") or 0
    return (f"| {name} | {extra} | {d['staging_gpu_hours']:.1f} | "
            f"{d['unqueued_staging_gpu_hours']:.1f} | {d['cold_staging_gpu_hours']:.1f} | "
            f"{100 * nvme:.0f} % | "
            f"{100 * cache:.0f} % | {d['object_gb'] / 1000:.2f} | {d['cache_gb'] / 1000:.2f} | "
            f"{d['prestaged_gb'] / 1000:.2f} |")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessera", required=True)
    p.add_argument("--data", default="../shared/data")
    p.add_argument("--out", required=True)
    p.add_argument("--jobs", type=int, default=2)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, text in (("cluster.yaml", CLUSTER), ("object-only.yaml", OBJECT_ONLY),
                       ("tiers.yaml", TIERS)):
        with open(os.path.join(args.out, name), "w") as f:
            f.write(text)
    alone = sweep_workload(args, background=False)
    pollux = os.path.join(args.data, "philly", "pollux", "workloads")
    sweep = sweep_workload(args)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        a = {(c, i): pool.submit(run, args, os.path.join(pollux, f"workload-{i}.csv"),
                                 f"pollux-{i}-{n}", ["--pollux-datasets"] + extra)
             for n, (c, extra) in enumerate(CONFIGS) for i in range(1, 9)}
        b = {c: pool.submit(run, args, sweep, f"sweep-{n}", extra, True)
             for n, (c, extra) in enumerate(CONFIGS)}
        c_runs = {"object store only": pool.submit(run, args, alone, "alone-object", [], True,
                                                   "object-only.yaml")}
        for n, (c, extra) in enumerate(CONFIGS):
            c_runs["tiers, " + c] = pool.submit(run, args, alone, f"alone-{n}", extra, True,
                                                "tiers.yaml")
        a = {k: v.result() for k, v in a.items()}
        b = {k: v.result() for k, v in b.items()}
        c_runs = {k: v.result() for k, v in c_runs.items()}

    head = ("| placement | {} | GPU-h lost to staging | of which unqueued | of which unhideable | NVMe hits "
            "| cache hits | object TB | cache TB | of which pre-staged TB |\n"
            "|---|---|---|---|---|---|---|---|---|---|")
    print("A. Pollux workloads 1-8 at load 1.0, 64 V100s, each application's published dataset\n")
    print(head.format("mean JCT s"))
    for c, _ in CONFIGS:
        runs = [a[(c, i)] for i in range(1, 9)]
        jct = sum(r["jct"]["mean"] * r["finished"] for r in runs) / sum(r["finished"] for r in runs)
        d = {k: sum((r["data"][k] or 0) for r in runs) for k in
             ("staging_gpu_hours", "unqueued_staging_gpu_hours", "cold_staging_gpu_hours",
              "object_gb", "cache_gb",
              "prestaged_gb", "node_reads")}
        reads = d["node_reads"]
        d["nvme_hit_rate"] = sum(r["data"]["nvme_hit_rate"] * r["data"]["node_reads"]
                                 for r in runs) / reads
        d["cache_hit_rate"] = sum(r["data"]["cache_hit_rate"] * r["data"]["node_reads"]
                                  for r in runs) / reads
        print(row(c, d, f"{jct:,.0f}"))
    print("\nB. 100-trial ImageNet sweep beside Pollux workload 1, 64 V100s\n")
    print(head.format("sweep time-to-solution h"))
    for c, _ in CONFIGS:
        r = b[c]
        print(row(c, r["data"], f"{sweep_time(r['_events']):.2f}"))
    print("\nC. The same sweep alone, I/O-bound without local copies (object store 6 GB/s)\n")
    lines = head.format("sweep time-to-solution h").split("\n")
    print(lines[0] + " node reads streamed |\n" + lines[1] + "---|")
    for c, r in c_runs.items():
        print(row(c, r["data"], f"{sweep_time(r['_events']):.2f}") + f" {r['data']['streamed']} |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Topology-aware placement experiment (issue 5; docs/topology.md).

A cluster of 4 racks x 8 nodes x 8 V100 under one spine, node NICs of 12.5 GB/s and rack
uplinks oversubscribed --oversub:1 (each node gets 12.5/oversub GB/s across racks). Pollux's
workloads (fixed-batch jobs of six applications with known model sizes) are replayed with
the same queue order and each placement scorer, twice: with the communication model (a ring
crossing racks pays its all-reduce over the oversubscribed uplinks) and with --no-comm-model
(an ideal, non-blocking network: only what Pollux measured inside one rack). Preemption is
off, so a job's training time is its JCT minus its queueing delay.

    scripts/topology_experiment.py --tessera build/release/src/tessera \\
        --data ../shared/data --out /tmp/topo

Prints one row per placement: mean JCT on the oversubscribed network and on the ideal one,
mean training time, and the lengthening of training against the ideal network, for the same
placement and for the network-aware reference (topology placement on the ideal network).
"""
import argparse
import concurrent.futures
import glob
import json
import os
import subprocess
import sys
import time

PLACEMENTS = ["bestfit", "spread", "random", "topology"]


def write_cluster(path, oversub, racks, nodes_per_rack, gpus):
    nic = 12.5
    with open(path, "w") as f:
        f.write(f"# {racks} racks x {nodes_per_rack} nodes x {gpus} V100, one spine.\n"
                f"# links.rack = crossing nodes of one rack (100 Gb/s node NIC);\n"
                f"# links.spine = crossing racks: the rack uplink oversubscribed {oversub:g}:1,\n"
                f"# i.e. {nic:g}/{oversub:g} GB/s per node when every node talks across racks.\n"
                f"racks: {racks}\nnodes_per_rack: {nodes_per_rack}\n"
                f"node: {{gpus: {gpus}, gpu_type: V100, cpu_milli: 64000, mem_mib: 524288, "
                f"nvlink_domain: {gpus}}}\n"
                f"links:\n"
                f"  rack: {{bandwidth_gbps: {nic:g}, latency_us: 5}}\n"
                f"  spine: {{bandwidth_gbps: {nic / oversub:g}, latency_us: 8}}\n")


def run(args, workload, placement, comm, out):
    tag = f"{os.path.basename(os.path.dirname(workload))}-" \
          f"{os.path.splitext(os.path.basename(workload))[0]}-{placement}-{'comm' if comm else 'ideal'}"
    res = os.path.join(out, tag + ".json")
    cmd = [args.tessera, "simulate", "--workload", workload, "--cluster",
           os.path.join(out, "cluster.yaml"), "--policy", f"{args.order}+{placement}",
           "--no-preemption", "--data-dir", args.data, "--series-interval", "0", "--quiet",
           "--json", res]
    if not comm:
        cmd.append("--no-comm-model")
    subprocess.run(cmd, check=True)
    with open(res) as f:
        r = json.load(f)
    jobs = r["finished"]
    jct = r["jct"]["mean"]
    wait = r["queueing_delay"]["mean"]
    return {"workload": workload, "placement": placement, "comm": comm, "jobs": jobs,
            "jct": jct, "train": jct - wait}


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessera", required=True)
    p.add_argument("--data", default="../shared/data")
    p.add_argument("--out", required=True)
    p.add_argument("--workloads", default="philly/pollux/workloads-2.0/workload-[1-8].csv",
                   help="glob under --data (default: Pollux's 2x-load workloads 1-8)")
    p.add_argument("--order", default="fifo", help="queue order shared by every run")
    p.add_argument("--oversub", type=float, default=4.0, help="rack uplink oversubscription")
    p.add_argument("--racks", type=int, default=4)
    p.add_argument("--nodes-per-rack", type=int, default=8)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--jobs", type=int, default=2, help="simulations in parallel")
    args = p.parse_args()
    workloads = sorted(glob.glob(os.path.join(args.data, args.workloads)))
    if not workloads:
        sys.exit(f"no workload matches {os.path.join(args.data, args.workloads)}")
    os.makedirs(args.out, exist_ok=True)
    write_cluster(os.path.join(args.out, "cluster.yaml"), args.oversub, args.racks,
                  args.nodes_per_rack, args.gpus)
    t0 = time.time()
    runs = [(w, pl, comm) for w in workloads for pl in PLACEMENTS for comm in (True, False)]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
        rows = list(ex.map(lambda r: run(args, r[0], r[1], r[2], args.out), runs))

    def mean(placement, comm, key):
        xs = [r[key] for r in rows if r["placement"] == placement and r["comm"] == comm]
        return sum(xs) / len(xs)

    ideal_train = mean("topology", False, "train")
    print(f"{len(workloads)} workloads ({', '.join(os.path.relpath(w, args.data) for w in workloads)}), "
          f"{args.racks} racks x {args.nodes_per_rack} nodes x {args.gpus} GPUs, rack uplink "
          f"{args.oversub:g}:1, order {args.order}, {len(rows)} runs in {time.time() - t0:.1f} s")
    print("| placement | mean JCT h (oversubscribed) | mean JCT h (ideal network) "
          "| JCT vs topology | mean training h | training vs same placement, ideal network "
          "| training vs ideal (topology, ideal network) |")
    print("|---|---|---|---|---|---|---|")
    topo_jct = mean("topology", True, "jct")
    for pl in PLACEMENTS:
        jct, jct_ideal = mean(pl, True, "jct"), mean(pl, False, "jct")
        train, train_ideal = mean(pl, True, "train"), mean(pl, False, "train")
        print(f"| {pl} | {jct / 3600:.3f} | {jct_ideal / 3600:.3f} "
              f"| {100 * (jct / topo_jct - 1):+.1f} % | {train / 3600:.3f} "
              f"| {100 * (train / train_ideal - 1):+.1f} % "
              f"| {100 * (train / ideal_train - 1):+.1f} % |")
    print("\nper workload, mean JCT h with the communication model:")
    print("| workload | " + " | ".join(PLACEMENTS) + " |")
    print("|---|" + "---|" * len(PLACEMENTS))
    for w in workloads:
        cells = []
        for pl in PLACEMENTS:
            r = next(r for r in rows if r["workload"] == w and r["placement"] == pl and r["comm"])
            cells.append(f"{r['jct'] / 3600:.3f}")
        print(f"| {os.path.relpath(w, args.data)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

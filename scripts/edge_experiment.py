#!/usr/bin/env python3
"""Edge sites (docs/edge.md): latency-bound inference from several regions, placed at the edge
site of its users (edge-first) or at the main site only, under links that go down and fall
below 500 kbit/s.

Sites: a main site of 8 nodes x 8 A100-80G (64 GPUs) and three edge sites (east, west, south)
of one node with 4 T4 each (--edge-gpus). Users reach their own site in 20 ms (round trip); an edge site's
link to the main site gives 20 Mbit/s at best with a 180 ms round trip.

Connectivity (synthetic; no public edge-link trace is in ../shared/data): each edge link is a
Markov chain over 5-minute slots for 24 hours, seeded per site. Up at 60-100 % of its
bandwidth; degraded at 0.1-0.45 Mbit/s (below 500 kbit/s); down. From up it degrades with
probability 0.03 and goes down with 0.02 per slot; degraded recovers with 0.25 and drops with
0.05; down recovers with 0.3 (to up) and 0.1 (to degraded). Each link also has one outage of
1-2 hours.

Workload (seeded): per region (the three edge regions and the main site's own) 40 inference
services, Poisson arrivals over the day, each serving 30 minutes to 3 hours on 1 GPU at
inference-critical priority: 2-8 requests/s of 20-80 kB (camera frames) answered with 2 kB,
25 ms of compute, latency SLO 300 ms. Beside them, 60 training jobs of 8 GPUs (1-6 hours of
work) at the main site.

Prints a markdown table; writes inputs and the JSON result under --out.

  python3 scripts/edge_experiment.py --tessera build/release/src/tessera --out /tmp/edge
"""
import argparse
import json
import os
import random
import subprocess

HOURS = 24
SLOT = 300
EDGES = ["east", "west", "south"]
NOMINAL_MBPS = 20
LINK_RTT_MS = 180
ACCESS_MS = 20


def connectivity(rng):
    rows = []
    state = "up"
    slots = HOURS * 3600 // SLOT
    outage_start = rng.randrange(slots // 6, slots - 24)
    outage_len = rng.randrange(12, 25)  # 1-2 hours of 5-minute slots
    for k in range(slots):
        r = rng.random()
        if state == "up":
            state = "degraded" if r < 0.03 else "down" if r < 0.05 else "up"
        elif state == "degraded":
            state = "up" if r < 0.25 else "down" if r < 0.30 else "degraded"
        else:
            state = "up" if r < 0.3 else "degraded" if r < 0.4 else "down"
        s = "down" if outage_start <= k < outage_start + outage_len else state
        if s == "up":
            rows.append((k * SLOT, 1, round(NOMINAL_MBPS * rng.uniform(0.6, 1.0), 3)))
        elif s == "degraded":
            rows.append((k * SLOT, 1, round(rng.uniform(0.1, 0.45), 3)))
        else:
            rows.append((k * SLOT, 0, 0))
    return rows


def sites_yaml(edge_gpus):
    lines = ["sites:",
             "  - name: main",
             "    main: true",
             f"    access_rtt_ms: {ACCESS_MS}",
             "    cluster: {racks: 2, nodes_per_rack: 4, node: {gpus: 8, gpu_type: A100-80G}}"]
    for e in EDGES:
        lines += [f"  - name: {e}",
                  f"    access_rtt_ms: {ACCESS_MS}",
                  f"    cluster: {{nodes: [{{name: {e}-0, rack: {e}, gpus: {edge_gpus}, gpu_type: T4}}]}}",
                  f"    link: {{bandwidth_mbps: {NOMINAL_MBPS}, rtt_ms: {LINK_RTT_MS}, "
                  f"connectivity: {e}.csv}}"]
    return "\n".join(lines) + "\n"


def workload(rng):
    jobs = []
    for region in EDGES + ["main"]:
        t = 0.0
        for i in range(40):
            t += rng.expovariate(40 / (HOURS * 3600 * 0.9))
            jobs.append({
                "name": f"{region}-svc-{i}", "tenant": region, "submit": round(t, 1), "gpus": 1,
                "work": round(rng.uniform(1800, 3 * 3600)), "priority": "inference-critical",
                "service": {"region": region, "latency_slo_ms": 300,
                            "request_rate": round(rng.uniform(2, 8), 2),
                            "request_kb": round(rng.uniform(20, 80), 1), "response_kb": 2,
                            "service_ms": 25}})
    t = 0.0
    for i in range(60):
        t += rng.expovariate(60 / (HOURS * 3600 * 0.8))
        jobs.append({"name": f"train-{i}", "tenant": "training", "submit": round(t, 1),
                     "gpus": 8, "work": round(rng.uniform(3600, 6 * 3600)),
                     "priority": "research"})
    jobs.sort(key=lambda j: j["submit"])
    return jobs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tessera", default="build/release/src/tessera")
    ap.add_argument("--out", default="/tmp/edge")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--edge-gpus", type=int, default=4, help="T4 GPUs at each edge site")
    ap.add_argument("--pack", action="store_true",
                    help="also run edge-first with services packed as GPU shares (edge --pack)")
    ap.add_argument("--pack-headroom", type=float, default=1.5)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for k, e in enumerate(EDGES):
        rng = random.Random(args.seed * 100 + k)
        with open(os.path.join(args.out, f"{e}.csv"), "w") as f:
            f.write("time,up,bandwidth_mbps\n")
            for row in connectivity(rng):
                f.write("%d,%d,%s\n" % row)
    with open(os.path.join(args.out, "sites.yaml"), "w") as f:
        f.write(sites_yaml(args.edge_gpus))
    with open(os.path.join(args.out, "jobs.jsonl"), "w") as f:
        for j in workload(random.Random(args.seed)):
            f.write(json.dumps(j) + "\n")
    result = os.path.join(args.out, "edge.json")
    subprocess.run([args.tessera, "edge", "--sites", os.path.join(args.out, "sites.yaml"),
                    "--workload", os.path.join(args.out, "jobs.jsonl"), "--json", result,
                    "--quiet"], check=True)
    runs = json.load(open(result))["runs"]
    if args.pack:
        packed = os.path.join(args.out, "edge-packed.json")
        subprocess.run([args.tessera, "edge", "--sites", os.path.join(args.out, "sites.yaml"),
                        "--workload", os.path.join(args.out, "jobs.jsonl"), "--json", packed,
                        "--quiet", "--placement", "edge-first", "--pack", "--pack-headroom",
                        str(args.pack_headroom)], check=True)
        for r in json.load(open(packed))["runs"]:
            r["placement"] += f" packed (headroom {args.pack_headroom:g}, slowdown " \
                f"{r['pack']['colocation_slowdown']:.2f})"
            runs.append(r)

    def pct(x):
        return f"{100 * x:.1f}"

    print("| placement | requests | answered % | within SLO % | mean latency (ms) | "
          "edge-region latency (ms) | links down or < 500 kbit/s: answered % | within SLO % | "
          "training JCT (h) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        edge = [x for x in r.get("regions", []) if x["region"] in EDGES]
        served = sum(x["served"] for x in edge)
        lat = sum(x["mean_latency_ms"] * x["served"] for x in edge) / served if served else 0
        q, d = r["requests"], r["degraded"]
        print(f"| {r['placement']} | {q['requests']:.0f} | {pct(q['served_fraction'])} | "
              f"{pct(q['slo_attainment'])} | {q['mean_latency_ms']:.0f} | {lat:.0f} | "
              f"{pct(d['served_fraction'])} | {pct(d['slo_attainment'])} | "
              f"{r['jobs']['mean_jct'] / 3600:.2f} |")
    print()
    for r in runs:
        print(f"{r['placement']}: starts edge {r['starts']['edge']} / main {r['starts']['main']}, "
              f"{r['migrations']} moved to the edge, {r['preemptions']} preempted, "
              f"{len(r['rejected'])} rejected, services waited {r['site_unreachable_seconds']/3600:.1f} "
              f"h for an unreachable main site")


if __name__ == "__main__":
    main()

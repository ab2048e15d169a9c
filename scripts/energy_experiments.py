#!/usr/bin/env python3
"""Issue 17's power experiments (docs/energy.md): power caps held by holding jobs or by
shifting GPU power limits, and Zeus's energy knob, on Pollux's workloads 1-8 (load 1.0, 64
GPUs) and one week of Philly (week 10 of the trace, 4,527 jobs, on 64 nodes x 4 V100);
consolidation with node sleep on a day of Philly at 2,048 GPUs; carbon-aware deferral.

Usage: scripts/energy_experiments.py [--tessera build/release/src/tessera]
                                     [--data ../shared/data] [--policy las] [--node-power 200]
Prints markdown tables. Each run is `tessera simulate ... --json`; the Philly week is sliced
from ../shared/data/philly/pollux/philly.csv into a temporary directory (never the repository).
"""
import argparse
import csv
import datetime
import json
import os
import subprocess
import sys
import tempfile


def simulate(tessera, workload, cluster, policy, extra, out):
    cmd = [tessera, "simulate", "--workload", workload, "--cluster", cluster, "--policy",
           policy, "--quiet", "--json", out] + extra
    subprocess.run(cmd, check=True)
    with open(out) as f:
        return json.load(f)


def philly_week(data, week, path):
    with open(os.path.join(data, "philly/pollux/philly.csv")) as f:
        rows = list(csv.DictReader(f))
    t0 = min(datetime.datetime.fromisoformat(r["timestamp"]) for r in rows)
    sel = [r for r in rows
           if (datetime.datetime.fromisoformat(r["timestamp"]) - t0).days // 7 == week]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(sel)
    return len(sel)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessera", default="build/release/src/tessera")
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--policy", default="las")
    ap.add_argument("--node-power", default="200")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tessera-energy-")
    week = os.path.join(tmp, "philly-week10.csv")
    n = philly_week(a.data, 10, week)
    c64x4 = os.path.join(tmp, "c64x4.yaml")
    with open(c64x4, "w") as f:
        f.write("racks: 8\nnodes_per_rack: 8\nnode: {gpus: 4, gpu_type: V100}\n")
    pollux = [os.path.join(a.data, f"philly/pollux/workloads/workload-{i}.csv")
              for i in range(1, 9)]
    suites = {
        "Pollux workloads 1-8, 64 GPUs": (pollux,
                                          os.path.join(a.data,
                                                       "philly/tiresias/cluster_spec.csv")),
        f"Philly week 10 ({n} jobs), 256 GPUs": ([week], c64x4),
    }
    base = ["--node-power", a.node_power]

    def run_suite(workloads, cluster, extra):
        jct, it_kwh, gpu_kwh, peak, changes = [], 0.0, 0.0, 0.0, 0
        for k, w in enumerate(workloads):
            j = simulate(a.tessera, w, cluster, a.policy, base + extra,
                         os.path.join(tmp, f"r{k}.json"))
            jct.append(j["jct"]["mean"])
            e = j["energy"]
            it_kwh += e["it_kwh"]
            gpu_kwh += e["gpu_busy_kwh"]
            peak = max(peak, e["peak_it_kw"] / (e["power_cap_kw"] or float("inf"))
                       if e["power_cap_kw"] else 0.0)
            changes += e["power_limit_changes"]
        return sum(jct) / len(jct), it_kwh, gpu_kwh, peak, changes

    print(f"policy {a.policy}, node base power {a.node_power} W, PUE 1\n")
    for name, (workloads, cluster) in suites.items():
        print(f"### Power cap: {name}\n")
        print("| cap | mode | mean JCT (s) | JCT lost | IT energy (kWh) | peak / cap | "
              "limit changes |")
        print("|---|---|---|---|---|---|---|")
        free = run_suite(workloads, cluster, [])
        print(f"| none | - | {free[0]:.0f} | - | {free[1]:.0f} | - | 0 |")
        for cap in ["80%", "70%", "60%"]:
            lost = {}
            for mode, flags in [("hold", []), ("shift", ["--power-shifting"])]:
                r = run_suite(workloads, cluster, ["--power-cap", cap] + flags)
                lost[mode] = r[0] - free[0]
                print(f"| {cap} | {mode} | {r[0]:.0f} | {lost[mode]:+.0f} | {r[1]:.0f} | "
                      f"{r[3]:.3f} | {r[4]} |")
            ratio = lost["shift"] / lost["hold"] if lost["hold"] > 0 else float("nan")
            print(f"| {cap} | shift / hold JCT lost | | {ratio:.2f} | | | |")
        print()
        print(f"### Energy knob: {name}\n")
        print("| eta | mean JCT (s) | JCT cost | GPU energy (kWh) | GPU energy saved | "
              "IT energy (kWh) | IT energy saved |")
        print("|---|---|---|---|---|---|---|")
        ref = None
        for eta in ["0", "0.5", "1"]:
            r = run_suite(workloads, cluster, ["--energy-weight", eta])
            if ref is None:
                ref = r
            print(f"| {eta} | {r[0]:.0f} | {100 * (r[0] / ref[0] - 1):+.1f} % | {r[2]:.0f} | "
                  f"{100 * (1 - r[2] / ref[2]):.1f} % | {r[1]:.0f} | "
                  f"{100 * (1 - r[1] / ref[1]):.1f} % |")
        print()
    consolidation(a, tmp)
    carbon(a, tmp)
    return 0


def consolidation(a, tmp):
    """Node sleep on a day of Philly at 2,048 GPUs: days 36-42 of the trace replayed (so that
    day 42 starts with the week's long jobs running), energy measured over day 42."""
    with open(os.path.join(a.data, "philly/pollux/philly.csv")) as f:
        rows = list(csv.DictReader(f))
    t0 = min(datetime.datetime.fromisoformat(r["timestamp"]) for r in rows)
    days = [r for r in rows
            if 36 <= (datetime.datetime.fromisoformat(r["timestamp"]) - t0).days <= 42]
    path = os.path.join(tmp, "philly-days36-42.csv")
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(days)
    first = min(datetime.datetime.fromisoformat(r["timestamp"]) for r in days)
    day42 = t0.replace(hour=0, minute=0, second=0) + datetime.timedelta(days=42)
    start_h = int((day42 - first).total_seconds() // 3600)
    cluster = os.path.join(tmp, "c512x4.yaml")
    with open(cluster, "w") as f:
        f.write("racks: 16\nnodes_per_rack: 32\nnode: {gpus: 4, gpu_type: V100}\n")
    print(f"### Consolidation with node sleep: Philly days 36-42 ({len(days)} jobs), "
          f"2,048 GPUs, energy over day 42\n")
    print("| setting | mean JCT (s) | JCT cost | day IT (kWh) | day idle + base (kWh) | "
          "idle saved | node wakes |")
    print("|---|---|---|---|---|---|---|")
    ref = None
    for name, extra in [("awake", []),
                        ("sleep after 30 min, wake 5 min",
                         ["--node-sleep-after", "1800", "--node-wake", "300"]),
                        ("sleep after 15 min, wake 5 min",
                         ["--node-sleep-after", "900", "--node-wake", "300"]),
                        ("sleep after 5 min, wake 5 min",
                         ["--node-sleep-after", "300", "--node-wake", "300"])]:
        j = simulate(a.tessera, path, cluster, "fifo+bestfit",
                     ["--node-power", a.node_power] + extra, os.path.join(tmp, "sleep.json"))
        s = j["energy"]["series"]
        it = sum(s["it_kwh"][start_h:start_h + 24])
        busy = sum(s["gpu_busy_kwh"][start_h:start_h + 24])
        idle = it - busy
        if ref is None:
            ref = (j["jct"]["mean"], idle)
        print(f"| {name} | {j['jct']['mean']:.0f} | {100 * (j['jct']['mean'] / ref[0] - 1):+.2f} % "
              f"| {it:.0f} | {idle:.0f} | {100 * (1 - idle / ref[1]):.1f} % | "
              f"{j['energy']['node_wakes']} |")
    print()


def carbon(a, tmp):
    """Carbon-aware deferral on the embedded workload with a synthetic diurnal series (no real
    series ships with the data; a user brings their grid's): two of the four tenants'
    queues are best-effort, one of them may wait up to 12 h for cleaner hours."""
    import math
    series = os.path.join(tmp, "carbon.csv")
    with open(series, "w") as f:
        f.write("time,g_per_kwh\n")
        for h in range(24):
            f.write(f"{h * 3600},{round(450 - 250 * max(0.0, math.sin((h - 6) / 12 * math.pi)))}\n")
    print("### Carbon-aware deferral: embedded workload, synthetic diurnal series "
          "(450 g/kWh at night, 200 at noon)\n")
    print("| tenant-2 queue | tenant-2 mean JCT (h) | tenant-2 g CO2 per kWh | cluster carbon (kg) |")
    print("|---|---|---|---|")
    for name, defer in [("best-effort", ""), ("best-effort, carbon_defer: 12h",
                                               "    carbon_defer: 12h\n")]:
        q = os.path.join(tmp, "q.yaml")
        with open(q, "w") as f:
            f.write("queues:\n  - name: tenant-0\n  - name: tenant-1\n  - name: tenant-2\n"
                    "    default_priority_class: best-effort\n" + defer +
                    "  - name: tenant-3\n    default_priority_class: best-effort\n")
        out = os.path.join(tmp, "carbon.json")
        subprocess.run([a.tessera, "simulate", "--quiet", "--node-power", a.node_power,
                        "--carbon", series, "--queues", q, "--json", out], check=True)
        with open(out) as f:
            j = json.load(f)
        t = [x for x in j["energy"]["by_tenant"] if x["tenant"] == "tenant-2"][0]
        per = j["per_tenant"]
        jct = per["tenant-2"]["jct"]["mean"] if isinstance(per, dict) else \
            [p for p in per if p.get("tenant") == "tenant-2"][0]["jct"]["mean"]
        print(f"| {name} | {jct / 3600:.2f} | {1000 * t['carbon_kg'] / t['kwh']:.0f} | "
              f"{j['energy']['carbon_kg']:.1f} |")
    print()


if __name__ == "__main__":
    sys.exit(main())

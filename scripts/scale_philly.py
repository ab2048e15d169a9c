#!/usr/bin/env python3
"""Philly's job mix scaled up to a larger cluster (issue 20's simulator benchmark).

Takes the jobs Philly submitted in one window of its trace (../shared/data/philly/pollux/
philly.csv; by default days 30-60, its busiest 30 days: 46,130 jobs offering 589 GPUs on average) and submits each `--copies` times, every copy shifted
by a random 0-60 s and given its virtual cluster's name with the copy's number (so that the
tenants scale with the cluster). The output is a Philly-format CSV that `tessera simulate`
reads. Philly ran about 2,500 GPUs: 80 copies offer the same load to 200,000.

  python3 scripts/scale_philly.py --copies 80 --out /tmp/philly-x80.csv
  tessera simulate --workload /tmp/philly-x80.csv --cluster CLUSTER.yaml --policy fair ...
"""
import argparse
import csv
import datetime
import random


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trace", default="../shared/data/philly/pollux/philly.csv")
    ap.add_argument("--copies", type=int, default=80)
    ap.add_argument("--from-day", type=float, default=30)
    ap.add_argument("--days", type=float, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    fmt = "%Y-%m-%d %H:%M:%S"
    rows = []
    with open(args.trace) as f:
        for r in csv.DictReader(f):
            if r["timestamp"]:
                rows.append((datetime.datetime.strptime(r["timestamp"], fmt), r))
    start = min(t for t, _ in rows) + datetime.timedelta(days=args.from_day)
    end = start + datetime.timedelta(days=args.days)
    window = sorted(((t, r) for t, r in rows if start <= t < end), key=lambda x: x[0])
    rng = random.Random(args.seed)
    out = []
    for t, r in window:
        for k in range(args.copies):
            shifted = t + datetime.timedelta(seconds=rng.randrange(60))
            out.append((shifted, r["duration"], r["num_gpus"], f"{r['cluster']}-{k}"))
    out.sort(key=lambda x: x[0])
    with open(args.out, "w") as f:
        f.write("timestamp,duration,num_gpus,cluster\n")
        for t, d, g, c in out:
            f.write(f"{t.strftime(fmt)},{d},{g},{c}\n")
    print(f"{len(out)} jobs ({len(window)} x {args.copies}) over {args.days:g} days -> {args.out}")


if __name__ == "__main__":
    main()

"""Reads Philly's job list as the experiment scripts use it (philly/pollux/philly.csv:
timestamp,duration,num_gpus,gpu_time,cluster)."""
import datetime


def read_philly(trace, start=None, days=0):
    """Jobs as dicts {submit, work, gpus, vc, line}, sorted by (submit, line).

    `submit` is seconds since `start` (an ISO date; default: the first timestamp); with
    days > 0 only jobs submitted in [start, start + days) are kept. `line` is the CSV line."""
    rows = []
    with open(trace) as f:
        header = f.readline().strip().split(",")
        idx = {k: i for i, k in enumerate(header)}
        for n, line in enumerate(f, 2):
            row = line.strip().split(",")
            if len(row) < len(header):
                continue
            ts = datetime.datetime.strptime(row[idx["timestamp"]], "%Y-%m-%d %H:%M:%S")
            rows.append((ts, n, float(row[idx["duration"]]), int(row[idx["num_gpus"]]),
                         row[idx["cluster"]]))
    if not rows:
        return []
    t0 = datetime.datetime.fromisoformat(start) if start else min(r[0] for r in rows)
    t1 = t0 + datetime.timedelta(days=days) if days > 0 else None
    jobs = [{"submit": (ts - t0).total_seconds(), "work": work, "gpus": gpus, "vc": vc,
             "line": n}
            for ts, n, work, gpus, vc in rows if ts >= t0 and (t1 is None or ts < t1)]
    jobs.sort(key=lambda j: (j["submit"], j["line"]))
    return jobs

"""Reading ``tessera simulate --json`` result files as plain records (lists of flat dicts).

A result file is one nested JSON object of metrics (docs/metrics.md defines each key). The
usual analysis compares runs (policies, seeds, clusters) side by side, which wants flat rows:
one per run for the summary, one per tenant, one per usage row, one per queue and time bucket
of the share series. These functions produce exactly those rows with the standard library
alone; ``frames.py`` turns them into pandas DataFrames for those who have pandas.

Nested objects are flattened into dotted column names (``jct.mean``, ``fairness.jain``);
lists (the CDFs, series) stay out of the summary and have records of their own. Every row
carries ``policy``, ``seed`` and ``file`` so rows of several runs can be stacked.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Union

# Top-level keys the summary leaves out: the run's configuration, and what has rows of its own.
_NOT_IN_SUMMARY = {"run", "per_tenant", "usage", "share_series", "timeline", "why"}
# Lists and objects inside `energy` that are series or per-tenant tables, not scalars.
_ENERGY_TABLES = {"series", "by_tenant"}

PathLike = Union[str, "os.PathLike[str]"]


@dataclass
class SimulationResult:
    """One ``--json`` result: its metrics as the simulator wrote them, and where it was read."""

    data: Dict[str, Any]
    path: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def policy(self) -> str:
        return str(self.data.get("policy", ""))

    @property
    def seed(self) -> Optional[int]:
        return self.data.get("seed")

    @property
    def workload(self) -> str:
        return str(self.data.get("workload", ""))

    def labels(self) -> Dict[str, Any]:
        """The columns that tell this run's rows from another's."""
        return {"policy": self.policy, "seed": self.seed, "workload": self.workload,
                "file": self.path}


ResultLike = Union[SimulationResult, PathLike, Dict[str, Any]]


def read_result(source: ResultLike) -> SimulationResult:
    """A result from a file path, an already parsed dict, or a SimulationResult (as is)."""
    if isinstance(source, SimulationResult):
        return source
    if isinstance(source, dict):
        return SimulationResult(source)
    path = os.fspath(source)
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict) or "jct" not in data:
        raise ValueError(f"{path}: not a `tessera simulate --json` result (no 'jct' metrics)")
    return SimulationResult(data, path)


def read_results(sources: Union[ResultLike, Iterable[ResultLike]]) -> List[SimulationResult]:
    """Several results; a single path, dict or result is a list of one."""
    if isinstance(sources, (str, dict, SimulationResult, os.PathLike)):
        return [read_result(sources)]
    return [read_result(s) for s in sources]


def flatten(obj: Dict[str, Any], prefix: str = "") -> Dict[str, Any]:
    """Nested objects as dotted keys; lists are left out (they are series, not scalars)."""
    out: Dict[str, Any] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        elif not isinstance(value, list):
            out[name] = value
    return out


def summary_record(result: ResultLike) -> Dict[str, Any]:
    """One flat row of a run's scalar metrics: jct.*, queueing_delay.*, makespan,
    gpu_allocation, fairness.*, preemptions, energy totals, ... (docs/metrics.md)."""
    r = read_result(result)
    row = r.labels()
    for key, value in r.data.items():
        if key in _NOT_IN_SUMMARY or key in row:
            continue
        if key == "energy" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in _ENERGY_TABLES}
        if isinstance(value, dict):
            row.update(flatten(value, key + "."))
        elif not isinstance(value, list):
            row[key] = value
    return row


def tenant_records(result: ResultLike) -> List[Dict[str, Any]]:
    """One row per tenant of ``per_tenant``: jobs, jct.*, queueing_delay.*, gpu_hours,
    preemptions, lost_gpu_hours."""
    r = read_result(result)
    rows = []
    for tenant, metrics in sorted((r.data.get("per_tenant") or {}).items()):
        rows.append({**r.labels(), "tenant": tenant, **flatten(metrics)})
    return rows


def usage_records(result: ResultLike) -> List[Dict[str, Any]]:
    """The run's accounting (``usage``, in ``GET /v1/usage``'s schema), one row per tenant
    and queue; GPU-hours by type become ``gpu_hours.<TYPE>`` columns and their sum
    ``gpu_hours``, jobs by final state ``jobs.<state>``."""
    r = read_result(result)
    rows = []
    for u in r.data.get("usage") or []:
        by_type = u.get("gpu_hours") or {}
        row = {**r.labels(), **flatten({k: v for k, v in u.items() if k != "gpu_hours"})}
        row["gpu_hours"] = float(sum(by_type.values()))
        row.update({f"gpu_hours.{t}": h for t, h in by_type.items()})
        rows.append(row)
    return rows


def share_series_records(result: ResultLike) -> List[Dict[str, Any]]:
    """The share series in long form: one row per leaf queue and time bucket with ``t``
    (seconds since the first submit, the bucket's start), ``gpus`` (mean GPUs held) and
    ``entitled`` (mean GPUs entitled). Empty when the run wrote none."""
    r = read_result(result)
    series = r.data.get("share_series") or {}
    start = float(series.get("start", 0.0))
    step = float(series.get("interval_s", 0.0))
    rows = []
    for queue, values in sorted((series.get("queues") or {}).items()):
        held = values.get("gpus") or []
        entitled = values.get("entitled") or []
        for i in range(max(len(held), len(entitled))):
            rows.append({**r.labels(), "queue": queue, "t": start + i * step,
                         "gpus": held[i] if i < len(held) else None,
                         "entitled": entitled[i] if i < len(entitled) else None})
    return rows


def cdf_records(result: ResultLike, metric: str = "jct") -> List[Dict[str, Any]]:
    """A distribution's 201 quantiles (``jct`` or ``queueing_delay``): rows of
    ``quantile`` (0, 0.005, ..., 1) and ``seconds``."""
    r = read_result(result)
    cdf = (r.data.get(metric) or {}).get("cdf") or []
    n = len(cdf)
    return [{**r.labels(), "metric": metric, "quantile": i / (n - 1) if n > 1 else 0.0,
             "seconds": v} for i, v in enumerate(cdf)]

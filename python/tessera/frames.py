"""``tessera simulate --json`` results as pandas DataFrames (the ``[pandas]`` extra).

pandas is imported when one of these functions is called, never when the package is, so
``import tessera`` works (and stays fast) where pandas is not installed. Each function takes
one result or several (paths, parsed dicts or SimulationResult objects) and stacks their rows,
with ``policy``, ``seed``, ``workload`` and ``file`` columns telling runs apart.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Union

from .results import (ResultLike, cdf_records, read_results, share_series_records,
                      summary_record, tenant_records, usage_records)

Results = Union[ResultLike, Iterable[ResultLike]]


def _pandas() -> Any:
    try:
        import pandas  # noqa: PLC0415 - lazy on purpose
    except ImportError as e:
        raise ImportError("tessera's DataFrame readers need pandas: "
                          "pip install 'tessera-client[pandas]' (or python3-pandas)") from e
    return pandas


def _frame(results: Results, rows_of: Callable[[Any], List[Dict[str, Any]]]) -> Any:
    pd = _pandas()
    rows: List[Dict[str, Any]] = []
    for r in read_results(results):
        rows.extend(rows_of(r))
    return pd.DataFrame.from_records(rows)


def summary_frame(results: Results) -> Any:
    """One row per run: its scalar metrics (``jct.mean``, ``gpu_allocation``, ...)."""
    return _frame(results, lambda r: [summary_record(r)])


def tenants_frame(results: Results) -> Any:
    """One row per run and tenant (``per_tenant``)."""
    return _frame(results, tenant_records)


def usage_frame(results: Results) -> Any:
    """One row per run, tenant and queue of the run's accounting (``usage``)."""
    return _frame(results, usage_records)


def share_series_frame(results: Results) -> Any:
    """One row per run, leaf queue and time bucket: GPUs held and entitled."""
    return _frame(results, share_series_records)


def cdf_frame(results: Results, metric: str = "jct") -> Any:
    """One row per run and quantile of ``jct`` or ``queueing_delay``."""
    return _frame(results, lambda r: cdf_records(r, metric))

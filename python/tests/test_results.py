"""Reading ``tessera simulate --json`` results: plain records always, DataFrames with pandas.

The results are made by the real binary (the embedded workload, two policies), so the reader
is checked against what the simulator writes today, not against a copy that could go stale.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tessera import (cdf_records, read_result, read_results, share_series_records,
                     summary_record, tenant_records, usage_records)


@pytest.fixture(scope="module")
def results(tessera_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("sim")
    paths = []
    for policy in ("fifo", "fair"):
        path = str(out / f"{policy}.json")
        subprocess.run([tessera_bin, "simulate", "--policy", policy, "--json", path, "--quiet"],
                       check=True, capture_output=True, timeout=120)
        paths.append(path)
    return paths


def test_a_result_reads_as_one_flat_summary_row(results):
    r = read_result(results[0])
    row = summary_record(r)
    assert row["policy"] == r.policy and r.policy.startswith("fifo")
    assert row["file"] == results[0] and row["jobs"] == row["finished"] == 400
    assert row["jct.mean"] > 0 and row["makespan"] > 0 and 0 < row["gpu_allocation"] <= 1
    assert "fairness.jain" in row and "energy.it_kwh" in row
    assert not any(isinstance(v, (list, dict)) for v in row.values())  # flat: one row
    assert not any(k.startswith(("run.", "per_tenant", "share_series")) for k in row)


def test_tenants_usage_series_and_cdfs_have_a_row_each(results):
    r = read_result(results[1])
    tenants = tenant_records(r)
    assert [t["tenant"] for t in tenants] == ["tenant-0", "tenant-1", "tenant-2", "tenant-3"]
    assert sum(t["jobs"] for t in tenants) == 400

    usage = usage_records(r)
    by_tenant = {u["tenant"]: u for u in usage}
    for t in tenants:  # the accounting adds up to per_tenant's GPU-hours (docs/metrics.md)
        assert math.isclose(by_tenant[t["tenant"]]["gpu_hours"], t["gpu_hours"], rel_tol=1e-9)
        assert by_tenant[t["tenant"]]["gpu_hours.V100"] == by_tenant[t["tenant"]]["gpu_hours"]

    series = share_series_records(r)
    step = r.data["share_series"]["interval_s"]
    queue0 = [s for s in series if s["queue"] == "tenant-0"]
    assert len(series) == 4 * len(queue0) and len(queue0) > 1
    assert [s["t"] for s in queue0[:2]] == [0.0, step]
    assert all(s["gpus"] >= 0 and s["entitled"] >= 0 for s in series)

    cdf = cdf_records(r, "queueing_delay")
    assert len(cdf) == 201 and (cdf[0]["quantile"], cdf[-1]["quantile"]) == (0.0, 1.0)
    assert all(a["seconds"] <= b["seconds"] for a, b in zip(cdf, cdf[1:]))


def test_a_file_that_is_not_a_result_is_refused(tmp_path):
    path = tmp_path / "other.json"
    path.write_text('{"jobs": []}')
    with pytest.raises(ValueError, match="not a `tessera simulate --json` result"):
        read_result(path)


def test_results_become_dataframes_with_pandas(results):
    pd = pytest.importorskip("pandas")
    from tessera import share_series_frame, summary_frame, tenants_frame, usage_frame

    summary = summary_frame(results)
    assert isinstance(summary, pd.DataFrame) and len(summary) == 2
    assert list(summary["policy"].str.split("+").str[0]) == ["fifo", "fair"]
    assert (summary["jobs"] == 400).all()
    assert len(tenants_frame(results)) == 8
    assert set(usage_frame(results[0])["tenant"]) == {f"tenant-{i}" for i in range(4)}
    assert share_series_frame(results).groupby("policy")["queue"].nunique().tolist() == [4, 4]


def test_the_package_imports_and_reads_results_without_pandas(results):
    # pandas made unimportable: the reader's records work, and only a frame asks for pandas.
    code = (
        "import sys; sys.modules['pandas'] = None\n"
        "import tessera\n"
        f"assert tessera.summary_record({results[0]!r})['jobs'] == 400\n"
        "try:\n"
        f"    tessera.summary_frame({results[0]!r})\n"
        "except ImportError as e:\n"
        "    assert 'tessera-client[pandas]' in str(e), e\n"
        "else:\n"
        "    raise SystemExit('a frame without pandas')\n")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)


def test_several_results_are_read_in_order(results):
    assert [r.path for r in read_results(results)] == results
    assert len(read_results(results[0])) == 1

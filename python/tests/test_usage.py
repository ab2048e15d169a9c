"""Accounting: a finished job shows in its tenant's usage."""
from __future__ import annotations

from helpers import POLL, WAIT, eventually

from tessera import JobSpec


def test_usage_reflects_a_finished_job(tenant, admin):
    c = tenant.client
    assert c.usage().usage == []  # a new tenant has used nothing
    job = c.submit(JobSpec(name="billed", command=["sh", "-c", "sleep 0.2"],
                           resources={"gpus": 1}))
    assert c.wait(job.id, interval=POLL, timeout=WAIT).state == "succeeded"

    # The server's default window ends at the current second rounded down, so a job that
    # ended within this second shows a moment later (reported: the /v1/usage route's `until`
    # in src/api/http_server.cc).
    def counted():
        u = c.usage()
        return u if [r.jobs for r in u.usage] == [{"succeeded": 1}] else None
    usage = eventually(counted, "the job in its tenant's usage", 5)
    assert usage.until > usage.since
    [row] = usage.usage
    assert (row.tenant, row.queue) == (tenant.name, tenant.name)
    assert row.jobs == {"succeeded": 1} and row.started == 1
    assert row.total_gpu_hours > 0 and row.preempted == 0

    # The admin sees the same row among everyone's; a window before the job holds nothing.
    assert [r.jobs for r in admin.usage().for_tenant(tenant.name)] == [{"succeeded": 1}]
    assert c.usage(since=1, until=2).usage == []

"""What the tests share besides fixtures: bounded waits, a tenant of their own, clean-up."""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Callable, TypeVar

import pytest

from tessera import Client, Conflict, Job, JobSpec, NotFound, TesseraError

# Seconds a test waits for anything the server does; only a bound against hanging.
WAIT = 60.0
# Poll intervals for watch/follow in tests: short, so the suite stays quick.
POLL = 0.1

T = TypeVar("T")


def eventually(probe: Callable[[], T], what: str, seconds: float = WAIT) -> T:
    """Polls `probe` until it returns something truthy; fails the test after `seconds`."""
    end = time.monotonic() + seconds
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > end:
            pytest.fail(f"gave up waiting: {what}")
        time.sleep(0.05)


def stop_jobs(client: Client, tenant: str) -> None:
    """Kills every job of `tenant` that has not ended and waits until its processes are gone
    (the server answers a cancel with 409 only then)."""
    try:
        jobs = client.jobs(tenant=tenant)
    except TesseraError:
        return
    for job in jobs:
        if job.state in ("succeeded", "failed", "timeout"):
            continue
        end = time.monotonic() + 20
        while time.monotonic() < end:
            try:
                client.cancel(job.id, force=True)
            except Conflict:
                break
            time.sleep(0.05)


def start_sleeper(client: Client, name: str, **spec: object) -> Job:
    """Submits a job that runs for a minute and returns it once its command is running (it
    printed "ready"), not merely once the server says "running": a SIGTERM sent while the
    member's wrapper shell is still starting the command is lost (reported), and a test that
    stops the job must not depend on that window."""
    job = client.submit(JobSpec(name=name, command=["sh", "-c", "echo ready; sleep 60"],
                                **spec))  # type: ignore[arg-type]
    client.wait(job.id, states={"running"}, interval=POLL, timeout=WAIT)

    def ready() -> bool:
        try:
            return client.logs(job.id).startswith("ready")
        except NotFound:  # no log yet
            return False
    eventually(ready, f"job {job.id} to print ready")
    return client.job(job.id)


@dataclass
class Tenant:
    name: str
    token: str
    client: Client


_names = itertools.count(1)


def make_tenant(server_addr: str, admin_client: Client, prefix: str = "team") -> Tenant:
    name = f"{prefix}-{next(_names)}"
    token = admin_client.create_tenant(name)
    return Tenant(name, token, Client(server_addr, token, timeout=20))

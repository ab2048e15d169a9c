"""Watching a job and acting on it: cancel, hold, release, requeue, update."""
from __future__ import annotations

import pytest
from helpers import POLL, WAIT, eventually, start_sleeper

from tessera import Conflict, JobSpec, TesseraTimeout

SLEEPER = ["sh", "-c", "sleep 60"]


def test_watch_sees_pending_running_succeeded_in_order(tenant):
    c = tenant.client
    job = c.submit(JobSpec(name="watched", command=["sh", "-c", "sleep 0.3; exit 0"]))
    changes = list(c.watch(job.id, interval=POLL, timeout=WAIT))
    assert [ch.state for ch in changes] == ["pending", "running", "succeeded"]
    assert [ch.previous for ch in changes] == [None, "pending", "running"]
    assert all(ch.job_id == job.id for ch in changes)
    assert changes[0].at <= changes[1].at <= changes[2].at
    assert changes[-1].finished and "exit code 0" in changes[-1].event.message


def test_watch_reports_a_failure_and_gives_up_after_its_timeout(tenant):
    c = tenant.client
    failing = c.submit(JobSpec(name="fails", command=["sh", "-c", "exit 3"]))
    assert [ch.state for ch in c.watch(failing.id, interval=POLL, timeout=WAIT)][-1] == "failed"
    assert c.job(failing.id).exit_code == 3

    slow = c.submit(JobSpec(name="slow", command=SLEEPER, resources={"gpus": 0}))
    with pytest.raises(TesseraTimeout):
        for _ in c.watch(slow.id, interval=POLL, timeout=0.5):
            pass


def test_cancel_moves_a_running_job_to_cancelled(tenant):
    c = tenant.client
    job = start_sleeper(c, "doomed")
    assert job.state == "running"

    cancelled = c.cancel(job.id)
    assert cancelled.state == "cancelled" and cancelled.message == f"cancelled by {tenant.name}"
    assert [ch.state for ch in c.watch(job.id, interval=POLL, timeout=WAIT)] == [
        "pending", "running", "cancelled"]
    # Once its processes are gone, cancelling again is a conflict (and says why).
    def conflict():
        try:
            c.cancel(job.id)
        except Conflict as e:
            return e
        return None
    assert "already cancelled" in eventually(conflict, "the job's processes to end").message


def test_hold_keeps_a_waiting_job_waiting_until_released(tenant):
    c = tenant.client
    blocker = c.submit(JobSpec(name="blocker", command=SLEEPER, resources={"gpus": 0}))
    waiting = c.submit(JobSpec(name="waiting", command=["true"], after_any=[blocker.id]))
    c.wait(blocker.id, states={"running"}, interval=POLL, timeout=WAIT)

    held = c.hold(waiting.id)
    assert (held.state, held.reason) == ("pending", "Held")
    with pytest.raises(Conflict) as e:
        c.hold(blocker.id)  # a running job cannot be held
    assert "running" in e.value.message

    released = c.release(waiting.id)
    assert released.state == "pending" and released.reason != "Held"
    with pytest.raises(Conflict):
        c.release(waiting.id)  # not held any more
    assert [e.type for e in c.events(waiting.id)][-2:] == ["Held", "Released"]


def test_requeue_runs_a_job_again_as_a_new_attempt(tenant):
    c = tenant.client
    job = start_sleeper(c, "again", resources={"gpus": 0})
    c.requeue(job.id)
    states = []
    for change in c.watch(job.id, interval=POLL, timeout=WAIT):
        states.append(change.state)
        if states == ["pending", "running", "pending", "running"]:
            break
    assert states == ["pending", "running", "pending", "running"]
    assert c.job(job.id).attempts == 2
    assert "requeued by" in [e for e in c.events(job.id) if e.type == "Requeued"][0].message


def test_update_changes_a_running_jobs_time_limit(tenant):
    c = tenant.client
    job = c.submit(JobSpec(name="limited", command=SLEEPER, resources={"gpus": 0}))
    c.wait(job.id, states={"running"}, interval=POLL, timeout=WAIT)
    updated = c.update(job.id, time_limit="10m")
    assert updated.spec.time_limit == 600
    assert c.events(job.id)[-1].type == "Updated"


def test_a_requeued_job_running_again_has_not_finished(tenant):
    c = tenant.client
    job = start_sleeper(c, "again", resources={"gpus": 0})
    c.requeue(job.id)

    def second_run():
        j = c.job(job.id)
        return j if (j.attempts, j.state) == (2, "running") else None
    again = eventually(second_run, "the second run")
    assert again.finished_at is None  # docs/openapi.yaml: null until the job finishes

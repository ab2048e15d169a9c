"""Submitting, reading and listing jobs against a real server, as a user of the client would."""
from __future__ import annotations

import pytest
from helpers import POLL, WAIT, eventually

from tessera import BadRequest, Conflict, JobSpec, JobState, Resources, Unschedulable

SLEEPER = ["sh", "-c", "sleep 60"]


def test_a_submitted_job_runs_and_its_logs_are_readable(tenant):
    c = tenant.client
    job = c.submit(JobSpec(
        name="hello",
        command=["sh", "-c", "echo hello from $TESSERA_JOB_ID; echo rank=$RANK world=$WORLD_SIZE"],
        resources=Resources(gpus=1)))
    assert job.id > 0 and job.created is True
    assert job.tenant == tenant.name and job.name == "hello"
    assert job.spec.resources.gpus == 1 and job.spec.gang.min == 1

    done = c.wait(job.id, interval=POLL, timeout=WAIT)
    assert (done.state, done.exit_code, done.attempts) == ("succeeded", 0, 1)
    assert done.finished and done.started_at is not None and done.finished_at >= done.started_at
    assert c.logs(job.id) == f"hello from {job.id}\nrank=0 world=1\n"
    assert list(c.log_lines(job.id)) == [f"hello from {job.id}", "rank=0 world=1"]
    assert [j.id for j in c.jobs(state="succeeded")] == [job.id]
    assert c.job(job.id).spec.command == job.spec.command


def test_a_job_spec_may_be_yaml_text_as_for_tessera_submit(tenant):
    c = tenant.client
    job = c.submit("name: from-yaml\ncommand: [sh, -c, 'echo written in yaml']\n"
                   "resources: {gpus: 0}\n")
    assert job.spec.resources.gpus == 0
    assert c.wait(job.id, interval=POLL, timeout=WAIT).state == "succeeded"
    assert c.logs(job.id) == "written in yaml\n"


def test_following_a_log_yields_each_line_as_it_is_written_until_the_job_ends(tenant):
    c = tenant.client
    job = c.submit(JobSpec(name="talker", command=[
        "sh", "-c", "echo one; sleep 0.3; echo two; sleep 0.3; printf 'three \\342\\234\\223'"]))
    lines = list(c.log_lines(job.id, follow=True, interval=POLL, timeout=WAIT))
    # The last line has no newline; it comes once the job has ended. UTF-8 survives.
    assert lines == ["one", "two", "three \u2713"]


def test_a_bad_spec_raises_bad_request_naming_the_field(tenant):
    c = tenant.client
    with pytest.raises(BadRequest) as e:
        c.submit(JobSpec(name="half", command=["true"], resources=Resources(gpus=1.5)))
    assert (e.value.status, e.value.field) == (400, "resources.gpus")
    assert "1.5" in e.value.message

    with pytest.raises(BadRequest) as e:
        c.submit(JobSpec(name="typo", command=["true"], extra={"gpus": 1}))
    assert e.value.field == "gpus" and "unknown key" in e.value.message

    with pytest.raises(BadRequest) as e:
        c.submit({"name": "no-command"})
    assert e.value.field == "command"
    assert c.jobs() == []  # nothing was created


def test_a_job_this_server_can_never_run_is_unschedulable(tenant):
    c = tenant.client
    with pytest.raises(Unschedulable) as e:
        c.submit(JobSpec(name="huge", command=["true"], resources=Resources(gpus=16)))
    assert e.value.status == 422
    assert e.value.field.startswith("resources") and "largest node has 2" in e.value.message

    with pytest.raises(Unschedulable) as e:
        c.submit(JobSpec(name="h100", command=["true"], resources=Resources(gpu_types=["H100"])))
    assert e.value.field == "resources.gpu_types" and "H100" in e.value.message


def test_a_retried_submission_with_the_same_idempotency_key_returns_the_same_job(tenant):
    c = tenant.client
    spec = JobSpec(name="once", command=["true"], resources={"gpus": 0})
    first = c.submit(spec, idempotency_key="py-client-retry-1")
    again = c.submit(spec, idempotency_key="py-client-retry-1")
    assert (first.created, again.created) == (True, False)
    assert again.id == first.id
    assert [j.id for j in c.jobs()] == [first.id]

    with pytest.raises(Conflict) as e:
        c.submit(JobSpec(name="other", command=["true"]), idempotency_key="py-client-retry-1")
    assert e.value.field == "Idempotency-Key" and f"job {first.id}" in e.value.message
    # Without a key of the caller's, each call is a new job.
    assert c.submit(spec).id != c.submit(spec).id


def test_jobs_are_listed_and_filtered_as_the_server_filters_them(tenant, admin):
    c = tenant.client
    quick = c.submit(JobSpec(name="quick", command=["true"], resources={"gpus": 0}))
    blocker = c.submit(JobSpec(name="blocker", command=SLEEPER, resources={"gpus": 0}))
    waiting = c.submit(JobSpec(name="waiting", command=["true"], after_any=[blocker.id]))
    c.wait(quick.id, interval=POLL, timeout=WAIT)
    c.wait(blocker.id, states={"running"}, interval=POLL, timeout=WAIT)
    eventually(lambda: c.job(waiting.id).reason == "Dependency", "the dependent job's reason")

    def ids(jobs):
        return [j.id for j in jobs]

    assert ids(c.jobs(state="running")) == ids(c.jobs(state=JobState.RUNNING)) == [blocker.id]
    assert ids(c.jobs(state=["pending", "running"])) == [blocker.id, waiting.id]
    assert ids(c.jobs(reason="Dependency")) == [waiting.id]
    assert ids(c.jobs(newest_first=True)) == [waiting.id, blocker.id, quick.id]
    assert ids(c.iter_jobs(page_size=1)) == [quick.id, blocker.id, waiting.id]
    assert ids(c.iter_jobs(page_size=1, newest_first=True)) == [waiting.id, blocker.id, quick.id]
    assert ids(c.jobs(limit=2)) == [quick.id, blocker.id]
    assert ids(admin.jobs(tenant=tenant.name)) == [quick.id, blocker.id, waiting.id]
    assert ids(admin.jobs(queue=tenant.name, state="succeeded")) == [quick.id]
    assert c.job(waiting.id).pending_reason  # in words, e.g. "waits for job N to end ..."

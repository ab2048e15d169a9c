"""The typed objects and the error mapping, without a server: what a newer server may send
must not break the client, and a refusal must keep the server's message and field."""
from __future__ import annotations

import pytest

from tessera import (ApiError, BadRequest, Conflict, Forbidden, Gang, Job, JobSpec, JobState,
                     NotFound, Resources, ServiceUnavailable, Unauthorized, Unschedulable, Usage)
from tessera.errors import error_for
from tessera.transport import parse_address

SERVER_JOB = {
    "id": 7, "name": "train", "tenant": "team-a", "state": "running",
    "spec": {"name": "train", "tenant": "team-a", "command": ["python", "train.py"],
             "gang": {"min": 2, "max": 4}, "resources": {"gpus": 0.5, "memory": "16Gi"},
             "time_limit": 3600.0, "env": {"BATCH": "64"}},
    "submitted_at": 1.5, "started_at": 2.5, "finished_at": None, "attempts": 1,
    "preemptions": 0, "exit_code": None, "message": "", "pending_reason": None, "reason": None,
    "queue": "research/team-a", "priority_class": "research",
    "allocation": [{"rank": 0, "node": "vm", "gpus": [1], "gpu_milli": 500}],
    "classified_as": None, "power_limit_w": None,
}


def test_a_job_from_the_server_is_typed():
    job = Job.from_dict(SERVER_JOB)
    assert job.id == 7 and job.state == JobState.RUNNING and not job.finished
    assert job.spec.gang == Gang(min=2, max=4)
    assert job.spec.resources.gpus == 0.5 and job.spec.resources.memory == "16Gi"
    assert job.allocation[0].gpus == [1] and job.allocation[0].gpu_milli == 500
    assert job.extra == {} and job.created is None


def test_fields_a_newer_server_adds_are_kept_not_fatal():
    data = dict(SERVER_JOB, carbon_budget={"kg": 3}, state="hibernating")
    data["spec"] = dict(SERVER_JOB["spec"], priority_boost=2)
    data["allocation"] = [dict(SERVER_JOB["allocation"][0], numa=1)]
    job = Job.from_dict(data)
    assert job.extra == {"carbon_budget": {"kg": 3}}
    assert job.state == "hibernating"  # a state this client does not know stays a string
    assert job.spec.extra == {"priority_boost": 2}
    assert job.allocation[0].extra == {"numa": 1}
    assert job.to_dict()["carbon_budget"] == {"kg": 3}  # and round-trips


def test_a_spec_takes_the_plain_forms_of_the_yaml_format_and_leaves_out_what_is_unset():
    spec = JobSpec(name="x", command=["true"], gang=2, resources={"gpus": 1, "cpu": "500m"},
                   sla={"max_queueing": "10m"})
    assert spec.to_dict() == {"name": "x", "command": ["true"], "gang": {"min": 2, "max": 2},
                              "resources": {"gpus": 1, "cpu": "500m"},
                              "sla": {"max_queueing": "10m"}}
    assert JobSpec.from_dict(spec.to_dict()) == spec
    assert JobSpec(name="y", command=["true"], gang=Gang(max=8)).to_dict()["gang"] == {
        "min": 1, "max": 8}
    assert Resources(gpus=0).to_dict() == {"gpus": 0}  # 0 is a value, not "unset"
    with pytest.raises(TypeError):
        JobSpec(name="z", command="echo hi")  # an argv, not a shell line


@pytest.mark.parametrize("status,cls", [
    (400, BadRequest), (401, Unauthorized), (403, Forbidden), (404, NotFound), (409, Conflict),
    (422, Unschedulable), (503, ServiceUnavailable), (418, ApiError)])
def test_each_status_has_its_exception_with_the_servers_message_and_field(status, cls):
    e = error_for(status, b'{"error": "expected an integer", "field": "resources.gpus"}')
    assert type(e) is cls and isinstance(e, ApiError)
    assert (e.status, e.message, e.field) == (status, "expected an integer", "resources.gpus")
    assert str(e) == f"HTTP {status}: expected an integer (field resources.gpus)"


def test_an_error_that_is_not_json_keeps_its_text():
    e = error_for(503, b"degraded: database writes failing since ...\n")
    assert isinstance(e, ServiceUnavailable) and e.field is None
    assert e.message == "degraded: database writes failing since ..."


def test_usage_rows_sum_gpu_hours_over_types():
    u = Usage.from_dict({"since": 0, "until": 10, "usage": [
        {"tenant": "a", "queue": "a", "gpu_hours": {"V100": 1.5, "A100": 0.5}, "cpu_hours": 0,
         "jobs": {"succeeded": 2}, "started": 2, "mean_wait_hours": 0.1, "preempted": 0,
         "preemptor": 0, "energy_kwh": 0.2}]})
    assert u.for_tenant("a")[0].total_gpu_hours == 2.0 and u.for_tenant("b") == []


@pytest.mark.parametrize("text,url", [
    ("127.0.0.1:8080", "http://127.0.0.1:8080"),
    ("https://gpu-box.lab:8443", "https://gpu-box.lab:8443"),
    ("https://gpu-box.lab/tessera/", "https://gpu-box.lab:443/tessera"),
    ("http://[::1]:9000", "http://[::1]:9000")])
def test_addresses_are_read_as_the_cli_reads_tessera_addr(text, url):
    assert parse_address(text).url == url


def test_an_address_of_another_scheme_is_refused():
    with pytest.raises(ValueError):
        parse_address("ftp://host:21")

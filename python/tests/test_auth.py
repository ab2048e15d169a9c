"""Tokens and tenants: who may see and do what, through the client's exceptions."""
from __future__ import annotations

import time

import pytest
from helpers import POLL, WAIT

from tessera import Client, Conflict, Forbidden, JobSpec, NotFound, Unauthorized

SLEEPER = ["sh", "-c", "sleep 60"]


def test_a_wrong_or_missing_token_raises_unauthorized(server, monkeypatch):
    with pytest.raises(Unauthorized) as e:
        Client(server.addr, "not-a-token").jobs()
    assert e.value.status == 401 and e.value.message.startswith("unknown bearer token")

    # None sent is said apart from a wrong one: the fix differs (set it, or correct it).
    monkeypatch.delenv("TESSERA_TOKEN", raising=False)
    with pytest.raises(Unauthorized) as e:
        Client(server.addr).submit(JobSpec(name="anon", command=["true"]))
    assert e.value.message.startswith("no bearer token sent"), e.value.message


def test_the_token_and_address_come_from_the_environment_as_for_the_cli(server, tenant,
                                                                        monkeypatch):
    monkeypatch.setenv("TESSERA_ADDR", server.addr)
    monkeypatch.setenv("TESSERA_TOKEN", tenant.token)
    me = Client().whoami()
    assert (me.admin, me.tenant) == (False, tenant.name)
    # An argument wins over the environment.
    with pytest.raises(Unauthorized):
        Client(token="not-a-token").whoami()


def test_another_tenants_job_is_forbidden_and_an_unknown_one_not_found(tenant, other_tenant):
    mine = tenant.client.submit(JobSpec(name="private", command=SLEEPER, resources={"gpus": 0}))
    tenant.client.wait(mine.id, states={"running"}, interval=POLL, timeout=WAIT)
    theirs = other_tenant.client
    for attempt in (lambda: theirs.job(mine.id), lambda: theirs.logs(mine.id),
                    lambda: theirs.events(mine.id), lambda: theirs.cancel(mine.id)):
        with pytest.raises(Forbidden) as e:
            attempt()
        assert e.value.status == 403 and "another tenant" in e.value.message
    assert tenant.client.job(mine.id).state == "running"  # the refused cancel changed nothing
    assert theirs.jobs() == []

    with pytest.raises(Forbidden) as e:
        theirs.jobs(tenant=tenant.name)
    assert e.value.field == "tenant"

    with pytest.raises(NotFound) as e:
        theirs.job(10**9)
    assert e.value.status == 404


def test_a_tenant_cannot_do_what_only_the_admin_may(tenant, admin):
    with pytest.raises(Forbidden):
        tenant.client.create_tenant("sneaky")
    with pytest.raises(Forbidden):
        tenant.client.tenants()
    assert admin.whoami().admin is True
    assert tenant.name in {t["name"] for t in admin.tenants()}


def test_users_inside_a_tenant_have_their_own_tokens_and_act_on_their_own_jobs(server, tenant):
    # The tenant's own token manages its people; each user's token stands for them.
    alice = Client(server.addr, tenant.client.add_user(tenant.name, "alice"))
    bob = Client(server.addr, tenant.client.add_user(tenant.name, "bob"))
    lead = Client(server.addr, tenant.client.add_user(tenant.name, "lead", role="admin"))
    me = alice.whoami()
    assert (me.tenant, me.user, me.role) == (tenant.name, "alice", "member")
    job = alice.submit(JobSpec(name="mine", command=SLEEPER, resources={"gpus": 0}))
    assert job.user == "alice"
    assert bob.job(job.id).user == "alice"  # the tenant's people see its jobs
    with pytest.raises(Forbidden) as e:
        bob.cancel(job.id)
    assert f"submitted by alice@{tenant.name}" in e.value.message
    assert lead.cancel(job.id).state in ("cancelled", "pending")
    with pytest.raises(Forbidden):
        bob.add_user(tenant.name, "eve")
    assert [u["name"] for u in lead.users(tenant.name)] == ["alice", "bob", "lead"]
    lead.remove_user(tenant.name, "bob")
    with pytest.raises(Unauthorized):
        bob.jobs()


def test_the_admin_reserves_gpus_for_a_tenant_and_the_tenant_sees_them(server, admin, tenant):
    start = time.time() + 86400  # tomorrow: nothing running now is in its way
    r = admin.create_reservation("py-deadline", tenant.name, 1, start, start + 3600)
    try:
        assert (r["name"], r["tenant"], r["state"], len(r["gpus"])) == (
            "py-deadline", tenant.name, "upcoming", 1)
        mine = [x for x in tenant.client.reservations() if x["name"] == "py-deadline"]
        assert mine and mine[0]["tenant"] == tenant.name
        with pytest.raises(Forbidden):
            tenant.client.create_reservation("sneaky", tenant.name, 1, start, start + 60)
        with pytest.raises(Conflict) as e:
            admin.create_reservation("too-many", tenant.name, 3, start, start + 60)
        assert "can be reserved" in e.value.message
    finally:
        admin.delete_reservation("py-deadline")
    assert all(x["name"] != "py-deadline" for x in admin.reservations())

"""What the server answers: jobs, their history, accounting, queues and nodes
(``components/schemas`` in docs/openapi.yaml).

Every class keeps the keys it does not know in ``extra`` (see ``_records``), and every field
has a default, so an answer from a newer server that adds or drops a field still parses.
Timestamps are unix seconds as the server sends them; ``datetime`` conversions are left to
the caller, who knows which time zone they want.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ._records import Record, list_of
from .spec import TERMINAL_STATES, JobSpec


@dataclass
class Allocation(Record):
    """Where one gang member runs: its node, GPU indices there and the share of each
    (``gpu_milli``: 1000 = a whole GPU)."""

    rank: int = 0
    node: str = ""
    gpus: List[int] = field(default_factory=list)
    gpu_milli: int = 1000
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Job(Record):
    """A job as the server sees it now. ``spec`` is the canonical form of what was submitted
    (durations in seconds, ``gang`` an object); ``pending_reason`` says in words why a waiting
    job waits and ``reason`` the same as a short code (``Resources``, ``Held``, ...)."""

    id: int = 0
    name: str = ""
    tenant: str = ""
    user: Optional[str] = None  # the tenant's user who submitted it; None: the tenant, the admin
    state: str = ""
    spec: Optional[JobSpec] = None
    submitted_at: float = 0.0
    started_at: Optional[float] = None
    finished_at: Optional[float] = None
    attempts: int = 0
    preemptions: int = 0
    exit_code: Optional[int] = None
    message: str = ""
    pending_reason: Optional[str] = None
    reason: Optional[str] = None
    queue: str = ""
    priority_class: str = ""
    allocation: List[Allocation] = field(default_factory=list)
    array_id: Optional[int] = None
    array_index: Optional[int] = None
    classified_as: Optional[str] = None
    power_limit_w: Optional[float] = None
    extra: Dict[str, Any] = field(default_factory=dict)
    # Set by Client.submit only: True when that call created the job (201), False when its
    # Idempotency-Key found the job an earlier try created (200). Not a server field.
    created: Optional[bool] = field(default=None, init=False, compare=False)

    _nested = {"spec": JobSpec.from_dict, "allocation": list_of(Allocation)}

    @property
    def finished(self) -> bool:
        """Whether the job reached a state it never leaves."""
        return self.state in TERMINAL_STATES


@dataclass
class JobEvent(Record):
    """One entry of a job's history (``GET /v1/jobs/ID/events``): ``type`` is ``Submitted``,
    ``Pending``, ``Held``, ``Released``, ``Updated``, ``Started``, ``Preempted``,
    ``Requeued``, ``Succeeded``, ``Failed``, ``TimedOut`` or ``Cancelled``."""

    at: float = 0.0
    type: str = ""
    message: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class StateChange:
    """A change of a job's state, as ``Client.watch`` yields it. ``previous`` is None for the
    first state seen; ``at`` is the server's time of the change; ``event`` the history entry it
    was read from (its ``message`` says by whom, where, or the exit code)."""

    job_id: int
    state: str
    previous: Optional[str]
    at: float
    event: JobEvent

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL_STATES


@dataclass
class UsageRow(Record):
    """Accounting for one tenant and queue over a window (``GET /v1/usage``): GPU-hours by
    GPU type, CPU-hours, jobs finished in the window by final state, first starts and their
    mean wait, runs preempted and runs of others preempted for this tenant's jobs."""

    tenant: str = ""
    queue: str = ""
    gpu_hours: Dict[str, float] = field(default_factory=dict)
    cpu_hours: float = 0.0
    jobs: Dict[str, int] = field(default_factory=dict)
    started: int = 0
    mean_wait_hours: float = 0.0
    preempted: int = 0
    preemptor: int = 0
    energy_kwh: Optional[float] = None
    carbon_kg: Optional[float] = None
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def total_gpu_hours(self) -> float:
        return float(sum(self.gpu_hours.values()))


@dataclass
class Usage(Record):
    """``GET /v1/usage``: the window [since, until) in unix seconds and one row per tenant and
    queue that had something in it (a tenant token sees its own rows only)."""

    since: int = 0
    until: int = 0
    usage: List[UsageRow] = field(default_factory=list)
    extra: Dict[str, Any] = field(default_factory=dict)

    _nested = {"usage": list_of(UsageRow)}

    def for_tenant(self, tenant: str) -> List[UsageRow]:
        """The rows of one tenant (one per queue it used)."""
        return [r for r in self.usage if r.tenant == tenant]


@dataclass
class Queue(Record):
    """A queue of the queue tree with its share and its load (``GET /v1/queues``)."""

    path: str = ""
    weight: float = 0.0
    guarantee_gpus: float = 0.0
    limit_gpus: Optional[float] = None
    holds_gpus: float = 0.0
    pending_jobs: int = 0
    running_jobs: int = 0
    fair_share_gpus: float = 0.0
    decayed_gpus: float = 0.0
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Node(Record):
    """A node and its free capacity (``GET /v1/nodes``); ``gpus`` as the server lists them
    (index, free_milli, the jobs holding a share)."""

    name: str = ""
    state: str = ""
    gpu_type: str = ""
    gpus: List[Dict[str, Any]] = field(default_factory=list)
    cpu_milli: int = 0
    free_cpu_milli: int = 0
    mem_mib: int = 0
    free_mem_mib: int = 0
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Caller(Record):
    """Who a token stands for (``GET /v1/whoami``): the admin, one tenant, or a user inside a
    tenant (``role``: ``server admin``, ``tenant``, ``admin`` or ``member``)."""

    admin: bool = False
    tenant: Optional[str] = None
    user: Optional[str] = None
    role: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict)

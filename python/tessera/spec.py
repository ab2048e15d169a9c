"""What a job asks for: the job spec of ``POST /v1/jobs`` (docs/service.md, "The job spec";
``JobSpec`` in docs/openapi.yaml).

The classes mirror the server's fields one to one, so a spec written here reads like the
YAML a user would submit with ``tessera submit``. Validation is the server's: it names the
offending field in its 400 answer (``BadRequest.field``), and duplicating its rules here
would only let the two drift apart.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, List, Mapping, Optional, Union

from ._records import Record

# Seconds, or a string of a number with a suffix s, m, h or d ("30s", "1.5h").
Duration = Union[int, float, str]
# A Kubernetes resource quantity (4, "500m", "16Gi").
Quantity = Union[int, float, str]


class JobState(str, Enum):
    """A job's state. Members compare equal to the server's strings
    (``job.state == JobState.RUNNING``); ``Job.state`` itself stays a plain string, so a state
    a newer server adds does not break an older client."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    PREEMPTED = "preempted"
    TIMEOUT = "timeout"

    def __str__(self) -> str:
        return self.value


# States a job never leaves (its processes may still be stopping after a cancel).
TERMINAL_STATES = frozenset({"succeeded", "failed", "cancelled", "timeout"})


@dataclass
class Gang(Record):
    """Members started together, all or none. ``max`` defaults to ``min`` on the server; a
    ``max`` above ``min`` is an elastic gang."""

    min: int = 1
    max: Optional[int] = None
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, value: Union["Gang", int, Mapping[str, Any]]) -> "Gang":
        """A gang from what the spec format allows: a number (min = max) or an object."""
        if isinstance(value, Gang):
            return value
        if isinstance(value, bool):
            raise TypeError("gang: expected a member count or {min, max}, got a bool")
        if isinstance(value, int):
            return cls(min=value, max=value)
        if isinstance(value, Mapping):
            return cls.from_dict(value)
        raise TypeError(f"gang: expected a member count or {{min, max}}, got {value!r}")


@dataclass
class Resources(Record):
    """What each member needs. ``gpus``: whole GPUs (0 = a CPU-only job) or a fraction of one
    GPU in (0, 1); the server defaults it to 1."""

    gpus: Optional[Union[int, float]] = None
    cpu: Optional[Quantity] = None
    memory: Optional[Quantity] = None
    gpu_types: Optional[List[str]] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Sla(Record):
    """A service-level objective: the longest a job should wait for its first start."""

    max_queueing: Optional[Duration] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class JobSpec(Record):
    """A job as submitted. Only ``name`` and ``command`` are required; every field left None is
    left out of the request, so the server (or the queue tree) supplies its default.

    ``gang``, ``resources`` and ``sla`` also take the plain values the YAML format allows
    (``gang=2``, ``resources={"gpus": 1}``), converted on construction.
    """

    name: str
    command: List[str]
    tenant: Optional[str] = None
    gang: Optional[Gang] = None
    resources: Optional[Resources] = None
    priority_class: Optional[str] = None
    span: Optional[str] = None
    sla: Optional[Sla] = None
    duration_estimate: Optional[Duration] = None
    checkpoint_grace: Optional[Duration] = None
    time_limit: Optional[Duration] = None
    after_ok: Optional[List[int]] = None
    after_any: Optional[List[int]] = None
    array: Optional[str] = None
    adaptive: Optional[Dict[str, Any]] = None
    dataset: Optional[Union[str, Dict[str, Any]]] = None
    env: Optional[Dict[str, str]] = None
    extra: Dict[str, Any] = field(default_factory=dict)

    _nested = {"gang": Gang.of, "resources": Resources.from_dict, "sla": Sla.from_dict}

    def __post_init__(self) -> None:
        if isinstance(self.command, str):
            # A string would be sent as one argv entry; the server wants the argv itself.
            raise TypeError("command: expected a list of strings (the argv), e.g. "
                            "['sh', '-c', 'echo hi']")
        if self.gang is not None and not isinstance(self.gang, Gang):
            self.gang = Gang.of(self.gang)
        if isinstance(self.resources, Mapping):
            self.resources = Resources.from_dict(self.resources)
        if isinstance(self.sla, Mapping):
            self.sla = Sla.from_dict(self.sla)

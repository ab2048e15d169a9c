"""``Client``: the HTTP API of ``tessera serve`` as Python methods returning typed objects.

Address, token and CA come from the arguments, else from the environment the ``tessera``
CLI reads (``TESSERA_ADDR``, ``TESSERA_TOKEN``, ``TESSERA_CA``), so a notebook started where
the CLI works needs no configuration. A refusal raises the ``ApiError`` subclass of its
status with the server's message and field; no answer raises ``TesseraConnectionError``.

Requests that are safe to repeat are retried when they got no answer (the server may be
restarting): reads, updates, and submissions, which always carry an ``Idempotency-Key`` so a
retry finds the job the first try created instead of making a second one. Cancel, hold,
release and requeue are not retried: a repeat would answer 409 for a change that was made.
"""
from __future__ import annotations

import json
import os
import time
import uuid
from datetime import datetime
from urllib.parse import quote
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Union

from ._records import plain
from .errors import TesseraConnectionError, TesseraError, TesseraTimeout, error_for
from .logs import DEFAULT_FOLLOW_INTERVAL, LogChunk, follow_lines, split_lines
from .models import Caller, Job, JobEvent, Node, Queue, StateChange, Usage
from .spec import TERMINAL_STATES, Duration, JobSpec, JobState
from .transport import DEFAULT_ADDR, Response, Transport, parse_address
from .watch import DEFAULT_INTERVAL, remaining, watch_events


def _quote(segment: str) -> str:
    """One path segment, percent-encoded (a name never reaches another route)."""
    return quote(segment, safe="")


# A job spec as submit() takes it: typed, a plain mapping, or YAML/JSON text as written for
# `tessera submit`.
SpecLike = Union[JobSpec, Mapping[str, Any], str]
# One state or several, as the job list's filter takes them.
States = Union[str, JobState, Iterable[Union[str, JobState]]]
# Unix seconds or an aware/naive datetime (naive: local time, as datetime.timestamp reads it).
TimeLike = Union[int, float, datetime]


class Client:
    """A connection to one ``tessera serve``.

    ``addr``: ``host:port`` or ``https://host:port`` (default ``TESSERA_ADDR``, else
    127.0.0.1:8080). ``token``: the admin's or a tenant's bearer token (default
    ``TESSERA_TOKEN``). ``ca_file``: the PEM CA an https server's certificate must chain to
    (default ``TESSERA_CA``, else the system's CAs). ``timeout``: seconds per request.
    ``retries``: further tries of a safe request that got no answer. ``clock`` and ``sleep``
    drive every wait (retries, watch, wait, following logs); tests replace them.
    """

    def __init__(self, addr: Optional[str] = None, token: Optional[str] = None, *,
                 ca_file: Optional[str] = None, timeout: float = 30.0, retries: int = 3,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        addr = addr or os.environ.get("TESSERA_ADDR") or DEFAULT_ADDR
        token = token if token is not None else os.environ.get("TESSERA_TOKEN", "")
        ca_file = ca_file or os.environ.get("TESSERA_CA") or None
        self.address = parse_address(addr)
        self.retries = max(0, retries)
        self.clock = clock
        self.sleep = sleep
        self._transport = Transport(self.address, token, timeout=timeout, ca_file=ca_file)

    def __repr__(self) -> str:  # never the token
        return f"Client({self.address.url!r})"

    # -- plumbing ----------------------------------------------------------------------------

    def _send(self, method: str, path: str, *, retry: bool = False, **kw: Any) -> Response:
        """One request, retried with backoff while it gets no answer (when `retry`); a
        refusal (status >= 400) raises its ApiError."""
        tries = self.retries + 1 if retry else 1
        for i in range(tries):
            try:
                resp = self._transport.request(method, path, **kw)
                break
            except TesseraConnectionError as e:
                if not e.retryable or i + 1 == tries:
                    raise
                self.sleep(min(0.2 * 2 ** i, 5.0))
        if resp.status >= 400:
            raise error_for(resp.status, resp.body)
        return resp

    def _json(self, method: str, path: str, **kw: Any) -> Any:
        resp = self._send(method, path, **kw)
        try:
            return json.loads(resp.body.decode("utf-8"))
        except ValueError as e:
            raise TesseraError(f"{method} {path}: the answer is not JSON ({e})") from e

    # -- the server --------------------------------------------------------------------------

    def info(self) -> Dict[str, Any]:
        """Which server this is (``{"server": "serve", "version": ...}``); needs no token."""
        return dict(self._json("GET", "/v1/info", retry=True))

    def health(self) -> str:
        """``ok``; raises ServiceUnavailable (503) with the reason when the server is
        degraded (its database refusing writes)."""
        return self._send("GET", "/healthz", retry=True).body.decode("utf-8").strip()

    def whoami(self) -> Caller:
        """Who this client's token stands for."""
        return Caller.from_dict(self._json("GET", "/v1/whoami", retry=True))

    # -- jobs --------------------------------------------------------------------------------

    def submit(self, spec: SpecLike, *, idempotency_key: Optional[str] = None) -> Job:
        """Submits a job and returns it as created (usually ``pending``).

        ``spec``: a JobSpec, a mapping in the spec format, or YAML/JSON text. With a tenant
        token, ``tenant`` may be left out (the token's own); the admin must name one.
        ``idempotency_key``: 1-255 printable ASCII characters; a repeat with the same key
        (and the same spec) returns the job the first call created, with ``created`` False.
        Without one, a fresh key is made for this call, so this call's own retries are safe;
        pass your own to make a retry of the whole call (after a crash, say) safe too.
        Raises BadRequest naming the field of an invalid spec, Unschedulable for one this
        server can never run, Conflict for a key reused with another spec."""
        if isinstance(spec, str):
            body, ctype = spec.encode("utf-8"), "application/yaml"
        else:
            data = spec.to_dict() if isinstance(spec, JobSpec) else plain(dict(spec))
            body, ctype = json.dumps(data).encode("utf-8"), "application/json"
        key = idempotency_key if idempotency_key is not None else uuid.uuid4().hex
        resp = self._send("POST", "/v1/jobs", retry=True, body=body, content_type=ctype,
                          headers={"Idempotency-Key": key})
        job = Job.from_dict(json.loads(resp.body.decode("utf-8")))
        job.created = resp.status == 201
        return job

    def job(self, job_id: int) -> Job:
        """One job. Raises NotFound for no such job, Forbidden for another tenant's."""
        return Job.from_dict(self._json("GET", f"/v1/jobs/{int(job_id)}", retry=True))

    get_job = job

    def iter_jobs(self, *, state: Optional[States] = None, tenant: Optional[str] = None,
                  queue: Optional[str] = None, priority_class: Optional[str] = None,
                  reason: Optional[str] = None, array: Optional[int] = None,
                  newest_first: bool = False, page_size: int = 500) -> Iterator[Job]:
        """Every job that matches all the filters given, oldest first (or newest first), read
        a page at a time as the iteration goes. ``state``: one state or several; ``tenant``:
        the admin's filter (a tenant token may name only its own); ``queue``: a queue path
        and the queues below it; ``priority_class``; ``reason``: a waiting job's reason code
        (``Held``, ``Resources``, ...); ``array``: the tasks of one job array."""
        if isinstance(state, str):
            states: Optional[str] = str(state)
        elif state is not None:
            states = ",".join(str(s) for s in state)
        else:
            states = None
        query: Dict[str, object] = {
            "state": states, "tenant": tenant, "queue": queue, "class": priority_class,
            "reason": reason, "array": array, "order": "desc" if newest_first else "asc",
            "limit": max(1, min(int(page_size), 10000)),
        }
        cursor_key = "before" if newest_first else "after"
        next_key = "next_before" if newest_first else "next_after"
        while True:
            page = self._json("GET", "/v1/jobs", retry=True, query=query)
            for j in page.get("jobs", []):
                yield Job.from_dict(j)
            nxt = page.get(next_key)
            if nxt is None:
                return
            query[cursor_key] = nxt

    def jobs(self, *, limit: Optional[int] = None, **filters: Any) -> List[Job]:
        """The jobs ``iter_jobs(**filters)`` yields, at most ``limit`` of them."""
        out: List[Job] = []
        if limit is not None:
            filters.setdefault("page_size", max(1, min(limit, 10000)))
        for j in self.iter_jobs(**filters):
            if limit is not None and len(out) >= limit:
                break
            out.append(j)
        return out

    list_jobs = jobs

    def events(self, job_id: int) -> List[JobEvent]:
        """The job's history, oldest first."""
        data = self._json("GET", f"/v1/jobs/{int(job_id)}/events", retry=True)
        return [JobEvent.from_dict(e) for e in data.get("events", [])]

    def watch(self, job_id: int, *, interval: float = DEFAULT_INTERVAL,
              timeout: Optional[float] = None) -> Iterator[StateChange]:
        """Yields each change of the job's state (pending, running, ... its end), read from
        its history every ``interval`` seconds (default 1 s), and stops once the job has
        ended; raises TesseraTimeout after ``timeout`` seconds. See ``watch.py``."""
        return watch_events(self.events, job_id, interval=interval, timeout=timeout,
                            clock=self.clock, sleep=self.sleep)

    def wait(self, job_id: int, *, states: Iterable[str] = TERMINAL_STATES,
             interval: float = DEFAULT_INTERVAL, timeout: Optional[float] = None) -> Job:
        """Waits until the job is now in one of ``states`` (default: ended) or has ended,
        polling it every ``interval`` seconds, and returns it as it is then. Unlike watch(),
        this looks at the current state only: waiting for ``running`` returns the ended job
        if it ran and ended between two polls. Raises TesseraTimeout after ``timeout``."""
        wanted = {str(s) for s in states}
        deadline = None if timeout is None else self.clock() + timeout
        while True:
            job = self.job(job_id)
            if job.state in wanted or job.finished:
                return job
            try:
                left = remaining(deadline, self.clock)
            except TesseraTimeout:
                raise TesseraTimeout(f"job {job_id} is still {job.state} after {timeout} s; "
                                     f"waited for {', '.join(sorted(wanted))}") from None
            self.sleep(interval if left is None else min(interval, left))

    # -- logs --------------------------------------------------------------------------------

    def log_chunk(self, job_id: int, rank: int = 0, offset: int = 0,
                  max_bytes: int = 0) -> LogChunk:
        """Bytes of a member's log of the job's current run from ``offset`` on (at most
        ``max_bytes``; 0: all), with where they start and which attempt they are from.
        Raises NotFound for a job that has not started."""
        resp = self._send("GET", f"/v1/jobs/{int(job_id)}/logs", retry=True,
                          query={"rank": rank, "offset": offset, "tail_bytes": max_bytes})
        return LogChunk(resp.body, int(resp.header("X-Log-Offset") or offset),
                        int(resp.header("X-Log-Attempt") or 0))

    def logs(self, job_id: int, *, rank: int = 0, tail_bytes: int = 65536) -> str:
        """A member's output (stdout and stderr) of the job's current run: its last
        ``tail_bytes`` bytes (0: all of it). Raises NotFound before the job started."""
        resp = self._send("GET", f"/v1/jobs/{int(job_id)}/logs", retry=True,
                          query={"rank": rank, "tail_bytes": tail_bytes})
        return resp.body.decode("utf-8", errors="replace")

    def log_lines(self, job_id: int, *, rank: int = 0, follow: bool = False,
                  tail_bytes: int = 0, interval: float = DEFAULT_FOLLOW_INTERVAL,
                  timeout: Optional[float] = None) -> Iterator[str]:
        """A member's log as lines (without their newlines). Without ``follow``: the log as
        it is now (its last ``tail_bytes`` bytes; 0: all). With ``follow``: every line of the
        current run as it is written, until the job has ended and all is read (polling every
        ``interval`` seconds while nothing new comes; TesseraTimeout after ``timeout``);
        a new run of the job starts over after a ``--- attempt N ---`` line."""
        if follow:
            return follow_lines(self.job, self.log_chunk, job_id, rank=rank, interval=interval,
                                timeout=timeout, clock=self.clock, sleep=self.sleep)
        resp = self._send("GET", f"/v1/jobs/{int(job_id)}/logs", retry=True,
                          query={"rank": rank, "tail_bytes": tail_bytes})
        return iter(split_lines(resp.body))

    # -- job control -------------------------------------------------------------------------

    def _action(self, job_id: int, action: str, query: Optional[Dict[str, object]] = None) -> Job:
        return Job.from_dict(self._json("POST", f"/v1/jobs/{int(job_id)}/{action}", query=query))

    def cancel(self, job_id: int, *, force: bool = False, array: bool = False) -> Job:
        """Cancels a waiting or running job (SIGTERM, SIGKILL after its checkpoint grace);
        it is ``cancelled`` at once. ``force``: SIGKILL now. ``array``: every unfinished task
        of the job array this job belongs to (the count is ``extra["cancelled_tasks"]``).
        Raises Conflict once the job has ended and its processes are gone."""
        query: Dict[str, object] = {}
        if force:
            query["force"] = True
        if array:
            query["array"] = True
        return self._action(job_id, "cancel", query or None)

    def hold(self, job_id: int) -> Job:
        """Keeps a waiting job waiting (reason ``Held``) until released. Conflict otherwise."""
        return self._action(job_id, "hold")

    def release(self, job_id: int) -> Job:
        """Lets a held job start again, in its place from its submission."""
        return self._action(job_id, "release")

    def requeue(self, job_id: int) -> Job:
        """Stops a running job and queues it again; its next run is a new attempt."""
        return self._action(job_id, "requeue")

    def update(self, job_id: int, *, priority_class: Optional[str] = None,
               time_limit: Optional[Duration] = None) -> Job:
        """Changes a waiting job's priority class, or a waiting or running job's time limit
        (a tenant may lower it; only the admin may raise it)."""
        body: Dict[str, Any] = {}
        if priority_class is not None:
            body["priority_class"] = priority_class
        if time_limit is not None:
            body["time_limit"] = time_limit
        if not body:
            raise ValueError("update: give priority_class, time_limit or both")
        data = self._json("PATCH", f"/v1/jobs/{int(job_id)}", retry=True,
                          body=json.dumps(body).encode("utf-8"), content_type="application/json")
        return Job.from_dict(data)

    # -- accounting and the cluster ----------------------------------------------------------

    def usage(self, *, since: Optional[TimeLike] = None,
              until: Optional[TimeLike] = None) -> Usage:
        """GPU-hours, CPU-hours, jobs by final state, waits and preemptions per tenant and
        queue over [since, until) (default: the last 30 days up to now). A tenant sees its own
        rows; the admin everyone's. The server takes whole seconds and its default ``until``
        is the current second rounded down, so a job that ended within this second shows a
        moment later; pass an ``until`` a little ahead to count it now (running runs count up
        to the present however far ahead ``until`` is)."""
        query = {"since": _unix(since), "until": _unix(until)}
        return Usage.from_dict(self._json("GET", "/v1/usage", retry=True, query=query))

    def queues(self) -> List[Queue]:
        """The queue tree's queues with their shares and load (a tenant sees its own)."""
        return [Queue.from_dict(q) for q in self._json("GET", "/v1/queues", retry=True)["queues"]]

    def nodes(self) -> List[Node]:
        """The nodes and their free capacity."""
        return [Node.from_dict(n) for n in self._json("GET", "/v1/nodes", retry=True)["nodes"]]

    # -- administration (the admin token) ----------------------------------------------------

    def create_tenant(self, name: str) -> str:
        """Creates a tenant and returns its token, which the server shows only this once."""
        data = self._json("POST", "/v1/tenants", body=json.dumps({"name": name}).encode("utf-8"),
                          content_type="application/json")
        return str(data["token"])

    def tenants(self) -> List[Dict[str, Any]]:
        """Every tenant: name, whether it has a token, its queue, pending and running jobs."""
        return list(self._json("GET", "/v1/tenants", retry=True)["tenants"])

    # -- people inside tenants ------------------------------------------------------------

    def add_user(self, tenant: str, name: str, role: str = "member") -> str:
        """Adds a user to ``tenant`` (``member`` acts on their own jobs, ``admin`` on all the
        tenant's and manages its users) and returns their token, shown only this once."""
        body = json.dumps({"name": name, "role": role}).encode("utf-8")
        data = self._json("POST", f"/v1/tenants/{_quote(tenant)}/users", body=body,
                          content_type="application/json")
        return str(data["token"])

    def users(self, tenant: Optional[str] = None) -> List[Dict[str, Any]]:
        """A tenant's users (every tenant's for the admin when ``tenant`` is None)."""
        path = "/v1/users" if tenant is None else f"/v1/tenants/{_quote(tenant)}/users"
        return list(self._json("GET", path, retry=True)["users"])

    def remove_user(self, tenant: str, name: str) -> None:
        """Removes a user: their token stops working at once; their jobs stay."""
        self._json("DELETE", f"/v1/tenants/{_quote(tenant)}/users/{_quote(name)}")

    def rotate_user_token(self, tenant: str, name: str) -> str:
        """A new token for a user (by the user or a manager); the old one stops working."""
        data = self._json("POST", f"/v1/tenants/{_quote(tenant)}/users/{_quote(name)}/token",
                          body=b"", content_type="application/json")
        return str(data["token"])

    def create_reservation(self, name: str, tenant: str, gpus: int, start: TimeLike,
                           end: TimeLike, *, user: Optional[str] = None,
                           gpu_type: Optional[str] = None, node: Optional[str] = None,
                           ignore_jobs: bool = False) -> Dict[str, Any]:
        """The admin sets ``gpus`` GPUs aside for ``tenant`` (or its ``user``) over
        [``start``, ``end``): inside the window only their jobs use them; before it, only jobs
        whose time limit ends by its start. Returns the reservation, its GPUs as
        ``NODE/INDEX``; ``Conflict`` says what stands in the way when too few are free."""
        body: Dict[str, Any] = {"name": name, "tenant": tenant, "gpus": gpus,
                                "start": _seconds(start), "end": _seconds(end),
                                "ignore_jobs": ignore_jobs}
        for key, value in (("user", user), ("gpu_type", gpu_type), ("node", node)):
            if value is not None:
                body[key] = value
        return dict(self._json("POST", "/v1/reservations",
                               body=json.dumps(body).encode("utf-8"),
                               content_type="application/json"))

    def reservations(self) -> List[Dict[str, Any]]:
        """Every reservation (upcoming, active, ended); another tenant's without its names."""
        return list(self._json("GET", "/v1/reservations", retry=True)["reservations"])

    def delete_reservation(self, name: str) -> None:
        """The admin deletes a reservation: its GPUs are everyone's again."""
        self._json("DELETE", f"/v1/reservations/{_quote(name)}")


def _seconds(t: TimeLike) -> float:
    """Unix seconds of a time given as a number or a datetime."""
    return t.timestamp() if isinstance(t, datetime) else float(t)


def _unix(t: Optional[TimeLike]) -> Optional[int]:
    """Whole unix seconds, as the server's query parameters take them."""
    if t is None:
        return None
    if isinstance(t, datetime):
        return int(t.timestamp())
    return int(t)

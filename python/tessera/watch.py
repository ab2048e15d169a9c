"""Watching a job's state change, by polling its history.

``tessera serve`` has no streaming endpoint, but it records every transition of a job in
its history (``GET /v1/jobs/ID/events``), in the same transaction as the change itself
("the history never misses or repeats a state the database holds", docs/service.md). So the
watcher polls the history rather than the job: a job that starts and ends between two polls
still yields pending, running and succeeded, in order, each with the server's time.

The clock and the sleep are parameters so that tests (and callers with an event loop of
their own) can drive the loop without waiting on the wall clock.
"""
from __future__ import annotations

import time
from typing import Callable, Dict, Iterator, List, Optional

from .errors import TesseraTimeout
from .models import JobEvent, StateChange
from .spec import TERMINAL_STATES

# How often the history is read by default, in seconds: a job's state is news within a
# second, and a watcher costs the server one small read a second.
DEFAULT_INTERVAL = 1.0

# The state each history entry moves a job into. Pending (a new reason), Held, Released and
# Updated leave the state as it was and are not state changes.
EVENT_STATES: Dict[str, str] = {
    "Submitted": "pending",
    "Requeued": "pending",
    "Started": "running",
    "Preempted": "preempted",
    "Succeeded": "succeeded",
    "Failed": "failed",
    "TimedOut": "timeout",
    "Cancelled": "cancelled",
}


def remaining(deadline: Optional[float], clock: Callable[[], float]) -> Optional[float]:
    """Seconds left before `deadline` (None: no deadline); raises TesseraTimeout past it."""
    if deadline is None:
        return None
    left = deadline - clock()
    if left <= 0:
        raise TesseraTimeout("timed out")
    return left


def watch_events(events: Callable[[int], List[JobEvent]], job_id: int, *,
                 interval: float = DEFAULT_INTERVAL, timeout: Optional[float] = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> Iterator[StateChange]:
    """Yields each change of the job's state, oldest first, from its first state (pending)
    on, and returns once it reaches a state it never leaves. ``events`` reads the job's
    history (``Client.events``). Raises TesseraTimeout when ``timeout`` seconds pass first.

    A job that runs again (requeued, preempted) yields pending and running again. A new
    attempt that follows a failed launch without leaving ``running`` is not a change."""
    if interval <= 0:
        raise ValueError("interval must be positive")
    deadline = None if timeout is None else clock() + timeout
    seen = 0
    state: Optional[str] = None
    while True:
        history = events(job_id)
        # The history only grows (entries are appended, never rewritten), so what was seen
        # is a prefix of what is read now.
        for event in history[seen:]:
            new = EVENT_STATES.get(event.type)
            if new is None or new == state:
                continue
            change = StateChange(job_id, new, state, event.at, event)
            state = new
            yield change
        seen = len(history)
        if state in TERMINAL_STATES:
            return
        try:
            left = remaining(deadline, clock)
        except TesseraTimeout:
            raise TesseraTimeout(f"job {job_id} is still {state} after {timeout} s") from None
        sleep(interval if left is None else min(interval, left))

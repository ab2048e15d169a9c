"""Reading a job member's output as lines, and following it as it grows.

The server has no streaming log endpoint; it serves any byte range of a member's log
(``GET /v1/jobs/ID/logs?rank=R&offset=N&tail_bytes=M``) and says in ``X-Log-Offset`` where
the bytes start and in ``X-Log-Attempt`` which run they are from. Following is therefore
polling from the last offset read, as ``tessera logs --follow`` does: whole lines as they
come, until the job has ended and nothing is left. A new run (a requeue, a preemption)
writes a new log, read from its start after a ``--- attempt N ---`` line, as the CLI prints.

Lines are split on bytes and decoded one by one (UTF-8, undecodable bytes replaced), so a
character cut between two reads is never mangled.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterator, List, Optional

from .errors import NotFound, TesseraTimeout
from .models import Job
from .spec import TERMINAL_STATES
from .watch import remaining

# Bytes read per request while following: the CLI's size; a busy log is caught up in a few.
FOLLOW_CHUNK = 1 << 20
# How long a follower waits before asking again when nothing new came, in seconds.
DEFAULT_FOLLOW_INTERVAL = 0.5


@dataclass
class LogChunk:
    """Bytes of one member's log: where they start in the file, and whose run they are from."""

    data: bytes
    offset: int
    attempt: int


class _LineSplitter:
    """Cuts bytes into lines, keeping an unfinished last line until its newline comes."""

    def __init__(self) -> None:
        self._partial = b""

    def feed(self, data: bytes) -> List[str]:
        self._partial += data
        *lines, self._partial = self._partial.split(b"\n")
        return [_text(line) for line in lines]

    def flush(self) -> List[str]:
        rest, self._partial = self._partial, b""
        return [_text(rest)] if rest else []


def _text(line: bytes) -> str:
    return line.decode("utf-8", errors="replace")


def split_lines(data: bytes) -> List[str]:
    """The lines of a log read whole (the last one even without its newline)."""
    s = _LineSplitter()
    return s.feed(data) + s.flush()


def follow_lines(job: Callable[[int], Job],
                 chunk: Callable[[int, int, int, int], LogChunk], job_id: int, *, rank: int = 0,
                 interval: float = DEFAULT_FOLLOW_INTERVAL, timeout: Optional[float] = None,
                 attempt_markers: bool = True, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> Iterator[str]:
    """Yields the member's log lines as they are written, from the start of its current run,
    and returns once the job has ended and its log is read to the end. ``job`` reads the job
    (``Client.job``), ``chunk(job_id, rank, offset, max_bytes)`` a piece of its log
    (``Client.log_chunk``). A job that has not started yet is waited for.
    Raises TesseraTimeout when ``timeout`` seconds pass first."""
    deadline = None if timeout is None else clock() + timeout
    attempt: Optional[int] = None
    offset = 0
    lines = _LineSplitter()
    while True:
        # The job's state is read before its log: once it has ended its log is complete, so
        # an empty read after that means everything was read.
        j = job(job_id)
        ended = j.state in TERMINAL_STATES
        got = False
        if j.attempts > 0:
            try:
                c: Optional[LogChunk] = chunk(job_id, rank, offset, FOLLOW_CHUNK)
            except NotFound:  # started a moment ago; its log is not there yet
                c = None
            if c is not None and attempt is not None and c.attempt != attempt:
                # A new run: its log is another file, read from its start.
                yield from lines.flush()
                if attempt_markers:
                    yield f"--- attempt {c.attempt} ---"
                attempt, offset = c.attempt, 0
                continue
            if c is not None:
                attempt = c.attempt
                offset = c.offset + len(c.data)
                got = bool(c.data)
                yield from lines.feed(c.data)
        if ended and not got:
            break
        try:
            left = remaining(deadline, clock)
        except TesseraTimeout:
            raise TesseraTimeout(
                f"job {job_id} is still {j.state} after {timeout} s of following its log"
            ) from None
        if not got:
            sleep(interval if left is None else min(interval, left))
    yield from lines.flush()

"""The polling loops (watch, following logs, retries) driven by a fake clock: what they yield,
how long they sleep and when they give up, without waiting on the wall clock."""
from __future__ import annotations

import socket

import pytest

from tessera import Client, Job, JobEvent, NotFound, TesseraConnectionError, TesseraTimeout
from tessera.logs import LogChunk, follow_lines
from tessera.watch import watch_events


class FakeClock:
    """time.monotonic and time.sleep in one: sleeping advances the clock at once."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def history(*types: str):
    return [JobEvent(at=float(i), type=t, message="") for i, t in enumerate(types)]


def scripted(*polls):
    """An events() that answers each poll with the next history, then the last forever."""
    answers = list(polls)

    def events(job_id: int):
        assert job_id == 5
        return answers.pop(0) if len(answers) > 1 else answers[0]
    return events


def test_watch_yields_each_state_once_in_order_and_sleeps_the_interval_between_polls():
    clock = FakeClock()
    events = scripted(history("Submitted"),
                      history("Submitted", "Pending"),  # a new reason is not a state change
                      history("Submitted", "Pending", "Started", "Requeued", "Started"),
                      history("Submitted", "Pending", "Started", "Requeued", "Started",
                              "Succeeded"))
    changes = list(watch_events(events, 5, interval=2.0, clock=clock, sleep=clock.sleep))
    assert [(c.previous, c.state) for c in changes] == [
        (None, "pending"), ("pending", "running"), ("running", "pending"),
        ("pending", "running"), ("running", "succeeded")]
    assert [c.at for c in changes] == [0.0, 2.0, 3.0, 4.0, 5.0]  # the server's times
    assert clock.sleeps == [2.0, 2.0, 2.0]


def test_watch_gives_up_at_its_timeout_having_slept_no_longer():
    clock = FakeClock()
    events = scripted(history("Submitted", "Started"))
    seen = []
    with pytest.raises(TesseraTimeout, match="still running"):
        for change in watch_events(events, 5, interval=2.0, timeout=5.0, clock=clock,
                                   sleep=clock.sleep):
            seen.append(change.state)
    assert seen == ["pending", "running"]
    assert clock.sleeps == [2.0, 2.0, 1.0] and clock.now == 105.0


class FakeJob:
    """A job whose log grows (and whose runs change) as the follower polls it."""

    def __init__(self, script):
        self.script = list(script)  # (state, attempts, attempt of the log, log bytes so far)
        self.current = self.script[0]

    def job(self, job_id: int) -> Job:
        if len(self.script) > 1:
            self.current = self.script.pop(0)
        else:
            self.current = self.script[0]
        state, attempts, _, _ = self.current
        return Job(id=job_id, state=state, attempts=attempts)

    def chunk(self, job_id: int, rank: int, offset: int, max_bytes: int) -> LogChunk:
        _, attempts, attempt, data = self.current
        if attempts == 0:
            raise NotFound(404, "job has not started")
        start = min(offset, len(data))
        return LogChunk(data[start:start + max_bytes], start, attempt)


def test_following_a_log_yields_whole_lines_across_reads_and_runs():
    check = "\u2713".encode()
    fake = FakeJob([
        ("pending", 0, 0, b""),
        ("running", 1, 1, b"one\ntw"),
        ("running", 1, 1, b"one\ntwo\nok " + check[:1]),  # a character cut between reads
        ("running", 1, 1, b"one\ntwo\nok " + check + b"\nlast words"),
        ("running", 2, 2, b"again\n"),  # requeued: a new run, a new log
        ("succeeded", 2, 2, b"again\ndone"),
    ])
    clock = FakeClock()
    lines = list(follow_lines(fake.job, fake.chunk, 9, interval=0.5, clock=clock,
                              sleep=clock.sleep))
    # The old run's unfinished line is not lost when the next run starts.
    assert lines == ["one", "two", "ok \u2713", "last words", "--- attempt 2 ---", "again",
                     "done"]
    assert clock.sleeps == [0.5]  # slept only when nothing new came (before the start)


def test_following_gives_up_at_its_timeout():
    fake = FakeJob([("running", 1, 1, b"quiet\n")])
    clock = FakeClock()
    with pytest.raises(TesseraTimeout):
        list(follow_lines(fake.job, fake.chunk, 9, interval=1.0, timeout=3.0, clock=clock,
                          sleep=clock.sleep))
    assert clock.now == 103.0


def test_a_read_that_gets_no_answer_is_retried_with_backoff_then_raises():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    clock = FakeClock()
    c = Client(f"127.0.0.1:{port}", "t", retries=3, clock=clock, sleep=clock.sleep, timeout=5)
    with pytest.raises(TesseraConnectionError, match="no answer"):
        c.jobs()
    assert clock.sleeps == [0.2, 0.4, 0.8]
    clock.sleeps.clear()
    with pytest.raises(TesseraConnectionError):
        c.cancel(1)  # not safe to repeat: tried once
    assert clock.sleeps == []

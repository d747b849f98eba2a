"""A time limit for one fuzz case, and the one rule every case must obey.

Every case ends in success or in :class:`sim.NpuSimError`, within :data:`CASE_SECONDS`.
The limit is a ``SIGALRM`` timer: it interrupts pure-Python loops (a hang in the
simulator is one), and raises :class:`CaseTimeout`, a ``BaseException`` so that no
``except Exception`` in the code under test can swallow it.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import TypeVar

import pytest

from sim import NpuSimError

CASE_SECONDS = 10.0
T = TypeVar("T")


class CaseTimeout(BaseException):
    """A fuzz case ran longer than its limit (a hang)."""


@contextmanager
def time_limit(seconds: float = CASE_SECONDS) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("fuzz cases need the main thread for their SIGALRM time limit")

    def expire(signum: int, frame: FrameType | None) -> None:
        raise CaseTimeout(f"case ran longer than {seconds} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass(frozen=True)
class Outcome:
    """How a case ended: ``value`` on success, else the project error it raised."""

    value: object
    error: NpuSimError | None
    seconds: float

    @property
    def ok(self) -> bool:
        return self.error is None


def run_case(fn: Callable[[], T], seconds: float = CASE_SECONDS) -> Outcome:
    """Run ``fn`` under the time limit; a project error is an outcome, anything else fails."""
    start = time.perf_counter()
    try:
        with time_limit(seconds):
            try:
                value: object = fn()
                error = None
            except NpuSimError as exc:
                value, error = None, exc
    except CaseTimeout:
        # a clean failure: a traceback through the signal handler confuses pytest's report
        pytest.fail(f"hang: the case ran longer than {seconds} s", pytrace=False)
    return Outcome(value, error, time.perf_counter() - start)

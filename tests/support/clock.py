"""A clock a test advances instead of sleeping: monotonic time plus what the test skipped."""

from __future__ import annotations

import threading
import time


class SkipClock:
    """Runs at the real rate (so everything that waits on real time still progresses) and jumps ahead by
    `advance(seconds)`: a cache whose interval it measures expires at once, without a sleep."""

    def __init__(self) -> None:
        self.skipped = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return time.monotonic() + self.skipped

    def advance(self, seconds: float) -> None:
        """Move the clock `seconds` ahead of real time."""
        with self._lock:
            self.skipped += seconds

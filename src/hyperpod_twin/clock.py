"""The twin clock: scaled real time plus explicit advances, and a scheduler of timed callbacks."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class TwinClock:
    """Twin time = (real seconds since start x scale) + explicit advances.

    `schedule(delay, fn)` runs `fn` once twin time has moved `delay` seconds on, from a background
    thread (started by `start()`), or at once inside `advance()` when an advance crosses its due time.
    Progressions (EKS ACTIVE, HyperPod InService, pods finishing) are all scheduled here, so a test
    can skip waiting with `advance()` instead of sleeping.
    """

    def __init__(self, scale: float = 20.0) -> None:
        self.scale = scale
        self._real_start = time.monotonic()
        self._offset = 0.0
        self._epoch = time.time()
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        # One thread runs callbacks at a time, so advance() returns only after every callback that fell
        # due has finished, including one the background thread had already picked up.
        self._run_lock = threading.RLock()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def now(self) -> float:
        """Twin seconds since the clock started."""
        return (time.monotonic() - self._real_start) * self.scale + self._offset

    def wall(self) -> float:
        """Twin time as a Unix timestamp (what AWS timestamps and Kubernetes times show)."""
        return self._epoch + self.now()

    def set_scale(self, scale: float) -> None:
        """Change the speed of twin time without a jump."""
        with self._cond:
            current = self.now()
            self.scale = scale
            self._real_start = time.monotonic()
            self._offset = current
            self._cond.notify_all()

    def schedule(self, delay: float, fn: Callable[[], None]) -> None:
        """Run `fn` when twin time reaches now + `delay` (delay <= 0 runs at the next tick)."""
        with self._cond:
            heapq.heappush(self._queue, (self.now() + max(delay, 0.0), next(self._seq), fn))
            self._cond.notify_all()

    def advance(self, seconds: float) -> None:
        """Move twin time forward and run everything that became due, in due order."""
        with self._cond:
            self._offset += seconds
            self._cond.notify_all()
        self.run_due()

    def run_due(self) -> int:
        """Run every callback that is due now; return how many ran."""
        ran = 0
        with self._run_lock:
            while True:
                with self._cond:
                    if not self._queue or self._queue[0][0] > self.now():
                        return ran
                    _, _, fn = heapq.heappop(self._queue)
                try:
                    fn()
                except Exception:
                    log.exception("twin clock callback failed")
                ran += 1

    def clear(self) -> None:
        """Drop every scheduled callback (used by reset)."""
        with self._cond:
            self._queue.clear()

    def start(self) -> None:
        """Start the background thread that runs callbacks as they fall due."""
        if self._thread is not None:
            return
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name="twin-clock", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the background thread."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _loop(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                wait = 0.5
                if self._queue:
                    due_in = (self._queue[0][0] - self.now()) / max(self.scale, 1e-9)
                    wait = min(max(due_in, 0.0), 0.5)
                if wait > 0:
                    self._cond.wait(wait)
            self.run_due()

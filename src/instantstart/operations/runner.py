"""The runner: claims operations by lease, drives their stages in order, resumes after restarts."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from typing import Any, Generic

from anyio import to_thread
from pydantic import BaseModel

from instantstart.errors import UnknownKind
from instantstart.logs import operation_id_var
from instantstart.operations.kinds import KindRegistry, OperationKind
from instantstart.operations.models import OperationRef
from instantstart.operations.params import params_for_submit, params_to_store
from instantstart.operations.stage import AppT
from instantstart.operations.stage_runs import LeaseLost, Listener, StageRuns
from instantstart.operations.store import OperationStore
from instantstart.settings import Settings

log = logging.getLogger(__name__)


class Runner(StageRuns, Generic[AppT]):
    """Drives persisted operations. Several runners (processes) may share one database safely.

    Generic over the application object handed to stage functions (`start(app)`), so the engine imports
    nothing above it."""

    def __init__(self, settings: Settings, store: OperationStore, kinds: KindRegistry) -> None:
        self.settings = settings
        self.store = store
        self.kinds = kinds
        self.owner = settings.worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.app: AppT | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._listeners: list[Listener] = []
        self._save_locks: dict[str, asyncio.Lock] = {}

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, app: AppT) -> None:
        """Begin claiming operations; unfinished ones from before a restart are picked up first."""
        self.app = app
        self._wake = asyncio.Event()
        self._loop_task = asyncio.create_task(self._loop(), name="operations-runner")

    async def stop(self) -> None:
        """Stop claiming and give running operations' leases back so another process can resume them."""
        if self._loop_task:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def wake(self) -> None:
        """Look for work now instead of at the next poll."""
        self._wake.set()

    def add_listener(self, listener: Listener) -> None:
        """Call `listener(operation_id)` whenever an operation changes (live views)."""
        self._listeners.append(listener)

    # -- submission --------------------------------------------------------------------------
    async def submit(
        self,
        kind: str,
        params: BaseModel,
        *,
        target: str | None,
        idempotency_key: str | None,
        status_tool: str,
        poll_after_seconds: int = 10,
    ) -> OperationRef:
        """Persist a new operation (or find the idempotent twin) and return its reference at once. `params` is
        the kind's params model (see `params_model` for a tool that has a dict): stored as dumped, once."""
        spec = self._kind(kind)
        stored = params_to_store(spec.params, kind, params)
        view, created = await to_thread.run_sync(self.store.submit, spec, stored, target, idempotency_key)
        if created:
            log.info("operation submitted", extra={"operation_id": view.operation_id, "kind": kind})
            self.wake()
            await self._notify(view.operation_id)
        return OperationRef(
            operation_id=view.operation_id,
            status=view.status,
            status_tool=status_tool,
            poll_after_seconds=poll_after_seconds,
        )

    def params_model(self, kind: str, params: dict[str, Any]) -> BaseModel:
        """Raw params (camelCase or snake_case keys) validated as the kind's params model, for `submit`."""
        return params_for_submit(self._kind(kind).params, kind, params)

    def _kind(self, kind: str) -> OperationKind:
        spec = self.kinds.get(kind)
        if spec is None:
            raise UnknownKind(f"Operation kind {kind} is not registered.")
        return spec

    async def replay(
        self, kind: str, idempotency_key: str | None, *, status_tool: str, poll_after_seconds: int = 10
    ) -> OperationRef | None:
        """The reference of the operation already recorded under this idempotency key, if any (handlers
        that do work before submitting check this first, so a retry repeats none of it)."""
        if not idempotency_key:
            return None
        existing = await to_thread.run_sync(self.store.find_by_key, kind, idempotency_key)
        if existing is None:
            return None
        return OperationRef(
            operation_id=existing.operation_id,
            status=existing.status,
            status_tool=status_tool,
            poll_after_seconds=poll_after_seconds,
        )

    # -- the loop ----------------------------------------------------------------------------
    async def _loop(self) -> None:
        while True:
            try:
                free = self.settings.max_concurrent_operations - len(self._tasks)
                if free > 0:
                    ids = await to_thread.run_sync(self.store.runnable_ids, set(self._tasks), free)
                    for operation_id in ids:
                        token = await to_thread.run_sync(
                            self.store.claim, operation_id, self.owner, self.settings.lease_seconds
                        )
                        if token is None:
                            continue
                        task = asyncio.create_task(self._drive(operation_id, token), name=operation_id)
                        self._tasks[operation_id] = task
                        task.add_done_callback(self._forget)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("runner poll failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.settings.worker_poll_seconds)
            self._wake.clear()

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._tasks.pop(task.get_name(), None)

    async def _drive(self, operation_id: str, token: str) -> None:
        operation_id_var.set(operation_id)
        heartbeat = asyncio.create_task(self._heartbeat(operation_id, token, asyncio.current_task()))
        try:
            await self._run_stages(operation_id, token)
        except LeaseLost:
            log.warning("lease lost; another worker owns the operation now", extra={"operation_id": operation_id})
        except asyncio.CancelledError:
            # Shutdown: hand the lease back so a restarted process resumes at once.
            with contextlib.suppress(Exception):
                await to_thread.run_sync(self.store.release, operation_id, token)
            raise
        except Exception:
            log.exception("operation driver crashed", extra={"operation_id": operation_id})
            with contextlib.suppress(Exception):
                await to_thread.run_sync(self.store.release, operation_id, token)
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
            await self._notify(operation_id)
            self._save_locks.pop(operation_id, None)

    async def _heartbeat(self, operation_id: str, token: str, driver: asyncio.Task[Any] | None) -> None:
        interval = max(self.settings.lease_seconds / 3, 0.2)
        while True:
            await asyncio.sleep(interval)
            ok = await to_thread.run_sync(self.store.renew, operation_id, token, self.settings.lease_seconds)
            if not ok and driver is not None:
                driver.cancel(msg="lease lost")
                return
            # A cancel request interrupts a long stage instead of waiting for it to end.
            if driver is not None and await to_thread.run_sync(self.store.cancel_requested, operation_id):
                driver.cancel(msg="cancel requested")
                return


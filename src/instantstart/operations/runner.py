"""The runner: claims operations by lease, drives their stages in order, resumes after restarts."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Generic

from anyio import to_thread

from instantstart.errors import Cancelled, InstantStartError, InternalError, Timeout, UnknownKind
from instantstart.logs import operation_id_var
from instantstart.operations.kinds import KindRegistry, OperationKind, StageSpec
from instantstart.operations.models import TERMINAL, OperationRef, OpStatus
from instantstart.operations.params import params_for_load, params_for_submit
from instantstart.operations.stage import AppT, StageContext
from instantstart.operations.store import OperationStore, finished_values
from instantstart.settings import Settings
from instantstart.store.models import utcnow

log = logging.getLogger(__name__)

Listener = Callable[[str], Awaitable[None] | None]


class LeaseLost(Exception):
    """Another worker took the operation over; this one stops touching it."""


class Runner(Generic[AppT]):
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

    async def _notify(self, operation_id: str) -> None:
        for listener in list(self._listeners):
            try:
                result = listener(operation_id)
                if asyncio.iscoroutine(result):
                    await result
            except Exception:
                log.exception("operation listener failed")

    # -- submission --------------------------------------------------------------------------
    async def submit(
        self,
        kind: str,
        params: dict[str, Any],
        *,
        target: str | None,
        idempotency_key: str | None,
        status_tool: str,
        poll_after_seconds: int = 10,
    ) -> OperationRef:
        """Persist a new operation (or find the idempotent twin) and return its reference at once."""
        spec = self.kinds.get(kind)
        if spec is None:
            raise UnknownKind(f"Operation kind {kind} is not registered.")
        params = params_for_submit(spec.params, kind, params)
        view, created = await to_thread.run_sync(self.store.submit, spec, params, target, idempotency_key)
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

    async def _save(self, operation_id: str, token: str, **values: Any) -> None:
        if not await to_thread.run_sync(lambda: self.store.save_leased(operation_id, token, **values)):
            raise LeaseLost(operation_id)
        await self._notify(operation_id)

    async def _run_stages(self, operation_id: str, token: str) -> None:
        row = await to_thread.run_sync(self.store.load_leased, operation_id, token)
        if row is None or row.status in TERMINAL:
            return
        kind = self.kinds.get(row.kind)
        if kind is None:
            error = UnknownKind(f"No handler for operation kind {row.kind}.").to_dict()
            await self._finish(operation_id, token, row.stages, OpStatus.FAILED, error)
            return
        try:
            params = params_for_load(kind.params, kind.name, operation_id, row.params)
        except InstantStartError as exc:
            await self._finish(operation_id, token, row.stages, OpStatus.FAILED, exc.to_dict())
            return
        stages = [dict(s) for s in row.stages]
        if row.status != OpStatus.RUNNING.value or row.started_at is None:
            await self._save(operation_id, token, status=OpStatus.RUNNING.value, started_at=row.started_at or utcnow())
        outputs = {s["name"]: dict(s.get("outputs") or {}) for s in stages if s["status"] == "SUCCEEDED"}
        failed: dict[str, dict[str, Any]] = {}
        for index, spec in enumerate(kind.stages):
            stage = stages[index]
            if stage["status"] == OpStatus.SUCCEEDED.value:
                continue  # a stage that succeeded is never rerun
            if stage["status"] == OpStatus.FAILED.value and kind.continue_after_failure:
                failed[spec.name] = dict((stage.get("outputs") or {}).get("error") or {})  # before a restart
                continue
            result = await self._run_stage(
                operation_id, token, row, params, kind, spec, stages, index, outputs, failed
            )
            if result is None:
                if kind.continue_after_failure and stage["status"] == OpStatus.FAILED.value:
                    failed[spec.name] = stage["outputs"]["error"]
                    continue
                return
            outputs[spec.name] = result
        everything = {**outputs, **{name: {"error": error} for name, error in failed.items()}}
        final = kind.result_from(everything) if kind.result_from else {k: v for k, v in everything.items() if v}
        if failed:
            first = next(iter(failed.values()))
            error = {**first, "details": {**(first.get("details") or {}), "failedStages": list(failed)}}
            await self._finish(operation_id, token, stages, OpStatus.FAILED, error, result=final)
            return
        await self._finish(operation_id, token, stages, OpStatus.SUCCEEDED, None, result=final)

    async def _run_stage(
        self,
        operation_id: str,
        token: str,
        row: Any,
        params: Any,
        kind: OperationKind,
        spec: StageSpec,
        stages: list[dict[str, Any]],
        index: int,
        outputs: dict[str, dict[str, Any]],
        failed: dict[str, dict[str, Any]],
    ) -> dict[str, Any] | None:
        """Run one stage with retries. Returns its outputs, or None when the stage failed (the operation
        ended, unless its kind continues after a failure) or the operation was cancelled."""
        stage = stages[index]
        while True:
            if await to_thread.run_sync(self.store.cancel_requested, operation_id):
                await self._cancel(operation_id, token, stages, index)
                return None
            stage.update(
                status=OpStatus.RUNNING.value,
                attempts=int(stage["attempts"]) + 1,
                startedAt=stage.get("startedAt") or utcnow().isoformat(),
                finishedAt=None,
            )
            # The stage's RUNNING state and attempt count are committed before its side effects.
            await self._save(operation_id, token, stages=stages)

            async def progress(message: str, _stage: dict[str, Any] = stage) -> None:
                _stage["message"] = message
                await self._save(operation_id, token, stages=stages)

            assert self.app is not None
            ctx = StageContext(
                operation_id=operation_id,
                kind=kind.name,
                target=row.target,
                params=params,
                raw_params=row.params,
                outputs=outputs,
                stage=spec.name,
                attempt=int(stage["attempts"]),
                app=self.app,
                _progress=progress,
                failed=dict(failed),
            )
            try:
                produced = await asyncio.wait_for(spec.fn(ctx), timeout=spec.timeout_seconds)
            except TimeoutError:
                error = Timeout(
                    f"Stage {spec.name} did not finish within {spec.timeout_seconds:.0f}s.", retryable=True
                )
                if not await self._retry_or_fail(operation_id, token, kind, spec, stages, index, error):
                    return None
                continue
            except InstantStartError as exc:
                if exc.retryable:
                    if not await self._retry_or_fail(operation_id, token, kind, spec, stages, index, exc):
                        return None
                    continue
                await self._fail(operation_id, token, kind, stages, index, exc.to_dict())
                return None
            except asyncio.CancelledError:
                if await to_thread.run_sync(self.store.cancel_requested, operation_id):
                    await self._cancel(operation_id, token, stages, index)
                    return None
                raise
            except Exception as exc:
                log.exception("stage %s crashed", spec.name, extra={"operation_id": operation_id})
                crash = InternalError(
                    f"Stage {spec.name} failed unexpectedly: {type(exc).__name__}.",
                    hint="This is a bug; the server log has the traceback.",
                )
                await self._fail(operation_id, token, kind, stages, index, crash.to_dict())
                return None
            result = dict(produced or {})
            stage.update(
                status=OpStatus.SUCCEEDED.value,
                finishedAt=utcnow().isoformat(),
                outputs=result,
                message=stage.get("message") or "done",
            )
            await self._save(operation_id, token, stages=stages)
            return result

    async def _retry_or_fail(
        self,
        operation_id: str,
        token: str,
        kind: OperationKind,
        spec: StageSpec,
        stages: list[dict[str, Any]],
        index: int,
        exc: InstantStartError,
    ) -> bool:
        stage = stages[index]
        attempts = int(stage["attempts"])
        if attempts >= spec.max_attempts:
            await self._fail(
                operation_id,
                token,
                kind,
                stages,
                index,
                {
                    "code": exc.code.value,
                    "message": f"{exc.message} (gave up after {attempts} attempts)",
                    "hint": exc.hint,
                    "details": {**exc.details, "stage": spec.name, "attempts": attempts},
                },
            )
            return False
        delay = spec.backoff(attempts)
        stage["message"] = f"attempt {attempts} failed: {exc.message}; retrying in {delay:.0f}s"
        await self._save(operation_id, token, stages=stages)
        waited = 0.0
        while waited < delay:  # wake early for a cancel request
            step = min(0.5, delay - waited)
            await asyncio.sleep(step)
            waited += step
            if await to_thread.run_sync(self.store.cancel_requested, operation_id):
                break
        return True

    async def _fail(
        self,
        operation_id: str,
        token: str,
        kind: OperationKind,
        stages: list[dict[str, Any]],
        index: int,
        error: dict[str, Any],
    ) -> None:
        stages[index].update(status=OpStatus.FAILED.value, finishedAt=utcnow().isoformat(), message=error["message"])
        error.setdefault("details", {})
        error["details"] = {**error["details"], "stage": stages[index]["name"]}
        if kind.continue_after_failure:  # recorded on the stage; the later stages still run
            stages[index]["outputs"] = {"error": error}
            await self._save(operation_id, token, stages=stages)
            return
        await self._finish(operation_id, token, stages, OpStatus.FAILED, error)

    async def _cancel(self, operation_id: str, token: str, stages: list[dict[str, Any]], index: int) -> None:
        for stage in stages[index:]:
            if stage["status"] not in TERMINAL:
                stage["status"] = OpStatus.CANCELLED.value
        await self._finish(
            operation_id,
            token,
            stages,
            OpStatus.CANCELLED,
            Cancelled("Cancelled on request.", hint="operation_retry resumes from the cancelled stage.").to_dict(),
        )

    async def _finish(
        self,
        operation_id: str,
        token: str,
        stages: list[dict[str, Any]],
        status: OpStatus,
        error: dict[str, Any] | None,
        result: dict[str, Any] | None = None,
    ) -> None:
        values = finished_values(status, error, utcnow())
        values.update(stages=stages, result=result)
        await self._save(operation_id, token, **values)
        log.info("operation finished", extra={"operation_id": operation_id, "status": status.value})


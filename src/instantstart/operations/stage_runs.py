"""Running an operation's stages: in order, with retries, a stage and those declared alongside it together,
saving every change under the operation's lease (the runner's claiming and heartbeat live in runner.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from anyio import to_thread

from instantstart.errors import Cancelled, InstantStartError, InternalError, Timeout, UnknownKind
from instantstart.operations.kinds import KindRegistry, OperationKind
from instantstart.operations.models import TERMINAL, OpStatus
from instantstart.operations.params import params_for_load
from instantstart.operations.stage import StageContext
from instantstart.operations.stage_record import StageRecord
from instantstart.operations.store import OperationStore, finished_values
from instantstart.store.models import utcnow

log = logging.getLogger(__name__)

Listener = Callable[[str], Awaitable[None] | None]


class LeaseLost(Exception):
    """Another worker took the operation over; this one stops touching it."""


@dataclass
class _Run:
    """One drive of one operation: what every step of it needs."""

    operation_id: str
    token: str
    row: Any
    params: Any
    kind: OperationKind
    stages: list[StageRecord]  # replaced element by element (records are immutable), never rebound


class StageRuns:
    """The stage-running half of the runner (mixed into `Runner`)."""

    store: OperationStore
    kinds: KindRegistry
    owner: str
    app: Any
    _listeners: list[Listener]
    _save_locks: dict[str, asyncio.Lock]

    async def _notify(self, operation_id: str) -> None:
        for listener in list(self._listeners):
            try:
                result = listener(operation_id)
                if asyncio.iscoroutine(result):
                    await result
            except Exception:
                log.exception("operation listener failed")

    async def _save(self, operation_id: str, token: str, **values: Any) -> None:
        # One save at a time per operation, each writing the stages as they are when its turn comes: stages
        # running together save concurrently, and an older picture must never land after a newer one.
        lock = self._save_locks.setdefault(operation_id, asyncio.Lock())
        async with lock:
            if "stages" in values:
                values["stages"] = [s.to_dict() for s in values["stages"]]
            if not await to_thread.run_sync(lambda: self.store.save_leased(operation_id, token, **values)):
                raise LeaseLost(operation_id)
        await self._notify(operation_id)

    async def _run_stages(self, operation_id: str, token: str) -> None:
        row = await to_thread.run_sync(self.store.load_leased, operation_id, token)
        if row is None or row.status in TERMINAL:
            return
        stages = [StageRecord.from_dict(s) for s in row.stages]
        kind = self.kinds.get(row.kind)
        if kind is None:
            error = UnknownKind(f"No handler for operation kind {row.kind}.").to_dict()
            await self._finish(operation_id, token, stages, OpStatus.FAILED, error)
            return
        try:
            params = params_for_load(kind.params, kind.name, operation_id, row.params)
        except InstantStartError as exc:
            await self._finish(operation_id, token, stages, OpStatus.FAILED, exc.to_dict())
            return
        if row.status != OpStatus.RUNNING.value or row.started_at is None:
            await self._save(operation_id, token, status=OpStatus.RUNNING.value, started_at=row.started_at or utcnow())
        outputs = {s.name: dict(s.outputs) for s in stages if s.status == OpStatus.SUCCEEDED}
        failed: dict[str, dict[str, Any]] = {}
        run = _Run(operation_id, token, row, params, kind, stages)
        index = 0
        while index < len(kind.stages):
            group = kind.together(index)
            spec, stage = kind.stages[index], stages[index]
            index = group[-1] + 1
            if len(group) > 1:
                if not await self._run_together(run, group, outputs):
                    return
                continue
            if stage.status == OpStatus.SUCCEEDED:
                continue  # a stage that succeeded is never rerun
            if stage.status == OpStatus.FAILED and kind.continue_after_failure:
                failed[spec.name] = stage.error  # before a restart
                continue
            result = await self._run_stage(run, group[0], outputs, failed)
            if result is None:
                if kind.continue_after_failure and stages[group[0]].status == OpStatus.FAILED:
                    failed[spec.name] = stages[group[0]].error
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

    async def _run_together(self, run: _Run, group: list[int], outputs: dict[str, dict[str, Any]]) -> bool:
        """Run the stage at group[0] and, once it waits or succeeds, the stages alongside it. True when every
        one succeeded; otherwise the operation has ended (FAILED with the first failure in stage order, or
        CANCELLED) once all the started ones did."""
        kind, stages = run.kind, run.stages
        leader, partners = group[0], group[1:]
        before = dict(outputs)  # what every stage of the group may read: the stages before it
        tasks: dict[int, asyncio.Task[dict[str, Any] | None]] = {}

        def start(index: int, on_waiting: Callable[[], None] | None = None) -> None:
            if index in tasks or stages[index].status == OpStatus.SUCCEEDED:
                return
            stage_run = self._run_stage(run, index, dict(before), {}, together=True, on_waiting=on_waiting)
            tasks[index] = asyncio.create_task(stage_run, name=f"{run.operation_id}:{kind.stages[index].name}")

        def start_partners() -> None:
            for index in partners:
                start(index)

        if stages[leader].status == OpStatus.SUCCEEDED:
            start_partners()
        start(leader, on_waiting=start_partners)
        try:
            while running := [t for t in tasks.values() if not t.done()]:
                await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                broken = next((t for t in tasks.values() if t.done() and not t.cancelled() and t.exception()), None)
                if broken is not None:  # a lost lease or a crash of the engine itself: stop the others
                    for task in tasks.values():
                        task.cancel()
                    await asyncio.gather(*tasks.values(), return_exceptions=True)
                    raise broken.exception()  # type: ignore[misc]
                if stages[leader].status == OpStatus.SUCCEEDED:
                    start_partners()  # the leader succeeded without waiting (a no-op for those started)
        except asyncio.CancelledError:
            # A cancel request or shutdown: each stage records its own ending, then the group's is decided.
            for task in tasks.values():
                task.cancel()
            ended = await asyncio.gather(*tasks.values(), return_exceptions=True)
            if any(isinstance(e, BaseException) for e in ended):
                raise
        for index in group:
            if stages[index].status == OpStatus.SUCCEEDED:
                outputs[kind.stages[index].name] = dict(stages[index].outputs)
        statuses = [stages[i].status for i in group]
        if all(s == OpStatus.SUCCEEDED for s in statuses):
            return True
        if OpStatus.CANCELLED in statuses:
            await self._cancel(run, leader)
            return False
        first = next(i for i in group if stages[i].status == OpStatus.FAILED)
        await self._finish(run.operation_id, run.token, stages, OpStatus.FAILED, stages[first].error)
        return False

    async def _run_stage(
        self,
        run: _Run,
        index: int,
        outputs: dict[str, dict[str, Any]],
        failed: dict[str, dict[str, Any]],
        *,
        together: bool = False,
        on_waiting: Callable[[], None] | None = None,
    ) -> dict[str, Any] | None:
        """Run one stage with retries. Returns its outputs, or None when the stage failed (the operation
        ended, unless its kind continues after a failure) or the operation was cancelled. A stage run
        `together` with others records its own failure or cancellation and leaves the operation's ending to
        `_run_together`."""
        while True:
            if await to_thread.run_sync(self.store.cancel_requested, run.operation_id):
                await self._cancel(run, index, only_this=together)
                return None
            await self._begin_attempt(run, index)
            try:
                produced = await self._attempt(run, index, outputs, failed, on_waiting)
            except asyncio.CancelledError:
                if await to_thread.run_sync(self.store.cancel_requested, run.operation_id):
                    await self._cancel(run, index, only_this=together)
                    return None
                raise
            except Exception as exc:
                if await self._after_error(run, index, exc, together):
                    continue  # retrying
                return None
            result = dict(produced or {})
            stage = run.stages[index]
            run.stages[index] = stage.replace(
                status=OpStatus.SUCCEEDED,
                finished_at=utcnow().isoformat(),
                outputs=result,
                message=stage.message or "done",
            )
            await self._save(run.operation_id, run.token, stages=run.stages)
            return result

    async def _begin_attempt(self, run: _Run, index: int) -> None:
        """The stage's RUNNING state and attempt count, committed before its side effects."""
        stage, now = run.stages[index], utcnow().isoformat()
        run.stages[index] = stage.replace(
            status=OpStatus.RUNNING,
            attempts=stage.attempts + 1,
            started_at=stage.started_at or now,
            finished_at=None,
            attempt_started_at=now,
            runner=self.owner,
        )
        await self._save(run.operation_id, run.token, stages=run.stages)

    async def _attempt(
        self,
        run: _Run,
        index: int,
        outputs: dict[str, dict[str, Any]],
        failed: dict[str, dict[str, Any]],
        on_waiting: Callable[[], None] | None,
    ) -> dict[str, Any] | None:
        """One attempt of the stage's function within the stage's time limit (raises what the function raised,
        TimeoutError past the limit)."""
        operation_id, token, stages, spec = run.operation_id, run.token, run.stages, run.kind.stages[index]

        async def progress(message: str) -> None:
            stages[index] = stages[index].replace(message=message)
            await self._save(operation_id, token, stages=stages)

        assert self.app is not None
        ctx = StageContext(
            operation_id=operation_id,
            kind=run.kind.name,
            target=run.row.target,
            params=run.params,
            raw_params=run.row.params,
            outputs=outputs,
            stage=spec.name,
            attempt=stages[index].attempts,
            app=self.app,
            _progress=progress,
            failed=dict(failed),
            _waiting=on_waiting,
        )
        return await asyncio.wait_for(spec.fn(ctx), timeout=spec.timeout_seconds)

    async def _after_error(self, run: _Run, index: int, exc: Exception, together: bool) -> bool:
        """Record an attempt's failure: True when the stage is tried again (after its backoff), False when it
        failed (retries used up, not retryable, or a crash)."""
        spec = run.kind.stages[index]
        if isinstance(exc, TimeoutError):
            error = Timeout(f"Stage {spec.name} did not finish within {spec.timeout_seconds:.0f}s.", retryable=True)
            return await self._retry_or_fail(run, index, error, together)
        if isinstance(exc, InstantStartError):
            if exc.retryable:
                return await self._retry_or_fail(run, index, exc, together)
            await self._fail(run, index, exc.to_dict(), together)
            return False
        log.error("stage %s crashed", spec.name, exc_info=exc, extra={"operation_id": run.operation_id})
        crash = InternalError(
            f"Stage {spec.name} failed unexpectedly: {type(exc).__name__}.",
            hint="This is a bug; the server log has the traceback.",
        )
        await self._fail(run, index, crash.to_dict(), together)
        return False

    async def _retry_or_fail(self, run: _Run, index: int, exc: InstantStartError, together: bool = False) -> bool:
        spec, stage = run.kind.stages[index], run.stages[index]
        attempts = stage.attempts
        if attempts >= spec.max_attempts:
            await self._fail(
                run,
                index,
                {
                    "code": exc.code.value,
                    "message": f"{exc.message} (gave up after {attempts} attempts)",
                    "hint": exc.hint,
                    "details": {**exc.details, "stage": spec.name, "attempts": attempts},
                },
                together,
            )
            return False
        delay = spec.backoff(attempts)
        run.stages[index] = stage.replace(message=f"attempt {attempts} failed: {exc.message}; retrying in {delay:.0f}s")
        await self._save(run.operation_id, run.token, stages=run.stages)
        waited = 0.0
        while waited < delay:  # wake early for a cancel request
            step = min(0.5, delay - waited)
            await asyncio.sleep(step)
            waited += step
            if await to_thread.run_sync(self.store.cancel_requested, run.operation_id):
                break
        return True

    async def _fail(self, run: _Run, index: int, error: dict[str, Any], together: bool = False) -> None:
        stages = run.stages
        stages[index] = stages[index].replace(
            status=OpStatus.FAILED, finished_at=utcnow().isoformat(), message=error["message"]
        )
        error.setdefault("details", {})
        error["details"] = {**error["details"], "stage": stages[index].name}
        if run.kind.continue_after_failure or together:  # recorded on the stage; the later stages still run
            stages[index] = stages[index].replace(outputs={"error": error})
            await self._save(run.operation_id, run.token, stages=stages)
            return
        await self._finish(run.operation_id, run.token, stages, OpStatus.FAILED, error)

    async def _cancel(self, run: _Run, index: int, *, only_this: bool = False) -> None:
        """Mark the stages from `index` on CANCELLED and end the operation so; `only_this` marks that stage
        alone and leaves the operation's ending to whoever runs it together with others."""
        stages = run.stages
        for at in range(index, index + 1 if only_this else len(stages)):
            if stages[at].status not in TERMINAL:
                stages[at] = stages[at].replace(status=OpStatus.CANCELLED)
        if only_this:
            stages[index] = stages[index].replace(finished_at=utcnow().isoformat())
            await self._save(run.operation_id, run.token, stages=stages)
            return
        await self._finish(
            run.operation_id,
            run.token,
            stages,
            OpStatus.CANCELLED,
            Cancelled("Cancelled on request.", hint="operation_retry resumes from the cancelled stage.").to_dict(),
        )

    async def _finish(
        self,
        operation_id: str,
        token: str,
        stages: list[StageRecord],
        status: OpStatus,
        error: dict[str, Any] | None,
        result: dict[str, Any] | None = None,
    ) -> None:
        values = finished_values(status, error, utcnow())
        values.update(stages=stages, result=result)
        await self._save(operation_id, token, **values)
        log.info("operation finished", extra={"operation_id": operation_id, "status": status.value})


"""A test-only operation kind whose stages record their executions and side effects (loaded as a plugin).

Each stage appends one line per execution to `<journalDir>/executions.log` and creates its side effect
`<journalDir>/effect-<stage>` the way every real stage works: look first, create only if absent. The
kill -9 test counts both: executions show where work was retried; effects must exist exactly once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from pathlib import Path
from typing import Any

from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext, StageContext
from instantstart.errors import PreconditionFailed, Throttled
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.params import ParamsModel

STAGES = ("alpha", "beta", "gamma", "delta")


def _journal(ctx: StageContext) -> Path:
    return Path(ctx.params_as(ProbeParams).journal_dir)


def _behaviour(ctx: StageContext) -> dict[str, Any]:
    behaviour: dict[str, Any] = ctx.params_as(ProbeParams).behaviour.get(ctx.stage, {})
    return behaviour


def _make_stage(name: str) -> StageSpec:
    async def run(ctx: StageContext) -> dict[str, Any]:
        journal = _journal(ctx)
        with open(journal / "executions.log", "a") as handle:
            handle.write(f"{name} {ctx.attempt} {os.getpid()}\n")
        behaviour = _behaviour(ctx)
        await ctx.progress(f"{name} working (attempt {ctx.attempt})")
        touch = behaviour.get("touchFile")
        if touch:  # a side effect another stage (or the test) waits for
            Path(touch).touch()
        gate = behaviour.get("holdUntilFileExists")
        if gate and not Path(gate).exists():
            ctx.waiting()  # held in a wait: stages alongside this one start
        while gate and not Path(gate).exists():  # held mid-stage until the test opens the gate (a kill point)
            await asyncio.sleep(0.02)
        work = behaviour.get("workUntilFileExists")
        while work and not Path(work).exists():  # busy without saying it waits: nothing starts beside it
            await asyncio.sleep(0.02)
        await asyncio.sleep(ctx.params_as(ProbeParams).stage_seconds)
        fail_until = int(behaviour.get("temporaryFailures", 0))
        if ctx.attempt <= fail_until:
            raise Throttled(f"{name} transient failure {ctx.attempt}")
        flag = behaviour.get("failIfFileExists")
        if flag and Path(flag).exists():
            raise PreconditionFailed(f"{name} refused: {flag} exists", hint="remove the file")
        effect = journal / f"effect-{name}"
        # Look before you create: a rerun after a crash adopts the effect instead of duplicating it.
        if not effect.exists():
            with open(effect, "x") as handle:
                handle.write(ctx.operation_id)
        return {"effect": effect.name, **({"sawFailed": sorted(ctx.failed)} if ctx.failed else {})}

    return StageSpec(name, run, max_attempts=4, timeout_seconds=30, backoff_seconds=0.05, backoff_max_seconds=0.2)


class ProbeParams(ParamsModel):
    """What the probe kind stores: a typed params model like every production kind."""

    journal_dir: str
    target: str = "probe-target"
    stage_seconds: float = 0.05
    behaviour: dict[str, dict[str, Any]] = Field(default_factory=dict)


KINDS.register(OperationKind(name="probe", stages=tuple(_make_stage(s) for s in STAGES), params=ProbeParams))
# gamma runs beside beta (it starts once beta waits or succeeds).
KINDS.register(OperationKind(name="probe_alongside", params=ProbeParams, stages=tuple(
    dataclasses.replace(_make_stage(s), alongside_previous=s == "gamma") for s in STAGES)))
KINDS.register(OperationKind(name="probe_independent", stages=tuple(_make_stage(s) for s in STAGES),
                             params=ProbeParams, continue_after_failure=True))


class ProbeRequest(WireModel):
    """Inputs of the probe operation."""

    journal_dir: str = Field(min_length=1)
    target: str = Field(default="probe-target", min_length=1, max_length=100)
    stage_seconds: float = Field(default=0.05, ge=0, le=30)
    behaviour: dict[str, dict[str, Any]] = Field(default_factory=dict)
    independent: bool = Field(default=False, description="Stages are independent: a failed one does not stop "
                              "the later ones (kind probe_independent).")
    alongside: bool = Field(default=False, description="gamma runs beside beta (kind probe_alongside).")


@operation(
    "probe_run",
    destructive=False,
    idempotent=False,
    method="POST",
    path="/test/probe",
    completion="operation_get",
    example={"journalDir": "/tmp", "target": "faces-probe", "stageSeconds": 0},
)
async def probe_run(ctx: CallContext, req: ProbeRequest) -> OperationRef:
    """Test-only: run the four probe stages, recording executions and side effects in journalDir."""
    Path(req.journal_dir).mkdir(parents=True, exist_ok=True)
    kind = "probe_independent" if req.independent else "probe_alongside" if req.alongside else "probe"
    return await ctx.app.runner.submit(
        kind,
        ctx.app.runner.params_model(kind, req.model_dump(by_alias=True, exclude={"independent", "alongside"})),
        target=req.target,
        idempotency_key=ctx.idempotency_key,
        status_tool="operation_get",
        poll_after_seconds=1,
    )

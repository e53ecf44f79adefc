"""Utility tools: the polling primitive agents use between status checks."""

from __future__ import annotations

import asyncio

from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext


class WaitSecondsRequest(WireModel):
    """How long to wait."""

    seconds: int = Field(ge=1, le=300, description="Seconds to wait, 1-300.")


class WaitSecondsResult(WireModel):
    """How long was waited."""

    waited_seconds: int


@operation("wait_seconds", method="POST", path="/wait", mutating=False, example={"seconds": 1}, cli=("util", "wait"))
async def wait_seconds(ctx: CallContext, req: WaitSecondsRequest) -> WaitSecondsResult:
    """Wait `seconds` (1-300) and return. The polling primitive: call it between status checks
    instead of polling in a tight loop."""
    await asyncio.sleep(req.seconds)
    return WaitSecondsResult(waited_seconds=req.seconds)

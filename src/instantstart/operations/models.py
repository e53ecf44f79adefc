"""Wire models of operations: the reference a mutating call returns and the full operation view."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class OpStatus(StrEnum):
    """Operation and stage statuses."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


ACTIVE = (OpStatus.PENDING.value, OpStatus.RUNNING.value)
TERMINAL = (OpStatus.SUCCEEDED.value, OpStatus.FAILED.value, OpStatus.CANCELLED.value)


class _Out(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class OperationRef(_Out):
    """What every mutating call returns at once."""

    operation_id: str
    status: OpStatus
    status_tool: str = Field(description="The tool whose answer decides completion.")
    poll_after_seconds: int = Field(description="How long to wait before polling again.")


class ErrorInfo(_Out):
    """Why an operation failed."""

    code: str
    message: str
    hint: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)


class StageView(_Out):
    """One stage of an operation."""

    name: str
    status: OpStatus
    attempts: int = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None
    message: str = ""
    outputs: dict[str, Any] = Field(default_factory=dict)
    attempt_started_at: datetime | None = Field(default=None, description="When the latest attempt began.")
    runner: str | None = Field(default=None, description="The worker (replica) that ran the latest attempt.")


class OperationView(_Out):
    """An operation as stored, for operation_get and operation_list."""

    operation_id: str
    kind: str
    target: str | None
    status: OpStatus
    params: dict[str, Any]
    stages: list[StageView]
    current_stage: str | None
    error: ErrorInfo | None
    result: dict[str, Any] | None
    cancel_requested: bool
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    elapsed_seconds: float

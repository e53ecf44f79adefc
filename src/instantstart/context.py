"""Contexts handed to operations: the application (settings, database, runner) and one call."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from instantstart.settings import Settings
from instantstart.store.db import Database

if TYPE_CHECKING:
    from instantstart.operations.runner import Runner


@dataclass
class AppContext:
    """Process-wide state shared by every face: settings, the database and the operations runner."""

    settings: Settings
    db: Database
    runner: Runner


@dataclass
class CallContext:
    """One call of one operation, from any face."""

    app: AppContext
    idempotency_key: str | None = None
    request_id: str | None = None
    face: str = "rest"
    extra: dict[str, str] = field(default_factory=dict)

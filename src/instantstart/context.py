"""Contexts handed to operations: the application (settings, database, runner) and one call."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from instantstart.settings import Settings
from instantstart.store.db import Database

if TYPE_CHECKING:
    from instantstart.aws.clients import AwsClients
    from instantstart.kube.client import KubeClients
    from instantstart.operations.runner import Runner
    from instantstart.services.core.describe_cache import DescribeCache


@dataclass
class AppContext:
    """Process-wide state shared by every face: settings, database, runner, AWS and Kubernetes clients."""

    settings: Settings
    db: Database
    runner: Runner
    aws: AwsClients
    kube: KubeClients
    cache: DescribeCache


@dataclass
class CallContext:
    """One call of one operation, from any face."""

    app: AppContext
    idempotency_key: str | None = None
    request_id: str | None = None
    face: str = "rest"
    extra: dict[str, str] = field(default_factory=dict)

"""Contexts handed to operations: the application (settings, database, runner, clients) and one call."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from instantstart.aws.clients import AwsClients
from instantstart.describe_cache import DescribeCache
from instantstart.kube.client import KubeClients
from instantstart.kube.informers import Informers
from instantstart.operations.runner import Runner
from instantstart.operations.stage import StageContext as EngineStageContext
from instantstart.principal import Principal
from instantstart.settings import Settings
from instantstart.store.db import Database


@dataclass
class AppContext:
    """Process-wide state shared by every face: settings, database, runner, AWS and Kubernetes clients."""

    settings: Settings
    db: Database
    runner: Runner[AppContext]
    aws: AwsClients
    kube: KubeClients
    cache: DescribeCache
    informers: Informers = field(default_factory=Informers)


StageContext: TypeAlias = EngineStageContext[AppContext]
"""What the control plane's stage functions receive: the engine's stage context over this application."""


@dataclass
class CallContext:
    """One call of one operation, from any face. `principal` is the authenticated caller; None only for an
    in-process call no face received (the event hub's snapshot reads), which no role check applies to."""

    app: AppContext
    idempotency_key: str | None = None
    request_id: str | None = None
    face: str = "rest"
    extra: dict[str, str] = field(default_factory=dict)
    principal: Principal | None = None

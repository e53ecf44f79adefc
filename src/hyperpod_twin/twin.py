"""The digital twin composed: one AWS account (moto + extensions) on one port, a clock, a bus, plugins."""

from __future__ import annotations

import importlib
import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.config import Config

from hyperpod_twin import oidc, writes
from hyperpod_twin.aws.caller_policy import OperatorSetup
from hyperpod_twin.aws.control import make_control
from hyperpod_twin.aws.faults import FaultBook
from hyperpod_twin.aws.server import TwinHttpServer, preload
from hyperpod_twin.aws.side import AwsSide
from hyperpod_twin.clock import TwinClock
from hyperpod_twin.events import EventBus

log = logging.getLogger(__name__)

DEFAULT_ACCOUNT_ID = "111122223333"
DEFAULT_REGION = "us-west-2"
# Fixed credentials of the twin account's IAM user. boto3 signs with them; the Kubernetes side checks
# the SigV4 signatures of presigned STS URLs (EKS bearer tokens) against them.
ACCESS_KEY_ID = "AKIATWINTWINTWIN0001"
SECRET_ACCESS_KEY = "twinTwinTwinTwinTwinTwinTwinTwinTwin0001"
CALLER_USER = "instantstart-twin"
# With caller="assumed-role" the same credentials answer as a session of this role (as SSO and CI
# credentials do), so the control plane's assumed-role → role handling is exercised.
# Outside instantstart-*, the pattern of the roles the control plane may create and change.
CALLER_ROLE = "InstantStartTwinOperator"
CALLER_SESSION = "instantstart"
CALLERS = ("user", "assumed-role")
# Twin seconds per real second: EKS ACTIVE (600 s) in 15 s, HyperPod InService (~480 s) in 12 s.
DEFAULT_CLOCK_SCALE = 40.0


@dataclass
class TwinConfig:
    """How to run a twin: where to listen, how fast twin time runs, which account and Region."""

    host: str = "127.0.0.1"
    port: int = 0
    clock_scale: float = DEFAULT_CLOCK_SCALE
    account_id: str = DEFAULT_ACCOUNT_ID
    region: str = DEFAULT_REGION
    # Who the twin's credentials are: the IAM user, or an assumed-role session (test profile:
    # HYPERPOD_TWIN_CALLER=assumed-role).
    caller: str = field(default_factory=lambda: os.environ.get("HYPERPOD_TWIN_CALLER", "user"))
    # The caller's IAM policy and the account's customer managed policies (the permissions boundary), restored on
    # every reset: with a caller policy, the control plane's guarded calls are judged by it (aws/caller_policy).
    setup: OperatorSetup = field(default_factory=OperatorSetup)


class Twin:
    """An offline AWS account with HyperPod-capable EKS clusters.

    `start()` serves moto and the twin's extensions on one HTTP port (`endpoint_url`), starts the
    clock and attaches every plugin in `PLUGINS` (the Kubernetes API servers and the simulator).
    moto's backends are process-wide, so run one Twin per process.
    """

    PLUGINS: tuple[str, ...] = ("hyperpod_twin.kube.plugin", "hyperpod_twin.sim.plugin")

    def __init__(self, config: TwinConfig | None = None) -> None:
        self.config = config or TwinConfig()
        self.account_id = self.config.account_id
        self.region = self.config.region
        self.access_key_id = ACCESS_KEY_ID
        self.secret_access_key = SECRET_ACCESS_KEY
        if self.config.caller not in CALLERS:
            raise ValueError(f"caller must be one of {', '.join(CALLERS)}")
        if self.config.caller == "assumed-role":
            self.caller_arn = f"arn:aws:sts::{self.account_id}:assumed-role/{CALLER_ROLE}/{CALLER_SESSION}"
        else:
            self.caller_arn = f"arn:aws:iam::{self.account_id}:user/{CALLER_USER}"
        self.project_bucket = f"instantstart-{self.account_id}-{self.region}"
        self.clock = TwinClock(self.config.clock_scale)
        self.bus = EventBus()
        self.aws = AwsSide(
            account_id=self.account_id,
            region=self.region,
            clock=self.clock,
            bus=self.bus,
            access_key_id=self.access_key_id,
            caller_arn=self.caller_arn,
            project_bucket=self.project_bucket,
            setup=self.config.setup,
        )
        self.faults: FaultBook = self.aws.faults
        self._server: TwinHttpServer | None = None
        self._reset_lock = threading.Lock()
        self.plugins: list[Any] = []
        self.preloading: threading.Thread | None = None  # parsing the botocore models in the background

    @property
    def endpoint_url(self) -> str:
        """`http://host:port` of the AWS endpoint (set AWS_ENDPOINT_URL to it)."""
        if self._server is None:
            raise RuntimeError("the twin is not started")
        return f"http://{self.config.host}:{self._server.port}"

    @property
    def port(self) -> int:
        """The bound port."""
        if self._server is None:
            raise RuntimeError("the twin is not started")
        return self._server.port

    def env(self) -> dict[str, str]:
        """Environment variables that point boto3 (and the AWS CLI) at the twin."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
        }

    def info(self) -> dict[str, Any]:
        """Facts about this twin (served at `/_twin/health`)."""
        return {
            "endpoint_url": self.endpoint_url,
            "account_id": self.account_id,
            "region": self.region,
            "access_key_id": self.access_key_id,
            "caller_arn": self.caller_arn,
            "project_bucket": self.project_bucket,
            "clock_scale": self.clock.scale,
            "chart_repo_url": getattr(self, "chart_repo_url", None),
            "hub_url": getattr(self, "hub_url", None),
        }

    def start(self) -> Twin:
        """Serve on host:port, start the clock and attach the plugins; returns self."""
        if self._server is not None:
            return self
        control = make_control(self.aws, self.reset, self.info)
        app = self.aws.app(control)
        self._server = TwinHttpServer(app, self.config.host, self.config.port)
        # moto's state is process-wide: a twin started after another one begins as a clean account.
        self.aws.reset()
        self._server.start()
        self.preloading = threading.Thread(target=preload, args=(app,), name="twin-preload", daemon=True)
        self.preloading.start()
        self.clock.start()
        for dotted in self.PLUGINS:
            try:
                module = importlib.import_module(dotted)
            except ModuleNotFoundError as exc:
                if exc.name != dotted:
                    raise
                log.warning("twin plugin %s is not available", dotted)
                continue
            module.attach(self)
            self.plugins.append(module)
        log.info("twin AWS endpoint %s (account %s, %s)", self.endpoint_url, self.account_id, self.region)
        return self

    def stop(self) -> None:
        """Stop the clock and the HTTP server (plugins are told through `twin.stopping`)."""
        self.bus.publish("twin.stopping")
        self.clock.stop()
        if self._server is not None:
            self._server.stop()
            self._server = None

    def reset(self) -> None:
        """A clean account: every scheduled progression dropped, every component back to its start."""
        with self._reset_lock:
            self.clock.clear()
            self.aws.reset()
            writes.reset()
            oidc.reset()
            self.bus.publish("twin.reset")

    def boto3_client(self, service: str, **kwargs: Any) -> Any:
        """A boto3 client for `service` pointed at the twin with its credentials."""
        config = kwargs.pop("config", None) or Config(retries={"mode": "standard", "max_attempts": 5})
        client: Any = boto3.client(  # type: ignore[call-overload]
            service,
            endpoint_url=self.endpoint_url,
            region_name=kwargs.pop("region_name", self.region),
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            config=config,
            **kwargs,
        )
        return client

    def __enter__(self) -> Twin:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


PLUGINS = Twin.PLUGINS

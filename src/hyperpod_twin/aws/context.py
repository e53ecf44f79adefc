"""Shared state of the twin's AWS extensions: account facts, clock, bus, one lock, and moto backend access."""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from hyperpod_twin.clock import TwinClock
from hyperpod_twin.events import EventBus, Topic

from .faults import FaultBook
from .protocol import AwsError, AwsRequest, RawResponse

log = logging.getLogger(__name__)

Handler = Callable[[AwsRequest], RawResponse]


class AwsContext:
    """Everything an extension module needs; one per Twin.

    State changes happen under `locked()`. Events emitted inside are queued and published once the
    lock is released, so a bus handler may call back into the twin (over HTTP or Python) safely.
    """

    def __init__(
        self,
        *,
        account_id: str,
        region: str,
        clock: TwinClock,
        bus: EventBus,
        faults: FaultBook,
        caller_arn: str,
        access_key_id: str,
    ) -> None:
        self.account_id = account_id
        self.region = region
        self.clock = clock
        self.bus = bus
        self.faults = faults
        self.caller_arn = caller_arn
        self.access_key_id = access_key_id
        self.handlers: dict[tuple[str, str], Handler] = {}
        # Checks that run before moto answers (e.g. quota enforcement); they raise AwsError to refuse.
        self.guards: dict[tuple[str, str], Callable[[AwsRequest], None]] = {}
        # IAM's decision on the caller's own request (caller_policy): an AwsError refuses it.
        self.authorizer: Callable[[AwsRequest], AwsError | None] = lambda req: None
        self.reset_hooks: list[Callable[[], None]] = []
        self._lock = threading.RLock()
        self._local = threading.local()

    @property
    def caller_principal(self) -> str:
        """The caller's IAM principal: an assumed-role session canonicalised to its role's ARN, as EKS
        (access entries, aws-iam-authenticator) canonicalises it."""
        return canonical_principal(self.caller_arn)

    # registration -----------------------------------------------------------------------------
    def route(self, service: str, operation: str) -> Callable[[Handler], Handler]:
        """Decorator: the extension answers `service`.`operation` instead of moto."""

        def deco(fn: Handler) -> Handler:
            self.handlers[(service, operation)] = fn
            return fn

        return deco

    def on_reset(self, fn: Callable[[], None]) -> None:
        """Register a callback that clears a module's state on `/_twin/reset`."""
        self.reset_hooks.append(fn)

    def reset(self) -> None:
        """Clear every extension's state."""
        with self.locked():
            for hook in self.reset_hooks:
                hook()

    # locking and events ---------------------------------------------------------------------------
    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the state lock; events emitted meanwhile are published after the outermost release."""
        depth = getattr(self._local, "depth", 0)
        if depth == 0:
            self._local.outbox = []
        self._local.depth = depth + 1
        try:
            with self._lock:
                yield
        finally:
            self._local.depth -= 1
            if self._local.depth == 0:
                outbox: list[tuple[Topic, dict[str, Any]]] = self._local.outbox
                self._local.outbox = []
                for topic, payload in outbox:
                    self.bus.publish(topic, **payload)

    def emit(self, topic: Topic, **payload: Any) -> None:
        """Publish `topic` (deferred until the state lock is released)."""
        if getattr(self._local, "depth", 0) > 0:
            self._local.outbox.append((topic, payload))
        else:
            self.bus.publish(topic, **payload)

    def later(self, delay: float, fn: Callable[[], None]) -> None:
        """Run `fn` under the state lock after `delay` twin seconds."""

        def run() -> None:
            with self.locked():
                fn()

        self.clock.schedule(delay, run)

    # moto backends ----------------------------------------------------------------------------
    def ec2(self, region: str) -> Any:
        """moto's EC2 backend for the twin account in `region`."""
        from moto.ec2.models import ec2_backends

        return ec2_backends[self.account_id][region]

    def eks(self, region: str) -> Any:
        """moto's EKS backend for the twin account in `region`."""
        from moto.eks.models import eks_backends

        return eks_backends[self.account_id][region]

    def iam(self) -> Any:
        """moto's IAM backend for the twin account."""
        from moto.iam.models import iam_backends

        return iam_backends[self.account_id]["aws"]

    def subnet_az(self, region: str, subnet_id: str) -> tuple[str, str, str]:
        """(AZ name, AZ id, VPC id) of a subnet in moto; ValidationException if it does not exist."""
        try:
            subnet = self.ec2(region).get_subnet(subnet_id)
        except Exception as exc:
            raise AwsError("ValidationException", f"The subnet ID '{subnet_id}' does not exist") from exc
        return str(subnet.availability_zone), str(subnet.availability_zone_id), str(subnet.vpc_id)

    def az_id(self, region: str, az_name: str) -> str:
        """The zone ID (e.g. usw2-az1) of an AZ name."""
        for zone in self.ec2(region).describe_availability_zones():
            if zone.name == az_name:
                return str(zone.zone_id)
        raise AwsError("ValidationException", f"Unknown Availability Zone {az_name}")

    def az_names(self, region: str) -> list[str]:
        """AZ names of a region, sorted."""
        return sorted(str(z.name) for z in self.ec2(region).describe_availability_zones())

    def arn(self, service: str, region: str, resource: str) -> str:
        """An ARN in the twin account."""
        return f"arn:aws:{service}:{region}:{self.account_id}:{resource}"


def hex_id(n: int) -> str:
    """n random lowercase hex characters."""
    return secrets.token_hex((n + 1) // 2)[:n]


def alnum_id(n: int) -> str:
    """n random lowercase letters and digits."""
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    return "".join(secrets.choice(alphabet) for _ in range(n))


def canonical_principal(arn: str) -> str:
    """`arn:aws:sts::<acct>:assumed-role/<role>/<session>` → `arn:aws:iam::<acct>:role/<role>`; others as they are."""
    if ":assumed-role/" not in arn:
        return arn
    partition, account = arn.split(":")[1], arn.split(":")[4]
    role = arn.split(":assumed-role/", 1)[1].split("/", 1)[0]
    return f"arn:{partition}:iam::{account}:role/{role}"

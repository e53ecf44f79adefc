"""Scripted failures: throttling, 5xx and errors per operation, and capacity shortages per instance type and AZ."""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import asdict, dataclass
from typing import Any

from .protocol import AwsError, AwsRequest, throttling_code

INSUFFICIENT_CAPACITY_MESSAGE = (
    "We currently do not have sufficient capacity for the requested instance type(s). Please try again."
)

KINDS = ("throttle", "error", "server_error", "quota_exceeded", "insufficient_capacity", "addon_failure",
         "eks_failure", "deep_health_check_failure", "nat_gateway_slow", "nat_gateway_failure", "page_size",
         "grafana_failure")
# Faults that shape a lifecycle or an answer rather than refuse a request.
LIFECYCLE = ("insufficient_capacity", "addon_failure", "eks_failure", "deep_health_check_failure",
             "nat_gateway_slow", "nat_gateway_failure", "page_size", "grafana_failure")
# EC2's NatGateway.FailureCode values (botocore model).
NAT_FAILURE_CODES = ("InsufficientFreeAddressesInSubnet", "Gateway.NotAttached", "InvalidAllocationID.NotFound",
                     "Resource.AlreadyAssociated", "InternalError", "InvalidSubnetID.NotFound")
ADDON_OUTCOMES = ("CREATE_FAILED", "DEGRADED", "UPDATE_FAILED")


@dataclass
class Fault:
    """One scripted failure. `remaining` None means until cleared.

    Request faults (throttle, error, server_error, quota_exceeded) match `service` and `operation` (and, with
    `match`, members of the request's JSON body, e.g. {"addonName": "metrics-server"})
    (either may be "*"). `insufficient_capacity` matches `instance_type` and `availability_zone`
    (an AZ name or AZ ID, "*" for every AZ) when the twin launches a node or an FSx file system.
    """

    id: int
    kind: str
    service: str = "*"
    operation: str = "*"
    remaining: int | None = None
    code: str | None = None
    message: str | None = None
    status: int | None = None
    instance_type: str | None = None
    availability_zone: str | None = None
    addon: str | None = None  # addon_failure: the add-on name or "*"
    match: dict[str, Any] | None = None  # request faults: JSON body members the request must carry
    outcome: str | None = None  # addon_failure: CREATE_FAILED | DEGRADED | UPDATE_FAILED
    cluster: str | None = None  # eks_failure: the EKS cluster name or "*"
    size: int | None = None  # page_size: at most this many items per page (AWS may return fewer than asked)
    seconds: float | None = None  # nat_gateway_slow: twin seconds a NAT gateway takes to become available/deleted
    hits: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON form for `/_twin/faults`."""
        return asdict(self)


class FaultBook:
    """The list of active faults, consulted on every AWS request and every simulated launch."""

    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def add(self, spec: dict[str, Any]) -> Fault:
        """Add a fault from its JSON spec (see `Fault`); ValueError on a bad spec."""
        kind = spec.get("kind")
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}")
        count = spec.get("count", spec.get("times"))
        if count is not None and (not isinstance(count, int) or count < 1):
            raise ValueError("count must be a positive integer")
        if kind in ("insufficient_capacity", "deep_health_check_failure"):
            if not spec.get("instance_type"):
                raise ValueError(f"{kind} needs instance_type")
        elif kind == "addon_failure":
            if spec.get("outcome") not in ADDON_OUTCOMES:
                raise ValueError(f"addon_failure needs outcome, one of {', '.join(ADDON_OUTCOMES)}")
        elif kind == "page_size":
            if not isinstance(spec.get("size"), int) or spec["size"] < 1 or spec.get("operation") is None:
                raise ValueError("page_size needs operation and size (a positive integer)")
        elif kind == "nat_gateway_failure":
            if spec.get("code", NAT_FAILURE_CODES[0]) not in NAT_FAILURE_CODES:
                raise ValueError(f"nat_gateway_failure code must be one of {', '.join(NAT_FAILURE_CODES)}")
        elif kind == "nat_gateway_slow":
            if not isinstance(spec.get("seconds"), int | float) or spec["seconds"] < 0:
                raise ValueError("nat_gateway_slow needs seconds (twin seconds, >= 0)")
        elif kind not in ("quota_exceeded", "eks_failure", "nat_gateway_failure", "grafana_failure") \
                and spec.get("operation") is None:
            raise ValueError(f"{kind} needs operation (or '*')")
        status = spec.get("status")
        if kind == "server_error" and status is not None and not (500 <= int(status) <= 599):
            raise ValueError("server_error status must be 5xx")
        fault = Fault(
            id=next(self._ids),
            kind=kind,
            service=str(spec.get("service", "*")),
            operation=str(spec.get("operation", "*")),
            remaining=count,
            code=spec.get("code"),
            message=spec.get("message"),
            status=int(status) if status is not None else None,
            instance_type=spec.get("instance_type"),
            availability_zone=spec.get("availability_zone", "*"),
            addon=spec.get("addon", "*") if kind == "addon_failure" else None,
            outcome=spec.get("outcome"),
            cluster=spec.get("cluster", "*") if kind == "eks_failure" else None,
            size=spec.get("size"),
            seconds=spec.get("seconds"),
            match=dict(spec["match"]) if isinstance(spec.get("match"), dict) else None,
        )
        with self._lock:
            self._faults.append(fault)
        return fault

    def list(self) -> list[Fault]:
        """Active faults."""
        with self._lock:
            return list(self._faults)

    def remove(self, fault_id: int) -> bool:
        """Drop one fault; False if unknown."""
        with self._lock:
            before = len(self._faults)
            self._faults = [f for f in self._faults if f.id != fault_id]
            return len(self._faults) != before

    def clear(self) -> None:
        """Drop every fault."""
        with self._lock:
            self._faults.clear()

    def _consume(self, fault: Fault) -> None:
        fault.hits += 1
        if fault.remaining is not None:
            fault.remaining -= 1
            if fault.remaining <= 0:
                self._faults.remove(fault)

    def check_request(self, req: AwsRequest) -> AwsError | None:
        """The error a scripted request fault imposes on `req`, consuming one use; None if none applies."""
        with self._lock:
            for fault in self._faults:
                if fault.kind in LIFECYCLE:
                    continue
                if fault.service not in ("*", req.service):
                    continue
                if fault.operation not in ("*", req.operation):
                    continue
                if fault.match and not _body_matches(req, fault.match):
                    continue
                self._consume(fault)
                return _request_error(fault, req)
        return None

    def page_size(self, req: AwsRequest) -> int | None:
        """The page size a `page_size` fault imposes on `req` (the smallest that matches), or None."""
        with self._lock:
            sizes = [f.size for f in self._faults if f.kind == "page_size" and f.size is not None
                     and f.service in ("*", req.service) and f.operation in ("*", req.operation)]
        return min(sizes) if sizes else None

    def capacity_scripted_short(self, instance_type: str, az_name: str, az_id: str) -> bool:
        """Whether a shortage is scripted for this type and AZ (without consuming a use)."""
        with self._lock:
            return any(
                f.kind == "insufficient_capacity"
                and f.instance_type == instance_type
                and f.availability_zone in ("*", None, az_name, az_id)
                for f in self._faults
            )

    def capacity_short(self, instance_type: str, az_name: str, az_id: str) -> bool:
        """True (consuming one use) if launching `instance_type` in this AZ must fail for capacity."""
        with self._lock:
            for fault in self._faults:
                if fault.kind != "insufficient_capacity" or fault.instance_type != instance_type:
                    continue
                if fault.availability_zone not in ("*", None, az_name, az_id):
                    continue
                self._consume(fault)
                return True
        return False


    def lifecycle(self, kind: str, **match: str) -> Fault | None:
        """The first lifecycle fault of `kind` whose fields match (`*` matches anything), consuming one use."""
        with self._lock:
            for fault in self._faults:
                if fault.kind != kind:
                    continue
                if all(getattr(fault, key) in ("*", None, value) for key, value in match.items()):
                    self._consume(fault)
                    return fault
        return None


def _request_error(fault: Fault, req: AwsRequest) -> AwsError:
    op = req.operation or "request"
    if fault.kind == "throttle":
        code, status = throttling_code(req.protocol, req.service)
        return AwsError(fault.code or code, fault.message or "Rate exceeded", fault.status or status)
    if fault.kind == "server_error":
        status = fault.status or 500
        code = fault.code or ("ServiceUnavailable" if status == 503 else "InternalFailure")
        message = fault.message or "We encountered an internal error. Please try again."
        return AwsError(code, message, status)
    if fault.kind == "quota_exceeded":
        default = {
            "sagemaker": "ResourceLimitExceeded",
            "eks": "ResourceLimitExceededException",
            "fsx": "ServiceLimitExceeded",
            "ec2": "ResourceLimitExceeded",
            "iam": "LimitExceeded",
        }.get(req.service, "LimitExceededException")
        message = fault.message or f"The account-level service limit for {op} has been exceeded."
        return AwsError(fault.code or default, message, fault.status or 400)
    return AwsError(
        fault.code or "ValidationException", fault.message or f"Scripted failure of {op}", fault.status or 400
    )


def _body_matches(req: AwsRequest, wanted: dict[str, Any]) -> bool:
    """Whether the request's JSON body carries every member of `wanted` with that value."""
    try:
        body = json.loads(req.body or b"{}")
    except ValueError:
        return False
    return isinstance(body, dict) and all(body.get(k) == v for k, v in wanted.items())

"""The `/_twin/…` HTTP control endpoints: health, clock, faults, quotas, node health findings, writes, reset."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from werkzeug.wrappers import Request, Response

from hyperpod_twin import writes

from . import s3_owner

if TYPE_CHECKING:
    from .side import AwsSide

_NODE_HEALTH = re.compile(r"^/_twin/nodes/(i-[0-9a-f]+)/health$")
_NODE_HARDWARE = re.compile(r"^/_twin/nodes/(i-[0-9a-f]+)/hardware$")
_KUBE = re.compile(r"^/_twin/kube/([A-Za-z0-9_-]+)/([a-z]+/[a-z]+)$")
HEALTH_STATUSES = (
    "Schedulable",
    "Unschedulable",
    "UnschedulablePendingReplacement",
    "UnschedulablePendingReboot",
)


def _json(data: Any, status: int = 200) -> Response:
    return Response(json.dumps(data, default=str), status=status, content_type="application/json")


def _error(message: str, status: int = 400) -> Response:
    return _json({"error": message}, status)


def _body(request: Request) -> dict[str, Any]:
    """The request's JSON object body ({} when empty)."""
    if not request.get_data():
        return {}
    data = json.loads(request.get_data())
    if not isinstance(data, dict):
        raise ValueError("body must be a JSON object")
    return data


class ControlEndpoints:
    """The WSGI handler for `/_twin/…`; `reset` resets the whole twin, `info` describes it."""

    def __init__(self, side: AwsSide, reset: Callable[[], None], info: Callable[[], dict[str, Any]]) -> None:
        self.side = side
        self.ctx = side.ctx
        self.reset = reset
        self.info = info

    def __call__(self, request: Request) -> Response:
        """Answer one `/_twin/…` request."""
        path = request.path.rstrip("/")
        try:
            if path == "/_twin/health":
                return _json({"status": "ok", **self.info()})
            if path == "/_twin/clock":
                return self.clock(request)
            if path == "/_twin/reset" and request.method == "POST":
                self.reset()
                return _json({"reset": True})
            if path.startswith("/_twin/faults"):
                return self.faults(request, path)
            if path == "/_twin/s3/foreign-buckets" and request.method == "POST":
                return _json(s3_owner.create_foreign_bucket(_body(request), self.ctx.region))
            if path == "/_twin/quotas":
                return self.quotas(request)
            if path == "/_twin/writes":
                if request.method == "DELETE":
                    writes.reset()
                return _json({"writes": writes.snapshot()})
            m = _NODE_HEALTH.match(path)
            if m and request.method == "POST":
                return self.node_health(request, m.group(1))
            m = _NODE_HARDWARE.match(path)
            if m and request.method == "POST":
                return self.hardware(request, m.group(1))
            m = _KUBE.match(path)
            if m and request.method == "POST":
                return self.kube(request, m.group(1), m.group(2))
        except (ValueError, TypeError, KeyError) as exc:
            return _error(str(exc))
        return _error(f"unknown twin control endpoint {request.method} {path}", 404)

    def clock(self, request: Request) -> Response:
        """/_twin/clock: read it, or POST a new scale and/or seconds to advance."""
        if request.method == "POST":
            data = _body(request)
            if "scale" in data:
                scale = float(data["scale"])
                if scale <= 0:
                    return _error("scale must be positive")
                self.ctx.clock.set_scale(scale)
            if "advance" in data:
                seconds = float(data["advance"])
                if seconds < 0:
                    return _error("advance must not be negative")
                self.ctx.clock.advance(seconds)
        wall = self.ctx.clock.wall()
        return _json(
            {
                "now": self.ctx.clock.now(),
                "wall": wall,
                "iso": dt.datetime.fromtimestamp(wall, dt.UTC).isoformat(),
                "scale": self.ctx.clock.scale,
            }
        )

    def faults(self, request: Request, path: str) -> Response:
        """/_twin/faults: list, add (POST), clear (DELETE) or remove one (DELETE /_twin/faults/<id>)."""
        m = re.match(r"^/_twin/faults/(\d+)$", path)
        if m and request.method == "DELETE":
            ok = self.ctx.faults.remove(int(m.group(1)))
            return _json({"removed": ok}, 200 if ok else 404)
        if request.method == "POST":
            data = _body(request)
            specs: list[dict[str, Any]] = list(data["faults"]) if "faults" in data else [data]
            added = [self.ctx.faults.add(s).to_dict() for s in specs]
            return _json({"faults": added}, 201)
        if request.method == "DELETE":
            self.ctx.faults.clear()
            return _json({"faults": []})
        return _json({"faults": [f.to_dict() for f in self.ctx.faults.list()]})

    def quotas(self, request: Request) -> Response:
        """/_twin/quotas: list them, or set one (POST/PUT)."""
        if request.method in ("POST", "PUT"):
            with self.ctx.locked():
                q = self.side.quotas.set(_body(request))
            return _json(q.shape(self.ctx.account_id, self.ctx.region))
        with self.ctx.locked():
            items = [q.shape(self.ctx.account_id, self.ctx.region) for q in self.side.quotas.items.values()]
        return _json({"quotas": items})

    def node_health(self, request: Request, instance_id: str) -> Response:
        """POST /_twin/nodes/<id>/health: a health finding on a HyperPod node."""
        data = _body(request)
        status = data.get("status")
        if status not in HEALTH_STATUSES:
            return _error(f"status must be one of {', '.join(HEALTH_STATUSES)}")
        with self.ctx.locked():
            found = self.side.life.find_node(instance_id)
            if found is None:
                return _error(f"no HyperPod node {instance_id}", 404)
            cluster, node = found
            extra = {k: str(data[k]) for k in ("fault_type", "deep_health_check_status") if data.get(k)}
            reason = str(data.get("reason") or "Injected by /_twin")
            self.side.life.node_health(cluster, node, str(status), reason, **extra)
            recovery = cluster.node_recovery
        return _json({"instance_id": instance_id, "health_status": status, "node_recovery": recovery})

    def hardware(self, request: Request, instance_id: str) -> Response:
        """POST /_twin/nodes/<id>/hardware: the simulator's hardware faults (sim/nccl_tests.py)."""
        answers = self.ctx.bus.publish("twin.node.hardware", instance_id=instance_id, body=_body(request))
        if not answers:
            return _error("the twin's simulator is not running", 404)
        return _error(answers[0]["error"]) if "error" in answers[0] else _json(answers[0])

    def kube(self, request: Request, cluster: str, action: str) -> Response:
        """POST /_twin/kube/<cluster>/<action>: a control action on a cluster's Kubernetes side."""
        answers = self.ctx.bus.publish("twin.kube.control", cluster=cluster, action=action, body=_body(request))
        if not answers:
            return _error("the twin's Kubernetes side is not running", 404)
        answer = answers[0]
        return _error(answer["error"], 404 if "no running" in answer["error"] else 400) if "error" in answer \
            else _json(answer)


def make_control(
    side: AwsSide, reset: Callable[[], None], info: Callable[[], dict[str, Any]]
) -> Callable[[Request], Response]:
    """The WSGI handler for `/_twin/…`; `reset` resets the whole twin, `info` describes it."""
    return ControlEndpoints(side, reset, info)

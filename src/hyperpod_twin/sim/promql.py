"""A PromQL subset over the simulated pods' /metrics: what KEDA's prometheus scaler asks a Prometheus.

Series are scraped from every Ready pod of a namespace that answers HTTP (model servers, routers), labelled as
Prometheus' Kubernetes pod discovery would (`namespace`, `pod`, and each pod label with `.`, `/`, `-` as `_`).
Queries: `selector`, or `sum|avg|max|min|count(selector)`, where a selector is `name{label op "value", …}` with
op `=`, `!=`, `=~`, `!~`."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from hyperpod_twin.kube.runtime import ProxyHandler
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.kobj import Obj

Series = tuple[str, dict[str, str], float]

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?')
_QUERY = re.compile(r"^\s*(?:(sum|avg|max|min|count)\s*\(\s*(.*?)\s*\)|(.*?))\s*$", re.S)
_SELECTOR = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{(.*)\})?$", re.S)


class QueryError(ValueError):
    """The query is outside the subset the twin evaluates."""


def parse_exposition(text: str) -> list[Series]:
    """Samples of a Prometheus text exposition (comments skipped)."""
    out: list[Series] = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        found = _SAMPLE.match(line.strip())
        if found is None:
            continue
        labels = {k: v for k, _, v in _LABEL.findall(found.group(3) or "")}
        try:
            out.append((found.group(1), labels, float(found.group(4))))
        except ValueError:
            continue
    return out


def target_labels(pod: Obj) -> dict[str, str]:
    """What Prometheus' pod discovery (with a labelmap of the pod labels) attaches to a pod's series."""
    labels = {re.sub(r"[^a-zA-Z0-9_]", "_", k): str(v) for k, v in (pod["metadata"].get("labels") or {}).items()}
    return {**labels, "namespace": pod["metadata"]["namespace"], "pod": pod["metadata"]["name"]}


def scrape(pods: Iterable[Obj], handlers_of: Callable[[str, str], list[tuple[int, ProxyHandler]]]) -> list[Series]:
    """Every series of the Ready pods' /metrics (each handler once, however many ports it serves)."""
    out: list[Series] = []
    for pod in pods:
        if not kobj.pod_is_ready(pod):
            continue
        seen: set[int] = set()
        for _port, handler in handlers_of(pod["metadata"]["namespace"], pod["metadata"]["name"]):
            if id(handler) in seen:
                continue
            seen.add(id(handler))
            response = handler("GET", "/metrics", "", {}, b"")
            if response.status != 200:
                continue
            extra = target_labels(pod)
            out += [(name, {**extra, **labels}, value)
                    for name, labels, value in parse_exposition(response.body.decode(errors="replace"))]
    return out


def _matches(labels: dict[str, str], matchers: list[tuple[str, str, str]]) -> bool:
    for key, op, value in matchers:
        have = labels.get(key, "")
        ok = {"=": have == value, "!=": have != value, "=~": re.fullmatch(value, have) is not None,
              "!~": re.fullmatch(value, have) is None}[op]
        if not ok:
            return False
    return True


def evaluate(query: str, series: list[Series]) -> float | None:
    """The query's single value over `series` (None: no sample matched, as an empty Prometheus result)."""
    found = _QUERY.match(query)
    if found is None:
        raise QueryError(f"cannot parse {query!r}")
    aggregate, inner = found.group(1), found.group(2) if found.group(1) else found.group(3)
    selector = _SELECTOR.match(inner or "")
    if selector is None:
        raise QueryError(f"the twin evaluates `metric{{labels}}` or sum/avg/max/min/count of it, not {query!r}")
    body = selector.group(2) or ""
    matchers = [(k, op, v) for k, op, v in _LABEL.findall(body)]
    if _LABEL.sub("", body).strip():
        raise QueryError(f"cannot parse the label matchers of {query!r}")
    values = [v for name, labels, v in series if name == selector.group(1) and _matches(labels, matchers)]
    if aggregate == "count":
        return float(len(values))
    if not values:
        return None
    if aggregate is None:
        if len(values) > 1:
            raise QueryError(f"{query!r} returns {len(values)} series; KEDA needs a single value (wrap it in sum)")
        return values[0]
    return {"sum": sum(values), "avg": sum(values) / len(values), "max": max(values), "min": min(values)}[aggregate]

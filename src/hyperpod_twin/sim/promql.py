"""A PromQL subset over the simulated pods' /metrics: what KEDA's prometheus scaler asks a Prometheus.

Series are scraped from every Ready pod of a namespace that answers HTTP (model servers, routers), labelled as
Prometheus' Kubernetes pod discovery would (`namespace`, `pod`, and each pod label with `.`, `/`, `-` as `_`).
Queries: `selector`, or `sum|avg|max|min|count [by (l, …)] (selector)`, where a selector is
`name{label op "value", …}` with op `=`, `!=`, `=~`, `!~`."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from hyperpod_twin.kube.runtime import ProxyHandler
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.kobj import Obj

Series = tuple[str, dict[str, str], float]

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?')
_QUERY = re.compile(
    r"^\s*(?:(sum|avg|max|min|count)\s*(?:by\s*\(([^)]*)\))?\s*\(\s*(.*?)\s*\)\s*(?:by\s*\(([^)]*)\))?|(.*?))\s*$",
    re.S,
)
_SELECTOR = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{(.*)\})?$", re.S)


_AGGREGATES: dict[str, Callable[[list[float]], float]] = {
    "sum": sum, "avg": lambda vs: sum(vs) / len(vs), "max": max, "min": min, "count": lambda vs: float(len(vs)),
}


class QueryError(ValueError):
    """The query or a parameter is outside what the twin evaluates (Prometheus' `bad_data`)."""


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


def vector(query: str, series: list[Series]) -> list[tuple[dict[str, str], float]]:
    """The query's result vector over `series`: (labels, value) per output series, as Prometheus answers an
    instant query (a bare selector keeps each series' labels with `__name__`; an aggregate keeps its `by` labels)."""
    found = _QUERY.match(query)
    if found is None:
        raise QueryError(f"cannot parse {query!r}")
    aggregate, by_before, inner, by_after, bare = found.groups()
    selector = _SELECTOR.match((inner if aggregate else bare) or "")
    if selector is None:
        raise QueryError(
            f"the twin evaluates `metric{{labels}}` or sum/avg/max/min/count [by (…)] of it, not {query!r}")
    body = selector.group(2) or ""
    matchers = [(k, op, v) for k, op, v in _LABEL.findall(body)]
    if _LABEL.sub("", body).strip():
        raise QueryError(f"cannot parse the label matchers of {query!r}")
    picked = [(labels, v) for name, labels, v in series if name == selector.group(1) and _matches(labels, matchers)]
    if aggregate is None:
        return [({"__name__": selector.group(1), **labels}, v) for labels, v in picked]
    by = [b.strip() for b in (by_before or by_after or "").split(",") if b.strip()]
    groups: dict[tuple[str, ...], list[float]] = {}
    for labels, v in picked:
        groups.setdefault(tuple(labels.get(b, "") for b in by), []).append(v)
    if not groups and aggregate == "count" and not by:
        groups[()] = []  # count of nothing is 0 (KEDA reads it as a value)
    return [({b: k for b, k in zip(by, key, strict=True) if k}, _AGGREGATES[aggregate](vs))
            for key, vs in sorted(groups.items())]


def evaluate(query: str, series: list[Series]) -> float | None:
    """The query's single value over `series` (None: no sample matched, as an empty Prometheus result)."""
    result = vector(query, series)
    if len(result) > 1:
        raise QueryError(f"{query!r} returns {len(result)} series; KEDA needs a single value (wrap it in sum)")
    return result[0][1] if result else None

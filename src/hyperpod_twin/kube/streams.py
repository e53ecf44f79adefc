"""Streaming responses: watch (JSON event stream) and pod logs (plain text, optionally followed)."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from hyperpod_twin.kube.runtime import LogLine, PodLogStore
from hyperpod_twin.kube.selectors import Predicate
from hyperpod_twin.kube.status import ApiError, status_body
from hyperpod_twin.kube.store import ObjectStore, ResourceType, WatchEvent

Obj = dict[str, Any]
HEARTBEAT = 0.5  # seconds between liveness checks of an idle stream
BOOKMARK_EVERY = 5.0


def _line(event_type: str, obj: Obj) -> bytes:
    return json.dumps({"type": event_type, "object": obj}, separators=(",", ":")).encode() + b"\n"


def watch_stream(
    store: ObjectStore,
    rtype: ResourceType,
    namespace: str | None,
    predicate: Predicate | None,
    resource_version: str,
    timeout: float,
    bookmarks: bool,
    stopping: threading.Event,
    render: Callable[[Obj], Obj],
    bookmark_every: float = BOOKMARK_EVERY,
    initial_events: bool = False,
) -> Iterator[bytes]:
    """Events of one resource type from `resource_version` on ("" or "0": start with ADDED for all).

    Objects leaving the selector are reported DELETED and objects entering it ADDED, as the watch
    cache does. A resourceVersion older than the store's history yields one ERROR event with a 410
    Expired Status (clients then relist)."""
    pending: queue.Queue[WatchEvent] = queue.Queue()

    def listener(event: WatchEvent) -> None:
        if event.rtype.key == rtype.key:
            pending.put(event)

    store.add_listener(listener)
    return _watch(store, rtype, namespace, predicate, resource_version, timeout, bookmarks, stopping, render,
                  pending, listener, bookmark_every, initial_events)


def _watch(
    store: ObjectStore,
    rtype: ResourceType,
    namespace: str | None,
    predicate: Predicate | None,
    resource_version: str,
    timeout: float,
    bookmarks: bool,
    stopping: threading.Event,
    render: Callable[[Obj], Obj],
    pending: queue.Queue[WatchEvent],
    listener: Callable[[WatchEvent], None],
    bookmark_every: float,
    initial_events: bool,
) -> Iterator[bytes]:
    def in_scope(obj: Obj) -> bool:
        return not rtype.namespaced or namespace is None or obj.get("metadata", {}).get("namespace") == namespace

    def matches(obj: Obj) -> bool:
        return in_scope(obj) and (predicate is None or predicate(obj))

    matched: set[tuple[str, str]] = set()

    def translate(event: WatchEvent) -> bytes | None:
        meta = event.object.get("metadata", {})
        key = (meta.get("namespace", ""), meta.get("name", ""))
        now_matches = event.type != "DELETED" and matches(event.object)
        was = key in matched
        if event.type == "DELETED":
            if not was and not matches(event.object):
                return None
            matched.discard(key)
            return _line("DELETED", render(event.object))
        if now_matches:
            matched.add(key)
            return _line("MODIFIED" if was else "ADDED", render(event.object))
        if was:
            matched.discard(key)
            return _line("DELETED", render(event.object))
        return None

    epoch = store.watch_epoch
    try:
        last_rv = 0
        if resource_version in ("", "0") or initial_events:
            items, last_rv = store.list(rtype, namespace if rtype.namespaced else None, predicate)
            for item in items:
                meta = item["metadata"]
                matched.add((meta.get("namespace", ""), meta["name"]))
                yield _line("ADDED", render(item))
            if initial_events:
                # WatchList (sendInitialEvents): a bookmark marks the end of the initial state.
                yield _line("BOOKMARK", {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": {
                    "resourceVersion": str(last_rv), "annotations": {"k8s.io/initial-events-end": "true"}}})
        else:
            try:
                since = int(resource_version)
            except ValueError:
                yield _line("ERROR", status_body(400, f"invalid resourceVersion {resource_version}", "BadRequest"))
                return
            history = store.events_since(since, rtype)
            if history is None:
                yield _line("ERROR", status_body(410, f"too old resource version: {since} "
                                                 f"({store.resource_version})", "Expired"))
                return
            # What the client's list at `since` held is not recorded, so assume it held every object
            # that existed then and matches now or changed since (the old state is unknown): a
            # change out of the selection then reads DELETED, never silently nothing.
            first: dict[tuple[str, str], str] = {}
            for event in history:
                meta = event.object.get("metadata", {})
                first.setdefault((meta.get("namespace", ""), meta.get("name", "")), event.type)
            current, _ = store.list(rtype, namespace if rtype.namespaced else None, predicate)
            keys = {(i["metadata"].get("namespace", ""), i["metadata"]["name"]) for i in current}
            matched.update(k for k in keys if first.get(k) != "ADDED")
            matched.update(k for k, kind in first.items() if kind != "ADDED")
            last_rv = since
            for event in history:
                last_rv = max(last_rv, event.resource_version)
                line = translate(event)
                if line:
                    yield line
        deadline = time.monotonic() + timeout
        next_bookmark = time.monotonic() + bookmark_every
        while not stopping.is_set() and time.monotonic() < deadline:
            if store.watch_epoch != epoch:
                # /_twin/kube/…/watches/cut: end the connection without the final chunk, as a failure does.
                raise ConnectionAbortedError("watch cut by the twin")
            try:
                event = pending.get(timeout=min(HEARTBEAT, bookmark_every) if bookmarks else HEARTBEAT)
            except queue.Empty:
                if bookmarks and time.monotonic() >= next_bookmark:
                    next_bookmark = time.monotonic() + bookmark_every
                    yield _line("BOOKMARK", {"kind": rtype.kind, "apiVersion": rtype.api_version,
                                             "metadata": {"resourceVersion": str(max(last_rv, 0))}})
                else:
                    yield b""
                continue
            if event.resource_version <= last_rv:
                continue
            last_rv = event.resource_version
            line = translate(event)
            if line:
                yield line
    finally:
        store.remove_listener(listener)


def log_stream(
    logs: PodLogStore,
    namespace: str,
    pod: str,
    container: str,
    follow: bool,
    tail_lines: int | None,
    since_seconds: int | None,
    timestamps: bool,
    limit_bytes: int | None,
    stopping: threading.Event,
    pod_exists: Callable[[], bool],
) -> Iterator[bytes]:
    """A container's log lines; with `follow`, new lines until the container exits or the pod goes.

    The lines already written are read now, before the response starts, so a line appended while
    the client reads the headers is streamed as new rather than lost to `tailLines`."""
    lines = logs.read(namespace, pod, container)
    return _log_lines(logs, namespace, pod, container, lines, follow, tail_lines, since_seconds, timestamps,
                      limit_bytes, stopping, pod_exists)


def _log_lines(
    logs: PodLogStore,
    namespace: str,
    pod: str,
    container: str,
    lines: list[LogLine],
    follow: bool,
    tail_lines: int | None,
    since_seconds: int | None,
    timestamps: bool,
    limit_bytes: int | None,
    stopping: threading.Event,
    pod_exists: Callable[[], bool],
) -> Iterator[bytes]:
    position = len(lines)
    if since_seconds is not None:
        cutoff = time.time() - since_seconds
        lines = [line for line in lines if line.timestamp >= cutoff]
    if tail_lines is not None:
        lines = lines[-tail_lines:] if tail_lines > 0 else []
    sent = 0

    def render(timestamp: float, text: str) -> bytes:
        stamp = datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
        return ((stamp + " ") if timestamps else "").encode() + text.rstrip("\n").encode() + b"\n"

    for line in lines:
        chunk = render(line.timestamp, line.text)
        if limit_bytes is not None and sent + len(chunk) > limit_bytes:
            yield chunk[: limit_bytes - sent]
            return
        sent += len(chunk)
        yield chunk
    if not follow:
        return
    while not stopping.is_set():
        if logs.wait(namespace, pod, container, position, timeout=HEARTBEAT):
            new = logs.read(namespace, pod, container, position)
            position += len(new)
            for line in new:
                chunk = render(line.timestamp, line.text)
                if limit_bytes is not None and sent + len(chunk) > limit_bytes:
                    yield chunk[: limit_bytes - sent]
                    return
                sent += len(chunk)
                yield chunk
            if not new and logs.is_closed(namespace, pod, container):
                return
        else:
            if not pod_exists():
                return
            yield b""


def pick_container(pod: Obj, requested: str) -> str:
    """The container a log request means; 400 when ambiguous or unknown, as the kubelet says."""
    spec = pod.get("spec") or {}
    names = [c.get("name", "") for c in (spec.get("containers") or [])]
    init = [c.get("name", "") for c in (spec.get("initContainers") or [])]
    name = pod["metadata"]["name"]
    if requested:
        if requested not in names + init:
            raise ApiError(400, f"container {requested} is not valid for pod {name}", "BadRequest")
        return requested
    if len(names) == 1:
        return str(names[0])
    annotated = (pod["metadata"].get("annotations") or {}).get("kubectl.kubernetes.io/default-container")
    if annotated in names:
        return str(annotated)
    raise ApiError(
        400,
        f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]",
        "BadRequest",
    )

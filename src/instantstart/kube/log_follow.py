"""Following a container's log: (timestamp, text) pairs as the API server streams them with follow=true."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

from instantstart.kube import k8s
from instantstart.kube.calls import kube_call

LINE_CHARS = 2000  # one streamed line at most (longer lines are cut, as pod_logs does)


def split_stamp(raw: str) -> tuple[str, str]:
    """`2026-12-03T12:00:00.123456789Z text` → (timestamp, text); no timestamp → ("", raw)."""
    stamp, _, text = raw.partition(" ")
    if len(stamp) >= 20 and stamp[4] == "-" and stamp.endswith("Z"):
        return stamp, text
    return "", raw


def follow_log(api: k8s.ApiClient, namespace: str, pod: str, container: str | None, *, since_seconds: int | None,
               tail_lines: int | None, stop: threading.Event, opened: list[Any]) -> Iterator[tuple[str, str]]:
    """Blocking: the log lines, then new ones as they are written, until the container ends or `stop` is set.
    The open response is put in `opened` so another thread can close it (that ends a read that waits)."""
    kwargs: dict[str, Any] = {"follow": True, "timestamps": True, "_preload_content": False}
    if container:
        kwargs["container"] = container
    if since_seconds is not None:
        kwargs["since_seconds"] = since_seconds
    if tail_lines is not None:
        kwargs["tail_lines"] = tail_lines
    response: Any = kube_call(f"follow the log of {namespace}/{pod}", k8s.CoreV1Api(api).read_namespaced_pod_log,
                              pod, namespace, **kwargs)
    opened.append(response)
    pending = b""
    try:
        for chunk in response.stream(8192, decode_content=False):
            if stop.is_set():
                return
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for raw in complete:
                stamp, text = split_stamp(raw.decode("utf-8", "replace"))
                yield stamp, text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 1] + "…"
        if pending and not stop.is_set():
            yield split_stamp(pending.decode("utf-8", "replace"))
    finally:
        if stop.is_set():
            with contextlib.suppress(Exception):
                response.close()  # interrupted: the connection is dead, never back to the pool
        else:
            response.release_conn()


def interrupt(response: Any) -> None:
    """Wake the thread reading a followed log from another thread, without blocking: shut the socket down.
    Closing the response instead waits for the reading thread to let go of its buffer, i.e. until the
    container writes again (forever for a quiet one), and froze the event loop that called it."""
    sock = getattr(getattr(response, "connection", None), "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)

"""The last lines a failed Job's pod printed, clipped and redacted, for an operation's error (untrusted data)."""

from __future__ import annotations

import re

from instantstart.kube import core_kinds, k8s, wire

TAIL_LINES = 20
LINE_CHARS = 300
# Tokens a workload might print (Hugging Face, AWS keys, bearer headers): never carried into an error.
_SECRETS = re.compile(r"hf_[A-Za-z0-9]{8,}|(?:AKIA|ASIA)[A-Z0-9]{16}|(?i:bearer)\s+[A-Za-z0-9._~+/=-]{8,}")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clip(text: str, lines: int = TAIL_LINES) -> list[str]:
    """The last `lines` lines of `text`: control characters dropped, each clipped, secrets redacted."""
    out = []
    for line in text.splitlines()[-lines:]:
        line = _SECRETS.sub("[redacted]", _CONTROL.sub("", line))
        out.append(line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + "…")
    return out


def job_log_tail(api: k8s.ApiClient, namespace: str, job: str, container: str) -> list[str]:
    """The clipped last lines of the newest pod of `job` (a failed one first); [] when there is no log (blocking)."""
    try:
        pods = wire.items(core_kinds.list_pods(api, namespace, label_selector=f"job-name={job}"))
    except k8s.ApiException:
        return []

    def order(pod: wire.Obj) -> tuple[bool, str]:
        return (wire.phase(pod) == "Failed", str(wire.metadata(pod).get("creationTimestamp") or ""))

    for pod in sorted(pods, key=order, reverse=True):
        try:
            text = core_kinds.read_pod_log(api, wire.name(pod), namespace, container=container, tail_lines=TAIL_LINES)
        except k8s.ApiException:
            continue
        if str(text).strip():
            return clip(str(text))
    return []

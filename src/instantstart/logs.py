"""Structured logging: JSON lines carrying request and operation ids, with secrets redacted."""

from __future__ import annotations

import json
import logging
import re
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

request_id_var: ContextVar[str | None] = ContextVar("request_id", default=None)
operation_id_var: ContextVar[str | None] = ContextVar("operation_id", default=None)

# Registered secrets, newest last; bounded so caller-supplied secrets cannot grow memory without end.
_SECRETS: dict[str, None] = {}
MAX_REGISTERED_SECRETS = 1024
_PATTERNS = [
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=\-]{8,}"),
    re.compile(r"(k8s-aws-v1\.)[A-Za-z0-9_\-]+"),
    re.compile(r"(?i)((?:hf_?token|api[_-]?token|secret|password)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"),
]
_STANDARD = set(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime", "color_message"}


def register_secret(value: str) -> None:
    """Never let `value` appear in a log line (the API token, for one)."""
    if value:
        _SECRETS.pop(value, None)
        _SECRETS[value] = None
        while len(_SECRETS) > MAX_REGISTERED_SECRETS:
            del _SECRETS[next(iter(_SECRETS))]


def contains_secret(text: str) -> bool:
    """Whether `text` carries any registered secret (the engine refuses to persist such text)."""
    return any(secret in text for secret in list(_SECRETS))


def redact_secrets(text: str) -> str:
    """Replace registered secrets only (values stay JSON-valid: secrets never hold quotes or backslashes
    that json.dumps would escape differently, and a match inside escaped text is replaced whole)."""
    for secret in list(_SECRETS):
        text = text.replace(secret, "***")
    return text


def redact(text: str) -> str:
    """Remove registered secrets and token-shaped values from `text`."""
    for secret in list(_SECRETS):
        text = text.replace(secret, "***")
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + "***", text)
    return text


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, ids, extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = request_id_var.get()
        operation_id = operation_id_var.get()
        if request_id:
            payload["requestId"] = request_id
        if operation_id:
            payload["operationId"] = operation_id
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                payload[_camel(key)] = value
        if record.exc_info:
            payload["exception"] = self.formatException(record.exc_info)
        return redact(json.dumps(payload, default=str))


class TextFormatter(logging.Formatter):
    """Human-readable lines for a terminal, still redacted and still carrying ids."""

    def format(self, record: logging.LogRecord) -> str:
        ids = " ".join(
            f"{name}={value}"
            for name, value in (("req", request_id_var.get()), ("op", operation_id_var.get()))
            if value
        )
        base = super().format(record)
        return redact(f"{base} {ids}".rstrip())


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part.title() for part in rest)


def configure(level: str = "INFO", json_lines: bool = True) -> None:
    """Install the formatter on the root logger (idempotent)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_lines else TextFormatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for existing in list(root.handlers):
        if getattr(existing, "_instantstart", False):
            root.removeHandler(existing)
    handler._instantstart = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level.upper())
    for noisy in ("uvicorn.access", "botocore", "urllib3", "httpx", "mcp"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))

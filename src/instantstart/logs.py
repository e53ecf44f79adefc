"""Structured logging: JSON lines carrying request and operation ids, with secrets redacted."""

from __future__ import annotations

import json
import logging
import re
import sys
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from typing import Any

request_id_var: ContextVar[str | None] = ContextVar("request_id", default=None)
operation_id_var: ContextVar[str | None] = ContextVar("operation_id", default=None)

# Registered secrets, newest last; bounded so caller-supplied secrets cannot grow memory without end. Every one
# is redacted from every log line. The server's own secrets (the API token) are also kept out of every stored
# row; a caller's Secret field is kept out of the rows of the call that carried it (`carried_secrets`): the same
# text in another call is that call's ordinary data (a token "us-west-2" must not make the Region unwritable).
_SECRETS: dict[str, None] = {}
_SERVER_SECRETS: dict[str, None] = {}
MAX_REGISTERED_SECRETS = 1024
_CARRIED: ContextVar[tuple[tuple[str, str], ...]] = ContextVar("carried_secrets", default=())
_PATTERNS = [
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=\-]{8,}"),
    re.compile(r"(k8s-aws-v1\.)[A-Za-z0-9_\-]+"),
    re.compile(r"(?i)((?:hf_?token|api[_-]?token|secret|password)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"),
]
_STANDARD = set(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime", "color_message"}


def _remember(registry: dict[str, None], value: str) -> None:
    registry.pop(value, None)
    registry[value] = None
    while len(registry) > MAX_REGISTERED_SECRETS:
        del registry[next(iter(registry))]


def register_server_secret(value: str) -> None:
    """A secret of the server itself (the API token): never in a log line, never in any stored row."""
    if value:
        _remember(_SECRETS, value)
        _remember(_SERVER_SECRETS, value)


def register_secret(value: str) -> None:
    """A secret the call running in this context handles (a token a service function reads): never in a log
    line from now on, and kept out of what this call records, like its Secret fields (`carry_secrets`)."""
    if value:
        _remember(_SECRETS, value)
        if all(value != carried for _field, carried in _CARRIED.get()):
            _CARRIED.set((*_CARRIED.get(), ("a secret argument", value)))


def carry_secrets(fields: list[tuple[str, str]]) -> Token[tuple[tuple[str, str], ...]]:
    """The Secret fields (wire name, value) of the call running in this context: never in a log line from now
    on, and refused or scrubbed in what this call records (see `carried_secrets`). Reset with the token."""
    for _field, value in fields:
        if value:
            _remember(_SECRETS, value)
    return _CARRIED.set(tuple((f, v) for f, v in fields if v))


def release_secrets(token: Token[tuple[tuple[str, str], ...]]) -> None:
    """End the call's scope opened by `carry_secrets` (its values stay redacted from logs)."""
    _CARRIED.reset(token)


def carried_secrets() -> tuple[tuple[str, str], ...]:
    """(wire name, value) of the Secret fields of the call running in this context."""
    return _CARRIED.get()


def contains_secret(text: str, carried: tuple[str, ...] = ()) -> bool:
    """Whether `text` carries a server secret or one of `carried` (a call's own secrets)."""
    return any(secret in text for secret in (*list(_SERVER_SECRETS), *carried))


def redact_secrets(text: str, carried: tuple[str, ...] = ()) -> str:
    """Replace server secrets and `carried` only (values stay JSON-valid: secrets never hold quotes or
    backslashes that json.dumps would escape differently, and a match inside escaped text is replaced whole)."""
    for secret in (*list(_SERVER_SECRETS), *carried):
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

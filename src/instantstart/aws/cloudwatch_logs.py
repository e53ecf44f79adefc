"""CloudWatch Logs reads: the streams of a group by prefix and the tail of one stream (blocking, translated)."""

from __future__ import annotations

from typing import Any

from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import call, error_code
from instantstart.aws.paging import collect


def stream_names(aws: AwsClients, region: str, group: str, prefix: str) -> list[str]:
    """Names of the group's streams starting with `prefix`; [] when the group does not exist."""
    try:
        found = collect(f"list log streams of {group}", aws.client("logs", region), "describe_log_streams",
                        "logStreams", logGroupName=group, logStreamNamePrefix=prefix)
    except Exception as exc:
        if error_code(exc) == "ResourceNotFoundException":
            return []
        raise
    return sorted(str(s["logStreamName"]) for s in found)


def tail(aws: AwsClients, region: str, group: str, stream: str, lines: int) -> list[str]:
    """The last `lines` messages of one stream, oldest first."""
    client: Any = aws.client("logs", region)
    got: dict[str, Any] = call(f"read log stream {stream}", client.get_log_events, logGroupName=group,
                               logStreamName=stream, limit=lines, startFromHead=False)
    return [str(e.get("message", "")) for e in got.get("events", [])][-lines:]

"""The workspace's file rules shared by the service and the CLI's sync (no heavy imports: the CLI loads it)."""

from __future__ import annotations

import re

from instantstart.errors import InvalidInput

# A file travels base64 in one JSON request; the API's default body limit is 1 MiB (docs/ARCHITECTURE.md).
MAX_FILE_BYTES = 512 * 1024
MAX_PATH_CHARS = 512
# Path segments: no '.', '..' or empty segment, no control characters or backslashes (a Windows separator).
_BAD_CHARS = re.compile(r"[\x00-\x1f\x7f\\]")


def workspace_path(path: str, field: str = "path") -> str:
    """A file's path relative to the claim, refused unless it stays inside it: no leading '/', no '.', '..' or
    empty segment, no trailing '/' (a folder), no control characters or backslash, at most 512 characters."""
    segments = path.split("/")
    if (
        not path
        or len(path) > MAX_PATH_CHARS
        or _BAD_CHARS.search(path)
        or any(s in ("", ".", "..") for s in segments)
    ):
        raise InvalidInput(
            f"Invalid input: {field}: {path[:200]!r} is not a file path inside the claim",
            hint="Give a relative path like src/train.py: segments separated by '/', none empty, '.' or '..', "
            "no leading or trailing '/', no backslash or control character, at most 512 characters.",
            details={"fields": [{"field": field, "message": "must be a relative file path inside the claim"}]},
        )
    return path

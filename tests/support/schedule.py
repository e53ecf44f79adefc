"""Test files ordered longest first (recorded in tests/durations.json), so xdist's two workers finish together.

pytest-xdist with `--dist loadfile` hands whole files to whichever worker runs low, in collection order (the
Makefile turns off its own reordering by test count, which put the one-test schemathesis file, the longest of
all, at the very end). Longest-first is the classic greedy balance: what is left at the end is only short files.
Files the record does not name keep their collection order after the recorded ones. Regenerate the record from a
full run's log with `bench/suite_durations.py LOG --write tests/durations.json`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DURATIONS = Path(__file__).resolve().parents[1] / "durations.json"


def recorded_seconds(path: Path = DURATIONS) -> dict[str, float]:
    """Seconds per test file (path relative to the repository) of the last recorded full run; empty if none."""
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    return {str(name): float(seconds) for name, seconds in data.get("files", {}).items()}


def order_longest_first(items: list[pytest.Item], seconds: dict[str, float] | None = None) -> None:
    """Reorder `items` in place: whole files, longest recorded first; a file's own tests keep their order."""
    seconds = recorded_seconds() if seconds is None else seconds
    if not seconds:
        return
    first_seen: dict[str, int] = {}
    for index, item in enumerate(items):
        first_seen.setdefault(_file_of(item), index)
    items.sort(key=lambda item: (-seconds.get(_file_of(item), 0.0), first_seen[_file_of(item)]))


def _file_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]

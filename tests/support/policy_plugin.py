"""The session call log for the IAM policy test: a file named before any twin starts, that test ordered last."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

FULL_RUN = pytest.StashKey[bool]()
TESTS = Path(__file__).resolve().parents[1]


def start_call_log() -> None:
    """Name a fresh call log for this session (inherited by every twin process started from here on)."""
    if "HYPERPOD_TWIN_CALL_LOG" not in os.environ:
        fd, path = tempfile.mkstemp(prefix="instantstart-aws-calls-", suffix=".log")
        os.close(fd)
        os.environ["HYPERPOD_TWIN_CALL_LOG"] = path


def is_full_run(config: pytest.Config) -> bool:
    """Whether this session runs the whole suite (no paths but tests/, no -k/-m/--deselect/--lf)."""
    if config.getoption("keyword") or config.getoption("markexpr") or config.getoption("deselect"):
        return False
    if config.getoption("lf", False) or config.getoption("last_failed_no_failures", "all") != "all":
        return False
    paths = [Path(a.split("::", 1)[0]).resolve() for a in config.args] or [TESTS]
    return all(p in (TESTS, TESTS.parent) for p in paths)


def order_last(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Move `runs_last` tests to the end, and remember whether the whole suite is collected."""
    config.stash[FULL_RUN] = is_full_run(config)
    last = [i for i in items if i.get_closest_marker("runs_last")]
    items[:] = [i for i in items if not i.get_closest_marker("runs_last")] + last

"""The custom resource kinds are registered with the watch-fed state at start-up (services.load_all), not as an
effect of importing a module: importing custom.py alone registers nothing, and an unregistered kind is refused."""

from __future__ import annotations

import subprocess
import sys

import pytest

from instantstart.services import load_all
from instantstart.services.base.watch import state
from instantstart.services.base.watch.custom import CUSTOM_KINDS

IMPORT_ONLY = """
from instantstart.services.base.watch import custom, state
assert not set(custom.CUSTOM_KINDS) & set(state.WATCHED_KINDS), sorted(state.WATCHED_KINDS)
custom.register()
assert set(custom.CUSTOM_KINDS) <= set(state.WATCHED_KINDS) and set(custom.CUSTOM_KINDS) <= state.LIVE_KINDS
"""


def test_importing_the_custom_kinds_registers_nothing_until_register_is_called() -> None:
    done = subprocess.run([sys.executable, "-c", IMPORT_ONLY], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_after_start_up_the_registry_watches_every_custom_kind_and_pushes_their_changes() -> None:
    load_all()
    for kind, (path, view) in CUSTOM_KINDS.items():
        assert state.WATCHED_KINDS[kind] == (path, view)
        assert kind in state.LIVE_KINDS  # their changes reach the WebSocket
    assert {"nodes", "pods", "services", "deployments", "events"} <= set(state.WATCHED_KINDS)


def test_an_unregistered_kind_is_refused_with_the_fix() -> None:
    with pytest.raises(KeyError, match="load_all registers"):
        state.informer(None, "t", "us-west-2", "eks", "widgets")  # type: ignore[arg-type]

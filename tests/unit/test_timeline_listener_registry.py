"""The timeline's Kubernetes-events listener is registered with the watch-fed state at start-up (services.load_all),
not as an effect of importing a module: in a fresh interpreter, importing the timeline registers nothing, and
after load_all (however often called) every events informer gets exactly that one listener."""

from __future__ import annotations

import subprocess
import sys

FRESH = """
from instantstart.services.monitoring import state, timeline
assert state.LISTENER_FACTORIES.get("events", []) == [], state.LISTENER_FACTORIES
from instantstart.services import load_all
load_all()
assert state.LISTENER_FACTORIES["events"] == [timeline.kubernetes_events], state.LISTENER_FACTORIES
load_all()
assert state.LISTENER_FACTORIES["events"] == [timeline.kubernetes_events], state.LISTENER_FACTORIES
assert set(state.LISTENER_FACTORIES) == {"events"}, sorted(state.LISTENER_FACTORIES)
"""


def test_importing_the_timeline_registers_nothing_and_start_up_registers_its_events_listener_once() -> None:
    done = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr

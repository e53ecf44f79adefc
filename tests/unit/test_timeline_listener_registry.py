"""The timeline's Kubernetes-events listener lives on the application context (AppContext.listener_factories), not in
a module global: importing the timeline or starting up (services.load_all) registers nothing; attaching the timeline
to an application gives that application's events informers exactly that one listener, however often attached, and
another application in the same process none."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FRESH = """
import sys
from pathlib import Path
from instantstart.api.app import build_context
from instantstart.services import load_all
from instantstart.services.base.watch import state, timeline
from instantstart.settings import Settings
assert not hasattr(state, "LISTENER_FACTORIES"), "listener factories are per application"
load_all()
data = Path(sys.argv[1])
first = build_context(Settings(data_dir=data / "first"))
second = build_context(Settings(data_dir=data / "second"))
assert first.listener_factories == {} and second.listener_factories == {}
timeline.attach(first)
timeline.attach(first)
assert first.listener_factories == {"events": [timeline.kubernetes_events]}, first.listener_factories
assert second.listener_factories == {}, second.listener_factories
"""


def test_the_events_listener_is_each_applications_own_and_registered_once(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", FRESH, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr

"""The chaos soak, short: a few derandomized steps of the rule-based state machine (tests/support/soak.py) against
a control plane process on the twin, with twin faults and kill -9, invariants checked after every step; then
every saved failing sequence in tests/soak_regressions/ replayed. `bench/soak.py --minutes N` is the long run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis.stateful import run_state_machine_as_test

from instantstart.twin_process import TwinProcess
from tests.support.soak import REGRESSIONS, bind, replay
from tests.support.soak_harness import STATS, Profile

SEED = int(os.environ.get("SOAK_SEED", "1"))
SHORT = Profile(max_clusters=1, full_create=False, max_kills=1, op_deadline=240.0)


@pytest.fixture
def aws_env(twin: TwinProcess, monkeypatch: pytest.MonkeyPatch) -> TwinProcess:
    """The soak's own ledger reconcile reaches the twin with the twin's credentials."""
    for key, value in twin.env.items():
        monkeypatch.setenv(key, value)
    return twin


def test_short_soak(aws_env: TwinProcess, tmp_path: Path) -> None:
    before = STATS.checks
    machine = seed(SEED)(bind(aws_env, tmp_path, SHORT))
    # Hypothesis tries the simplest sequence first (one rule repeated); the second example is the seeded one.
    run_state_machine_as_test(machine, settings=settings(
        max_examples=2, stateful_step_count=10, deadline=None, database=None,
        phases=[Phase.generate], suppress_health_check=list(HealthCheck), print_blob=False))
    print("short soak:", STATS.line(), json.dumps(machine.last_steps))
    assert STATS.checks > before, "the invariants ran"
    assert machine.last_steps, "steps ran"


@pytest.mark.parametrize("saved", sorted(REGRESSIONS.glob("*.json")), ids=lambda p: p.stem)
def test_saved_sequence_holds(saved: Path, aws_env: TwinProcess, tmp_path: Path) -> None:
    document = json.loads(saved.read_text())
    replay(bind(aws_env, tmp_path, Profile(**document["profile"])), document["steps"])

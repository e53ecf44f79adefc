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

from instantstart.services.core.installation import installation_id
from instantstart.services.core.ledger import TAG_CLUSTER, TAG_INSTALLATION
from instantstart.store.db import Database
from instantstart.store.models import ClusterRow
from instantstart.twin_process import TwinProcess
from tests.support.soak import REGRESSIONS, bind, replay
from tests.support.soak_checks import check_quiet, check_step
from tests.support.soak_harness import STATS, Harness, Profile, Violation
from tests.support.twin import twin_client

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


def test_the_invariants_catch_what_they_claim(aws_env: TwinProcess, tmp_path: Path) -> None:
    """Each kind of breakage the soak looks for, planted by hand, is reported as a violation."""
    h = Harness(aws_env, tmp_path, SHORT)
    try:
        check_step(h)
        check_quiet(h)  # a fresh control plane on a fresh account holds every invariant
        h.unscanned.append(f"an answer that echoed {h.running.token}")
        with pytest.raises(Violation, match="a secret"):
            check_step(h)
        status, _ = h.rest("POST", "/test/probe", {"journalDir": str(tmp_path / "j"), "stageSeconds": 0})
        assert status == 202
        with pytest.raises(Violation, match="that no call started"):
            check_step(h)  # started behind the soak's back: a phantom to the soak's own record
        status, _ = h.rest("GET", "/operations/op-missing")  # a refusal that names its code and hint passes
        assert 400 <= status < 500
        with pytest.raises(Violation, match="code and a hint"):
            h._answer("REST GET /x", 404, "{}", {"error": {"code": "NOT_FOUND"}})  # the same without its hint
        db = Database(h.database_url)
        region = aws_env.env["AWS_REGION"]
        with db.session() as session:
            session.add(ClusterRow(tag="orph", region=region, eks_cluster_name="eks-cluster-orph",
                                   hyperpod_cluster_name=None))
        tags = [{"Key": TAG_CLUSTER, "Value": "orph"}, {"Key": TAG_INSTALLATION, "Value": installation_id(db)}]
        twin_client(aws_env, "ec2").create_vpc(CidrBlock="10.9.0.0/16",
                                               TagSpecifications=[{"ResourceType": "vpc", "Tags": tags}])
        db.dispose()
        with pytest.raises(Violation, match="ledger differs"):
            check_quiet(h)  # a tagged VPC of this installation that the ledger does not hold: an orphan
    finally:
        h.close()

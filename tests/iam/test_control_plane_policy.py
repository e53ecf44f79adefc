"""deploy/iam/control-plane-policy.json against what the control plane really called on the twin this session.

Runs last (tests/conftest.py orders it; under xdist the controller checks at session end). Direction 1, always:
every IAM action the recorded calls need is granted. Direction 2, only when the whole suite ran and passed (a subset
or a failure calls less): every granted action was needed by some call.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from instantstart.services.account.policy import control_plane_policy
from tests.support.aws_actions import recorded_actions
from tests.support.policy_plugin import FULL_RUN, policy_finding

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "deploy" / "iam" / "control-plane-policy.json"


def test_the_deploy_copy_is_the_packaged_policy() -> None:
    assert json.loads(SHIPPED.read_text()) == control_plane_policy()


def test_every_statement_is_scoped_or_says_why_not() -> None:
    for statement in control_plane_policy()["Statement"]:
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        if resources == ["*"]:
            # Read-only look-ups and calls whose resources IAM cannot name carry an explaining Sid.
            assert statement["Sid"].endswith(("Read", "Unscoped", "Tagged")), statement["Sid"]
    pass_role = [s for s in control_plane_policy()["Statement"] if "iam:PassRole" in s["Action"]]
    assert len(pass_role) == 1 and pass_role[0]["Action"] == ["iam:PassRole"]
    assert pass_role[0]["Condition"]["StringEquals"]["iam:PassedToService"]
    assert all(r.endswith(":role/instantstart-*") for r in pass_role[0]["Resource"])


@pytest.mark.runs_last
def test_policy_matches_the_calls_the_suite_made(request: pytest.FixtureRequest) -> None:
    """Under xdist this worker saw only part of the session: direction 1 here on the calls so far, and
    tests/support/policy_plugin.check_at_session_end checks both on the controller once every worker is done."""
    log = Path(os.environ["HYPERPOD_TWIN_CALL_LOG"])
    _needed, calls = recorded_actions(log)
    if not calls:
        pytest.skip("no control-plane AWS call was made in this session (no twin test ran)")
    full = request.config.stash.get(FULL_RUN, False)
    finding = policy_finding(log, complete=full and not request.session.testsfailed)
    assert finding is None, finding

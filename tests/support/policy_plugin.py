"""The session call log for the IAM policy tests: a file named before any twin starts (the twin writes the roles'
uses next to it), those tests ordered last.

Under pytest-xdist every worker is its own session, so no test can run after all the others: the workers inherit
the controller's log (named when tests/conftest.py is imported, before they start), the policy test on a worker
checks only that every call made so far is granted, and the controller checks both directions once every worker
has finished (`check_at_session_end`), reporting a finding as a failed test of the policy module.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

FULL_RUN = pytest.StashKey[bool]()
TESTS = Path(__file__).resolve().parents[1]
POLICY_TEST = "tests/iam/test_control_plane_policy.py::test_policy_matches_the_calls_the_suite_made"
ROLE_TEST = "tests/iam/test_role_policies.py::test_role_policies_match_what_their_principals_did"


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


def is_xdist_worker(config: pytest.Config) -> bool:
    """Whether this process is a pytest-xdist worker (it sees only the tests sent to it)."""
    return hasattr(config, "workerinput")


def is_xdist_controller(config: pytest.Config) -> bool:
    """Whether this process distributes the tests to xdist workers (and runs none itself)."""
    return config.pluginmanager.hasplugin("dsession")


def order_last(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Move `runs_last` tests to the end, and remember whether the whole suite is collected."""
    config.stash[FULL_RUN] = is_full_run(config) and not is_xdist_worker(config)
    last = [i for i in items if i.get_closest_marker("runs_last")]
    items[:] = [i for i in items if not i.get_closest_marker("runs_last")] + last


def policy_finding(log: Path, complete: bool) -> str | None:
    """What is wrong between the recorded calls and the shipped policy (None: nothing, or no call recorded).

    Always: every action a call needed is granted. With `complete` (whole suite, no failure): every granted
    action was needed."""
    from instantstart.services.account.policy import control_plane_policy, granted_actions
    from tests.support.aws_actions import recorded_actions

    needed, calls = recorded_actions(log)
    if not calls:
        return None
    granted = set(granted_actions(control_plane_policy()))
    missing = sorted(needed - granted)
    if missing:
        return f"the control plane called AWS for actions the policy does not grant: {missing}"
    unused = sorted(granted - needed) if complete else []
    if unused:
        return f"the policy grants actions no test made the control plane call: {unused}"
    return None


def role_finding(call_log: Path, complete: bool) -> str | None:
    """What is wrong between the policies of the roles the control plane creates and what their principals did
    on the twin (tests/support/role_usage.py); None when nothing is."""
    from tests.support.role_usage import builder_grants, recorded_uses, role_findings, role_log

    uses = recorded_uses(role_log(call_log))
    if not uses:
        return None
    findings = role_findings(uses, builder_grants(), complete)
    return "\n".join(findings) if findings else None


def check_at_session_end(session: pytest.Session) -> None:
    """On the xdist controller, after every worker finished: the control-plane policy against every call of the
    session, and the role policies against every use of a role."""
    config = session.config
    if not is_xdist_controller(config) or "HYPERPOD_TWIN_CALL_LOG" not in os.environ:
        return
    if session.shouldstop or session.shouldfail:
        return  # interrupted (-x, Ctrl-C): the calls are incomplete and the failure is already reported
    complete = is_full_run(config) and session.testsfailed == 0
    log = Path(os.environ["HYPERPOD_TWIN_CALL_LOG"])
    for test, finding in ((POLICY_TEST, policy_finding(log, complete)), (ROLE_TEST, role_finding(log, complete))):
        if finding is None:
            continue
        report = pytest.TestReport(
            nodeid=test + "[all-workers]", location=(test.split("::")[0], None, "session end"),
            keywords={}, outcome="failed", longrepr=finding, when="call",
        )
        config.hook.pytest_runtest_logreport(report=report)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

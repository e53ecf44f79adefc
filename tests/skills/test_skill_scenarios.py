"""Every skill's scenario replayed over MCP HTTP against a real `instantstart serve --twin` process (one per
module, on ephemeral ports with a temporary data dir), in the order a user would go: create, capacity, features,
training, a model deployed and called, then the diagnostics."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from instantstart.catalog import CATALOG
from instantstart.services import load_all
from tests.skills.replay import Replay, check_scenario
from tests.support.faces import mcp_http
from tests.support.servers import ServedTwin, serve_twin_process
from tests.support.twin import twin_client

load_all()
ORDER = [
    "create-cluster",
    "capacity",
    "advanced-features",
    "train",
    "deploy-model",
    "diagnose-node-health",
    "diagnose-nccl",
    "diagnose-cluster-creation",
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedTwin]:
    """One `serve --twin` process (with its own twin) for the whole module."""
    with serve_twin_process(tmp_path_factory.mktemp("skills")) as process:
        yield process



@pytest.mark.parametrize("name", ORDER)
async def test_skill_scenario_reaches_its_end_condition(name: str, served: ServedTwin) -> None:
    from instantstart.skills import SKILLS_DIR, load_skill

    skill = load_skill(Path(SKILLS_DIR) / name / "SKILL.md")
    scenario = skill.scenario()
    diagnostic = name.startswith("diagnose-")
    check_scenario(name, scenario, diagnostic=diagnostic)
    async with mcp_http(served.running) as session:
        replay = Replay(session, served.endpoint_url)
        await replay.run(name, "setup", scenario.get("setup") or [])
        before = len(replay.called)
        await replay.run(name, "steps", scenario["steps"])
    called = replay.called[before:]
    # Every tool the replay called is one the skill names (wait_seconds is the polling primitive).
    assert set(called) - {"wait_seconds"} <= skill.tool_names(), set(called) - skill.tool_names()
    steps = scenario["steps"]
    approvals = [i for i, s in enumerate(steps) if "approval" in s]
    if diagnostic:
        read_steps = [s.get("call") or s.get("poll") for s in steps[: approvals[0]]]
        assert all(CATALOG.get(t).read_only for t in read_steps if t), read_steps  # type: ignore[union-attr]
    # A scenario that prescribes a destructive step runs it only after an approval point, and the replay
    # went past that point (a scenario that stops at approval proves nothing about the fix).
    destructive = [i for i, s in enumerate(steps) if (t := s.get("call")) and CATALOG.get(t).destructive]  # type: ignore[union-attr]
    assert all(any(a < i for a in approvals) for i in destructive), (name, destructive, approvals)
    once = scenario.get("created_once") or {}
    if "eks" in once:
        assert len(twin_client(served, "eks").list_clusters()["clusters"]) == once["eks"]  # type: ignore[arg-type]
    if "hyperpod" in once:
        hyperpod = twin_client(served, "sagemaker").list_clusters()["ClusterSummaries"]  # type: ignore[arg-type]
        assert len(hyperpod) == once["hyperpod"]

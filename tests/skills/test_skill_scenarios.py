"""Every skill's scenario replayed over MCP against one control plane on the twin (shared by the module, in
the order a user would go: create, capacity, features, then the diagnostics)."""

from __future__ import annotations

from pathlib import Path

import pytest

from instantstart.catalog import CATALOG
from instantstart.services import load_all
from instantstart.twin_process import TwinProcess
from tests.skills.replay import Replay, check_scenario
from tests.support.faces import mcp_http
from tests.support.servers import Running
from tests.support.twin import shared_control_plane, twin_client

load_all()
ORDER = [
    "create-cluster",
    "capacity",
    "advanced-features",
    "diagnose-node-health",
    "diagnose-nccl",
    "diagnose-cluster-creation",
]


# One control plane on a clean twin for the whole module.
shared_cp = shared_control_plane()


@pytest.mark.parametrize("name", ORDER)
async def test_skill_scenario_reaches_its_end_condition(
    name: str, shared_cp: Running, twin_process: TwinProcess
) -> None:
    from instantstart.skills import SKILLS_DIR, load_skill

    skill = load_skill(Path(SKILLS_DIR) / name / "SKILL.md")
    scenario = skill.scenario()
    diagnostic = name.startswith("diagnose-")
    check_scenario(name, scenario, diagnostic=diagnostic)
    async with mcp_http(shared_cp) as session:
        replay = Replay(session, twin_process.endpoint_url)
        await replay.run(name, "setup", scenario.get("setup") or [])
        before = len(replay.called)
        await replay.run(name, "steps", scenario["steps"])
    called = replay.called[before:]
    # Every tool the replay called is one the skill names (wait_seconds is the polling primitive).
    assert set(called) - {"wait_seconds"} <= skill.tool_names(), set(called) - skill.tool_names()
    if diagnostic:
        approval = next(i for i, s in enumerate(scenario["steps"]) if "approval" in s)
        read_steps = [s.get("call") or s.get("poll") for s in scenario["steps"][:approval]]
        assert all(CATALOG.get(t).read_only for t in read_steps if t), read_steps  # type: ignore[union-attr]
    once = scenario.get("created_once") or {}
    if "eks" in once:
        assert len(twin_client(twin_process, "eks").list_clusters()["clusters"]) == once["eks"]
    if "hyperpod" in once:
        assert len(twin_client(twin_process, "sagemaker").list_clusters()["ClusterSummaries"]) == once["hyperpod"]

"""Skill evals without a server: tools named exist, example calls validate, scenarios hold the policies, agent
configurations auto-approve read-only tools only (nothing side-effecting, mutating or destructive), and the catalog
carries its annotations."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from instantstart.catalog import CATALOG
from instantstart.catalog.groups import GROUP_DESCRIPTIONS
from instantstart.catalog.schema import arguments_schema
from instantstart.cli.agent_config import auto_approved, write_config
from instantstart.cli.main import build_app
from instantstart.mcp.tools import tool_for
from instantstart.services import load_all
from instantstart.settings import Settings
from instantstart.skills import SKILLS_DIR, all_skills
from tests.skills.replay import ScenarioError, check_scenario

load_all()
REPO = Path(__file__).resolve().parents[2]
SKILLS = all_skills()
REQUIRED = {
    "create-cluster",
    "capacity",
    "advanced-features",
    "deploy-model",
    "train",
    "diagnose-node-health",
    "diagnose-nccl",
    "diagnose-cluster-creation",
}


def test_the_required_skills_ship_in_the_package_and_at_the_repository_root() -> None:
    assert {s.name for s in SKILLS} >= REQUIRED
    assert (REPO / "skills").resolve() == SKILLS_DIR
    for skill in SKILLS:
        assert skill.description.startswith("Use when"), skill.name
        assert (skill.path.parent / "scenario.yaml").is_file(), skill.name


@pytest.mark.parametrize("skill", SKILLS, ids=lambda s: s.name)
def test_every_tool_a_skill_names_exists(skill) -> None:  # type: ignore[no-untyped-def]
    names = skill.tool_names()
    assert names, skill.name
    missing = sorted(n for n in names if CATALOG.get(n) is None)
    assert not missing, f"{skill.name} names tools that do not exist: {missing}"


@pytest.mark.parametrize("skill", SKILLS, ids=lambda s: s.name)
def test_every_example_call_validates_against_its_schema(skill) -> None:  # type: ignore[no-untyped-def]
    for call in skill.example_calls():
        spec = CATALOG.get(call["tool"])
        assert spec is not None, call
        jsonschema.validate(call.get("arguments", {}), arguments_schema(spec.input_model))
        spec.input_model.model_validate(call.get("arguments", {}))


@pytest.mark.parametrize("skill", SKILLS, ids=lambda s: s.name)
def test_every_scenario_validates_and_keeps_the_approval_policy(skill) -> None:  # type: ignore[no-untyped-def]
    check_scenario(skill.name, skill.scenario(), diagnostic=skill.name.startswith("diagnose-"))


def test_a_wrong_parameter_name_fails_the_eval_with_a_clear_message() -> None:
    skill = next(s for s in SKILLS if s.name == "create-cluster")
    broken = copy.deepcopy(skill.scenario())
    step = next(s for s in broken["steps"] if s.get("call") == "cluster_create_eks")
    step["args"] = {"clustertag": "demo"}
    with pytest.raises(ScenarioError) as caught:
        check_scenario(skill.name, broken, diagnostic=False)
    message = str(caught.value)
    assert "create-cluster" in message and "cluster_create_eks" in message and "'clustertag'" in message


def test_a_state_change_before_approval_fails_a_diagnostic_scenario() -> None:
    skill = next(s for s in SKILLS if s.name == "diagnose-node-health")
    broken = copy.deepcopy(skill.scenario())
    broken["steps"].insert(0, {"call": "hyperpod_node_reboot", "args": {"nodeId": "i-0123456789abcdef0"}})
    with pytest.raises(ScenarioError, match="changes state before the approval point"):
        check_scenario(skill.name, broken, diagnostic=True)


@pytest.mark.parametrize("target", ["kiro", "claude-code", "mcp-json"])
def test_agent_config_lists_the_server_and_skills_and_auto_approves_read_only_tools_only(
    target: str, tmp_path: Path
) -> None:
    result = CliRunner().invoke(
        build_app(Settings(data_dir=tmp_path / "d")), ["agent-config", target, "--dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    mcp_servers = json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"] if target != "kiro" else None
    approved: list[str] = []
    if target == "kiro":
        agent = json.loads((tmp_path / ".kiro/agents/hypd-inst-agent.json").read_text())
        assert agent["name"] == "hypd-inst-agent"
        assert agent["mcpServers"]["hypd-inst"]["args"] == ["mcp"]
        assert {r.split("/")[-2] for r in agent["resources"]} >= REQUIRED
        for resource in agent["resources"]:
            assert (tmp_path / resource.removeprefix("file://")).is_file()
        approved = [a.removeprefix("@hypd-inst/") for a in agent["allowedTools"]]
    else:
        assert mcp_servers is not None and "hypd-inst" in mcp_servers
    if target == "claude-code":
        settings = json.loads((tmp_path / ".claude/settings.json").read_text())
        approved = [a.removeprefix("mcp__hypd-inst__") for a in settings["permissions"]["allow"]]
        assert {p.name for p in (tmp_path / ".claude/skills").iterdir()} >= REQUIRED
    for name in approved:
        spec = CATALOG.get(name)
        assert spec is not None and spec.behaviour == "read-only" and not spec.destructive, name
    if target != "mcp-json":
        assert "cluster_get_status" in approved and "inference_call_model" not in approved, approved
        side_effecting = {s.name for s in CATALOG if s.behaviour == "side-effecting"}
        assert side_effecting and not side_effecting & set(approved), side_effecting & set(approved)
    assert not any(CATALOG.get(n).destructive for n in auto_approved(CATALOG))  # type: ignore[union-attr]


def test_write_config_refuses_an_unknown_target(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="kiro, claude-code, mcp-json"):
        write_config("vscode", tmp_path, CATALOG)


def test_every_tool_carries_annotations_and_hyperpod_create_lists_its_aliases() -> None:
    for spec in CATALOG:
        annotations = tool_for(spec).annotations
        assert annotations is not None
        assert annotations.read_only_hint is spec.read_only, spec.name
        assert annotations.open_world_hint is (spec.behaviour != "read-only"), spec.name
        assert annotations.destructive_hint is spec.destructive and annotations.idempotent_hint is spec.idempotent
    for name in ("cluster_delete", "hyperpod_node_replace", "hyperpod_node_delete", "hyperpod_delete_instance_group"):
        assert CATALOG.get(name).destructive, name  # type: ignore[union-attr]
    schema = tool_for(CATALOG.get("hyperpod_create")).input_schema  # type: ignore[arg-type]
    for alias in (
        "AcceleratedInstanceType",
        "AcceleratedInstanceCount",
        "initInstanceGroupTag",
        "AcceleratedEBSVolumeSize",
    ):
        assert alias in schema["properties"], alias
    legacy = {
        "AcceleratedInstanceType": "ml.g6.4xlarge",
        "AcceleratedInstanceCount": 1,
        "availabilityZone": "us-west-2c",
    }
    jsonschema.validate(legacy, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**legacy, "bogus": 1}, schema)


def test_cli_short_help_is_the_first_sentence_and_groups_have_descriptions() -> None:
    for spec in CATALOG:
        assert spec.summary.endswith((".", "!", "?")), (spec.name, spec.summary)
        if spec.read_only:  # read-only said exactly once, so the description fits an agent's context
            assert spec.tool_description.lower().count("read-only") == 1, (spec.name, spec.tool_description)
        assert spec.tool_description.startswith(spec.summary.split(" ")[0]), spec.name
        if spec.handler.__module__.startswith("instantstart."):  # plugins (test probes) bring their own groups
            assert spec.cli_group in GROUP_DESCRIPTIONS, spec.cli_group
    karpenter = CATALOG.get("hyperpod_get_creation_status")
    assert karpenter is not None and karpenter.summary.endswith("right now.")
    import typer

    command = typer.main.get_command(build_app(Settings()))
    groups = command.commands  # type: ignore[attr-defined]
    assert groups["cluster"].help == GROUP_DESCRIPTIONS["cluster"]
    assert groups["operation"].help == GROUP_DESCRIPTIONS["operation"]
    spec = CATALOG.get("hyperpod_node_replace")
    assert spec is not None
    assert groups["hyperpod"].commands["node-replace"].short_help == spec.summary


def test_a_scenario_that_stops_at_its_approval_point_fails_the_eval() -> None:
    skill = next(s for s in SKILLS if s.name == "diagnose-nccl")
    broken = copy.deepcopy(skill.scenario())
    last = max(i for i, s in enumerate(broken["steps"]) if "approval" in s)
    broken["steps"] = broken["steps"][: last + 1]
    with pytest.raises(ScenarioError, match="stops at its approval point"):
        check_scenario(skill.name, broken, diagnostic=True)


@pytest.mark.parametrize("skill", SKILLS, ids=lambda s: s.name)
def test_every_skill_states_goal_questions_sequence_polling_confirmation_resume_and_what_is_forbidden(
    skill,  # type: ignore[no-untyped-def]
) -> None:
    headings = [line[3:].lower() for line in skill.body.splitlines() if line.startswith("## ")]
    for required in ("goal", "resume", "forbidden"):
        assert any(h.startswith(required) for h in headings), (skill.name, required, headings)
    text = skill.body.lower()
    assert "wait_seconds" in text and "terminal" in text, skill.name  # the poll-to-terminal rule
    if skill.name.startswith("diagnose-"):
        assert any(h.startswith("investigate (read-only") for h in headings), skill.name
        assert "approv" in text, skill.name  # state-changing steps wait for approval
    else:
        assert any(h.startswith("ask only") for h in headings), (skill.name, headings)
        assert any(h.startswith("confirm") for h in headings), (skill.name, headings)


def test_the_openapi_document_marks_every_operation_as_the_mcp_annotations_do() -> None:
    from instantstart.api.openapi import build_openapi

    operations = {
        op["operationId"]: op for item in build_openapi(CATALOG)["paths"].values() for op in item.values()
    }
    assert set(operations) == {spec.name for spec in CATALOG}
    for spec in CATALOG:
        assert operations[spec.name]["x-instantstart-behaviour"] == {
            "class": spec.behaviour, "readOnly": spec.read_only, "openWorld": spec.open_world,
            "destructive": spec.destructive, "idempotent": spec.idempotent,
        }, spec.name
    assert operations["inference_call_model"]["x-instantstart-behaviour"]["class"] == "side-effecting"
    events, timeline = operations["cluster_events"], operations["cluster_timeline"]
    # The compatibility name answers with the same model as the timeline it aliases.
    assert events["responses"]["200"] == timeline["responses"]["200"]

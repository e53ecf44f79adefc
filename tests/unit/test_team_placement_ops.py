"""Every operation by which a member submits a workload places it by team (services/teams/placement.py) before it
looks at the cluster: a member of two teams of the cluster who names no namespace is asked which team's, and a
member who names another namespace is refused FORBIDDEN naming theirs. Through the catalog's invoke (as every face
calls), on a real store. (inference_deploy_container, which first looks for an idempotent replay in the
operation runner, is checked over MCP in tests/integration/test_teams.py.)"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import instantstart.services as services
from instantstart.catalog.invoke import invoke_spec
from instantstart.catalog.registry import CATALOG
from instantstart.context import CallContext, Owned
from instantstart.errors import Forbidden, InvalidInput
from instantstart.principal import Principal
from instantstart.services.access.users import create_user
from instantstart.settings import Settings
from instantstart.store import teams
from instantstart.store.db import Database
from instantstart.store.models import ClusterRow, utcnow

WORKLOADS = {
    "training_job_submit": {"jobName": "j", "image": "example/train:1", "command": "train.py",
                            "instanceType": "ml.g5.12xlarge"},
    "training_recipe_submit": {"recipe": "verl", "jobName": "rl2", "instanceType": "ml.g5.12xlarge"},
    "ray_job_submit": {"jobName": "rl", "image": "example/ray:1", "entrypoint": "python3 train.py",
                       "instanceType": "ml.g5.12xlarge"},
    "inference_jumpstart_deploy": {"modelId": "huggingface-llm-qwen2-5-7b-instruct", "instanceType": "ml.g5.12xlarge"},
    "inference_managed_deploy": {"name": "qwen", "modelName": "qwen", "image": "vllm/vllm-openai:v0.11.0",
                                 "instanceType": "ml.g5.12xlarge", "gpuCount": 1,
                                 "modelSource": {"type": "huggingface", "huggingFaceModelId": "Qwen/Qwen3-0.6B"}},
}


@pytest.fixture
def db(tmp_path: Path) -> Database:
    database = Database(f"sqlite:///{tmp_path / 'state.db'}")
    database.migrate()
    with database.session() as session:
        session.add(ClusterRow(tag="c1", region="us-west-2", eks_cluster_name="c1-eks", hyperpod_cluster_name="c1-hp"))
    for name, role in (("alice", "member"), ("bob", "member")):
        create_user(database, name, role, "admin")
    for team, members in (("a", ["alice"]), ("b", ["alice", "bob"])):
        teams.save_team(database, teams.Team(team, "c1", f"q{team}", {"instanceType": "ml.g5.12xlarge",
                                                                      "accelerators": 2}, members, "opal", utcnow()))
    return database


@pytest.mark.parametrize("name", sorted(WORKLOADS))
async def test_a_member_workload_is_placed_by_team(db: Database, tmp_path: Path, name: str) -> None:
    services.load_all()
    spec = CATALOG.get(name)
    app: Any = SimpleNamespace(db=db, owned=Owned(), settings=Settings(data_dir=tmp_path))
    as_alice = CallContext(app=app, principal=Principal("alice", "member", "main"))
    with pytest.raises(InvalidInput) as which:
        await invoke_spec(spec, {**WORKLOADS[name], "clusterTag": "c1"}, as_alice)
    assert "member of 2 teams" in str(which.value) and "hyperpod-ns-a, hyperpod-ns-b" in str(which.value.hint)
    as_bob = CallContext(app=app, principal=Principal("bob", "member", "main"))
    with pytest.raises(Forbidden) as outside:
        await invoke_spec(spec, {**WORKLOADS[name], "clusterTag": "c1", "namespace": "hyperpod-ns-a"}, as_bob)
    assert "hyperpod-ns-b" in str(outside.value.hint)

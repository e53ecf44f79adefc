"""A recognisable secret sent through every face (REST, MCP over HTTP and stdio, CLI) reaches the Kubernetes
Secret on a twin EKS cluster and nothing else: not the SQLite file (with its WAL), the server log, any
response, the operation views, the OpenAPI document or the MCP tool list."""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client

from instantstart.aws.clients import AwsClients
from instantstart.kube.apply import read_object
from instantstart.kube.client import KubeClients
from instantstart.settings import Settings
from instantstart.twin_process import TwinProcess
from tests.support.servers import REPO, process_server
from tests.support.twin import twin_client
from tests.support.waits import wait_terminal


def secret_body(namespace: str, name: str) -> dict[str, Any]:
    """Names a v1 Secret (this module must not import tests.support.secret_ops: importing it registers
    its operation in this process's catalog, which the faces tests enumerate)."""
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}}


PLUGINS = '["tests.support.probe_ops", "tests.support.secret_ops"]'


def active_eks_cluster(twin: TwinProcess, name: str) -> None:
    """An ACTIVE EKS cluster on the twin, made directly (as someone else's cluster would be)."""
    ec2: Any = twin_client(twin, "ec2")
    vpc = ec2.create_vpc(CidrBlock="10.61.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.61.{i}.0/24", AvailabilityZone=f"us-west-2{z}")["Subnet"][
            "SubnetId"
        ]
        for i, z in enumerate("ab")
    ]
    iam: Any = twin_client(twin, "iam")
    role = iam.create_role(RoleName="secret-probe-eks", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    eks: Any = twin_client(twin, "eks")
    eks.create_cluster(name=name, roleArn=role, resourcesVpcConfig={"subnetIds": subnets})
    deadline = time.monotonic() + 60
    while eks.describe_cluster(name=name)["cluster"]["status"] != "ACTIVE":
        assert time.monotonic() < deadline, "the twin's EKS cluster did not become ACTIVE"
        time.sleep(0.05)


def tool_json(result: Any) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads(result.content[0].text)
    return payload


async def test_a_secret_reaches_the_kubernetes_secret_and_nowhere_else(
    twin: TwinProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in twin.env.items():
        monkeypatch.setenv(key, value)
    active_eks_cluster(twin, "secrets")
    values = {face: f"SeKrEt-{face}-{secrets.token_hex(12)}" for face in ("rest", "tool", "mcp", "stdio", "cli")}
    texts: list[str] = []  # every response body and CLI/stdio output
    log_path = tmp_path / "server.log"
    db_file = tmp_path / "state.db"
    env = {
        **twin.env,
        "INSTANTSTART_AWS_ENDPOINT_URL": twin.endpoint_url,
        "INSTANTSTART_PLUGINS": PLUGINS,
        "INSTANTSTART_LOG_JSON": "true",
    }
    with process_server(tmp_path / "data", f"sqlite:///{db_file}", log_path=log_path, extra_env=env) as (cp, _):
        refs: dict[str, str] = {}

        def body(face: str) -> dict[str, Any]:
            return {"eksClusterName": "secrets", "secretName": f"tok-{face}", "token": values[face]}

        with cp.client() as client:
            rest = client.post("/api/v1/test/secret-probe", json=body("rest"), headers={"Idempotency-Key": "sg-1"})
            again = client.post("/api/v1/test/secret-probe", json=body("rest"), headers={"Idempotency-Key": "sg-1"})
            tool = client.post("/api/v1/tools/secret_probe_store", json=body("tool"))
            invalid = client.post("/api/v1/test/secret-probe", json={**body("rest"), "namespace": "Not_Valid"})
            for response in (rest, again, tool, invalid):
                texts.append(response.text)
            assert rest.status_code == 202, rest.text
            assert again.json()["operationId"] == rest.json()["operationId"]
            assert invalid.status_code == 422
            assert invalid.json()["error"]["details"]["fields"][0]["field"] == "namespace"
            refs["rest"], refs["tool"] = rest.json()["operationId"], tool.json()["operationId"]
        headers = {"Authorization": f"Bearer {cp.token}"}
        async with (
            streamablehttp_client(cp.url + "/mcp", headers=headers) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            answer = await session.call_tool("secret_probe_store", body("mcp"))
            texts.append(answer.content[0].text)
            assert not answer.isError, answer.content[0].text
            refs["mcp"] = tool_json(answer)["operationId"]
            texts.append(json.dumps([t.model_dump() for t in (await session.list_tools()).tools]))
        stdio_env = {**cp.env(), **env, "PYTHONPATH": str(REPO)}
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "instantstart.cli.main", "mcp"], env=stdio_env, cwd=str(REPO)
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            answer = await session.call_tool("secret_probe_store", body("stdio"))
            texts.append(answer.content[0].text)
            assert not answer.isError, answer.content[0].text
            refs["stdio"] = tool_json(answer)["operationId"]
        # The CLI takes the secret from its environment variable (never from argv).
        cli = subprocess.run(
            [
                sys.executable,
                "-m",
                "instantstart.cli.main",
                "secret",
                "probe-store",
                "-o",
                "json",
                "--eks-cluster-name",
                "secrets",
                "--secret-name",
                "tok-cli",
            ],
            env={**stdio_env, "INSTANTSTART_TOKEN": values["cli"]},
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        texts += [cli.stdout, cli.stderr]
        assert cli.returncode == 0, cli.stderr
        refs["cli"] = json.loads(cli.stdout)["operationId"]
        help_text = subprocess.run(
            [sys.executable, "-m", "instantstart.cli.main", "secret", "probe-store", "--help"],
            env={**stdio_env, "INSTANTSTART_TOKEN": values["cli"]},
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        texts.append(help_text.stdout)
        assert "INSTANTSTART_TOKEN" in help_text.stdout
        with cp.client() as client:
            for operation_id in refs.values():
                view = wait_terminal(client, operation_id, timeout=60)
                assert view["status"] == "SUCCEEDED", view
                assert view["result"]["verify"]["keys"] == ["token"], view
                assert "token" not in view["params"]
            listing = client.get("/api/v1/operations", params={"limit": 50})
            openapi = client.get("/api/v1/openapi.json")
            metrics = client.get("/metrics")
            texts += [listing.text, openapi.text, metrics.text]
            assert listing.json()["total"] == len(refs)
            schema = openapi.json()["paths"]["/api/v1/test/secret-probe"]["post"]["requestBody"]
            assert schema["content"]["application/json"]["schema"]["properties"]["token"]["writeOnly"] is True

    # The one place the value lives: each face's Kubernetes Secret.
    kube = KubeClients(AwsClients(Settings(aws_endpoint_url=twin.endpoint_url, aws_region=twin.env["AWS_REGION"])))
    api = kube.api_client("secrets")
    for face, value in values.items():
        live = read_object(api, secret_body("default", f"tok-{face}"))
        assert live is not None and base64.b64decode(live["data"]["token"]).decode() == value

    stored = b"".join(p.read_bytes() for p in tmp_path.glob("state.db*"))
    log_text = log_path.read_text()
    assert "secret probe writing token=" in log_text  # the careless line was written, redacted
    haystacks = {"database": stored.decode("latin-1"), "log": log_text, "responses": "\n".join(texts)}
    for face, value in values.items():
        encoded = base64.b64encode(value.encode()).decode()
        for where, text in haystacks.items():
            assert value not in text, f"the {face} secret leaked into the {where}"
            assert encoded not in text, f"the {face} secret leaked (base64) into the {where}"
    assert os.stat(db_file).st_mode & 0o077 == 0

"""The agent path through an MCP client: from an empty account to a verified cluster with storage mounted."""

from __future__ import annotations

import json
from typing import Any

from mcp import ClientSession

from instantstart.twin_process import TwinProcess
from tests.support.faces import mcp_http
from tests.support.servers import Running


async def call(session: ClientSession, tool: str, **args: Any) -> dict[str, Any]:
    """One tool call; its JSON payload (asserting it is not an error)."""
    result = await session.call_tool(tool, args)
    payload: dict[str, Any] = json.loads(result.content[0].text)
    assert not result.is_error, (tool, payload)
    return payload


async def poll(session: ClientSession, status_tool: str, done: Any, limit: int = 120, **args: Any) -> dict[str, Any]:
    """Poll a status tool with wait_seconds in between, as an agent does, until `done(status)`."""
    for _ in range(limit):
        status = await call(session, status_tool, **args)
        if done(status):
            return status
        await call(session, "wait_seconds", seconds=1)
    raise AssertionError(f"{status_tool} never finished: {status}")


async def test_agent_path_over_mcp(cp: Running, twin: TwinProcess) -> None:
    async with mcp_http(cp) as mcp:
        assert (await call(mcp, "cluster_list_all"))["count"] == 0
        ref = await call(mcp, "cluster_create_eks", clusterTag="agent", clientToken="agent-eks-1")
        assert ref["statusTool"] == "cluster_get_eks_creation_status"
        eks = await poll(mcp, "cluster_get_eks_creation_status", lambda s: s["terminal"], clusterTag="agent")
        assert eks["state"] == "SUCCEEDED", eks
        switch = await call(mcp, "cluster_switch", clusterTag="agent")
        await poll(mcp, "operation_get", lambda s: s["status"] == "SUCCEEDED", operationId=switch["operationId"])
        deps = await call(mcp, "cluster_configure_dependencies")
        status = await poll(
            mcp, "operation_get", lambda s: s["status"] in ("SUCCEEDED", "FAILED"), operationId=deps["operationId"]
        )
        assert status["status"] == "SUCCEEDED", status
        dependency_status = await call(mcp, "cluster_get_dependency_status")
        assert dependency_status, dependency_status
        hp = await call(
            mcp,
            "hyperpod_create",
            availabilityZone="us-west-2c",
            AcceleratedInstanceType="ml.g6.4xlarge",
            AcceleratedInstanceCount=1,
        )
        assert hp["statusTool"] == "hyperpod_get_creation_status"
        created = await poll(mcp, "hyperpod_get_creation_status", lambda s: s["terminal"])
        assert created["state"] == "SUCCEEDED", created
        storage = await call(mcp, "s3_storage_create")
        await poll(mcp, "operation_get", lambda s: s["status"] == "SUCCEEDED", operationId=storage["operationId"])
        cluster = await call(mcp, "cluster_get_status")
    nodes = cluster["nodes"]
    assert len(nodes) == 1 and cluster["nodesReadySchedulable"] == 1, cluster
    assert nodes[0]["ready"] is True and nodes[0]["schedulable"] is True and nodes[0]["gpus"] == 1
    g6 = next(a for a in cluster["accelerators"] if a["instanceType"] == "ml.g6.4xlarge")
    assert g6["gpuTotal"] == 1 and g6["gpuAvailable"] == 1
    claim = next(c for c in cluster["storage"] if c["name"] == "s3-claim")
    assert claim["bound"] is True and claim["phase"] == "Bound"
    assert cluster["ready"] is True, cluster["problems"]

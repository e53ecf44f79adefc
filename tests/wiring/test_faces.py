"""The four faces agree: same tools, same input schema, same validation error text, same result."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_MODERN_VERSION

from instantstart.catalog import CATALOG
from instantstart.catalog.registry import OperationSpec
from instantstart.mcp.tools import SERVER_NAME, tool_for, tool_input_schema
from instantstart.services import load_all
from instantstart.store.db import Database
from instantstart.store.models import ClusterRow
from tests.support.faces import (
    call_cli,
    call_rest,
    call_tool_route,
    mcp_client_http,
    mcp_client_stdio,
    mcp_http,
    mcp_http_raw,
    mcp_stdio,
    tool_payload,
)
from tests.support.servers import Running
from tests.support.waits import wait_terminal

load_all()


def seed_cluster(running: Running, tag: str = "demo") -> None:
    """A cluster row, as cluster creation or import would leave it."""
    db = Database(running.database_url)
    with db.session() as session:
        session.add(
            ClusterRow(
                tag=tag,
                region="us-west-2",
                eks_cluster_name=f"eks-cluster-{tag}",
                hyperpod_cluster_name=f"hp-cluster-{tag}",
                stages={"eks": "SUCCEEDED"},
                details={},
            )
        )
    db.dispose()


def violation(spec: OperationSpec) -> tuple[str, Any] | None:
    """A (field, value) that breaks one of the input model's constraints, derived from its JSON Schema."""
    schema = tool_input_schema(spec)
    for name, prop in schema["properties"].items():
        if name == "clientToken":
            continue
        if "maximum" in prop:
            return name, prop["maximum"] + 1
        if "minimum" in prop:
            return name, prop["minimum"] - 1
        if "pattern" in prop:
            return name, "Not Valid!"
        if "minLength" in prop:
            return name, ""
        for option in prop.get("anyOf", [prop]):
            if option.get("type") == "integer":
                return name, "not-a-number"
    return None


def specs() -> list[OperationSpec]:
    return list(CATALOG)


async def test_every_face_lists_the_same_tools_with_the_same_schemas(server: Running) -> None:
    async with mcp_http(server) as http_session, mcp_stdio(server) as stdio_session:
        assert http_session  # initialized
        http_tools = {t.name: t for t in (await http_session.list_tools()).tools}
        stdio_tools = {t.name: t for t in (await stdio_session.list_tools()).tools}
    names = {spec.name for spec in CATALOG}
    assert set(http_tools) == names == set(stdio_tools)
    with server.client() as client:
        openapi = client.get("/api/v1/openapi.json").json()
    routes = {op["operationId"] for item in openapi["paths"].values() for op in item.values()}
    assert routes == names
    for spec in CATALOG:
        assert http_tools[spec.name].input_schema == stdio_tools[spec.name].input_schema == tool_input_schema(spec)
        assert http_tools[spec.name].description == spec.tool_description
        annotations = tool_for(spec).annotations
        assert http_tools[spec.name].annotations == stdio_tools[spec.name].annotations == annotations, spec.name
        if spec.mutating:
            assert spec.completion and spec.completion in http_tools[spec.name].description


async def test_server_name_is_hypd_inst(server: Running) -> None:
    async with mcp_http_raw(server) as session:
        init = await session.initialize()
    assert init.server_info.name == SERVER_NAME


async def test_current_protocol_clients_see_what_handshake_clients_see(server: Running) -> None:
    """The SDK's default client negotiates the newest protocol (no initialize handshake) over both transports;
    it must list the same tools and get the same payloads as a client that did the handshake."""
    async with mcp_http(server) as legacy, mcp_client_http(server) as http, mcp_client_stdio(server) as stdio:
        assert legacy.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
        assert http.protocol_version == stdio.protocol_version == LATEST_MODERN_VERSION

        def shape(tools: Any) -> list[tuple[Any, ...]]:
            return [(t.name, t.description, t.input_schema, t.annotations) for t in tools.tools]

        expected = shape(await legacy.list_tools())
        assert len(expected) == len(CATALOG)
        assert shape(await http.list_tools()) == expected == shape(await stdio.list_tools())

        spec = next(s for s in specs() if not s.mutating and violation(s) is not None)
        field, value = violation(spec)  # type: ignore[misc]
        calls = [("cluster_list_all", {}), ("no_such_tool", {}), (spec.name, {**spec.example, field: value})]
        for name, args in calls:
            want = tool_payload(await legacy.call_tool(name, args))
            assert tool_payload(await http.call_tool(name, args)) == want, name
            assert tool_payload(await stdio.call_tool(name, args)) == want, name
        assert want["error"]["code"] == "INVALID_INPUT" and field in want["error"]["message"], want


async def test_faces_agree_on_validation_errors_and_results(cp: Running, tmp_path: Any) -> None:
    """Against the control plane on the twin, so operations that call AWS give real answers."""
    server = cp
    seed_cluster(server)
    async with mcp_http(server) as http_session, mcp_stdio(server) as stdio_session:

        async def all_faces(spec: OperationSpec, args: dict[str, Any], *, cli: bool = True) -> list[dict[str, Any]]:
            results = [
                call_rest(server, spec, args),
                call_tool_route(server, spec, args),
                tool_payload(await http_session.call_tool(spec.name, args)),
                tool_payload(await stdio_session.call_tool(spec.name, args)),
            ]
            if cli:
                results.append(call_cli(server, spec, args))
            return results

        # Reads first (their results must not change between faces), then mutations.
        ordered = sorted(specs(), key=lambda s: (s.mutating, s.name))
        for spec in ordered:
            example = dict(spec.example)
            if spec.name == "probe_run":
                example["journalDir"] = str(tmp_path / "probe")
            # 1. An unknown field: the same INVALID_INPUT text everywhere (the CLI cannot send one).
            bogus = await all_faces(spec, {**example, "bogusField": 1}, cli=False)
            assert all(r == bogus[0] for r in bogus), (spec.name, bogus)
            assert bogus[0]["error"]["code"] == "INVALID_INPUT"
            assert "bogusField" in bogus[0]["error"]["message"]
            # 2. A value that breaks a constraint: the same text on all five faces.
            broken = violation(spec)
            if broken is not None:
                field, value = broken
                bad = await all_faces(spec, {**example, field: value})
                assert all(r == bad[0] for r in bad), (spec.name, bad)
                assert bad[0]["error"]["code"] == "INVALID_INPUT" and field in bad[0]["error"]["message"]
            # 3. The valid example: the same result everywhere (mutations share one clientToken).
            args = {**example, "clientToken": f"faces-{spec.name}"} if spec.mutating else example
            good = await all_faces(spec, args)
            if spec.mutating and "error" not in good[0]:
                # An idempotent replay reports the operation's current status, which moves on.
                good = [{k: v for k, v in r.items() if k != "status"} for r in good]
            assert all(r == good[0] for r in good), (spec.name, good)
            if spec.mutating and "error" not in good[0]:
                assert set(good[0]) == {"operationId", "statusTool", "pollAfterSeconds"}
                assert good[0]["statusTool"] == spec.completion
                # Stop it at once: a mutation left running (cluster_create reaching its activate stage)
                # would change what later tools see between one face and the next.
                # And wait until it has ended: one still holding its lock (alert_channels_update on state:alerts)
                # would make the next operation's first face answer CONFLICT and the others not.
                with server.client() as client:
                    client.post(f"/api/v1/operations/{good[0]['operationId']}/cancel")
                    wait_terminal(client, good[0]["operationId"])


@pytest.mark.parametrize("python", [sys.executable])
def test_catalog_covers_the_compatibility_tools_built_so_far(python: str) -> None:
    names = {spec.name for spec in CATALOG}
    assert {
        "wait_seconds",
        "cluster_list_all",
        "cluster_switch",
        "operation_get",
        "operation_list",
        "operation_retry",
        "operation_cancel",
    } <= names

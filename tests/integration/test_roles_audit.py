"""Users, roles, tokens and the audit trail: the role table over every operation and face, token lifecycle."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from sqlalchemy import update

from instantstart.catalog import CATALOG
from instantstart.catalog.roles import RULES, rule_for
from instantstart.principal import ROLES, role_rank
from instantstart.services import load_all
from instantstart.store.access import TokenRow
from instantstart.store.db import Database
from instantstart.store.models import utcnow
from tests.support.faces import call_cli, mcp_http, stdio_params, tool_payload
from tests.support.servers import Running

load_all()

BOGUS = {"bogusField": 1}  # refused by every input model: an allowed call fails validation, changing nothing


def post(running: Running, name: str, args: dict[str, Any], token: str | None = None) -> tuple[int, dict[str, Any]]:
    """Call a tool over REST as the holder of `token` (default: the bootstrap admin)."""
    who = dataclasses.replace(running, token=token or running.token)
    with who.client() as client:
        response = client.post(f"/api/v1/tools/{name}", json=args)
    return response.status_code, response.json()


def make_user(running: Running, name: str, role: str) -> str:
    """Create a user with a role and return a fresh token of theirs."""
    assert post(running, "user_create", {"name": name, "role": role})[0] == 200
    status, created = post(running, "token_create", {"name": "main", "user": name})
    assert status == 200, created
    return str(created["token"])


def expected(name: str, role: str) -> bool:
    """Whether `role` may call the operation `name` (own-token operations: on your own tokens)."""
    spec = CATALOG.get(name)
    assert spec is not None
    return role_rank(role) >= role_rank(rule_for(spec).role)


def check_denial(payload: dict[str, Any], name: str) -> None:
    error = payload["error"]
    needed = rule_for(CATALOG.get(name)).role  # type: ignore[arg-type]
    assert error["code"] == "FORBIDDEN", (name, error)
    assert needed in error["message"] and needed in error["hint"], error
    assert error["details"]["requiredRole"] == needed


def test_every_builtin_operation_declares_a_role_and_the_roles_keep_their_promises() -> None:
    names = {spec.name for spec in CATALOG if not spec.name.startswith("probe_")}
    assert names <= set(RULES), f"operations without a role: {sorted(names - set(RULES))}"
    for spec in CATALOG:
        if spec.name not in names:
            continue
        needed = rule_for(spec).role
        if rule_for(spec).own_field is not None:  # your own tokens: every role manages them
            continue
        if not spec.read_only:
            assert needed != "viewer", f"{spec.name} changes or reaches something: not for viewers"
        if spec.side_effecting:
            assert role_rank(needed) >= role_rank("member")
    for name in ("cluster_create", "cluster_delete", "hyperpod_update_advanced_features", "mlflow_configure",
                 "karpenter_install", "storage_delete", "operation_cancel"):
        assert not expected(name, "member") and expected(name, "operator"), name
    for name in ("user_create", "user_update", "user_delete", "user_list", "audit_list"):
        assert not expected(name, "operator") and expected(name, "admin"), name
    # Teams are task governance capacity (compute quotas): operators create, change and delete them (with their
    # member lists); everyone may list them.
    for name in ("team_create", "team_update", "team_delete"):
        assert not expected(name, "member") and expected(name, "operator"), name
    assert expected("team_list", "viewer")
    assert expected("training_job_submit", "member") and not expected("training_job_submit", "viewer")
    assert expected("cluster_get_status", "viewer") and not expected("inference_call_model", "viewer")
    for name in ("user_create", "token_create", "token_revoke"):  # says what it changes, never "Read-only."
        description = CATALOG.get(name).tool_description  # type: ignore[union-attr]
        assert "users and tokens at once" in description and "Read-only" not in description


async def test_the_role_table_holds_over_rest_and_mcp_and_the_audit_trail_records_it(server: Running) -> None:
    """For every operation and role: REST (tool route and resource route for a sample) and MCP over HTTP give
    the same allowed/FORBIDDEN answer; stdio MCP and the CLI for a sample (a subprocess per call is slow)."""
    tokens = {role: make_user(server, f"the-{role}", role) for role in ROLES}
    for role, token in tokens.items():
        rest = {spec.name: post(server, spec.name, BOGUS, token) for spec in CATALOG}
        async with mcp_http(dataclasses.replace(server, token=token)) as session:
            listed = {tool.name for tool in (await session.list_tools()).tools}
            for spec in CATALOG:
                status, payload = rest[spec.name]
                mcp_payload = tool_payload(await session.call_tool(spec.name, BOGUS))
                assert mcp_payload["error"]["code"] == payload["error"]["code"], (role, spec.name)
                if expected(spec.name, role):
                    assert status == 422 and payload["error"]["code"] == "INVALID_INPUT", (role, spec.name, payload)
                    assert spec.name in listed, (role, spec.name)
                else:
                    assert status == 403, (role, spec.name, payload)
                    check_denial(payload, spec.name)
                    check_denial(mcp_payload, spec.name)
                    assert spec.name not in listed, (role, spec.name)
    # The resource route is the same check.
    with dataclasses.replace(server, token=tokens["member"]).client() as client:
        denied = client.post("/api/v1/clusters", json={"clusterTag": "x"}).json()
    check_denial(denied, "cluster_create")

    # The audit trail: who created, who was denied, with which token and through which face.
    _, trail = post(server, "audit_list", {"limit": 1000})
    entries = trail["entries"]
    created = [e for e in entries if e["operation"] == "user_create" and e["outcome"] == "ok"]
    assert {(e["user"], e["tokenName"], e["face"]) for e in created} == {("admin", "bootstrap", "rest")}
    denials = [e for e in entries if e["user"] == "the-member" and e["operation"] == "cluster_create"]
    assert {(e["outcome"], e["errorCode"], e["tokenName"]) for e in denials} == {("denied", "FORBIDDEN", "main")}
    assert {e["face"] for e in denials} == {"rest", "mcp"}
    assert all(e["source"] == "127.0.0.1" for e in denials)
    _, mine = post(server, "audit_list", {"user": "the-viewer", "outcome": "denied"})
    assert mine["entries"] and {e["user"] for e in mine["entries"]} == {"the-viewer"}
    assert post(server, "audit_list", {}, tokens["operator"])[0] == 403

    # stdio MCP and the CLI, as the viewer: a sample of the table.
    env = {**stdio_params(server).env, "INSTANTSTART_API_TOKEN": tokens["viewer"]}  # type: ignore[dict-item]
    params = StdioServerParameters(command=stdio_params(server).command, args=stdio_params(server).args, env=env,
                                   cwd=stdio_params(server).cwd)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = {tool.name for tool in (await session.list_tools()).tools}
        assert listed == {spec.name for spec in CATALOG if expected(spec.name, "viewer")}
        check_denial(tool_payload(await session.call_tool("cluster_delete", {"clusterTag": "demo"})), "cluster_delete")
        assert "clusters" in tool_payload(await session.call_tool("cluster_list_all", {}))
    viewer = dataclasses.replace(server, token=tokens["viewer"])
    cli_denied = call_cli_as(viewer, "inference_call_model", {})
    check_denial(cli_denied, "inference_call_model")
    _, faces = post(server, "audit_list", {"user": "the-viewer", "limit": 1000})
    assert {"mcp", "cli"} <= {e["face"] for e in faces["entries"]}


def call_cli_as(running: Running, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """The CLI with the running's token (INSTANTSTART_API_TOKEN, as a user would set it)."""
    spec = CATALOG.get(name)
    assert spec is not None
    before = os.environ.get("INSTANTSTART_API_TOKEN")
    os.environ["INSTANTSTART_API_TOKEN"] = running.token
    try:
        return call_cli(running, spec, args)
    finally:
        if before is None:
            del os.environ["INSTANTSTART_API_TOKEN"]
        else:
            os.environ["INSTANTSTART_API_TOKEN"] = before


def test_token_lifecycle(server: Running) -> None:
    token = make_user(server, "dana", "member")
    _, me = post(server, "user_me", {}, token)
    assert (me["user"], me["role"], me["tokenName"]) == ("dana", "member", "main")
    assert "training_job_submit" in me["allowedOperations"] and "cluster_create" not in me["allowedOperations"]
    # Listed without the token; the database holds its digest, never the token.
    status, listed = post(server, "token_list", {}, token)
    assert status == 200 and [t["name"] for t in listed["tokens"]] == ["main"]
    assert token not in str(listed) and "token" not in listed["tokens"][0]
    db_file = Path(server.database_url.removeprefix("sqlite:///"))
    with sqlite3.connect(db_file) as conn:
        conn.execute("PRAGMA wal_checkpoint(FULL)")
    assert token.encode() not in db_file.read_bytes()
    # A member manages their own tokens, not another user's.
    status, second = post(server, "token_create", {"name": "laptop", "expiresInDays": 1}, token)
    assert status == 200 and second["user"] == "dana" and second["state"] == "active"
    status, other = post(server, "token_list", {"user": "admin"}, token)
    assert status == 403 and other["error"]["details"]["requiredRole"] == "admin"
    # Expired: refused.
    db = Database(server.database_url)
    with db.session() as session:
        session.execute(update(TokenRow).where(TokenRow.id == second["id"]).values(expires_at=utcnow() - timedelta(1)))
    db.dispose()
    status, refused = post(server, "user_me", {}, second["token"])
    assert status == 401 and refused["error"]["code"] == "UNAUTHORIZED"
    assert {t["name"]: t["state"] for t in post(server, "token_list", {}, token)[1]["tokens"]}["laptop"] == "expired"
    # Revoked: refused from the next request on.
    status, revoked = post(server, "token_revoke", {"name": "main"}, token)
    assert status == 200 and revoked["state"] == "revoked"
    assert post(server, "user_me", {}, token)[0] == 401
    # The role changes with user_update; deleting the user ends every token of theirs.
    fresh = post(server, "token_create", {"name": "again", "user": "dana"})[1]["token"]
    assert post(server, "user_update", {"name": "dana", "role": "viewer"})[0] == 200
    assert post(server, "user_me", {}, fresh)[1]["role"] == "viewer"
    assert post(server, "user_delete", {"name": "dana"})[0] == 200
    assert post(server, "user_me", {}, fresh)[0] == 401
    # The bootstrap admin stays admin.
    assert post(server, "user_update", {"name": "admin", "role": "viewer"})[1]["error"]["code"] == "PRECONDITION_FAILED"


def test_a_web_session_is_the_user_it_signed_in_as_until_the_token_is_revoked(server: Running) -> None:
    token = make_user(server, "erin", "viewer")
    with httpx.Client(base_url=server.url, timeout=30) as browser:
        assert browser.post("/sign-in", data={"token": token}, headers={"Origin": server.url}).status_code == 303
        page = browser.get("/").text
        csrf = page.split('name="csrf-token" content="', 1)[1].split('"', 1)[0]
        me = browser.get("/api/v1/me").json()
        assert (me["user"], me["role"], me["tokenName"]) == ("erin", "viewer", "main")
        refused = browser.post("/api/v1/clusters", json={"clusterTag": "x"}, headers={"X-InstantStart-CSRF": csrf})
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "FORBIDDEN"
        _, trail = post(server, "audit_list", {"user": "erin"})
        assert [(e["face"], e["outcome"]) for e in trail["entries"]] == [("ui", "denied")]
        assert post(server, "token_revoke", {"name": "main", "user": "erin"})[0] == 200
        gone = browser.get("/api/v1/me")
        assert gone.status_code == 401 and "sign in again" in gone.json()["error"]["message"]

"""The three behaviour classes (read-only, side-effecting, mutating): what the decorator refuses, what each class
becomes (annotations, description, auto-approval), and the whole catalog walked against the audited classification."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from instantstart.catalog import CATALOG
from instantstart.catalog.base import NoInput
from instantstart.catalog.registry import MUTATING, READ_ONLY, SIDE_EFFECTING, Catalog, operation
from instantstart.cli.agent_config import auto_approved
from instantstart.mcp.tools import tool_for
from instantstart.services import load_all

load_all()

# The audit (docs/ARCHITECTURE.md, "Behaviour classes"): the only operations that are not mutating yet act outside
# the control plane's own state. Every other non-mutating operation reads and changes nothing.
# User and token management writes the control plane's own tables at once (a token is shown once, so it cannot be
# an operation's stored result): side-effecting, never auto-approved.
# The workspace writes and deletes files of the caller's data in a claim at once (content cannot be an operation's
# stored params): side-effecting, conditional on the ETag.
SIDE_EFFECTING_TOOLS = {"inference_call_model", "token_create", "token_revoke", "user_create", "user_delete",
                        "user_update", "workspace_delete_file", "workspace_write_file"}


class Out(BaseModel):
    """A result."""

    ok: bool = True


def declare(catalog: Catalog, doc: str = "Call something.", **kwargs: Any) -> None:
    """Declare one operation `probe` on `catalog` with the given decorator arguments."""

    async def probe(ctx: Any, req: NoInput) -> Out:
        return Out()

    probe.__doc__ = doc
    operation("probe_call", path="/probe", catalog=catalog, **kwargs)(probe)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"method": "GET", "side_effecting": True}, "a GET is read-only"),
        ({"method": "GET", "mutating": True, "completion": "operation_get", "destructive": False,
          "idempotent": True}, "a GET is read-only"),
        ({"method": "POST", "side_effecting": True, "mutating": True}, "not both"),
        ({"method": "POST", "side_effecting": True, "destructive": True}, "not destructive"),
    ],
)
def test_the_decorator_refuses_a_get_that_acts_and_mixed_classes(kwargs: dict[str, Any], message: str) -> None:
    catalog = Catalog()
    with pytest.raises(ValueError, match=message):
        declare(catalog, **kwargs)
    assert len(catalog) == 0


def test_a_side_effecting_or_mutating_docstring_must_not_claim_read_only() -> None:
    with pytest.raises(ValueError, match="docstring says read-only"):
        declare(Catalog(), "Call a model. Read-only.", method="POST", side_effecting=True)
    with pytest.raises(ValueError, match="docstring says read-only"):
        declare(Catalog(), "Change a thing. Read-only.", method="POST", completion="operation_get",
                destructive=False, idempotent=True)


def test_a_side_effecting_operation_is_open_world_not_read_only_and_never_auto_approved() -> None:
    catalog = Catalog()
    declare(catalog, method="POST", side_effecting=True)
    spec = catalog.get("probe_call")
    assert spec is not None
    assert (spec.behaviour, spec.read_only, spec.open_world, spec.mutating) == (SIDE_EFFECTING, False, True, False)
    assert spec.idempotent is False and spec.destructive is False  # every call acts again (and may be billed)
    assert "Side-effecting" in spec.tool_description and "read-only" not in spec.tool_description.split("not")[0]
    hints = tool_for(spec).annotations
    assert hints is not None and (hints.read_only_hint, hints.open_world_hint) == (False, True)
    assert auto_approved(catalog) == []
    read = Catalog()
    declare(read, method="GET")
    assert auto_approved(read) == ["probe_call"] and read.get("probe_call").open_world is False  # type: ignore[union-attr]


def test_the_catalog_holds_the_audited_classification() -> None:
    by_class: dict[str, set[str]] = {READ_ONLY: set(), SIDE_EFFECTING: set(), MUTATING: set()}
    for spec in CATALOG:
        by_class[spec.behaviour].add(spec.name)
        if spec.method == "GET":
            assert spec.behaviour == READ_ONLY, spec.name
        if spec.behaviour != READ_ONLY:
            assert "read-only" not in spec.description.lower(), spec.name
    assert by_class[SIDE_EFFECTING] == SIDE_EFFECTING_TOOLS
    approved = set(auto_approved(CATALOG))
    assert approved == by_class[READ_ONLY] and not approved & (by_class[SIDE_EFFECTING] | by_class[MUTATING])
    # The non-GET reads: pure computation (lint, wait) or AWS describes (the creation preflight).
    assert {"cluster_plan_create", "inference_managed_lint", "wait_seconds"} <= by_class[READ_ONLY]

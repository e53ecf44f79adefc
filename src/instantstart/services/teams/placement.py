"""Where a member's job (or model server) goes: their team's namespace and Kueue queue by default. A caller who
is a member of one team of the cluster gets its namespace when they name none, and every training job in a team's
namespace gets the team's LocalQueue when it names none. A caller whose role is member and who belongs to teams of
the cluster may submit only into those teams' namespaces (operators and admins anywhere; a member of no team as
before)."""

from __future__ import annotations

from typing import TypeVar

from anyio import to_thread
from pydantic import BaseModel

from instantstart.context import CallContext
from instantstart.errors import Forbidden, InvalidInput
from instantstart.principal import Principal
from instantstart.store import teams as store
from instantstart.store.db import Database


def place(db: Database, principal: Principal | None, tag: str, namespace: str | None,
          queue: str | None) -> tuple[str, str | None]:
    """(namespace, queueName) for a job on cluster `tag`; `namespace` None: the caller named none (blocking)."""
    mine = store.teams_of(db, principal.user, tag) if principal is not None else []
    if namespace is None:
        if len(mine) > 1:
            raise InvalidInput(
                f"Invalid input: namespace: you are a member of {len(mine)} teams on cluster {tag}; name the "
                "namespace of the one to submit for.",
                hint="One of: " + ", ".join(t.namespace for t in mine) + ".")
        namespace = mine[0].namespace if mine else "default"
    if principal is not None and mine and not principal.at_least("operator") and namespace not in {
            t.namespace for t in mine}:
        raise Forbidden(
            f"namespace: {namespace} is not the namespace of a team of yours on cluster {tag}; {principal.user} "
            f"is a member of {', '.join(t.name for t in mine)}.",
            hint="Submit into " + ", ".join(t.namespace for t in mine) + " (or leave namespace out), or ask an "
            "operator to add you to the team (team_update).")
    owner = next((t for t in store.list_teams(db, tag) if t.namespace == namespace), None)
    if owner is not None and queue is None:
        queue = owner.queue
    return namespace, queue


M = TypeVar("M", bound=BaseModel)


async def in_team_namespace(ctx: CallContext, tag: str, req: M) -> M:
    """`req` (a model server or other workload with a `namespace` field) in the caller's team's namespace when it
    names none, refused outside their teams' namespaces as `place` refuses (no queue: only training jobs are
    queued by the twin's Kueue)."""
    given = getattr(req, "namespace") if "namespace" in req.model_fields_set else None  # noqa: B009
    namespace, _ = await to_thread.run_sync(place, ctx.app.db, ctx.principal, tag, given, None)
    return req.model_copy(update={"namespace": namespace})

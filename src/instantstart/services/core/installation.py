"""The installation id: made once per database, tagged on what this control plane creates, checked before
adopting or deleting anything found by tag alone."""

from __future__ import annotations

import secrets

from sqlalchemy.exc import IntegrityError

from instantstart.errors import Conflict
from instantstart.services.core.ledger import TAG_CLUSTER, TAG_INSTALLATION
from instantstart.store.db import Database
from instantstart.store.models import StateRow, utcnow

INSTALLATION_KEY = "installation-id"


def installation_id(db: Database) -> str:
    """This installation's id: made once per database, then always the same."""
    with db.session() as session:
        row = session.get(StateRow, INSTALLATION_KEY)
        if row is not None and row.value:
            return str(row.value)
    try:
        with db.session() as session:
            session.add(StateRow(key=INSTALLATION_KEY, value=f"is-{secrets.token_hex(8)}", updated_at=utcnow()))
    except IntegrityError:
        pass  # another worker made it first; read theirs
    with db.session() as session:
        row = session.get(StateRow, INSTALLATION_KEY)
        assert row is not None
        return str(row.value)


def refuse_foreign(kind: str, name: str, tags: dict[str, str], cluster_tag: str, installation: str) -> None:
    """Raise Conflict when an existing resource found by name carries another installation's id or another
    cluster's tag (someone else's: never adopted, never deleted). Untagged resources are judged by the caller."""
    found = tags.get(TAG_INSTALLATION)
    if found not in (None, installation):
        raise Conflict(
            f"{kind} {name} belongs to another InstantStart installation ({found}); it is neither adopted nor"
            " deleted.",
            hint=f"Use another clusterTag, or manage {name} from the installation that made it.",
            details={"resource": name, "installation": found},
        )
    if tags.get(TAG_CLUSTER) not in (None, cluster_tag):
        seen = f"is tagged {TAG_CLUSTER}={tags[TAG_CLUSTER]}" if tags[TAG_CLUSTER] else f"carries no {TAG_CLUSTER}"
        raise Conflict(
            f"{kind} {name} exists but {seen}, not {cluster_tag}: InstantStart did not create it for this cluster.",
            hint=f"Choose another clusterTag, or delete {name} if nothing uses it.",
            details={"resource": name, "clusterTag": tags.get(TAG_CLUSTER)},
        )

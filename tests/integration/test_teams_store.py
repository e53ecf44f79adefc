"""The team record on SQLite and PostgreSQL (migration 0006): team → namespaces for usage reports, membership by
member list or SSO group mapping, and members' job placement."""

from __future__ import annotations

import pytest

from instantstart.errors import Forbidden, InvalidInput
from instantstart.principal import Principal
from instantstart.services.access.users import create_user
from instantstart.services.teams.placement import place
from instantstart.store import teams
from instantstart.store.db import Database
from instantstart.store.models import ClusterRow, utcnow
from instantstart.store.sso import sign_in


@pytest.fixture
def db(database_url: str) -> Database:
    database = Database(database_url)
    database.migrate()
    with database.session() as session:
        for tag in ("c1", "c2"):
            session.add(ClusterRow(tag=tag, region="us-west-2", eks_cluster_name=f"{tag}-eks",
                                   hyperpod_cluster_name=f"{tag}-hp"))
    return database


def team(name: str, tag: str, members: list[str]) -> teams.Team:
    return teams.Team(name, tag, f"q{name}{tag}"[:12], {"instanceType": "ml.g5.12xlarge", "accelerators": 2},
                      members, "opal", utcnow())


def test_team_namespaces_membership_and_placement(db: Database) -> None:
    create_user(db, "alice", "member", "admin")
    create_user(db, "bob", "member", "admin")
    teams.save_team(db, team("a", "c1", ["alice"]))
    teams.save_team(db, team("a", "c2", []))
    teams.save_team(db, team("b", "c1", ["bob", "alice"]))
    assert teams.team_namespaces(db) == {"a": [("c1", "hyperpod-ns-a"), ("c2", "hyperpod-ns-a")],
                                         "b": [("c1", "hyperpod-ns-b")]}
    assert [t.name for t in teams.teams_of(db, "alice", "c1")] == ["a", "b"]
    assert teams.teams_of(db, "alice", "c2") == []
    # An SSO user is a member of the teams their provider groups map to.
    carol = sign_in(db, "sub-carol", "carol@example.com", "member", ["a"])
    assert [t.name for t in teams.teams_of(db, carol.name, "c2")] == ["a"]

    alice, bob = Principal("alice", "member", "main"), Principal("bob", "member", "main")
    with pytest.raises(InvalidInput) as several:
        place(db, alice, "c1", None, None)
    assert "hyperpod-ns-a, hyperpod-ns-b" in str(several.value.hint)
    assert place(db, alice, "c1", "hyperpod-ns-b", None) == ("hyperpod-ns-b", "hyperpod-ns-b-localqueue")
    teams.save_team(db, team("b", "c1", ["bob"]))
    assert place(db, bob, "c1", None, None) == ("hyperpod-ns-b", "hyperpod-ns-b-localqueue")
    assert place(db, bob, "c1", None, "other") == ("hyperpod-ns-b", "other")
    with pytest.raises(Forbidden):
        place(db, bob, "c1", "default", None)
    # Operators go anywhere; a member of no team keeps the default namespace.
    assert place(db, Principal("opal", "operator", "main"), "c1", "default", None) == ("default", None)
    assert place(db, Principal("dave", "member", "main"), "c1", None, None) == ("default", None)
    teams.delete_team(db, "b", "c1")
    assert "b" not in teams.team_namespaces(db)

"""The users, tokens and audit tables on SQLite and PostgreSQL: digests only, expiry, revocation, retention."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from instantstart.errors import Conflict, NotFound
from instantstart.services.access.audit import AuditListRequest, read_audit
from instantstart.services.access.tokens import create_token, list_tokens, revoke_token
from instantstart.services.access.users import create_user, delete_user
from instantstart.store.access import AuditRow, TokenRow, digest, prune_audit, record_audit, resolve
from instantstart.store.db import Database
from instantstart.store.models import utcnow


@pytest.fixture
def db(database_url: str) -> Database:
    database = Database(database_url)
    database.migrate()
    return database


def entry(user: str, operation: str, outcome: str, days_ago: float = 0) -> AuditRow:
    return AuditRow(at=utcnow() - timedelta(days=days_ago), user=user, role="member", token_name="main", face="rest",
                    source="127.0.0.1", operation=operation, cluster_tag="demo", outcome=outcome, error_code="",
                    operation_id="")


def test_tokens_are_stored_as_digests_and_expire_and_revoke(db: Database) -> None:
    create_user(db, "bo", "member", "admin")
    assert create_user(db, "bo", "member", "admin").role == "member"  # the same again: the same user
    with pytest.raises(Conflict):
        create_user(db, "bo", "viewer", "admin")
    made = create_token(db, "bo", "main", 30)
    with pytest.raises(Conflict):
        create_token(db, "bo", "main", 30)
    with db.read_session() as session:
        stored = session.scalars(select(TokenRow)).one()
        assert stored.digest == digest(made.token) and made.token not in repr(vars(stored))
    owner = resolve(db, made.token)
    assert owner is not None and (owner.user, owner.role, owner.token_name) == ("bo", "member", "main")
    assert resolve(db, made.token + "x") is None
    assert resolve(db, made.token, now=utcnow() + timedelta(days=31)) is None  # expired
    assert revoke_token(db, "bo", "main").state == "revoked"
    assert resolve(db, made.token) is None
    assert [t.state for t in list_tokens(db, "bo")] == ["revoked"]
    again = create_token(db, "bo", "main", None)  # a revoked token's name may be used again; no expiry
    assert resolve(db, again.token) is not None and again.expires_at is None
    delete_user(db, "bo", "admin")
    assert resolve(db, again.token) is None
    with pytest.raises(NotFound):
        list_tokens(db, "bo")


def test_the_audit_trail_filters_by_user_and_outcome_and_keeps_its_retention(db: Database) -> None:
    record_audit(db, entry("ann", "cluster_create", "ok", days_ago=400))
    record_audit(db, entry("ann", "cluster_delete", "denied"))
    record_audit(db, entry("bob", "training_job_submit", "ok"))
    assert [e.operation for e in read_audit(db, AuditListRequest(user="ann"))] == ["cluster_delete", "cluster_create"]
    assert [e.user for e in read_audit(db, AuditListRequest(outcome="denied"))] == ["ann"]
    assert prune_audit(db, 365) == 1
    assert [e.operation for e in read_audit(db, AuditListRequest())] == ["training_job_submit", "cluster_delete"]

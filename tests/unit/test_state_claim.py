"""claim_state: the first writer of a key wins, and every racing claimer gets the winner's value (the project
bucket's name is claimed this way, so clusters created at once share one bucket)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from instantstart.store.db import Database
from instantstart.store.state import claim_state, read_state


def test_the_first_claim_wins_and_racing_claims_agree(database_url: str) -> None:
    db = Database(database_url)
    db.migrate()
    assert claim_state(db, "k", "first") == "first"
    assert claim_state(db, "k", "second") == "first"
    assert read_state(db, "k") == "first"
    with ThreadPoolExecutor(8) as pool:
        won = list(pool.map(lambda i: claim_state(db, "race", f"v{i}"), range(16)))
    assert len(set(won)) == 1 and won[0] == read_state(db, "race")

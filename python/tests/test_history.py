"""Store.history: a job's attempt ledger, on SQLite and on PostgreSQL (``store`` fixture).

Every claim is a row with its fence and how it ended; every late write the fence refused is
counted under the fence that tried it. The SQLite case also reads the ledger back through the
standard ``sqlite3`` module, an independent connection.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import leasefence
from leasefence import Store


def test_a_takeover_and_the_late_writes_it_refused(store: Store):
    store.enqueue("job")
    stale = store.claim_next("a", ttl=10.0, now=0.0)
    fresh = store.claim_next("b", ttl=10.0, now=20.0)
    assert (stale.fence, fresh.fence) == (1, 2)
    assert store.complete(stale, "late", now=21.0) is False
    assert store.complete(stale, "late again", now=21.5) is False
    assert store.renew(stale, ttl=10.0, now=21.6) is None
    assert store.complete(fresh, "done", now=22.0) is True

    history = store.history("job")
    assert history is not None
    assert [(a.fence, a.owner, a.outcome, a.error) for a in history.attempts] == [
        (1, "a", "lost", None),
        (2, "b", "completed", None),
    ]
    assert all(a.claimed_at is not None and a.ended_at is not None for a in history.attempts)
    assert [(r.fence, r.op, r.count) for r in history.refusals] == [
        (1, "complete", 2),
        (1, "renew", 1),
    ]
    assert history.refused() == 3
    assert (history.refused(fence=1), history.refused(fence=2)) == (3, 0)
    assert history == store.history("job")  # a read: the same ledger again
    assert "History(attempts=2, refused=3)" == repr(history)


def test_each_ending_is_named(store: Store):
    store.enqueue("f", max_attempts=5)
    lease = store.claim_next("w", ttl=10.0, now=0.0)
    store.fail(lease, "boom", now=1.0, retry_at=1.0)
    lease = store.claim_next("w", ttl=10.0, now=2.0)
    assert store.release(lease) is True
    lease = store.claim_next("w", ttl=10.0, now=3.0)
    assert store.cancel("f", now=4.0) is True
    attempts = store.history("f").attempts
    assert [(a.fence, a.outcome, a.error) for a in attempts] == [
        (1, "failed", "boom"),
        (2, "released", None),
        (3, "cancelled", None),
    ]
    store.enqueue("open")
    store.claim_next("w", ttl=10.0, now=5.0, queues=["default"])
    (held,) = store.history("open").attempts
    assert (held.fence, held.owner, held.outcome, held.ended_at) == (1, "w", None, None)


def test_an_unknown_job_has_none_and_a_bad_id_names_itself(store: Store):
    assert store.history("missing") is None
    with pytest.raises(leasefence.InvalidArgument) as bad:
        store.history("")
    assert bad.value.argument == "job_id"


def test_the_ledger_is_the_stored_one(tmp_path: Path):
    path = tmp_path / "jobs.db"
    store = Store(path)
    store.enqueue("j")
    a = store.claim_next("a", ttl=5.0, now=0.0)
    store.claim_next("b", ttl=5.0, now=6.0)
    assert store.fail(a, "late", now=7.0) is None
    history = store.history("j")
    con = sqlite3.connect(path)
    try:
        rows = con.execute(
            "SELECT fence, owner, outcome FROM attempts WHERE job_id = 'j' ORDER BY fence"
        ).fetchall()
        refused = con.execute(
            "SELECT fence, op, count FROM refusals WHERE job_id = 'j'"
        ).fetchall()
    finally:
        con.close()
    assert rows == [(a.fence, a.owner, a.outcome) for a in history.attempts]
    assert rows == [(1, "a", "lost"), (2, "b", None)]
    assert refused == [(r.fence, r.op, r.count) for r in history.refusals] == [(1, "fail", 1)]
    store.close()

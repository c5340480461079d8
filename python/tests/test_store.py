"""leasefence.Store: the queue's operations, on SQLite and on PostgreSQL (``store`` fixture).

Writes go through leases; every write is fenced exactly as the eight functions are, and the
operator verbs (cancel, retry, delete, purge, pause, resume) are documented as such.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

import leasefence
from leasefence import NewJob, Store


def test_enqueue_claim_next_complete_round_trip(store: Store):
    assert store.enqueue("j1", b"\x00payload\xff", queue="mail", kind="send", priority=3) is True
    assert store.enqueue("j1") is False
    lease = store.claim_next("w1", ttl=30.0, now=100.0)
    assert lease is not None
    assert (lease.job_id, lease.owner, lease.fence, lease.until) == ("j1", "w1", 1, 130.0)
    assert (lease.queue, lease.kind, lease.payload, lease.priority, lease.attempt) == (
        "mail", "send", b"\x00payload\xff", 3, 1
    )
    assert store.claim_next("w2", ttl=30.0, now=101.0) is None
    assert store.complete(lease, "sent", now=101.0) is True
    assert store.state("j1") == {
        "id": "j1", "owner": "w1", "until": 130.0, "fence": 1, "result": "sent", "done": 1
    }
    info = store.inspect("j1", now=102.0)
    assert (info.status, info.outcome, info.attempts, info.payload) == (
        "done", "completed", 1, b"\x00payload\xff"
    )


def test_leases_are_immutable_values(store: Store):
    store.enqueue("j")
    lease = store.claim_next("w", ttl=10.0, now=0.0)
    with pytest.raises(AttributeError):
        lease.fence = 99  # type: ignore[misc]
    assert lease == lease and hash(lease) == hash(lease)
    assert "fence=1" in repr(lease)


def test_a_stale_lease_can_store_nothing(store: Store):
    store.enqueue("j")
    a = store.claim_next("A", ttl=10.0, now=0.0)
    b = store.claim_next("B", ttl=10.0, now=10.0)  # A's lease expired
    assert (a.fence, b.fence) == (1, 2)
    assert store.renew(a, ttl=10.0, now=11.0) is None
    assert store.complete(a, "stale", now=11.0) is False
    assert store.fail(a, "stale error", now=11.0) is None
    assert store.release(a) is False
    assert store.complete(b, "fresh", now=12.0) is True
    assert store.state("j")["result"] == "fresh"


def test_renew_returns_the_renewed_lease_and_never_revives(store: Store):
    store.enqueue("j")
    lease = store.claim_next("w", ttl=10.0, now=0.0)
    renewed = store.renew(lease, ttl=10.0, now=5.0)
    assert renewed is not None and renewed.until == 15.0 and lease.until == 10.0
    assert store.renew(renewed, ttl=10.0, now=15.0) is None  # now == until: expired
    assert store.state("j")["until"] == 15.0


def test_fail_retries_with_backoff_then_dies(store: Store):
    store.enqueue("j", max_attempts=2)
    first = store.claim_next("w", ttl=10.0, now=0.0)
    failed = store.fail(first, "boom", now=1.0, retry_at=5.0)
    assert failed == failed and (failed.dead, failed.retry_at) == (False, 5.0)
    assert store.claim_next("w", ttl=10.0, now=4.0) is None  # not before 5
    second = store.claim_next("w", ttl=10.0, now=5.0)
    assert (second.fence, second.attempt, second.last_error) == (2, 2, "boom")
    last = store.fail(second, "boom again", now=6.0)
    assert (last.dead, last.retry_at) == (True, None)
    assert store.inspect("j", now=7.0).status == "dead"
    assert store.stats(now=7.0).dead == 1


def test_release_gives_the_job_back_with_its_fence(store: Store):
    store.enqueue("j")
    lease = store.claim_next("w", ttl=10.0, now=0.0)
    assert store.release(lease) is True
    again = store.claim_next("v", ttl=10.0, now=1.0)
    assert again.fence == 2


def test_claim_batch_takes_the_best_jobs_in_one_call(store: Store):
    store.enqueue_many(["a", NewJob("b", priority=5), NewJob("c", queue="other")])
    leases = store.claim_batch("w", 2, ttl=10.0, now=0.0)
    assert [l.job_id for l in leases] == ["b", "a"]
    assert [l.job_id for l in store.claim_batch("w", 5, ttl=10.0, queues="other", now=0.0)] == ["c"]
    with pytest.raises(leasefence.InvalidArgument) as err:
        store.claim_batch("w", 0, now=0.0)
    assert err.value.argument == "n"


def test_complete_batch_refuses_a_stale_lease_and_keeps_its_neighbours(store: Store):
    store.enqueue_many(["a", "b"])
    a, b = store.claim_batch("w", 2, ttl=10.0, now=0.0)
    taken = store.claim("b", "other", ttl=10.0, now=10.0)  # b expired and was taken over
    assert store.complete_batch([(a, "ra"), (b, "stale")], now=9.0) == [True, False]
    assert store.state("a")["result"] == "ra"
    assert store.state("b") == {
        "id": "b", "owner": "other", "until": 20.0, "fence": 2, "result": None, "done": 0
    }
    assert store.complete(taken, "fresh", now=11.0)
    with pytest.raises(leasefence.InvalidArgument) as err:
        store.complete_batch([(a, 1)])  # type: ignore[list-item]
    assert err.value.argument == "completions"


def test_enqueue_many_reports_each_insert(store: Store):
    assert store.enqueue_many(["a", "b", "a"]) == [True, True, False]
    with pytest.raises(leasefence.InvalidArgument):
        store.enqueue_many(["c", 3])  # type: ignore[list-item]
    assert store.state("c") is None  # nothing of the bad batch was stored


def test_queues_kinds_and_pause(store: Store):
    store.enqueue("m", queue="mail")
    store.enqueue("r", queue="reports", kind="pdf")
    assert store.pause("mail") is True and store.pause("mail") is False
    lease = store.claim_next("w", ttl=10.0, now=0.0)
    assert lease.job_id == "r" and lease.kind == "pdf"
    assert store.claim_next("w", ttl=10.0, now=0.0) is None  # mail is paused
    queues = {q.name: q for q in store.queues(now=0.0)}
    assert queues["mail"].paused and queues["mail"].stats.ready == 1
    assert store.resume("mail") is True
    assert store.claim_next("w", ttl=10.0, queues=["mail"], now=0.0).job_id == "m"


def test_unique_keys_refuse_a_duplicate_within_the_window(store: Store):
    assert store.enqueue("a", unique_key="user-7", unique_for=3600.0) is True
    assert store.enqueue("b", unique_key="user-7", unique_for=3600.0) is False
    assert store.state("b") is None


def test_operator_verbs_cancel_retry_delete_purge(store: Store):
    store.enqueue_many(["a", "b", "c"])
    lease = store.claim_next("w", ttl=100.0, now=0.0)
    assert store.cancel(lease.job_id, now=1.0) is True
    assert store.complete(lease, "too late", now=2.0) is False  # cancelled under its holder
    assert store.inspect(lease.job_id, now=2.0).status == "cancelled"
    assert store.retry(lease.job_id, now=3.0) == [True]
    again = store.claim_next("w", ttl=100.0, now=3.0)
    assert again.job_id == lease.job_id and again.fence == lease.fence + 1
    assert store.complete(again, "ok", now=4.0)
    assert store.delete(["b", "nope"]) == [True, False]
    assert store.purge(finished_before=1e12) == 1
    assert store.state(lease.job_id) is None
    # A purged id enqueued again continues its fence sequence.
    store.enqueue(lease.job_id)
    assert store.claim(lease.job_id, "x", ttl=10.0, now=5.0).fence == again.fence + 1


def test_list_pages_and_filters(store: Store):
    store.enqueue_many([f"j{i}" for i in range(5)])
    store.claim("j3", "w", ttl=10.0, now=0.0)
    first = store.list(limit=2, now=1.0)
    assert [j.id for j in first] == ["j0", "j1"]
    assert [j.id for j in store.list(after="j1", limit=10, now=1.0)] == ["j2", "j3", "j4"]
    assert [j.id for j in store.list(status="leased", now=1.0)] == ["j3"]
    with pytest.raises(leasefence.InvalidArgument) as err:
        store.list(status="nonsense")
    assert err.value.argument == "status"
    stats = store.stats(now=1.0)
    assert (stats.ready, stats.leased, stats.total) == (4, 1, 5)


def test_admit_is_a_fence_gate(store: Store):
    assert store.admit("mailbox", 2) is True
    assert store.admit("mailbox", 1) is False
    assert store.admit("mailbox", 2) is True
    assert store.admit("mailbox", 3) is True


def test_bad_arguments_name_themselves_and_change_nothing(store: Store):
    store.enqueue("j")
    for call, name in [
        (lambda: store.claim_next("w", ttl=0.0, now=0.0), "ttl"),
        (lambda: store.claim_next("", ttl=1.0, now=0.0), "owner"),
        (lambda: store.claim_next("w", ttl=1.0, now=float("nan")), "now"),
        (lambda: store.enqueue("", b""), "job_id"),
        (lambda: store.enqueue("k", queue=""), "queue"),
        (lambda: store.claim_next("w", queues=[""], now=0.0), "queues"),
    ]:
        with pytest.raises(leasefence.InvalidArgument) as err:
            call()
        assert err.value.argument == name, (name, str(err.value))
        assert isinstance(err.value, ValueError)
    assert store.state("j") == {
        "id": "j", "owner": None, "until": 0.0, "fence": 0, "result": None, "done": 0
    }
    assert store.state("k") is None


def test_a_busy_timeout_beyond_its_range_is_refused_by_name(tmp_path: Path):
    # Negative, or longer than PostgreSQL's lock timeout takes (2^31 - 1 ms), or than a
    # duration holds at all: refused, naming it, and no file is made.
    for bad in [-1.0, 2147483.648, 1e30, float("inf")]:
        with pytest.raises(leasefence.InvalidArgument) as err:
            Store(tmp_path / "jobs.db", busy_timeout=bad)
        assert err.value.argument == "busy_timeout", (bad, str(err.value))
    assert not (tmp_path / "jobs.db").exists()
    with Store(tmp_path / "jobs.db", busy_timeout=2147483.647) as s:
        assert s.enqueue("j")


def test_a_closed_store_refuses_calls(store: Store):
    store.close()
    store.close()
    with pytest.raises(leasefence.InvalidArgument) as err:
        store.stats()
    assert err.value.argument == "store"


def test_store_is_a_context_manager(tmp_path: Path):
    with Store(tmp_path / "jobs.db") as s:
        s.enqueue("j")
        assert s.backend == "sqlite"
    with pytest.raises(leasefence.InvalidArgument):
        s.state("j")
    assert Store(tmp_path / "jobs.db").state("j")["id"] == "j"


def test_the_store_and_the_eight_functions_share_one_file(tmp_path: Path):
    path = tmp_path / "jobs.db"
    store = Store(path)
    store.enqueue("j")
    fence = leasefence.claim(path, "j", "seed", 0.0, 10.0)
    assert store.inspect("j", now=1.0).owner == "seed"
    lease = store.claim("j", "other", ttl=10.0, now=10.0)
    assert lease.fence == fence + 1
    assert leasefence.complete(path, "j", "seed", fence, 11.0, "stale") is False


def test_synchronous_is_full_by_default_and_can_opt_out(tmp_path: Path):
    import sqlite3

    Store(tmp_path / "a.db")
    with pytest.raises(leasefence.InvalidArgument) as err:
        Store(tmp_path / "b.db", synchronous="off")
    assert err.value.argument == "synchronous"
    assert Store(tmp_path / "c.db", synchronous="normal").backend == "sqlite"
    # The journal mode is a property of the file: WAL.
    assert sqlite3.connect(tmp_path / "a.db").execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_repr_names_the_backend_and_the_database(tmp_path: Path):
    store = Store(tmp_path / "jobs.db")
    assert repr(store) == f'Store(backend="sqlite", db="{tmp_path / "jobs.db"}")'


def test_a_postgres_url_with_a_password_never_shows_it():
    with pytest.raises(leasefence.Error) as err:
        Store("postgres://app:hunter2-secret@127.0.0.1:1/none?connect_timeout=1")
    assert "hunter2-secret" not in str(err.value)
    assert "hunter2-secret" not in repr(err.value)


def test_the_stubs_declare_the_read_only_fields_read_only(tmp_path: Path):
    # The runtime refuses an assignment to these snapshots; mypy --strict must too.
    store = Store(tmp_path / "jobs.db")
    store.enqueue("j")
    lease = store.claim("j", "A", 10.0, now=0.0)
    assert lease is not None
    failed = store.fail(lease, "boom", now=1.0)
    values = [
        (store.inspect("j"), "status"),
        (store.stats(), "ready"),
        (store.queues()[0], "paused"),
        (failed, "dead"),
        (leasefence.Worker(tmp_path / "jobs.db", str).stats(), "completed"),
    ]
    for value, field in values:
        with pytest.raises(AttributeError):
            setattr(value, field, getattr(value, field))
    snippet = tmp_path / "snippet.py"
    snippet.write_text(
        "import leasefence\n"
        "def f(i: leasefence.JobInfo, s: leasefence.Stats, q: leasefence.QueueInfo,\n"
        "      f: leasefence.Failed, w: leasefence.WorkerStats) -> None:\n"
        "    print(i.status, s.ready, q.paused, f.dead, w.completed)\n"
        "    i.status = 'done'\n"
        "    s.ready = 3\n"
        "    q.paused = True\n"
        "    f.dead = True\n"
        "    w.completed = 1\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(snippet)],
        capture_output=True,
        text=True,
    )
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    # Each of the five assignments is refused, and nothing else (the reads are fine).
    assert [line.split(":")[1] for line in errors] == ["5", "6", "7", "8", "9"], proc.stdout
    assert all("read-only" in line for line in errors), proc.stdout

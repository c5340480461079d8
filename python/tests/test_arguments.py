"""Bad arguments of every kind name themselves and change nothing.

An integer out of its argument's range is bad input, not arithmetic: ``InvalidArgument`` (a
``ValueError``) naming it, never a bare ``OverflowError``. A value of the wrong type is a
``TypeError`` naming the argument in its message (integers) or in its note (the rest: PyO3's
conversion, ``while processing 'ttl'``, printed under the traceback). The eight seed functions
keep the seed's behaviour: Python's ``sqlite3`` raises ``OverflowError`` for a fence beyond 64
bits, and so do they.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import leasefence
from leasefence import NewJob, Store, Worker

from conftest import read_row

HUGE = 2**64


def untouched(store: Store) -> None:
    """The job ``j`` as enqueued, and nothing else stored."""
    assert store.state("j") == {
        "id": "j", "owner": None, "until": 0.0, "fence": 0, "result": None, "done": 0
    }
    assert [job.id for job in store.list(now=0.0)] == ["j"]


def test_integers_out_of_range_are_invalid_arguments_naming_them(store: Store):
    store.enqueue("j")
    for call, name, shown in [
        (lambda: store.enqueue("k", priority=HUGE), "priority", str(HUGE)),
        (lambda: store.enqueue("k", priority=-HUGE), "priority", str(-HUGE)),
        (lambda: store.enqueue("k", max_attempts=-1), "max_attempts", "-1"),
        (lambda: store.enqueue("k", max_attempts=2**32), "max_attempts", str(2**32)),
        (lambda: NewJob("k", max_attempts=-1), "max_attempts", "-1"),
        (lambda: NewJob("k", priority=2**63), "priority", str(2**63)),
        (lambda: store.claim_batch("w", -1, now=0.0), "n", "-1"),
        (lambda: store.claim_batch("w", HUGE, now=0.0), "n", str(HUGE)),
        (lambda: store.list(limit=-1), "limit", "-1"),
        (lambda: store.admit("bucket/a", HUGE), "fence", str(HUGE)),
    ]:
        with pytest.raises(leasefence.InvalidArgument) as err:
            call()
        assert err.value.argument == name, (name, str(err.value))
        assert isinstance(err.value, ValueError)
        assert not isinstance(err.value, OverflowError)
        message = str(err.value)
        assert f"`{name}`" in message and shown in message, message
    untouched(store)
    # The gate admitted nothing: fence 1 is still the first it sees.
    assert store.admit("bucket/a", 1) is True


def test_the_edges_of_each_range_are_accepted(store: Store):
    assert store.enqueue("lo", priority=-(2**63), max_attempts=0)
    assert store.enqueue("hi", priority=2**63 - 1, max_attempts=2**32 - 1)
    lo, hi = store.inspect("lo"), store.inspect("hi")
    assert (lo.priority, lo.max_attempts) == (-(2**63), 0)
    assert (hi.priority, hi.max_attempts) == (2**63 - 1, 2**32 - 1)
    assert store.list(limit=0) == []
    assert store.admit("bucket/b", 2**63 - 1) is True
    # Anything with __index__ is an integer, as for range().
    class Two:
        def __index__(self) -> int:
            return 2

    leases = store.claim_batch("w", Two(), now=0.0)
    assert [lease.job_id for lease in leases] == ["hi", "lo"]


def test_wrong_types_are_type_errors_naming_the_argument(store: Store):
    store.enqueue("j")
    for call, name in [
        (lambda: store.enqueue("k", priority=1.5), "priority"),
        (lambda: store.enqueue("k", max_attempts="3"), "max_attempts"),
        (lambda: store.claim_batch("w", "2", now=0.0), "n"),
        (lambda: store.list(limit=None), "limit"),
    ]:
        with pytest.raises(TypeError) as err:
            call()
        assert f"invalid argument `{name}`: must be an int, not" in str(err.value), str(err.value)
    for call, name in [
        (lambda: store.claim_next("w", ttl="soon", now=0.0), "ttl"),
        (lambda: store.claim_next(7, now=0.0), "owner"),
        (lambda: store.purge("yesterday"), "finished_before"),
        (lambda: store.enqueue("k", "text, not bytes"), "payload"),
    ]:
        with pytest.raises(TypeError) as err:
            call()
        assert f"while processing '{name}'" in getattr(err.value, "__notes__", []), name
    untouched(store)


def test_purge_names_its_own_argument(store: Store):
    store.enqueue("j")
    for bad in [float("nan"), float("inf")]:
        with pytest.raises(leasefence.InvalidArgument) as err:
            store.purge(bad)
        assert err.value.argument == "finished_before", str(err.value)
        assert "`finished_before`" in str(err.value)
    untouched(store)


def test_worker_counts_out_of_range_are_invalid_arguments(tmp_path: Path):
    db = tmp_path / "jobs.db"
    Store(db).close()
    for kwargs, name in [
        ({"concurrency": -1}, "concurrency"),
        ({"concurrency": HUGE}, "concurrency"),
        ({"concurrency": 0}, "concurrency"),
        ({"batch": -2}, "batch"),
        ({"batch": 0}, "batch"),
    ]:
        with pytest.raises(leasefence.InvalidArgument) as err:
            Worker(db, lambda job: "x", **kwargs)
        assert err.value.argument == name, (kwargs, str(err.value))
    with pytest.raises(TypeError) as err:
        Worker(db, lambda job: "x", concurrency="4")
    assert "invalid argument `concurrency`" in str(err.value)


def test_the_seed_functions_keep_sqlite3s_overflow_error(db: Path):
    leasefence.enqueue(db, "j")
    fence = leasefence.claim(db, "j", "A", 0.0, 10.0)
    assert fence == 1
    with pytest.raises(OverflowError):
        leasefence.complete(db, "j", "A", HUGE, 1.0, "late")
    assert read_row(db, "j") == ("j", "A", 10.0, 1, None, 0)

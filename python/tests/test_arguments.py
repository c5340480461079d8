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
from leasefence import Lease, NewJob, Store, Worker

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
        # Not its 401 digits in the message: how many there are.
        (lambda: store.enqueue("k", priority=10**400), "priority", "got an int of 401 digits"),
        (lambda: store.enqueue("k", priority=-(10**400)), "priority", "got an int of 401 digits"),
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


BIG = 10**400  # an int no float holds: float(BIG) is an OverflowError


def test_an_int_too_large_for_a_float_is_an_invalid_argument_naming_it(store: Store, tmp_path: Path):
    store.enqueue("j")
    lease = store.claim("j", "A", 30.0, now=0.0)
    assert lease is not None
    db = tmp_path / "seed.db"
    leasefence.init_db(db)
    leasefence.enqueue(db, "j")
    sqlite = tmp_path / "w.db"
    Store(sqlite).close()
    fields = {"job_id": "j", "owner": "A", "fence": 1, "until": 10.0}
    calls = [
        # the eight functions
        (lambda: leasefence.claim(db, "j", "A", BIG, 1.0), "now"),
        (lambda: leasefence.claim(db, "j", "A", 0.0, BIG), "ttl"),
        (lambda: leasefence.renew(db, "j", "A", 1, BIG, 1.0), "now"),
        (lambda: leasefence.renew(db, "j", "A", 1, 0.0, -BIG), "ttl"),
        (lambda: leasefence.complete(db, "j", "A", 1, BIG, "r"), "now"),
        (lambda: leasefence.claim_many(db, "j", ["a", "b"], BIG, 1.0), "now"),
        (lambda: leasefence.claim_many(db, "j", [], 0.0, BIG), "ttl"),
        # Store and NewJob
        (lambda: Store(sqlite, busy_timeout=BIG), "busy_timeout"),
        (lambda: store.enqueue("k", not_before=BIG), "not_before"),
        (lambda: store.enqueue("k", unique_key="u", unique_for=BIG), "unique_for"),
        (lambda: NewJob("k", not_before=-BIG), "not_before"),
        (lambda: NewJob("k", unique_key="u", unique_for=BIG), "unique_for"),
        (lambda: store.claim("j", "B", BIG, now=0.0), "ttl"),
        (lambda: store.claim("j", "B", 1.0, now=BIG), "now"),
        (lambda: store.claim_next("B", BIG, now=0.0), "ttl"),
        (lambda: store.claim_next("B", now=BIG), "now"),
        (lambda: store.claim_batch("B", 2, BIG, now=0.0), "ttl"),
        (lambda: store.claim_batch("B", 2, now=BIG), "now"),
        (lambda: store.renew(lease, BIG, now=1.0), "ttl"),
        (lambda: store.renew(lease, 1.0, now=BIG), "now"),
        (lambda: store.complete(lease, "r", now=BIG), "now"),
        (lambda: store.complete_batch([(lease, "r")], now=BIG), "now"),
        (lambda: store.fail(lease, "e", now=BIG), "now"),
        (lambda: store.fail(lease, "e", now=1.0, retry_at=BIG), "retry_at"),
        (lambda: store.cancel("j", now=BIG), "now"),
        (lambda: store.retry("j", now=BIG), "now"),
        (lambda: store.retry_dead(now=BIG), "now"),
        (lambda: store.purge(BIG), "finished_before"),
        (lambda: store.list(now=BIG), "now"),
        (lambda: store.inspect("j", now=BIG), "now"),
        (lambda: store.queues(now=BIG), "now"),
        (lambda: store.stats(now=BIG), "now"),
        (lambda: leasefence.Lease(**{**fields, "until": BIG}), "until"),
        # Worker
        (lambda: Worker(sqlite, str, ttl=BIG), "ttl"),
        (lambda: Worker(sqlite, str, timeout=BIG), "timeout"),
        (lambda: Worker(sqlite, str, poll_interval=BIG), "poll_interval"),
        (lambda: Worker(sqlite, str, shutdown_deadline=BIG), "shutdown_deadline"),
    ]
    for call, name in calls:
        with pytest.raises(leasefence.InvalidArgument) as err:
            call()
        assert err.value.argument == name, (name, str(err.value))
        assert not isinstance(err.value, OverflowError)
        assert f"`{name}`" in str(err.value)
    # Nothing changed: j is still leased by A under fence 1, nothing else was enqueued.
    assert [(j.id, j.owner, j.fence, j.attempts) for j in store.list(now=1.0)] == [("j", "A", 1, 1)]
    assert leasefence.state(db, "j") == {
        "id": "j", "owner": None, "until": 0.0, "fence": 0, "result": None, "done": 0
    }


def test_job_wait_names_a_timeout_too_large_for_a_float(tmp_path: Path):
    path = tmp_path / "jobs.db"
    Store(path).enqueue("j")
    seen = []

    def handler(job):
        with pytest.raises(leasefence.InvalidArgument) as err:
            job.wait(BIG)
        seen.append(err.value.argument)
        return "ok"

    assert Worker(path, handler, drain=True).run(handle_signals=False).completed == 1
    assert seen == ["timeout"]


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


def test_a_bool_is_no_number(store: Store, tmp_path: Path):
    # Python counts True as 1; as a ttl, a fence or a count it is a slip, refused by name.
    store.enqueue("j")
    for call, name in [
        (lambda: store.claim_next("w", ttl=True, now=0.0), "ttl"),
        (lambda: store.claim_next("w", ttl=5.0, now=False), "now"),
        (lambda: store.claim_batch("w", True, now=0.0), "n"),
        (lambda: store.enqueue("k", priority=True), "priority"),
        (lambda: store.enqueue("k", max_attempts=True), "max_attempts"),
        (lambda: store.admit("bucket", True), "fence"),
        (lambda: store.list(limit=False), "limit"),
        (lambda: Worker(tmp_path / "w.db", lambda job: "x", concurrency=True), "concurrency"),
    ]:
        with pytest.raises(TypeError) as err:
            call()
        assert f"invalid argument `{name}`: must be" in str(err.value), str(err.value)
        assert "not bool" in str(err.value), str(err.value)
    untouched(store)
    assert store.admit("bucket", 1) is True
    # The seed's functions keep Python sqlite3's reading of a bool as 0 or 1.
    db = tmp_path / "seed.db"
    leasefence.init_db(db)
    leasefence.enqueue(db, "s")
    assert leasefence.claim(db, "s", "A", False, True) == 1
    assert read_row(db, "s") == ("s", "A", 1.0, 1, None, 0)


def test_the_fence_gate_refuses_a_fence_no_claim_hands_out(store: Store):
    for fence in [0, -1]:
        with pytest.raises(leasefence.InvalidArgument) as err:
            store.admit("bucket", fence)
        assert err.value.argument == "fence", str(err.value)
    # The gate still works as before: the refusals were errors, not stale answers.
    assert store.admit("bucket", 2) is True
    assert store.admit("bucket", 1) is False
    with pytest.raises(leasefence.InvalidArgument):
        store.admit("bucket", 0)


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


def test_fail_names_retry_at(store: Store):
    store.enqueue("j")
    lease = store.claim("j", "A", 10.0, now=0.0)
    assert lease is not None
    for bad in [float("nan"), float("inf"), float("-inf")]:
        with pytest.raises(leasefence.InvalidArgument) as err:
            store.fail(lease, "boom", now=1.0, retry_at=bad)
        assert err.value.argument == "retry_at", str(err.value)
    info = store.inspect("j", now=1.0)
    assert (info.status, info.fence, info.owner) == ("leased", 1, "A")


def test_a_str_payload_is_a_type_error_that_says_encode(store: Store):
    with pytest.raises(TypeError) as err:
        store.enqueue("k", "text")
    assert "invalid argument `payload`: must be bytes, not str" in str(err.value)
    with pytest.raises(TypeError) as err:
        NewJob("k", payload=12)
    assert "invalid argument `payload`: must be bytes, not int" in str(err.value)
    assert store.inspect("k") is None
    assert store.enqueue("k", bytearray(b"ok"))
    assert store.inspect("k").payload == b"ok"


@pytest.mark.parametrize("bad", [[1, 2, 3], (104, 105), range(3)])
def test_a_list_of_ints_is_no_payload(store: Store, bad):
    # A sequence of small ints was stored as the bytes it spelled ([1, 2, 3] -> b"\x01\x02\x03").
    with pytest.raises(TypeError) as err:
        store.enqueue("k", bad)
    assert "invalid argument `payload`: must be bytes" in str(err.value)
    with pytest.raises(TypeError):
        NewJob("k", payload=bad)
    assert store.inspect("k") is None
    assert store.enqueue("k", memoryview(b"ok"))
    assert store.inspect("k").payload == b"ok"


def test_enqueue_many_takes_a_lone_id_as_one_job(store: Store):
    assert store.enqueue_many("abc") == [True]
    assert [job.id for job in store.list(now=0.0)] == ["abc"]


def test_the_seed_functions_refuse_an_empty_path_or_a_nul_by_name(tmp_path: Path):
    for bad in ["", str(tmp_path / "a\0b.db")]:
        for call in [
            lambda: leasefence.init_db(bad),
            lambda: leasefence.enqueue(bad, "j"),
            lambda: leasefence.claim(bad, "j", "A", 0.0, 1.0),
        ]:
            with pytest.raises(leasefence.InvalidArgument) as err:
                call()
            assert err.value.argument == "path", str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_a_timed_out_handler_is_told_no_by_check_lease_and_admit(tmp_path: Path):
    db = tmp_path / "jobs.db"
    store = Store(db)
    store.enqueue("mail")
    # A first holder gave its lease back: the worker's attempt holds fence 2.
    assert store.release(store.claim("mail", "earlier", 30.0, now=0.0))
    seen = []

    def handler(job):
        seen.append((job.lost, job.check_lease(), job.admit("mailer")))
        # Past the time limit the worker gives the attempt up: wait until it says so.
        assert job.wait(10.0)
        seen.append((job.lost, job.check_lease(), job.admit("mailer")))
        return "sent anyway"

    worker = Worker(db, handler, timeout=0.3, ttl=30.0, drain=True, poll_interval=0.01)
    stats = worker.run(handle_signals=False)
    assert seen == [(False, True, True), (True, False, False)]
    assert (stats.timed_out, stats.completed) == (1, 0)
    info = store.inspect("mail")
    assert info.result is None and info.error.startswith("timed out after 0.3 s")
    # The gate kept the fence admitted before the limit (2): fence 2 is still admitted, not 1.
    assert store.admit("mailer", 2) is True
    assert store.admit("mailer", 1) is False


def test_now_is_keyword_only_where_the_seed_order_would_swap_it(store: Store):
    store.enqueue("z")
    # The seed's claim is (now, ttl); Store.claim's ttl comes first, so now must be named.
    with pytest.raises(TypeError):
        store.claim("z", "A", 1000.0, 30.0)
    lease = store.claim("z", "A", 30.0, now=1000.0)
    assert lease is not None and lease.until == 1030.0
    with pytest.raises(TypeError):
        store.renew(lease, 30.0, 1001.0)
    with pytest.raises(TypeError):
        store.complete(lease, "r", 1001.0)
    with pytest.raises(TypeError):
        store.fail(lease, "boom", 1001.0)
    assert store.inspect("z", now=1001.0).until == 1030.0


def test_arguments_are_named_as_the_caller_passed_them(store: Store, tmp_path: Path):
    for call, name in [
        (lambda: store.claim_next("w", queues=[""], now=0.0), "queues"),
        (lambda: store.claim_batch("w", 2, queues=["ok", ""], now=0.0), "queues"),
        (lambda: store.retry([""]), "job_ids"),
        (lambda: store.delete(["a", ""]), "job_ids"),
        (lambda: store.enqueue_many(["a", ""]), "jobs"),
    ]:
        with pytest.raises(leasefence.InvalidArgument) as err:
            call()
        assert err.value.argument == name, (name, str(err.value))
    assert store.list(now=0.0) == []
    # Which of the list's ids is bad: the list itself is not empty.
    with pytest.raises(leasefence.InvalidArgument) as err:
        store.enqueue_many(["ok", "fine", ""])
    assert "the job id at index 2 must not be empty" in str(err.value), str(err.value)
    assert store.list(now=0.0) == []
    db = tmp_path / "w.db"
    for kwargs, name in [({"owner_prefix": ""}, "owner_prefix"), ({"queues": {"": 1}}, "queues")]:
        with pytest.raises(leasefence.InvalidArgument) as err:
            Worker(db, lambda job: "x", **kwargs)
        assert err.value.argument == name, (kwargs, str(err.value))
    with pytest.raises(TypeError) as err:
        Worker(db, lambda job: "x", queues=["a"])
    assert "invalid argument `queues`" in str(err.value)
    with pytest.raises(leasefence.InvalidArgument) as err:
        Worker("", lambda job: "x")
    assert err.value.argument == "db"
    with pytest.raises(TypeError):
        Worker(b"x.db", lambda job: "x")
    assert "renewed=0" in repr(Worker(db, lambda job: "x", drain=True).run(handle_signals=False))


def test_a_lease_survives_pickle_and_copy_and_still_holds(store: Store):
    import copy
    import pickle

    store.enqueue("p", b"pay", kind="k", priority=3, max_attempts=2)
    lease = store.claim_next("A", 30.0, now=0.0)
    assert lease is not None
    for back in [pickle.loads(pickle.dumps(lease)), copy.copy(lease), copy.deepcopy(lease)]:
        assert back == lease and hash(back) == hash(lease)
        assert (back.job_id, back.owner, back.fence, back.until) == ("p", "A", 1, 30.0)
        assert (back.queue, back.kind, back.payload, back.priority) == ("default", "k", b"pay", 3)
        assert (back.max_attempts, back.attempt, back.last_error) == (2, 1, None)
    # The copy is as good as the original: the store judges owner and fence, nothing else.
    back = pickle.loads(pickle.dumps(lease))
    assert store.complete(back, "done", now=1.0) is True
    assert store.complete(lease, "again", now=1.0) is False
    assert store.state("p")["result"] == "done"


def test_a_new_job_compares_by_value_and_survives_pickle_and_copy(store: Store):
    import copy
    import pickle

    job = NewJob(
        "n", b"pay", queue="q", kind="k", priority=-3, not_before=5.0, max_attempts=2,
        unique_key="u", unique_for=60.0,
    )
    assert (job.job_id, job.payload, job.queue, job.kind, job.priority) == ("n", b"pay", "q", "k", -3)
    assert (job.not_before, job.max_attempts, job.unique_key, job.unique_for) == (5.0, 2, "u", 60.0)
    plain = NewJob("m")
    assert (plain.payload, plain.queue, plain.kind, plain.priority, plain.not_before) == (
        None, "default", None, 0, 0.0,
    )
    assert (plain.max_attempts, plain.unique_key, plain.unique_for) == (0, None, None)
    assert job == NewJob(
        "n", b"pay", queue="q", kind="k", priority=-3, not_before=5.0, max_attempts=2,
        unique_key="u", unique_for=60.0,
    )
    assert job != NewJob("n", b"pay", queue="q", kind="k", priority=-3, not_before=5.0)
    assert job != plain
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(job, protocol)) == job, protocol
        assert pickle.loads(pickle.dumps(plain, protocol)) == plain, protocol
    for back in [copy.copy(job), copy.deepcopy(job)]:
        assert back == job
    # Equal jobs hash alike (also at -0.0), so they can be set members and dict keys.
    assert hash(NewJob("n", not_before=0.0)) == hash(NewJob("n", not_before=-0.0))
    assert len({plain, NewJob("m"), job, copy.copy(job)}) == 2
    assert NewJob("m", b"") != plain and NewJob("m", b"").payload == b""
    # What comes back enqueues the same job: its fields as stored, read back.
    assert store.enqueue_many([pickle.loads(pickle.dumps(job))]) == [True]
    info = store.inspect("n", now=0.0)
    assert info is not None
    assert (info.queue, info.kind, info.payload, info.priority, info.not_before) == ("q", "k", b"pay", -3, 5.0)
    assert (info.max_attempts, info.unique_key) == (2, "u")
    # Its unique key (with its window) holds for the copy too: nothing is inserted.
    assert store.enqueue_many([copy.copy(NewJob("n2", queue="q", unique_key="u"))]) == [False]


def test_equal_leases_hash_alike_also_at_minus_zero():
    # 0.0 == -0.0, so the two leases are equal; their hashes differed (the bits of until),
    # and a set or dict kept both.
    a, b = Lease("j", "A", 1, 0.0), Lease("j", "A", 1, -0.0)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1


@pytest.mark.parametrize("threads", [-1, 2**70])
def test_a_thread_count_out_of_range_says_so(tmp_path: Path, threads):
    # -1 was refused saying the counts must be "(int)", which it is.
    with pytest.raises(leasefence.InvalidArgument) as err:
        Worker(tmp_path / "w.db", lambda job: "x", queues={"q": threads})
    assert err.value.argument == "queues"
    assert f"from 1 to 2**63 - 1, got {threads}" in str(err.value)


def test_a_thread_count_of_the_wrong_type_is_a_type_error(tmp_path: Path):
    with pytest.raises(TypeError) as err:
        Worker(tmp_path / "w.db", lambda job: "x", queues={"q": "2"})
    assert "invalid argument `queues`: must be an int, not str" in str(err.value)


def test_stats_are_hashable_values(store: Store):
    a, b = store.stats(now=0.0), store.stats(now=0.0)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1


def test_kinds_and_lone_ids_are_named_as_passed(store: Store, tmp_path: Path):
    db = tmp_path / "k.db"
    for kwargs, name in [({"kinds": {"": lambda job: "x"}}, "kinds"), ({"kinds": {"a": 5}}, "kinds")]:
        with pytest.raises(leasefence.InvalidArgument) as err:
            Worker(db, **kwargs)
        assert err.value.argument == name, (kwargs, str(err.value))
    with pytest.raises(leasefence.InvalidArgument) as err:
        store.enqueue_many("")
    assert err.value.argument == "jobs"


def test_a_lease_built_by_hand_is_checked_like_any_input():
    for kwargs, name in [
        ({"job_id": ""}, "job_id"),
        ({"owner": ""}, "owner"),
        ({"until": float("nan")}, "until"),
        ({"priority": 2**63}, "priority"),
        ({"max_attempts": -1}, "max_attempts"),
        ({"attempt": -1}, "attempt"),
        ({"attempt": 0}, "attempt"),
        ({"kind": ""}, "kind"),
        ({"kind": "a\nb"}, "kind"),
        ({"fence": 2**64}, "fence"),
        ({"queue": ""}, "queue"),
    ]:
        fields = {"job_id": "j", "owner": "A", "fence": 1, "until": 10.0, **kwargs}
        with pytest.raises(leasefence.InvalidArgument) as err:
            leasefence.Lease(**fields)
        assert err.value.argument == name, (kwargs, str(err.value))


def test_list_names_after(store: Store):
    store.enqueue("j")
    with pytest.raises(leasefence.InvalidArgument) as err:
        store.list(after="")
    assert err.value.argument == "after", str(err.value)
    assert "`after`" in str(err.value)


def test_a_nul_in_a_file_name_is_refused_by_name(tmp_path: Path):
    for db in [str(tmp_path / "a\0b.db"), tmp_path / "a\0b.db"]:
        with pytest.raises(leasefence.InvalidArgument) as err:
            Store(db)
        assert err.value.argument == "db", str(err.value)
        with pytest.raises(leasefence.InvalidArgument) as err:
            Worker(db, lambda job: "x")
        assert err.value.argument == "db", str(err.value)
        assert "\0" not in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_a_bad_connection_string_or_schema_fails_when_the_worker_is_made(tmp_path: Path):
    # Checked without connecting (no server needed): as Store refuses them, not at run().
    for db, schema, name in [
        ("postgres://u:pw@127.0.0.1/test?bogus=1", None, "db"),
        ("postgres://u:pw@[bad/test", None, "db"),
        ("postgres://postgres@127.0.0.1/test", "bad schema!", "schema"),
    ]:
        with pytest.raises(leasefence.InvalidArgument) as err:
            Worker(db, lambda job: "x", schema=schema)
        assert err.value.argument == name, (db, str(err.value))
        assert "pw" not in str(err.value), str(err.value)


def test_a_lease_made_by_hand_needs_a_fence_a_claim_hands_out():
    for fence in [0, -5]:
        with pytest.raises(leasefence.InvalidArgument) as err:
            Lease("j", "o", fence, 1.0)
        assert err.value.argument == "fence", str(err.value)
    assert Lease("j", "o", 1, 1.0).fence == 1


def test_claim_many_names_a_path_that_is_no_path(db: Path):
    leasefence.enqueue(db, "j")
    with pytest.raises(TypeError) as err:
        leasefence.claim_many(None, "j", ["a"], 0.0, 1.0)  # type: ignore[arg-type]
    assert "invalid argument `path`" in str(err.value), str(err.value)
    assert read_row(db, "j") == ("j", None, 0.0, 0, None, 0)


def test_unique_for_without_a_key_says_what_to_set(store: Store):
    with pytest.raises(leasefence.InvalidArgument) as err:
        store.enqueue("u", unique_for=5.0)
    assert err.value.argument == "unique_for"
    assert "set unique_key too" in str(err.value), str(err.value)
    assert store.inspect("u") is None


@pytest.mark.parametrize(
    "call, name, kind",
    [
        (lambda s: s.claim_next("w", ttl=1.0, queues=True, now=0.0), "queues", "bool"),
        (lambda s: s.claim_batch("w", 2, ttl=1.0, queues=7, now=0.0), "queues", "int"),
        (lambda s: s.retry_dead(queues=5, now=0.0), "queues", "int"),
        (lambda s: s.retry(0), "job_ids", "int"),
        (lambda s: s.delete(None), "job_ids", "NoneType"),
        (lambda s: s.delete([1, 2]), "job_ids", "list"),
    ],
)
def test_a_queue_or_id_list_of_the_wrong_type_is_a_type_error(tmp_path: Path, call, name, kind):
    store = Store(tmp_path / "jobs.db")
    store.enqueue("j")
    with pytest.raises(TypeError) as err:
        call(store)
    assert f"invalid argument `{name}`" in str(err.value)
    assert str(err.value).endswith(f", not {kind}")
    assert store.inspect("j", now=0.0).status == "ready"  # nothing claimed, nothing deleted


def test_a_handler_that_is_not_callable_is_a_type_error(tmp_path: Path):
    with pytest.raises(TypeError) as err:
        Worker(tmp_path / "w.db", 42)  # type: ignore[arg-type]
    assert str(err.value) == (
        "invalid argument `handler`: must be callable (it is called with a Job), not int"
    )

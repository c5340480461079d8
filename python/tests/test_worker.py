"""leasefence.Worker: Python handlers on Rust threads, heartbeats, lease loss, timeouts and
stopping on SIGTERM/SIGINT. Conditions are waited for (with a deadline), never slept for."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import leasefence
from leasefence import Store, Worker
from conftest import read_row

DEADLINE = 30.0


def wait_for(condition, what: str, deadline: float = DEADLINE) -> None:
    end = time.monotonic() + deadline
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def test_a_worker_runs_handlers_and_stores_their_results(tmp_path: Path):
    path = tmp_path / "jobs.db"
    store = Store(path)
    store.enqueue_many([leasefence.NewJob(f"j{i}", str(i).encode()) for i in range(20)])
    seen = []

    def handler(job: leasefence.Job) -> str:
        seen.append((job.id, job.fence, job.attempt))
        assert not job.lost and job.lease.fence == job.fence
        return f"twice {int(job.payload) * 2}"

    stats = Worker(path, handler, concurrency=3, drain=True).run()
    assert (stats.completed, stats.claimed, stats.stale_refused) == (20, 20, 0)
    assert sorted(seen) == sorted((f"j{i}", 1, 1) for i in range(20))
    for i in range(20):
        assert read_row(path, f"j{i}")[4:] == (f"twice {i * 2}", 1)


def test_an_exception_is_a_failure_and_a_retry_runs_it_again(tmp_path: Path):
    path = tmp_path / "jobs.db"
    store = Store(path)
    store.enqueue("j", max_attempts=1)
    seen = []

    def broken(job):
        seen.append(job.fence)
        raise RuntimeError(f"broken under fence {job.fence}")

    stats = Worker(path, broken, drain=True).run()
    assert (stats.dead, stats.completed) == (1, 0)
    info = store.inspect("j")
    assert info.status == "dead" and info.error == "RuntimeError: broken under fence 1"
    assert store.retry("j") == [True]  # the operator verb

    def fixed(job):
        seen.append(job.fence)
        return None  # an empty result

    assert Worker(path, fixed, drain=True).run().completed == 1
    assert seen == [1, 2]
    assert read_row(path, "j")[3:] == (2, "", 1)


def test_a_handler_exception_is_logged_with_its_traceback(tmp_path: Path, caplog):
    """The stored failure is `Type: message`; the traceback goes to the `leasefence.worker`
    logger (ERROR), where a Python job runner's user looks for it."""
    path = tmp_path / "jobs.db"
    Store(path).enqueue("tb", max_attempts=1)

    def deep_inside(job):
        raise KeyError(f"missing under fence {job.fence}")

    def handler(job):
        return deep_inside(job)

    with caplog.at_level("ERROR", logger="leasefence.worker"):
        stats = Worker(path, handler, drain=True).run()
    assert stats.dead == 1
    records = [r for r in caplog.records if r.name == "leasefence.worker"]
    assert len(records) == 1, caplog.text
    record = records[0]
    assert record.levelname == "ERROR"
    assert record.getMessage() == "handler raised on job tb (fence 1); the attempt fails"
    assert record.exc_info is not None and record.exc_info[0] is KeyError
    assert "deep_inside" in caplog.text and "missing under fence 1" in caplog.text


def test_a_handler_returning_a_wrong_type_is_a_failure(tmp_path: Path, caplog):
    path = tmp_path / "jobs.db"
    store = Store(path)
    store.enqueue("j", max_attempts=1)
    why = "the handler returned an object of type int; return a str (the result), UTF-8 bytes or None"
    with caplog.at_level("ERROR", logger="leasefence.worker"):
        assert Worker(path, lambda job: 42, drain=True).run().dead == 1
    assert store.inspect("j").error == why
    # Logged as a raised exception is, where the user looks for a handler's mistakes.
    records = [r for r in caplog.records if r.name == "leasefence.worker"]
    assert [r.getMessage() for r in records] == [
        f"handler of job j (fence 1) returned what cannot be stored: {why}; the attempt fails"
    ]
    assert records[0].levelname == "ERROR"


def test_kinds_route_jobs_to_their_handlers(tmp_path: Path):
    path = tmp_path / "jobs.db"
    store = Store(path)
    store.enqueue("a", kind="upper", payload=b"abc")
    store.enqueue("b", kind="lower", payload=b"XYZ")
    kinds = {
        "upper": lambda job: job.payload.decode().upper(),
        "lower": lambda job: job.payload.decode().lower(),
    }
    assert Worker(path, kinds=kinds, drain=True).run().completed == 2
    assert store.state("a")["result"] == "ABC" and store.state("b")["result"] == "xyz"


def test_a_lost_lease_sets_the_flag_and_the_late_result_is_refused(tmp_path: Path):
    path = tmp_path / "jobs.db"
    store = Store(path)
    store.enqueue("j")
    started = threading.Event()
    outcome = {}

    def handler(job):
        started.set()
        # Waits (GIL released) until the lease is lost, as a long step would.
        outcome["lost_in_time"] = job.wait(DEADLINE)
        outcome["flag"] = job.lost
        with pytest.raises(leasefence.LeaseLost):
            job.raise_if_lost()
        return "late result"

    # A short ttl: the heartbeat renews every ttl/2; the operator's cancel ends the lease, so
    # the next renewal is refused.
    worker = Worker(path, handler, ttl=1.0, poll_interval=0.05)
    runner = threading.Thread(target=lambda: outcome.setdefault("stats", worker.run(handle_signals=False)))
    runner.start()
    assert started.wait(DEADLINE)
    assert store.cancel("j") is True
    wait_for(lambda: "flag" in outcome, "the handler to see the lost lease")
    worker.shutdown()
    runner.join(DEADLINE)
    assert outcome["lost_in_time"] is True and outcome["flag"] is True
    assert store.state("j")["result"] is None  # the late result was not stored
    assert store.inspect("j").status == "cancelled"
    assert outcome["stats"].completed == 0


def test_check_lease_and_admit_fence_side_effects(tmp_path: Path):
    path = tmp_path / "jobs.db"
    store = Store(path)
    store.enqueue("j")
    # A first holder gave its lease back: the worker's attempt holds fence 2.
    assert store.release(store.claim("j", "earlier", 30.0, now=0.0))
    seen = {}

    def handler(job):
        seen["current"] = job.check_lease()
        seen["admitted"] = job.admit("mailbox")
        return "ok"

    assert Worker(path, handler, drain=True).run().completed == 1
    assert seen == {"current": True, "admitted": True}
    # The gate remembers fence 2: an older fence is refused.
    assert store.admit("mailbox", 1) is False


def test_a_timeout_stops_a_handler_and_records_a_failure(tmp_path: Path):
    path = tmp_path / "jobs.db"
    Store(path).enqueue("j", max_attempts=1)

    def handler(job):
        # Longer than a duration holds: as long as it takes, here until the run-time limit
        # cancels the job.
        job.wait(1e30)
        return "too slow"

    stats = Worker(path, handler, timeout=0.2, drain=True).run()
    assert stats.timed_out == 1 and stats.completed == 0
    info = Store(path).inspect("j")
    assert info.status == "dead" and info.result is None


def test_a_pathlike_db_is_the_sqlite_file_store_opens(tmp_path: Path, monkeypatch):
    import pathlib

    monkeypatch.chdir(tmp_path)
    # A legal file name that reads as a libpq connection string: a path is a file all the same.
    path = pathlib.Path("dbname=test user=postgres")
    store = Store(path)
    assert store.backend == "sqlite"
    store.enqueue("j")
    stats = Worker(path, lambda job: "done", drain=True).run(handle_signals=False)
    assert stats.completed == 1
    assert Store(tmp_path / "dbname=test user=postgres").state("j")["result"] == "done"


def test_the_native_worker_takes_any_mapping_as_its_stub_says(tmp_path: Path):
    import types

    from leasefence import _native

    path = tmp_path / "jobs.db"
    store = Store(path)
    store.enqueue("a1", kind="a")
    native = _native.Worker(
        str(path),
        None,
        kinds=types.MappingProxyType({"a": lambda job: "ran a"}),
        queues=types.MappingProxyType({"default": 1}),
        drain=True,
    )
    native.start()
    assert native.join().completed == 1
    assert store.state("a1")["result"] == "ran a"
    for name in ["kinds", "queues"]:
        with pytest.raises(TypeError) as err:
            _native.Worker(str(path), str, **{name: [("default", 1)]})
        assert f"invalid argument `{name}`" in str(err.value)


def test_an_empty_queues_mapping_is_refused_not_read_as_every_queue(tmp_path: Path):
    path = tmp_path / "jobs.db"
    store = Store(path)
    store.enqueue("in-default")
    with pytest.raises(leasefence.InvalidArgument) as err:
        store.claim_next("o", queues=[])  # as the store refuses an empty list
    assert err.value.argument == "queues"
    with pytest.raises(leasefence.InvalidArgument) as err:
        Worker(path, lambda job: "done", queues={}, drain=True)
    assert err.value.argument == "queues"
    assert Store(path).inspect("in-default").status == "ready"


async def async_handler(job):
    return "done"


def generator_handler(job):
    yield "done"


async def async_generator_handler(job):
    yield "done"


class AsyncCallable:
    async def __call__(self, job):
        return "done"


@pytest.mark.parametrize(
    "handler", [async_handler, generator_handler, async_generator_handler, AsyncCallable()]
)
def test_async_and_generator_handlers_are_refused_at_construction(tmp_path: Path, handler):
    import functools

    path = tmp_path / "jobs.db"
    store = Store(path)
    store.enqueue("j", max_attempts=1)
    with pytest.raises(TypeError) as err:
        Worker(path, handler, drain=True)
    assert "invalid argument `handler`" in str(err.value)
    with pytest.raises(TypeError) as err:
        Worker(path, kinds={"k": handler}, drain=True)
    assert "invalid argument `kinds`" in str(err.value)
    if not isinstance(handler, AsyncCallable):
        with pytest.raises(TypeError):
            Worker(path, functools.partial(handler), drain=True)
    # Nothing ran: the job is still ready, its one attempt unspent.
    info = Store(path).inspect("j")
    assert (info.status, info.attempts) == ("ready", 0)


def test_bad_worker_arguments_name_themselves(tmp_path: Path):
    path = tmp_path / "jobs.db"
    Store(path)
    cases = [
        (dict(handler=None), "handler"),
        (dict(handler=str, ttl=0.0), "ttl"),
        (dict(handler=str, concurrency=0), "concurrency"),
        (dict(handler=str, poll_interval=0.0), "poll_interval"),
        (dict(handler=str, poll_interval=1e30), "poll_interval"),
        (dict(handler=str, shutdown_deadline=1e30), "shutdown_deadline"),
        (dict(handler=str, synchronous="fast"), "synchronous"),
    ]
    for kwargs, name in cases:
        handler = kwargs.pop("handler")
        with pytest.raises(leasefence.InvalidArgument) as err:
            Worker(path, handler, **kwargs)
        assert err.value.argument == name


def test_concurrency_with_queues_is_refused_not_ignored(tmp_path: Path):
    # With queues= each queue has its own threads; concurrency=5 was silently not used (one
    # thread served the queue).
    path = tmp_path / "jobs.db"
    Store(path).enqueue("j", queue="q")
    with pytest.raises(leasefence.InvalidArgument) as err:
        Worker(path, lambda job: "done", concurrency=5, queues={"q": 1}, drain=True)
    assert err.value.argument == "concurrency"
    assert "queues" in str(err.value)
    # The default (1) with queues= stays fine.
    assert Worker(path, lambda job: "done", queues={"q": 2}, drain=True).run().completed == 1


def test_a_worker_runs_once(tmp_path: Path):
    path = tmp_path / "jobs.db"
    Store(path)
    worker = Worker(path, lambda job: "x", drain=True)
    worker.run()
    with pytest.raises(leasefence.InvalidArgument):
        worker.run()


def test_run_restores_the_signal_handlers_even_when_it_fails(tmp_path: Path):
    path = tmp_path / "jobs.db"
    worker = Worker(path, lambda job: "x", drain=True)
    worker.run()
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    try:
        with pytest.raises(leasefence.InvalidArgument):
            worker.run()  # start() fails: "was already run"
        after = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])
    # Else Ctrl-C would call shutdown() on a finished worker instead of raising KeyboardInterrupt.
    assert after == before


def test_run_leaves_a_signal_handled_by_c_code_alone(tmp_path: Path, monkeypatch):
    # signal.getsignal() is None for a handler installed by C code: Python cannot put it back,
    # so run() must not take that signal over (restoring None would raise a TypeError).
    real_getsignal, real_signal = signal.getsignal, signal.signal
    monkeypatch.setattr(
        signal, "getsignal", lambda s: None if s == signal.SIGTERM else real_getsignal(s)
    )
    installed = []
    monkeypatch.setattr(signal, "signal", lambda s, h: (installed.append(s), real_signal(s, h))[1])
    before = real_getsignal(signal.SIGINT)
    path = tmp_path / "jobs.db"
    Store(path).enqueue("j")
    assert Worker(path, lambda job: "x", drain=True).run().completed == 1
    assert installed == [signal.SIGINT, signal.SIGINT]  # taken over, then restored
    assert real_getsignal(signal.SIGINT) is before


WORKER_SCRIPT = textwrap.dedent(
    """
    import sys, leasefence
    path = sys.argv[1]
    def handler(job):
        print("started", job.id, flush=True)
        lost = job.wait(60)   # a long step; stops early only if the lease is given back
        return "finished" if not lost else "given back"
    stats = leasefence.Worker(path, handler, shutdown_deadline=float(sys.argv[2])).run()
    print("stats", stats.completed, stats.released, flush=True)
    """
)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_worker_and_gives_the_lease_back(tmp_path: Path, sig):
    path = tmp_path / "jobs.db"
    Store(path).enqueue("j")
    script = tmp_path / "worker.py"
    script.write_text(WORKER_SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(path), "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().split() == ["started", "j"]
        sent = time.monotonic()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=DEADLINE)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert out.split() == ["stats", "0", "1"]
    # Stopped within the deadline (0.2 s) plus the wait slices, not after the handler's 60 s.
    assert time.monotonic() - sent < 10
    # The lease was given back with its fence: claimable at once, and the next fence is 2.
    assert read_row(path, "j")[1:4] == (None, 0.0, 1)
    assert leasefence.claim(path, "j", "next", time.time(), 10.0) == 2


def test_a_graceful_stop_lets_a_short_handler_finish(tmp_path: Path):
    path = tmp_path / "jobs.db"
    Store(path).enqueue("j")
    started = threading.Event()
    release = threading.Event()

    def handler(job):
        started.set()
        release.wait(DEADLINE)
        return "finished"

    worker = Worker(path, handler, shutdown_deadline=DEADLINE)
    result = {}
    runner = threading.Thread(target=lambda: result.setdefault("stats", worker.run(handle_signals=False)))
    runner.start()
    assert started.wait(DEADLINE)
    worker.shutdown()
    assert worker.shutting_down
    release.set()
    runner.join(DEADLINE)
    assert result["stats"].completed == 1
    assert read_row(path, "j")[4:] == ("finished", 1)


def test_a_worker_on_postgres():
    from conftest import need_pg, drop_schema
    import uuid

    target = need_pg()
    schema = "py_" + uuid.uuid4().hex[:12]
    store = Store(target, schema=schema)
    store.enqueue_many([leasefence.NewJob(f"pg-{i}", str(i).encode()) for i in range(6)])
    store.enqueue("pg-broken", max_attempts=1, kind="broken")
    kinds = {"broken": lambda job: 1 / 0}
    stats = Worker(target, lambda job: job.id[::-1], kinds=kinds, schema=schema, concurrency=2, drain=True).run()
    assert (stats.completed, stats.dead) == (6, 1)
    for i in range(6):
        assert store.state(f"pg-{i}")["result"] == f"pg-{i}"[::-1]
    assert store.inspect("pg-broken").error == "ZeroDivisionError: division by zero"
    store.close()
    drop_schema(schema)


BUSY_SCRIPT = textwrap.dedent(
    """
    import sys, time, threading, leasefence
    started, returned = threading.Event(), threading.Event()
    def handler(job):
        started.set()
        end = time.monotonic() + 1.5   # a CPU-bound step that does not look at job.lost
        while time.monotonic() < end:
            pass
        returned.set()
        return "done"
    w = leasefence.Worker(sys.argv[1], handler, shutdown_deadline=0.2)
    threading.Thread(target=lambda: (started.wait(30), w.shutdown()), daemon=True).start()
    stats = w.run()
    print("returned", stats.released, returned.is_set(), flush=True)
    """
)


def test_run_returns_only_once_a_handler_past_the_deadline_has_returned(tmp_path: Path):
    # The core gives a handler that outlives the shutdown deadline up (lease released, lost
    # set) and returns; a thread still in Python code at interpreter exit aborted the process
    # ("Fatal Python error: PyGILState_Release", rc -6). run() now waits for it to return.
    path = tmp_path / "jobs.db"
    Store(path).enqueue("j")
    script = tmp_path / "busy.py"
    script.write_text(BUSY_SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script), str(path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["returned", "1", "True"]
    # Given back at the deadline, fence kept; the late "done" was not stored.
    info = Store(path).inspect("j")
    assert (info.status, info.owner, info.fence, info.result) == ("ready", None, 1, None)


@pytest.mark.parametrize("exc", [SystemExit(3), KeyboardInterrupt()])
def test_a_handler_raising_systemexit_stops_the_worker_and_gives_the_job_back(tmp_path: Path, exc):
    path = tmp_path / "jobs.db"
    store = Store(path)
    store.enqueue("first", max_attempts=1, priority=1)
    store.enqueue("second")
    seen = []

    def handler(job):
        seen.append(job.id)
        raise exc

    outcome = {}

    def run() -> None:
        try:
            outcome["stats"] = Worker(path, handler, poll_interval=0.05).run()
        except BaseException as raised:  # the worker stopped, then re-raised it
            outcome["raised"] = raised

    # Not drain: only the shutdown the exception asks for ends this run.
    runner = threading.Thread(target=run)
    runner.start()
    runner.join(DEADLINE)
    assert not runner.is_alive(), "the worker did not stop"
    assert outcome.get("raised") is exc, outcome
    assert seen == ["first"]  # no claim after it
    check = Store(path)
    first = check.inspect("first")
    # Not a failure of the job: given back with its fence, the attempt refunded.
    assert (first.status, first.owner, first.fence, first.attempts) == ("ready", None, 1, 0)
    assert first.error is None
    assert check.inspect("second").fence == 0



DAEMON_SCRIPT = textwrap.dedent(
    """
    import sys, threading, time, leasefence
    def handler(job):
        time.sleep(0.001)
        return "ok"
    w = leasefence.Worker(sys.argv[1], handler, concurrency=2)
    threading.Thread(target=w.run, kwargs={"handle_signals": False}, daemon=True).start()
    while leasefence.Store(sys.argv[1]).stats().done < 20:
        time.sleep(0.01)
    print("main exits", flush=True)
    """
)


def test_a_worker_in_a_daemon_thread_survives_the_interpreter_exiting(tmp_path: Path):
    # Python does not join a daemon thread at exit: the worker's Rust threads went on calling
    # handlers while the interpreter finalized, and the process crashed (SIGSEGV, or "Fatal
    # Python error: PyGILState_Release"). At exit the worker is now stopped at once first:
    # no handler starts any more, the running ones return, their leases are given back.
    path = tmp_path / "jobs.db"
    Store(path).enqueue_many([f"j{i}" for i in range(20000)])
    script = tmp_path / "daemon.py"
    script.write_text(DAEMON_SCRIPT)
    for _ in range(5):
        proc = subprocess.run(
            [sys.executable, str(script), str(path)], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == ["main", "exits"]
        stats = Store(path).stats()
        assert (stats.leased, stats.expired) == (0, 0), stats


def test_a_second_run_of_a_running_worker_leaves_it_stopped_at_exit(tmp_path: Path):
    # The refused second run() must not take the running worker off the list the exit hook
    # stops.
    path = tmp_path / "jobs.db"
    Store(path).enqueue_many([f"j{i}" for i in range(20000)])
    script = tmp_path / "twice.py"
    script.write_text(
        DAEMON_SCRIPT.replace(
            'print("main exits"',
            'try:\n    w.run()\nexcept leasefence.InvalidArgument:\n    pass\nprint("main exits"',
        )
    )
    for _ in range(3):
        proc = subprocess.run(
            [sys.executable, str(script), str(path)], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == ["main", "exits"]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads /proc/self/fd")
def test_run_closes_the_database_a_handler_opened_through_admit(tmp_path: Path):
    # job.admit() and job.check_lease() open a connection of the worker's own; it stayed open
    # (the file, its -wal and -shm) after run() returned, for as long as the Worker lived.
    path = tmp_path / "jobs.db"
    Store(path).enqueue_many(["a", "b"])

    def handler(job):
        return "ok" if job.admit("mailbox") and job.check_lease() else "no"

    def open_files():
        names = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                names.append(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:
                pass
        return [name for name in names if name.startswith(str(tmp_path))]

    worker = Worker(path, handler, drain=True)
    assert worker.run().completed == 2
    assert open_files() == []
    assert Store(path).state("b")["result"] == "ok"

"""Periodic jobs from Python: Store.add_schedule / remove_schedule / schedules, the scheduler
role taken once (Store.schedule_tick) or by a worker (Worker(..., scheduler=True)), and the
same schedules read and written by the CLI. Stored state is read back through an independent
connection (the standard sqlite3 module, or the CLI)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import leasefence
from leasefence import Store, Worker
from test_processes import run_cli

T0 = 1_796_083_200  # 2026-12-01T00:00:00Z
HOUR = 3_600
SCHEDULER_JOB = "leasefence.scheduler"


def query(path: Path, sql: str, *params):
    """The rows of `sql`, read by the standard sqlite3 module in another process: an
    independent connection. (In this one it would pull the WAL file from under the open
    Store — see docs/python.md on two copies of SQLite in one process.)"""
    script = (
        "import json, sqlite3, sys\n"
        "con = sqlite3.connect(sys.argv[1])\n"
        "rows = con.execute(sys.argv[2], json.loads(sys.argv[3])).fetchall()\n"
        "con.close()\n"
        "print(json.dumps([[c.hex() if isinstance(c, bytes) else c for c in r] for r in rows]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(path), sql, json.dumps(list(params))],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [tuple(r) for r in json.loads(out.stdout)]


def stored_schedules(path: Path):
    return query(
        path,
        "SELECT name, cron, tz, queue, kind, payload, priority, max_attempts, created_at, "
        "last_slot FROM schedules ORDER BY name",
    )


def read_row(path: Path, job_id: str):
    """The job's row (id, owner, until, fence, result, done), or None."""
    rows = query(path, "SELECT id, owner, until, fence, result, done FROM jobs WHERE id = ?", job_id)
    return rows[0] if rows else None


def test_add_list_and_remove_a_schedule(store: Store):
    assert store.add_schedule(
        "nightly-report",
        "0 3 * * *",
        tz="Europe/Berlin",
        queue="reports",
        kind="report",
        payload=b"\x00pdf",
        priority=5,
        max_attempts=3,
        now=T0 + 0.25,
    ) is True
    # A known name: refused, the stored one left as it was.
    assert store.add_schedule("nightly-report", "@hourly", now=T0 + 1.0) is False
    assert store.add_schedule("sync", "*/5 * * * *", now=T0) is True
    infos = store.schedules()
    assert [i.name for i in infos] == ["nightly-report", "sync"]
    nightly, sync = infos
    assert (nightly.cron, nightly.tz, nightly.queue, nightly.kind) == (
        "0 3 * * *",
        "Europe/Berlin",
        "reports",
        "report",
    )
    assert (nightly.payload, nightly.priority, nightly.max_attempts) == (b"\x00pdf", 5, 3)
    assert (nightly.created_at, nightly.last_slot, nightly.last_run) == (T0 + 0.25, T0, None)
    # 03:00 in Berlin in winter is 02:00 UTC.
    assert nightly.next_slot == T0 + 2 * HOUR
    assert nightly.next_run(now=T0 + 30 * HOUR) == T0 + 26 * HOUR  # missed ones run as the latest
    assert (sync.tz, sync.queue, sync.kind, sync.payload, sync.priority, sync.max_attempts) == (
        "UTC",
        "default",
        None,
        None,
        0,
        0,
    )
    assert sync.next_slot == T0 + 300
    assert "nightly-report" in repr(nightly) and "Europe/Berlin" in repr(nightly)
    assert store.schedules() == infos  # snapshots compare by value
    assert store.remove_schedule("nightly-report") is True
    assert store.remove_schedule("nightly-report") is False
    assert [i.name for i in store.schedules()] == ["sync"]


def test_a_schedule_is_stored_in_the_file_the_cli_reads(tmp_path: Path):
    path = tmp_path / "jobs.db"
    store = Store(path)
    store.add_schedule("sync", "*/5 * * * *", queue="sync", kind="pull", payload=b"p", now=T0)
    assert stored_schedules(path) == [
        ("sync", "*/5 * * * *", "UTC", "sync", "pull", b"p".hex(), 0, 0, float(T0), T0)
    ]
    out = run_cli(path, "schedule", "list", "--json", "--now", str(T0))
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout.splitlines()[0])
    assert (record["name"], record["cron"], record["queue"], record["kind"]) == (
        "sync",
        "*/5 * * * *",
        "sync",
        "pull",
    )
    # … and what the CLI adds, Python lists.
    out = run_cli(path, "schedule", "add", "hourly", "--cron", "@hourly", "--now", str(T0))
    assert out.returncode == 0, out.stderr
    assert [i.name for i in store.schedules()] == ["hourly", "sync"]


def job_columns(path: Path, job_id: str):
    rows = query(
        path, "SELECT queue, kind, payload, priority, max_attempts FROM jobs WHERE id = ?", job_id
    )
    return rows[0] if rows else None


def test_schedule_tick_enqueues_each_due_slot_once_and_gives_the_role_back(tmp_path: Path):
    path = tmp_path / "jobs.db"
    store = Store(path)
    store.add_schedule("nightly", "0 2 * * *", queue="reports", kind="report", payload=b"x",
                       priority=7, max_attempts=2, now=T0)
    # 01:00: nothing due yet; the role was taken (fence 1) and given back.
    tick = store.schedule_tick(owner="cron-a", now=T0 + HOUR)
    assert tick is not None
    assert (tick.enqueued, tick.passed, tick.skipped, tick.next_slot, tick.fence) == (
        [],
        [],
        0,
        T0 + 2 * HOUR,
        1,
    )
    assert read_row(path, SCHEDULER_JOB)[1] is None  # no owner: given back
    # 02:00: the slot runs, once.
    tick = store.schedule_tick(owner="cron-a", now=T0 + 2 * HOUR)
    assert tick is not None and tick.fence == 2
    assert tick.enqueued == ["nightly@2026-12-01T02:00:00Z"]
    assert job_columns(path, "nightly@2026-12-01T02:00:00Z") == ("reports", "report", b"x".hex(), 7, 2)
    assert read_row(path, "nightly@2026-12-01T02:00:00Z") == (
        "nightly@2026-12-01T02:00:00Z", None, 0.0, 0, None, 0,
    )
    again = store.schedule_tick(owner="cron-b", now=T0 + 2 * HOUR + 1)
    assert again is not None and (again.enqueued, again.fence) == ([], 3)
    # Three days later: the latest slot runs, the two missed ones do not.
    late = store.schedule_tick(now=T0 + 74 * HOUR)
    assert late is not None
    assert (late.enqueued, late.skipped, late.skipped_at_least) == (
        ["nightly@2026-12-04T02:00:00Z"],
        2,
        False,
    )
    assert "nightly@2026-12-04T02:00:00Z" in repr(late)
    assert [i.last_run for i in store.schedules()] == [T0 + 74 * HOUR]
    assert read_row(path, "nightly@2026-12-02T02:00:00Z") is None
    # Every tick is an attempt in the role's ledger, each under its own fence.
    history = store.history(SCHEDULER_JOB)
    assert history is not None
    assert [(a.fence, a.owner, a.outcome) for a in history.attempts][:3] == [
        (1, "cron-a", "released"),
        (2, "cron-a", "released"),
        (3, "cron-b", "released"),
    ]
    assert history.attempts[3].owner.startswith("tick-")  # the default owner


def test_schedule_tick_stands_by_while_another_scheduler_holds_the_role(tmp_path: Path):
    path = tmp_path / "jobs.db"
    store = Store(path)
    store.add_schedule("sync", "*/5 * * * *", now=T0)
    assert store.schedule_tick(owner="a", now=T0) is not None  # creates the role's job
    held = store.claim(SCHEDULER_JOB, "worker-1-scheduler", 60.0, now=T0 + 300)
    assert held is not None
    assert store.schedule_tick(owner="b", now=T0 + 301) is None
    assert read_row(path, "sync@2026-12-01T00:05:00Z") is None  # the holder enqueues it
    assert read_row(path, SCHEDULER_JOB)[1:4] == ("worker-1-scheduler", T0 + 360.0, held.fence)
    # Once that lease has ended, a tick takes the role over under the next fence.
    tick = store.schedule_tick(owner="b", now=T0 + 361)
    assert tick is not None and tick.fence == held.fence + 1
    assert tick.enqueued == ["sync@2026-12-01T00:05:00Z"]


def test_schedule_tick_on_postgres():
    from conftest import drop_schema, need_pg
    import uuid

    target = need_pg()
    schema = "py_" + uuid.uuid4().hex[:12]
    store = Store(target, schema=schema)
    try:
        store.add_schedule("sync", "*/5 * * * *", kind="pull", now=T0)
        tick = store.schedule_tick(owner="a", now=T0 + 300)
        assert tick is not None and tick.enqueued == ["sync@2026-12-01T00:05:00Z"]
        job = store.inspect("sync@2026-12-01T00:05:00Z", now=T0 + 300)
        assert job is not None and (job.kind, job.status) == ("pull", "ready")
        assert store.schedule_tick(owner="b", now=T0 + 301).enqueued == []  # type: ignore[union-attr]
        assert store.inspect(SCHEDULER_JOB, now=T0 + 301).owner is None  # type: ignore[union-attr]
    finally:
        store.close()
        drop_schema(schema)


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda s: s.add_schedule("a@b", "@hourly", now=T0), "name"),
        (lambda s: s.add_schedule("", "@hourly", now=T0), "name"),
        (lambda s: s.add_schedule("x", "every hour", now=T0), "cron"),
        (lambda s: s.add_schedule("x", "@hourly", tz="Mars/Olympus", now=T0), "tz"),
        (lambda s: s.add_schedule("x", "@hourly", queue="", now=T0), "queue"),
        (lambda s: s.add_schedule("x", "@hourly", kind="", now=T0), "kind"),
        (lambda s: s.add_schedule("x", "@hourly", max_attempts=-1, now=T0), "max_attempts"),
        (lambda s: s.add_schedule("x", "@hourly", now=float("nan")), "now"),
        (lambda s: s.add_schedule("x", "@hourly", now=1e300), "now"),
        (lambda s: s.remove_schedule("a b"), "name"),
        (lambda s: s.schedule_tick(owner="", now=T0), "owner"),
        (lambda s: s.schedule_tick(owner="a", ttl=0.0, now=T0), "ttl"),
        (lambda s: s.schedule_tick(owner="a", now=float("inf")), "now"),
    ],
)
def test_bad_schedule_arguments_name_themselves_and_change_nothing(tmp_path: Path, call, argument):
    path = tmp_path / "jobs.db"
    store = Store(path)
    store.add_schedule("kept", "@hourly", now=T0)
    before = stored_schedules(path)
    with pytest.raises(leasefence.InvalidArgument) as err:
        call(store)
    assert err.value.argument == argument, err.value
    assert isinstance(err.value, ValueError)
    assert stored_schedules(path) == before
    assert read_row(path, SCHEDULER_JOB) is None  # no tick took the role


def test_a_payload_must_be_bytes(tmp_path: Path):
    store = Store(tmp_path / "jobs.db")
    with pytest.raises(TypeError, match="payload"):
        store.add_schedule("x", "@hourly", payload="text", now=T0)  # type: ignore[arg-type]
    assert store.schedules() == []


def test_a_worker_with_the_scheduler_role_enqueues_and_runs_the_due_slots(tmp_path: Path):
    path = tmp_path / "jobs.db"
    store = Store(path)
    # Every second (six fields, seconds first), from the machine's clock now.
    store.add_schedule("beat", "* * * * * *", kind="beat")
    ran = []

    def handler(job: leasefence.Job) -> str:
        ran.append(job.id)
        return "ok"

    worker = Worker(path, handler, scheduler=True, owner_prefix="w1", poll_interval=0.05)
    runner = leasefence_thread(worker)
    deadline = time.monotonic() + 30.0
    while not ran and time.monotonic() < deadline:
        time.sleep(0.01)
    # While it runs, the worker holds the role under its own owner name.
    holder = read_row(path, SCHEDULER_JOB)
    worker.shutdown()
    runner.join(timeout=30.0)
    assert not runner.is_alive()
    assert ran and ran[0].startswith("beat@"), ran
    assert holder[1] == "w1-scheduler", holder
    assert read_row(path, ran[0])[4:] == ("ok", 1)
    # Stopped: the role is given back, so another scheduler takes it at once.
    assert read_row(path, SCHEDULER_JOB)[1] is None


def test_a_worker_without_the_scheduler_role_enqueues_nothing(tmp_path: Path):
    path = tmp_path / "jobs.db"
    store = Store(path)
    # A slot is due now: added two minutes ago, every minute.
    store.add_schedule("sync", "* * * * *", now=time.time() - 120)
    stats = Worker(path, lambda job: "ok", drain=True).run()
    assert stats.claimed == 0
    assert store.list() == []
    assert read_row(path, SCHEDULER_JOB) is None


def leasefence_thread(worker: Worker):
    import threading

    thread = threading.Thread(target=lambda: worker.run(handle_signals=False), daemon=True)
    thread.start()
    return thread

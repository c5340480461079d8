"""Several OS processes on one file, and the Rust command line and the Python package on the
same database."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import leasefence
from conftest import IN_CI, read_row

RACER = textwrap.dedent(
    """
    import sys, leasefence
    path, name, jobs, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    # Every process races for every job at the same clock readings: rounds of claim, then
    # complete or release, so fences keep rising on every job.
    for r in range(rounds):
        for j in range(jobs):
            job = f"j{j}"
            fence = leasefence.claim(path, job, name, float(r * 10), 10.0)
            if fence is not None:
                print(job, fence, flush=True)
                if r == rounds - 1:
                    leasefence.complete(path, job, name, fence, float(r * 10) + 1, name)
    """
)


def test_processes_on_one_file_never_share_a_fence(tmp_path: Path):
    path = tmp_path / "jobs.db"
    leasefence.init_db(path)
    jobs, rounds, procs = 10, 6, 4
    for j in range(jobs):
        leasefence.enqueue(path, f"j{j}")
    script = tmp_path / "racer.py"
    script.write_text(RACER)
    running = [
        subprocess.Popen(
            [sys.executable, str(script), str(path), f"p{k}", str(jobs), str(rounds)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(procs)
    ]
    issued = []
    for proc in running:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        issued += [tuple(line.split()) for line in out.splitlines()]
    # Each (job, fence) was handed to exactly one process, and each job got one fence a round:
    # 1, 2, …, rounds (all rounds' leases expire at the next round's clock).
    assert len(issued) == len(set(issued)) == jobs * rounds
    for j in range(jobs):
        fences = sorted(int(f) for job, f in issued if job == f"j{j}")
        assert fences == list(range(1, rounds + 1))
        row = read_row(path, f"j{j}")
        assert row[3] == rounds and row[5] == 1 and row[4] == row[1]


LOCKER = textwrap.dedent(
    """
    import sqlite3, sys
    con = sqlite3.connect(sys.argv[1], isolation_level=None)
    con.execute("BEGIN IMMEDIATE")
    print("locked", flush=True)
    sys.stdin.readline()
    con.execute("ROLLBACK")
    """
)


class Locker:
    """Another process holding the database's write lock until `release` (a process of its
    own: two copies of SQLite in one process do not see each other's POSIX locks)."""

    def __init__(self, path: Path):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", LOCKER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout.readline().strip() == "locked"

    def release(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write("go\n")
            self.proc.stdin.flush()
            self.proc.wait(30)


def test_threads_really_contend_the_gil_is_released(tmp_path: Path):
    # A call blocked on another process's write lock must not hold the GIL, so this thread
    # keeps running Python while it waits.
    path = tmp_path / "jobs.db"
    leasefence.init_db(path)
    blocker = Locker(path)
    done = threading.Event()
    result = {}

    def blocked():
        result["inserted"] = leasefence.enqueue(path, "j")
        done.set()

    thread = threading.Thread(target=blocked)
    thread.start()
    spins = 0
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        spins += 1  # Python bytecode, needing the GIL
    assert not done.is_set() and spins > 10_000
    blocker.release()
    thread.join(30)
    assert result == {"inserted": True}


def test_lock_contention_past_the_busy_timeout_is_busy_and_retryable(tmp_path: Path):
    path = tmp_path / "jobs.db"
    store = leasefence.Store(path, busy_timeout=0.05)
    store.enqueue("j")
    blocker = Locker(path)
    try:
        with pytest.raises(leasefence.Busy) as err:
            store.claim_next("w", ttl=10.0, now=0.0)
        assert isinstance(err.value, leasefence.Retryable) and err.value.retryable
    finally:
        blocker.release()
    assert read_row(path, "j") == ("j", None, 0.0, 0, None, 0)
    assert store.claim_next("w", ttl=10.0, now=0.0).fence == 1  # the retry succeeds


def cli() -> str:
    """The `leasefence` binary: LEASEFENCE_CLI, else target/{debug,release}/leasefence."""
    given = os.environ.get("LEASEFENCE_CLI")
    if given:
        return given
    root = Path(__file__).resolve().parents[2]
    target = Path(os.environ.get("CARGO_TARGET_DIR", root / "target"))
    for profile in ["debug", "release"]:
        exe = target / profile / "leasefence"
        if exe.exists():
            return str(exe)
    found = shutil.which("leasefence")
    if found:
        return found
    if IN_CI:
        pytest.fail("no leasefence binary: build it (cargo build -p leasefence-cli) or set LEASEFENCE_CLI")
    pytest.skip("no leasefence binary: build it (cargo build -p leasefence-cli) or set LEASEFENCE_CLI")


def run_cli(db: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [cli(), "--db", str(db), *args], capture_output=True, text=True, timeout=60
    )


def test_the_cli_and_the_package_share_one_database(tmp_path: Path):
    db = tmp_path / "shared.db"
    out = run_cli(db, "init")
    assert out.returncode == 0, out.stderr
    assert leasefence.enqueue(db, "invoice-42") is True
    # The CLI claims what Python enqueued …
    out = run_cli(db, "claim", "invoice-42", "--owner", "A", "--ttl", "10", "--now", "0")
    assert out.returncode == 0 and "fence 1" in out.stdout, out
    assert leasefence.state(db, "invoice-42")["owner"] == "A"
    # … Python takes it over after expiry and finishes it …
    b = leasefence.claim(db, "invoice-42", "B", 10.0, 10.0)
    assert b == 2 and leasefence.complete(db, "invoice-42", "B", b, 12.0, "paid")
    # … and the CLI's stale write is refused (exit 1), B's result untouched.
    out = run_cli(db, "complete", "invoice-42", "--owner", "A", "--fence", "1", "--result", "twice", "--now", "13")
    assert out.returncode == 1 and "refused" in out.stdout + out.stderr, out
    assert read_row(db, "invoice-42") == ("invoice-42", "B", 20.0, 2, "paid", 1)
    out = run_cli(db, "state", "invoice-42", "--now", "13")
    assert out.returncode == 0 and "done" in out.stdout and "fence        2" in out.stdout


def test_the_cli_reads_what_the_python_store_wrote(tmp_path: Path):
    db = tmp_path / "shared.db"
    store = leasefence.Store(db)
    store.enqueue_many(["a", "b", "c"])
    lease = store.claim_next("py", ttl=100.0, now=0.0)
    store.complete(lease, "from python", now=1.0)
    out = run_cli(db, "stats", "--now", "2")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "ready" in text and "2" in text and "done" in text
    # The CLI enqueues; Python's store sees it.
    out = run_cli(db, "enqueue", "d")
    assert out.returncode == 0, out.stderr
    assert store.state("d") == {"id": "d", "owner": None, "until": 0.0, "fence": 0, "result": None, "done": 0}


THREADS_REFUSED = textwrap.dedent(
    """
    import sys, leasefence
    cgroup, path = sys.argv[1], sys.argv[2]
    with open(cgroup, "w") as procs:  # join the capped cgroup: every thread counts from now on
        procs.write(str(__import__("os").getpid()))
    worker = leasefence.Worker(path, lambda job: "ok", concurrency=150, drain=True)
    try:
        worker.run(handle_signals=False)
    except leasefence.InvalidArgument as e:
        print("LFARG", e.argument, flush=True)
        print("LFERR", e, flush=True)
    else:
        print("LFOK", flush=True)
    """
)


def test_a_worker_the_system_refuses_threads_raises_instead_of_hanging(tmp_path: Path):
    """More threads than the process may start (a container's pids.max): run() raises
    InvalidArgument naming concurrency, after the threads it started stopped — it used to wait
    forever on a worker thread that had panicked."""
    root = Path("/sys/fs/cgroup/pids")
    cgroup = root / f"leasefence-py-thread-limit-{os.getpid()}"
    try:
        cgroup.mkdir()
        (cgroup / "pids.max").write_text("40")
    except OSError as e:
        if IN_CI:
            pytest.fail(f"CI is set, and a pids cgroup cannot be made here: {e}")
        pytest.skip(f"a pids cgroup cannot be made here (needs root and cgroup v1 pids): {e}")
    try:
        path = tmp_path / "jobs.db"
        store = leasefence.Store(str(path))
        store.enqueue_many([f"j{i}" for i in range(20)])
        store.close()
        done = subprocess.run(
            [sys.executable, "-c", THREADS_REFUSED, str(cgroup / "cgroup.procs"), str(path)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,  # not python/, whose leasefence/ sources would shadow the package
        )
    finally:
        cgroup.rmdir()
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert lines.get("LFARG") == "concurrency", done.stdout + done.stderr
    assert "the system refused to start worker thread" in lines["LFERR"]
    # Read back through a connection of the test's own: no lease left held.
    assert read_row_count(path, "SELECT count(*) FROM jobs WHERE done = 0 AND owner IS NOT NULL") == 0


def read_row_count(path: Path, sql: str) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute(sql).fetchone()[0]

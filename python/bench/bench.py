"""Throughput of the Python ``leasefence.Store`` against the Rust ``SqliteStore`` and against a
pure-Python implementation of the design note over the standard ``sqlite3`` module.

Run (with ``leasefence`` installed in the interpreter, and the Rust baseline built)::

    CARGO_TARGET_DIR=/tmp/tgt-bench cargo build --release -p leasefence-python --example store_loop
    python python/bench/bench.py --jobs 3000 --rounds 5 \\
        --rust-bin /tmp/tgt-bench/release/examples/store_loop [--json out.json] [--dir DIR]

Every subject works on a fresh SQLite file (WAL, ``synchronous = FULL``, one thread) in one
temporary directory under ``--dir`` (default: the repository's ``target/``, on the same disk as
the checkout; not tmpfs, so every commit pays a real fsync). Each enqueues ``--jobs`` jobs
first (not timed), then times a loop that claims the next ready job and completes it until
none is ready. Rounds alternate the subjects (the order rotates each round), so all of them
share the machine's state of the moment; a round's rate is jobs / seconds of that loop.

Subjects:

- ``python Store``: ``leasefence.Store(path)`` (``synchronous="full"``), ``claim_next`` then
  ``complete`` per job.
- ``python Store, batch 64``: ``claim_batch(64)`` (one commit), then ``complete`` each.
- ``rust Store``: ``python/examples/store_loop.rs``, the same loop on
  ``leasefence::SqliteStore`` (``claim_next`` + ``complete_lease``), run as a subprocess; its
  own timing of the loop is used (process start, open and enqueue excluded).
- ``pure-Python note``: :class:`NoteQueue` below, the design note's six-column ``jobs`` table
  over ``sqlite3``, honestly tuned: one connection in autocommit mode (``isolation_level=None``),
  WAL, ``synchronous=FULL``, statements reused through the module's statement cache, a
  partial index over the unfinished jobs, ``claim_next`` as ``BEGIN IMMEDIATE`` + one
  ``UPDATE … RETURNING`` + ``COMMIT``, ``complete`` as one fenced ``UPDATE`` (a single
  write statement is its own write transaction: the same lock as ``BEGIN IMMEDIATE``, one
  round trip instead of three).
- ``pure-Python note, batch 64``: 64 claims in one ``BEGIN IMMEDIATE`` transaction, then
  ``complete`` each on its own: like with like for ``python Store, batch 64``.
- ``pure-Python note, batch 64, one-commit completes``: as above, but the 64 completes share
  one transaction too (2 commits per 64 jobs).
- ``python Store, batch 64, complete_batch``: ``claim_batch(64)`` then ``complete_batch`` of
  the 64 (2 commits per 64 jobs): like with like for the one-commit pure-Python batch, the
  case where fsync no longer hides the cost of the code.

Ratios are of the medians, with the min–max of the per-round ratios (both subjects of a ratio
ran in the same round). Nothing here asserts a timing; the targets are printed next to the
measured ratios.

Finally, the ``claim_many`` check: ``--claim-many-runs`` (default 1,000) runs of
``leasefence.claim_many(path, job, [16 owners], 0.0, 30.0)``, each on a freshly enqueued job
(``init_db`` once, ``enqueue`` before each run, not timed), counting the runs in which exactly
one owner got a fence (an ``int``) and the other 15 got ``None``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import leasefence

REPO = Path(__file__).resolve().parents[2]
BATCH = 64
TTL = 30.0
STEP = 0.001  # the caller's clock advances by this much per claimed job (or batch)


def job_ids(n: int) -> List[str]:
    return [f"job-{i:06d}" for i in range(n)]


# ---- the pure-Python implementation of the note -------------------------------------------


class NoteQueue:
    """The design note's queue over the standard ``sqlite3`` module: one connection, WAL,
    ``synchronous=FULL``. A lease is ``(job_id, owner, fence, until)``."""

    SCHEMA = """
        CREATE TABLE IF NOT EXISTS jobs (
            id     TEXT PRIMARY KEY,
            owner  TEXT,
            until  REAL NOT NULL DEFAULT 0,
            fence  INTEGER NOT NULL DEFAULT 0,
            result TEXT,
            done   INTEGER NOT NULL DEFAULT 0
        );
        -- The unfinished jobs in rowid (enqueue) order: claim_next walks it from the start
        -- and stops at the first expired lease; finished jobs leave it.
        CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (done) WHERE done = 0;
    """
    # RETURNING needs SQLite >= 3.35; older copies take a SELECT and an UPDATE.
    RETURNING = sqlite3.sqlite_version_info >= (3, 35, 0)
    CLAIM = """
        UPDATE jobs SET owner = ?1, until = ?2, fence = fence + 1
         WHERE rowid IN (SELECT rowid FROM jobs WHERE done = 0 AND until <= ?3
                          ORDER BY rowid LIMIT ?4)
        RETURNING rowid, id, fence
    """
    SELECT = """
        SELECT rowid, id, fence FROM jobs WHERE done = 0 AND until <= ?1 ORDER BY rowid LIMIT ?2
    """
    TAKE = "UPDATE jobs SET owner = ?1, until = ?2, fence = fence + 1 WHERE rowid = ?3"
    COMPLETE = """
        UPDATE jobs SET result = ?1, done = 1
         WHERE id = ?2 AND owner = ?3 AND fence = ?4 AND done = 0 AND until > ?5
    """

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=True)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = FULL")
        self.conn.execute("PRAGMA busy_timeout = 5000")
        self.conn.executescript(self.SCHEMA)
        self.execute = self.conn.execute

    def close(self) -> None:
        self.conn.close()

    def enqueue_many(self, ids: List[str]) -> None:
        execute = self.execute
        execute("BEGIN IMMEDIATE")
        try:
            self.conn.executemany(
                "INSERT INTO jobs (id) VALUES (?) ON CONFLICT (id) DO NOTHING",
                [(i,) for i in ids],
            )
        except BaseException:
            execute("ROLLBACK")
            raise
        execute("COMMIT")

    def claim_batch(
        self, owner: str, n: int, ttl: float, now: float
    ) -> List[Tuple[str, str, int, float]]:
        """Up to ``n`` ready jobs, oldest first, in one ``BEGIN IMMEDIATE`` transaction."""
        execute = self.execute
        until = now + ttl
        execute("BEGIN IMMEDIATE")
        try:
            if self.RETURNING:
                rows = execute(self.CLAIM, (owner, until, now, n)).fetchall()
                if len(rows) > 1:
                    rows.sort()  # RETURNING has no order
            else:
                rows = execute(self.SELECT, (now, n)).fetchall()
                for rowid, _, _ in rows:
                    execute(self.TAKE, (owner, until, rowid))
                rows = [(rowid, job, fence + 1) for rowid, job, fence in rows]
        except BaseException:
            execute("ROLLBACK")
            raise
        execute("COMMIT")
        return [(job, owner, fence, until) for _, job, fence in rows]

    def claim_next(
        self, owner: str, ttl: float, now: float
    ) -> Optional[Tuple[str, str, int, float]]:
        leases = self.claim_batch(owner, 1, ttl, now)
        return leases[0] if leases else None

    def complete(self, lease: Tuple[str, str, int, float], result: str, now: float) -> bool:
        """One fenced UPDATE, its own (write) transaction."""
        job, owner, fence, _ = lease
        return self.execute(self.COMPLETE, (result, job, owner, fence, now)).rowcount == 1

    def complete_all(
        self, leases: List[Tuple[str, str, int, float]], result: str, now: float
    ) -> List[bool]:
        """Every lease's fenced UPDATE in one ``BEGIN IMMEDIATE`` transaction."""
        execute = self.execute
        execute("BEGIN IMMEDIATE")
        try:
            done = [
                execute(self.COMPLETE, (result, job, owner, fence, now)).rowcount == 1
                for job, owner, fence, _ in leases
            ]
        except BaseException:
            execute("ROLLBACK")
            raise
        execute("COMMIT")
        return done


# ---- the subjects: each takes (path, jobs) and returns the seconds of its timed loop ------


def timed(loop: Callable[[], int], jobs: int) -> float:
    """Runs ``loop`` with the garbage collector off (as ``timeit`` does) and checks that it
    completed every job."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        completed = loop()
        seconds = time.perf_counter() - start
    finally:
        gc.enable()
    if completed != jobs:
        raise RuntimeError(f"completed {completed} of {jobs} jobs")
    return seconds


def python_store(path: str, jobs: int) -> float:
    store = leasefence.Store(path)
    try:
        store.enqueue_many(job_ids(jobs))
        claim_next, complete = store.claim_next, store.complete

        def loop() -> int:
            t, done = 1.0, 0
            while True:
                t += STEP
                lease = claim_next("w", ttl=TTL, now=t)
                if lease is None:
                    return done
                done += complete(lease, "ok", now=t)

        return timed(loop, jobs)
    finally:
        store.close()


def python_store_batch(path: str, jobs: int) -> float:
    store = leasefence.Store(path)
    try:
        store.enqueue_many(job_ids(jobs))
        claim_batch, complete = store.claim_batch, store.complete

        def loop() -> int:
            t, done = 1.0, 0
            while True:
                t += STEP
                leases = claim_batch("w", BATCH, ttl=TTL, now=t)
                if not leases:
                    return done
                for lease in leases:
                    done += complete(lease, "ok", now=t)

        return timed(loop, jobs)
    finally:
        store.close()


def python_store_complete_batch(path: str, jobs: int) -> float:
    store = leasefence.Store(path)
    try:
        store.enqueue_many(job_ids(jobs))
        claim_batch, complete_batch = store.claim_batch, store.complete_batch

        def loop() -> int:
            t, done = 1.0, 0
            while True:
                t += STEP
                leases = claim_batch("w", BATCH, ttl=TTL, now=t)
                if not leases:
                    return done
                done += sum(complete_batch([(lease, "ok") for lease in leases], now=t))

        return timed(loop, jobs)
    finally:
        store.close()


def note(path: str, jobs: int) -> float:
    queue = NoteQueue(path)
    try:
        queue.enqueue_many(job_ids(jobs))
        claim_next, complete = queue.claim_next, queue.complete

        def loop() -> int:
            t, done = 1.0, 0
            while True:
                t += STEP
                lease = claim_next("w", TTL, t)
                if lease is None:
                    return done
                done += complete(lease, "ok", t)

        return timed(loop, jobs)
    finally:
        queue.close()


def note_batch(path: str, jobs: int) -> float:
    queue = NoteQueue(path)
    try:
        queue.enqueue_many(job_ids(jobs))
        claim_batch, complete = queue.claim_batch, queue.complete

        def loop() -> int:
            t, done = 1.0, 0
            while True:
                t += STEP
                leases = claim_batch("w", BATCH, TTL, t)
                if not leases:
                    return done
                for lease in leases:
                    done += complete(lease, "ok", t)

        return timed(loop, jobs)
    finally:
        queue.close()


def note_batch_one_commit(path: str, jobs: int) -> float:
    queue = NoteQueue(path)
    try:
        queue.enqueue_many(job_ids(jobs))
        claim_batch, complete_all = queue.claim_batch, queue.complete_all

        def loop() -> int:
            t, done = 1.0, 0
            while True:
                t += STEP
                leases = claim_batch("w", BATCH, TTL, t)
                if not leases:
                    return done
                done += sum(complete_all(leases, "ok", t))

        return timed(loop, jobs)
    finally:
        queue.close()


def rust_store(rust_bin: str) -> Callable[[str, int], float]:
    def run(path: str, jobs: int) -> float:
        out = subprocess.run(
            [rust_bin, path, str(jobs)], check=True, capture_output=True, text=True
        ).stdout
        report = json.loads(out)
        if report["jobs"] != jobs or report["synchronous"] != "FULL":
            raise RuntimeError(f"unexpected report from {rust_bin}: {out.strip()}")
        return float(report["seconds"])

    return run


# ---- the run ------------------------------------------------------------------------------

PY, PY_BATCH, RUST = "python Store", f"python Store, batch {BATCH}", "rust Store"
NOTE, NOTE_BATCH = "pure-Python note", f"pure-Python note, batch {BATCH}"
NOTE_BATCH_ONE = f"pure-Python note, batch {BATCH}, one-commit completes"
PY_BATCH_ONE = f"python Store, batch {BATCH}, complete_batch"

# (name, numerator, denominator, target as the issue states it, threshold)
RATIOS = [
    ("python Store ÷ rust Store", PY, RUST, "≥ 0.8×", 0.8),
    ("python Store ÷ pure-Python note", PY, NOTE, "≥ 5×", 5.0),
    (f"python batch {BATCH} ÷ pure-Python batch {BATCH}", PY_BATCH, NOTE_BATCH, "—", None),
    (
        f"python batch {BATCH} + complete_batch ÷ pure-Python one-commit batch {BATCH}",
        PY_BATCH_ONE,
        NOTE_BATCH_ONE,
        "—",
        None,
    ),
]


def remove_db(path: str) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.remove(path + suffix)
        except FileNotFoundError:
            pass


def run_rounds(
    subjects: Dict[str, Callable[[str, int], float]], jobs: int, rounds: int, workdir: str
) -> Dict[str, List[float]]:
    """Jobs per second of every subject in every round; the order rotates each round."""
    names = list(subjects)
    rates: Dict[str, List[float]] = {name: [] for name in names}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for k, name in enumerate(order):
            path = os.path.join(workdir, f"r{r}-s{k}.db")
            remove_db(path)
            seconds = subjects[name](path, jobs)
            remove_db(path)
            rates[name].append(jobs / seconds)
            print(f"  round {r + 1}/{rounds}  {name:<52} {jobs / seconds:9.0f} jobs/s",
                  file=sys.stderr, flush=True)
    return rates


def claim_many_check(runs: int, workdir: str, owners: int = 16) -> Dict[str, object]:
    path = os.path.join(workdir, "claim_many.db")
    remove_db(path)
    leasefence.init_db(path)
    names = [f"o{k}" for k in range(owners)]
    exactly_one, seconds, bad = 0, [], []
    for i in range(runs):
        job = f"job-{i}"
        leasefence.enqueue(path, job)
        start = time.perf_counter()
        results = leasefence.claim_many(path, job, names, 0.0, TTL)
        seconds.append(time.perf_counter() - start)
        fences = [r for r in results if isinstance(r, int)]
        nones = sum(r is None for r in results)
        if len(fences) == 1 and nones == owners - 1:
            exactly_one += 1
        elif len(bad) < 10:
            bad.append({"job": job, "results": results})
    remove_db(path)
    return {
        "runs": runs,
        "owners": owners,
        "exactly_one_fence": exactly_one,
        "median_ms": statistics.median(seconds) * 1e3,
        "min_ms": min(seconds) * 1e3,
        "max_ms": max(seconds) * 1e3,
        "failures": bad,
    }


def summarize(rates: Dict[str, List[float]]) -> Dict[str, Dict[str, float]]:
    return {
        name: {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}
        for name, xs in rates.items()
    }


def ratios(rates: Dict[str, List[float]]) -> List[Dict[str, object]]:
    out = []
    for label, num, den, target, threshold in RATIOS:
        if num not in rates or den not in rates:
            continue
        per_round = [a / b for a, b in zip(rates[num], rates[den])]
        of_medians = statistics.median(rates[num]) / statistics.median(rates[den])
        out.append({
            "ratio": label,
            "of_medians": of_medians,
            "min": min(per_round),
            "max": max(per_round),
            "target": target,
            "meets_target": None if threshold is None else of_medians >= threshold,
        })
    return out


def markdown(summary, ratio_rows, claim_many, args) -> str:
    lines = [
        f"claim_next → complete, {args.jobs} jobs, {args.rounds} rounds, 1 thread, "
        "SQLite WAL, synchronous = FULL",
        "",
        "| subject | median jobs/s | min–max jobs/s |",
        "|---|---:|---:|",
    ]
    for name, s in summary.items():
        lines.append(f"| {name} | {s['median']:,.0f} | {s['min']:,.0f}–{s['max']:,.0f} |")
    lines += [
        "",
        "| ratio | of medians | per-round min–max | target |",
        "|---|---:|---:|---|",
    ]
    for r in ratio_rows:
        met = r["meets_target"]
        verdict = "" if met is None else (" (met)" if met else " (not met)")
        lines.append(
            f"| {r['ratio']} | {r['of_medians']:.2f}× | {r['min']:.2f}–{r['max']:.2f}× "
            f"| {r['target']}{verdict} |"
        )
    if claim_many is not None:
        lines += [
            "",
            f"claim_many: {claim_many['exactly_one_fence']} of {claim_many['runs']} runs had "
            f"exactly one fence ({claim_many['owners']} owners; median "
            f"{claim_many['median_ms']:.1f} ms per run, min–max "
            f"{claim_many['min_ms']:.1f}–{claim_many['max_ms']:.1f} ms)",
        ]
    return "\n".join(lines)


def default_rust_bin() -> Optional[str]:
    targets = [os.environ.get("CARGO_TARGET_DIR"), str(REPO / "target")]
    for target in filter(None, targets):
        candidate = os.path.join(target, "release", "examples", "store_loop")
        if os.path.exists(candidate):
            return candidate
    return None


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=3000, help="jobs per subject per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--rust-bin", metavar="PATH", default=default_rust_bin(),
                        help="the built store_loop example (default: under $CARGO_TARGET_DIR "
                             "or target/)")
    parser.add_argument("--dir", default=str(REPO / "target"),
                        help="where the temporary databases go (a real disk, not tmpfs)")
    parser.add_argument("--claim-many-runs", type=int, default=1000)
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.rounds < 1:
        parser.error("--jobs and --rounds must be at least 1")
    if not args.rust_bin or not os.path.exists(args.rust_bin):
        parser.error(
            "the Rust baseline is not built; run `CARGO_TARGET_DIR=… cargo build --release "
            "-p leasefence-python --example store_loop` and pass --rust-bin"
        )

    subjects: Dict[str, Callable[[str, int], float]] = {
        PY: python_store,
        PY_BATCH: python_store_batch,
        RUST: rust_store(args.rust_bin),
        NOTE: note,
        NOTE_BATCH: note_batch,
        NOTE_BATCH_ONE: note_batch_one_commit,
        PY_BATCH_ONE: python_store_complete_batch,
    }
    os.makedirs(args.dir, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="leasefence-bench-", dir=args.dir)
    print(f"databases in {workdir}", file=sys.stderr)
    load_before = os.getloadavg()
    try:
        rates = run_rounds(subjects, args.jobs, args.rounds, workdir)
        claim_many = (
            claim_many_check(args.claim_many_runs, workdir) if args.claim_many_runs > 0 else None
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    load_after = os.getloadavg()

    summary = summarize(rates)
    ratio_rows = ratios(rates)
    print(markdown(summary, ratio_rows, claim_many, args))
    print(f"\n{os.cpu_count()} CPUs; load average (1 min) {load_before[0]:.1f} before, "
          f"{load_after[0]:.1f} after")
    if args.json:
        report = {
            "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
            "jobs": args.jobs,
            "rounds": args.rounds,
            "batch": BATCH,
            "machine": {
                "cpus": os.cpu_count(),
                "platform": platform.platform(),
                "python": platform.python_version(),
                "sqlite3_module_sqlite": sqlite3.sqlite_version,
                "leasefence": leasefence.__version__,
                "loadavg_before": load_before,
                "loadavg_after": load_after,
            },
            "rates": rates,
            "summary": summary,
            "ratios": ratio_rows,
            "claim_many": claim_many,
        }
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2, ensure_ascii=False)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Shared fixtures: a fresh SQLite file per test, and stores on every backend.

PostgreSQL cases run against ``LEASEFENCE_TEST_PG`` (a libpq string or a ``postgres://`` URL),
each in a schema of its own that is dropped afterwards. Without it they are skipped with the
reason; with ``CI`` set they fail instead, so CI never passes without them.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import uuid
from pathlib import Path
from typing import Iterator

import pytest

import leasefence

PG = os.environ.get("LEASEFENCE_TEST_PG")
IN_CI = bool(os.environ.get("CI"))


def need_pg() -> str:
    """The PostgreSQL target, or skip (fail under CI) without one."""
    if not PG:
        if IN_CI:
            pytest.fail("LEASEFENCE_TEST_PG is not set, and CI is: the PostgreSQL cases must run")
        pytest.skip("PostgreSQL cases need LEASEFENCE_TEST_PG (e.g. host=127.0.0.1 user=postgres dbname=test)")
    return PG


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A path to a new, initialised SQLite file."""
    path = tmp_path / "jobs.db"
    leasefence.init_db(path)
    return path


def read_row(path: Path, job_id: str):
    """The stored row, read through the standard sqlite3 module: an independent connection.

    Closing it removes the WAL file from under a Store still open in this process (two copies
    of SQLite, docs/python.md): read with it only after that Store's last write that another
    connection must see, or read from another process (test_schedules.query).
    """
    con = sqlite3.connect(path)
    try:
        return con.execute(
            "SELECT id, owner, until, fence, result, done FROM jobs WHERE id = ?", (job_id,)
        ).fetchone()
    finally:
        con.close()


def drop_schema(schema: str) -> None:
    store = leasefence.Store(PG, schema=schema)
    store.close()
    # The package has no DROP verb; psql is the independent connection.
    if shutil.which("psql"):
        subprocess.run(
            ["psql", PG, "-q", "-c", f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'],
            capture_output=True,
            check=False,
        )


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path: Path) -> Iterator[leasefence.Store]:
    """A fresh store on each backend (PostgreSQL: a schema of its own)."""
    if request.param == "sqlite":
        s = leasefence.Store(tmp_path / "jobs.db")
        yield s
        s.close()
        return
    target = need_pg()
    schema = "py_" + uuid.uuid4().hex[:12]
    s = leasefence.Store(target, schema=schema)
    yield s
    s.close()
    drop_schema(schema)

"""The design note's eight functions, rule by rule (CONTRACT.md's table and its decisions).

Every stored state is read back through the standard ``sqlite3`` module (an independent
connection), never through the package itself. The eight broken changes of the note are each
caught here (the catalog's seed entries run this file).
"""

from __future__ import annotations

import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import leasefence
from conftest import read_row

# ─── 1. init_db ─────────────────────────────────────────────────────────────────────────────


def test_init_db_creates_the_six_columns_with_their_types_and_defaults(tmp_path: Path):
    path = tmp_path / "new.db"
    assert leasefence.init_db(path) is None
    con = sqlite3.connect(path)
    cols = {r[1]: (r[2].upper(), r[3], r[4], r[5]) for r in con.execute("PRAGMA table_info(jobs)")}
    con.close()
    assert cols["id"][0] == "TEXT" and cols["id"][3] == 1
    assert cols["owner"][0] == "TEXT"
    assert cols["until"] == ("REAL", 1, "0", 0)
    assert cols["fence"] == ("INTEGER", 1, "0", 0)
    assert cols["result"][0] == "TEXT"
    assert cols["done"] == ("INTEGER", 1, "0", 0)


def test_init_db_is_idempotent_and_never_resets_a_fence(db: Path):
    leasefence.enqueue(db, "j")
    fence = leasefence.claim(db, "j", "A", 0.0, 5.0)
    leasefence.init_db(db)  # a worker restart
    leasefence.init_db(os.fspath(db))
    assert read_row(db, "j") == ("j", "A", 5.0, fence, None, 0)
    # The next claim gets a higher fence than any handed out before the restart.
    assert leasefence.claim(db, "j", "B", 5.0, 5.0) == fence + 1


def test_init_db_keeps_a_table_made_before_it_by_hand(tmp_path: Path):
    # A jobs table created by the sqlite3 shell or an older version (user_version 0).
    path = tmp_path / "old.db"
    con = sqlite3.connect(path)
    con.execute(
        "CREATE TABLE jobs(id TEXT PRIMARY KEY, owner TEXT, until REAL NOT NULL DEFAULT 0, "
        "fence INTEGER NOT NULL DEFAULT 0, result TEXT, done INTEGER NOT NULL DEFAULT 0)"
    )
    con.execute("INSERT INTO jobs VALUES ('old', 'X', 50.0, 7, NULL, 0)")
    con.commit()
    con.close()
    leasefence.init_db(path)
    assert read_row(path, "old") == ("old", "X", 50.0, 7, None, 0)
    assert leasefence.claim(path, "old", "Y", 50.0, 1.0) == 8


def test_init_db_switches_the_file_to_wal(db: Path):
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()


def test_init_db_refuses_a_file_that_is_not_sqlite_and_leaves_it_unmodified(tmp_path: Path):
    path = tmp_path / "notes.txt"
    path.write_bytes(b"not a database, just text\n" * 100)
    before = path.read_bytes()
    with pytest.raises(leasefence.NotADatabase):
        leasefence.init_db(path)
    assert path.read_bytes() == before


def test_init_db_refuses_a_jobs_table_missing_a_column(tmp_path: Path):
    path = tmp_path / "short.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE jobs(id TEXT PRIMARY KEY, owner TEXT)")
    con.commit()
    con.close()
    with pytest.raises(leasefence.SchemaMismatch) as err:
        leasefence.init_db(path)
    assert isinstance(err.value, leasefence.Error)
    con = sqlite3.connect(path)
    assert [r[1] for r in con.execute("PRAGMA table_info(jobs)")] == ["id", "owner"]
    con.close()


def test_a_missing_folder_is_a_clear_error(tmp_path: Path):
    with pytest.raises(leasefence.CannotOpen):
        leasefence.init_db(tmp_path / "no" / "such" / "folder" / "jobs.db")


def test_calls_before_init_db_are_an_error_and_create_nothing(tmp_path: Path):
    path = tmp_path / "never.db"
    with pytest.raises(leasefence.Error):
        leasefence.enqueue(path, "j")
    assert not path.exists()


# ─── 2. enqueue ─────────────────────────────────────────────────────────────────────────────


def test_enqueue_inserts_an_unknown_id_with_the_default_state(db: Path):
    assert leasefence.enqueue(db, "j") is True
    assert read_row(db, "j") == ("j", None, 0.0, 0, None, 0)


def test_enqueue_of_a_known_id_is_false_and_keeps_an_in_flight_lease(db: Path):
    leasefence.enqueue(db, "j")
    fence = leasefence.claim(db, "j", "A", 0.0, 30.0)
    assert leasefence.enqueue(db, "j") is False
    assert read_row(db, "j") == ("j", "A", 30.0, fence, None, 0)
    # The lease is still the live one: a second claim is refused, A can still complete.
    assert leasefence.claim(db, "j", "B", 1.0, 30.0) is None
    assert leasefence.complete(db, "j", "A", fence, 2.0, "A's") is True


def test_enqueue_of_a_known_id_keeps_a_finished_result(db: Path):
    leasefence.enqueue(db, "j")
    fence = leasefence.claim(db, "j", "A", 0.0, 30.0)
    assert leasefence.complete(db, "j", "A", fence, 1.0, "done once")
    assert leasefence.enqueue(db, "j") is False
    assert read_row(db, "j") == ("j", "A", 30.0, fence, "done once", 1)
    assert leasefence.claim(db, "j", "B", 100.0, 30.0) is None


def test_enqueue_stores_ids_verbatim(db: Path):
    for job_id in ["  spaced  ", "ünïcødé-✓", "a'b\"c;DROP TABLE jobs", "x" * 1000]:
        assert leasefence.enqueue(db, job_id) is True
        assert read_row(db, job_id)[0] == job_id


# ─── 3. state ───────────────────────────────────────────────────────────────────────────────


def test_state_of_an_unknown_id_is_none_not_an_empty_record(db: Path):
    assert leasefence.state(db, "nobody") is None


def test_state_returns_every_column_valued_as_sqlite3_returns_the_row(db: Path):
    leasefence.enqueue(db, "j")
    fence = leasefence.claim(db, "j", "A", 1.5, 2.0)
    leasefence.complete(db, "j", "A", fence, 2.0, "r")
    row = leasefence.state(db, "j")
    assert row == {"id": "j", "owner": "A", "until": 3.5, "fence": 1, "result": "r", "done": 1}
    assert list(row) == ["id", "owner", "until", "fence", "result", "done"]
    assert type(row["until"]) is float and type(row["fence"]) is int and type(row["done"]) is int
    # The same values the standard module reads from the row.
    assert tuple(row.values()) == read_row(db, "j")


def test_state_of_a_fresh_job_has_the_defaults(db: Path):
    leasefence.enqueue(db, "j")
    row = leasefence.state(db, "j")
    assert row == {"id": "j", "owner": None, "until": 0.0, "fence": 0, "result": None, "done": 0}
    assert type(row["until"]) is float


def test_state_shows_what_is_stored_not_a_cache(db: Path):
    leasefence.enqueue(db, "j")
    assert leasefence.state(db, "j")["fence"] == 0
    # Another connection writes behind the package's back.
    con = sqlite3.connect(db)
    con.execute("UPDATE jobs SET owner = 'Z', fence = 41, until = 9.0 WHERE id = 'j'")
    con.commit()
    con.close()
    assert leasefence.state(db, "j") == {
        "id": "j", "owner": "Z", "until": 9.0, "fence": 41, "result": None, "done": 0
    }


# ─── 4. claim ───────────────────────────────────────────────────────────────────────────────


def test_claim_of_a_fresh_job_gets_fence_1_and_stores_the_lease(db: Path):
    leasefence.enqueue(db, "j")
    assert leasefence.claim(db, "j", "A", 10.0, 5.0) == 1
    assert read_row(db, "j") == ("j", "A", 15.0, 1, None, 0)


def test_claim_returns_one_more_than_the_stored_fence(db: Path):
    leasefence.enqueue(db, "j")
    con = sqlite3.connect(db)
    con.execute("UPDATE jobs SET fence = 41 WHERE id = 'j'")
    con.commit()
    con.close()
    assert leasefence.claim(db, "j", "A", 0.0, 5.0) == 42
    assert read_row(db, "j")[3] == 42


@pytest.mark.parametrize("ttl", [0, 0.0, -1.0, -1e-9, math.nan, math.inf, -math.inf, 1e13, 1e300])
def test_claim_with_a_bad_ttl_raises_value_error_naming_it_and_changes_nothing(db: Path, ttl):
    leasefence.enqueue(db, "j")
    with pytest.raises(ValueError) as err:
        leasefence.claim(db, "j", "A", 0.0, ttl)
    assert isinstance(err.value, leasefence.InvalidArgument)
    assert err.value.argument == "ttl" and "ttl" in str(err.value)
    assert read_row(db, "j") == ("j", None, 0.0, 0, None, 0)


def test_claim_of_an_unknown_job_is_none_and_creates_no_row(db: Path):
    assert leasefence.claim(db, "ghost", "A", 0.0, 5.0) is None
    assert read_row(db, "ghost") is None


def test_claim_of_a_done_job_is_none_and_unchanged(db: Path):
    leasefence.enqueue(db, "j")
    fence = leasefence.claim(db, "j", "A", 0.0, 5.0)
    leasefence.complete(db, "j", "A", fence, 1.0, "r")
    assert leasefence.claim(db, "j", "B", 100.0, 5.0) is None
    assert read_row(db, "j") == ("j", "A", 5.0, 1, "r", 1)


def test_claim_of_a_live_lease_is_none_and_unchanged(db: Path):
    leasefence.enqueue(db, "j")
    leasefence.claim(db, "j", "A", 0.0, 10.0)
    assert leasefence.claim(db, "j", "B", 9.999, 10.0) is None
    assert leasefence.claim(db, "j", "A", 5.0, 10.0) is None  # not even its own owner
    assert read_row(db, "j") == ("j", "A", 10.0, 1, None, 0)


def test_claim_at_now_equal_to_until_is_expired_and_claimable(db: Path):
    leasefence.enqueue(db, "j")
    leasefence.claim(db, "j", "A", 0.0, 10.0)
    assert leasefence.claim(db, "j", "B", 10.0, 10.0) == 2
    assert read_row(db, "j") == ("j", "B", 20.0, 2, None, 0)


def test_claim_at_a_negative_clock_still_takes_a_fresh_job(db: Path):
    # A fresh job has until = 0; a caller's clock may start below it.
    leasefence.enqueue(db, "j")
    assert leasefence.claim(db, "j", "A", -5.0, 1.0) is None
    assert leasefence.claim(db, "j", "A", 0.0, 1.0) == 1


@pytest.mark.parametrize(
    "args, name",
    [
        (("", "A", 0.0, 1.0), "job_id"),
        (("j", "", 0.0, 1.0), "owner"),
        (("j", "A", math.nan, 1.0), "now"),
        (("j", "A", math.inf, 1.0), "now"),
    ],
)
def test_claim_with_another_bad_argument_names_it_and_changes_nothing(db: Path, args, name):
    leasefence.enqueue(db, "j")
    with pytest.raises(leasefence.InvalidArgument) as err:
        leasefence.claim(db, *args)
    assert err.value.argument == name
    assert read_row(db, "j") == ("j", None, 0.0, 0, None, 0)


# ─── 5. renew ───────────────────────────────────────────────────────────────────────────────


def test_renew_extends_a_live_lease(db: Path):
    leasefence.enqueue(db, "j")
    fence = leasefence.claim(db, "j", "A", 0.0, 10.0)
    assert leasefence.renew(db, "j", "A", fence, 9.0, 10.0) is True
    assert read_row(db, "j") == ("j", "A", 19.0, 1, None, 0)


def test_renew_can_shorten_a_lease_to_now_plus_ttl(db: Path):
    leasefence.enqueue(db, "j")
    fence = leasefence.claim(db, "j", "A", 0.0, 100.0)
    assert leasefence.renew(db, "j", "A", fence, 1.0, 2.0) is True
    assert read_row(db, "j")[2] == 3.0


def test_renew_never_revives_an_expired_lease_even_if_nobody_took_it(db: Path):
    leasefence.enqueue(db, "j")
    fence = leasefence.claim(db, "j", "A", 0.0, 10.0)
    assert leasefence.renew(db, "j", "A", fence, 10.0, 100.0) is False  # now == until
    assert leasefence.renew(db, "j", "A", fence, 11.0, 100.0) is False
    assert read_row(db, "j") == ("j", "A", 10.0, 1, None, 0)


def test_renew_refuses_a_stale_fence_and_another_owner(db: Path):
    leasefence.enqueue(db, "j")
    old = leasefence.claim(db, "j", "A", 0.0, 10.0)
    new = leasefence.claim(db, "j", "B", 10.0, 10.0)
    assert leasefence.renew(db, "j", "A", old, 11.0, 10.0) is False
    assert leasefence.renew(db, "j", "A", new, 11.0, 10.0) is False  # right fence, wrong owner
    assert leasefence.renew(db, "j", "B", old, 11.0, 10.0) is False  # right owner, old fence
    assert read_row(db, "j") == ("j", "B", 20.0, 2, None, 0)


def test_renew_of_a_done_job_is_false(db: Path):
    leasefence.enqueue(db, "j")
    fence = leasefence.claim(db, "j", "A", 0.0, 10.0)
    leasefence.complete(db, "j", "A", fence, 1.0, "r")
    assert leasefence.renew(db, "j", "A", fence, 2.0, 10.0) is False
    assert read_row(db, "j") == ("j", "A", 10.0, 1, "r", 1)


def test_renew_of_an_unknown_job_is_false(db: Path):
    assert leasefence.renew(db, "ghost", "A", 1, 0.0, 10.0) is False


@pytest.mark.parametrize("ttl", [0.0, -3.0, math.nan, math.inf])
def test_renew_with_a_bad_ttl_raises_value_error_and_changes_nothing(db: Path, ttl):
    leasefence.enqueue(db, "j")
    fence = leasefence.claim(db, "j", "A", 0.0, 10.0)
    with pytest.raises(ValueError) as err:
        leasefence.renew(db, "j", "A", fence, 1.0, ttl)
    assert err.value.argument == "ttl"
    assert read_row(db, "j") == ("j", "A", 10.0, 1, None, 0)


# ─── 6. complete ────────────────────────────────────────────────────────────────────────────


def test_complete_stores_the_result_under_a_live_lease(db: Path):
    leasefence.enqueue(db, "j")
    fence = leasefence.claim(db, "j", "A", 0.0, 10.0)
    assert leasefence.complete(db, "j", "A", fence, 9.999, "result") is True
    assert read_row(db, "j") == ("j", "A", 10.0, 1, "result", 1)


def test_complete_after_expiry_is_false_and_stores_nothing(db: Path):
    leasefence.enqueue(db, "j")
    fence = leasefence.claim(db, "j", "A", 0.0, 10.0)
    assert leasefence.complete(db, "j", "A", fence, 10.0, "late") is False  # now == until
    assert read_row(db, "j") == ("j", "A", 10.0, 1, None, 0)


def test_complete_of_a_finished_job_is_false_and_keeps_the_first_result(db: Path):
    leasefence.enqueue(db, "j")
    fence = leasefence.claim(db, "j", "A", 0.0, 10.0)
    assert leasefence.complete(db, "j", "A", fence, 1.0, "first")
    assert leasefence.complete(db, "j", "A", fence, 2.0, "second") is False
    assert read_row(db, "j") == ("j", "A", 10.0, 1, "first", 1)


def test_a_stalled_worker_can_no_longer_store_anything(db: Path):
    # The note's story: A stalls past its lease, B takes over and finishes, A wakes up.
    leasefence.enqueue(db, "invoice")
    a = leasefence.claim(db, "invoice", "A", 0.0, 10.0)
    assert leasefence.claim(db, "invoice", "B", 5.0, 10.0) is None
    b = leasefence.claim(db, "invoice", "B", 10.0, 10.0)
    assert (a, b) == (1, 2)
    assert leasefence.complete(db, "invoice", "B", b, 12.0, "B's")
    assert leasefence.renew(db, "invoice", "A", a, 13.0, 10.0) is False
    assert leasefence.complete(db, "invoice", "A", a, 13.0, "A's stale") is False
    assert leasefence.release(db, "invoice", "A", a) is False
    assert read_row(db, "invoice") == ("invoice", "B", 20.0, 2, "B's", 1)


def test_complete_with_a_stale_fence_before_the_new_owner_finishes_is_refused(db: Path):
    leasefence.enqueue(db, "j")
    a = leasefence.claim(db, "j", "A", 0.0, 10.0)
    leasefence.claim(db, "j", "B", 10.0, 10.0)
    assert leasefence.complete(db, "j", "A", a, 11.0, "stale") is False
    assert leasefence.complete(db, "j", "B", a, 11.0, "wrong fence") is False
    assert read_row(db, "j") == ("j", "B", 20.0, 2, None, 0)


def test_complete_of_an_unknown_job_is_false(db: Path):
    assert leasefence.complete(db, "ghost", "A", 1, 0.0, "r") is False
    assert read_row(db, "ghost") is None


def test_complete_stores_an_empty_and_a_unicode_result_verbatim(db: Path):
    for job_id, result in [("e", ""), ("u", "résultat ✓ \n\t'quoted'")]:
        leasefence.enqueue(db, job_id)
        fence = leasefence.claim(db, job_id, "A", 0.0, 10.0)
        assert leasefence.complete(db, job_id, "A", fence, 1.0, result)
        assert read_row(db, job_id)[4] == result


# ─── 7. release ─────────────────────────────────────────────────────────────────────────────


def test_release_clears_owner_and_until_and_keeps_the_fence(db: Path):
    leasefence.enqueue(db, "j")
    fence = leasefence.claim(db, "j", "A", 0.0, 10.0)
    assert leasefence.release(db, "j", "A", fence) is True
    assert read_row(db, "j") == ("j", None, 0.0, 1, None, 0)
    # Claimable at once, and the next fence is higher: no token number is reused.
    assert leasefence.claim(db, "j", "B", 1.0, 10.0) == 2


def test_release_refuses_another_owner_and_a_stale_fence(db: Path):
    leasefence.enqueue(db, "j")
    old = leasefence.claim(db, "j", "A", 0.0, 10.0)
    new = leasefence.claim(db, "j", "B", 10.0, 10.0)
    assert leasefence.release(db, "j", "A", old) is False
    assert leasefence.release(db, "j", "A", new) is False
    assert leasefence.release(db, "j", "B", old) is False
    assert read_row(db, "j") == ("j", "B", 20.0, 2, None, 0)


def test_release_of_a_done_job_is_false(db: Path):
    leasefence.enqueue(db, "j")
    fence = leasefence.claim(db, "j", "A", 0.0, 10.0)
    leasefence.complete(db, "j", "A", fence, 1.0, "r")
    assert leasefence.release(db, "j", "A", fence) is False
    assert read_row(db, "j") == ("j", "A", 10.0, 1, "r", 1)


def test_a_released_job_keeps_its_fence_when_enqueued_again(db: Path):
    leasefence.enqueue(db, "j")
    fence = leasefence.claim(db, "j", "A", 0.0, 10.0)
    leasefence.release(db, "j", "A", fence)
    assert leasefence.enqueue(db, "j") is False
    assert leasefence.claim(db, "j", "B", 0.0, 10.0) == 2


# ─── 8. claim_many ──────────────────────────────────────────────────────────────────────────


def test_claim_many_has_exactly_one_winner_in_input_order(db: Path):
    leasefence.enqueue(db, "j")
    owners = [f"w{i}" for i in range(16)]
    results = leasefence.claim_many(db, "j", owners, 0.0, 10.0)
    assert isinstance(results, list) and len(results) == 16
    winners = [i for i, r in enumerate(results) if r is not None]
    assert len(winners) == 1 and results[winners[0]] == 1
    assert all(r is None for i, r in enumerate(results) if i != winners[0])
    # The stored owner is the winner at its position: results are in input order.
    assert read_row(db, "j") == ("j", owners[winners[0]], 10.0, 1, None, 0)


def test_claim_many_tries_every_owner_not_only_the_first(db: Path):
    # With a live lease held by the first owner's name, only other owners could ever win;
    # across many jobs the winners must not all be owners[0].
    winners = set()
    for i in range(30):
        job_id = f"j{i}"
        leasefence.enqueue(db, job_id)
        owners = [f"o{k}" for k in range(8)]
        results = leasefence.claim_many(db, job_id, owners, 0.0, 10.0)
        assert sum(r is not None for r in results) == 1
        winners.add(results.index(1))
    assert winners != {0}


def test_claim_many_on_a_job_held_by_someone_else_is_all_none(db: Path):
    leasefence.enqueue(db, "j")
    leasefence.claim(db, "j", "holder", 0.0, 100.0)
    assert leasefence.claim_many(db, "j", ["a", "b", "c"], 1.0, 10.0) == [None, None, None]
    assert read_row(db, "j") == ("j", "holder", 100.0, 1, None, 0)


def test_claim_many_on_an_expired_job_gives_the_next_fence_to_one(db: Path):
    leasefence.enqueue(db, "j")
    leasefence.claim(db, "j", "old", 0.0, 5.0)
    results = leasefence.claim_many(db, "j", ["a", "b", "c", "d"], 5.0, 5.0)
    assert sorted(results, key=lambda r: r is None) [0] == 2
    assert [r for r in results if r is not None] == [2]


def test_claim_many_with_a_bad_ttl_raises_value_error_and_claims_nothing(db: Path):
    leasefence.enqueue(db, "j")
    with pytest.raises(ValueError):
        leasefence.claim_many(db, "j", ["a", "b"], 0.0, 0.0)
    with pytest.raises(leasefence.InvalidArgument) as err:
        leasefence.claim_many(db, "j", ["a", ""], 0.0, 1.0)  # one bad owner: no claim at all
    assert err.value.argument == "owner"
    assert read_row(db, "j") == ("j", None, 0.0, 0, None, 0)


def test_claim_many_refuses_a_single_owner_string(db: Path):
    leasefence.enqueue(db, "j")
    with pytest.raises(TypeError) as err:
        leasefence.claim_many(db, "j", "worker", 0.0, 10.0)  # type: ignore[arg-type]
    assert "`owners`" in str(err.value)
    # Nothing claimed: not under "w", "o", "r", …
    assert read_row(db, "j") == ("j", None, 0.0, 0, None, 0)


@pytest.mark.parametrize("bad", [None, b"b", 7])
def test_claim_many_with_an_owner_that_is_no_str_claims_nothing(db: Path, bad):
    # None passed the up-front check (it stood for "no owner"), so the other owners' threads
    # ran and one of them took the lease while the call raised.
    leasefence.enqueue(db, "j")
    with pytest.raises(TypeError) as err:
        leasefence.claim_many(db, "j", [bad, "a", "b"], 0.0, 10.0)  # type: ignore[list-item]
    assert "owner" in str(err.value) + str(getattr(err.value, "__notes__", ""))
    assert read_row(db, "j") == ("j", None, 0.0, 0, None, 0)


def test_claim_many_of_no_owners_is_an_empty_list(db: Path):
    leasefence.enqueue(db, "j")
    assert leasefence.claim_many(db, "j", [], 0.0, 1.0) == []


@pytest.mark.parametrize(
    "job_id, now, ttl, name",
    [("", 0.0, 1.0, "job_id"), ("j", float("nan"), 1.0, "now"), ("j", 0.0, -1.0, "ttl")],
)
def test_claim_many_of_no_owners_still_checks_its_arguments(db: Path, job_id, now, ttl, name):
    with pytest.raises(leasefence.InvalidArgument) as err:
        leasefence.claim_many(db, job_id, [], now, ttl)
    assert err.value.argument == name, str(err.value)


NO_THREAD_SCRIPT = """
import sys, concurrent.futures, leasefence

class Limited(concurrent.futures.ThreadPoolExecutor):
    # As the OS does past its thread limit: the third thread cannot start.
    submitted = 0

    def submit(self, *args, **kwargs):
        Limited.submitted += 1
        if Limited.submitted == 3:
            raise RuntimeError("can't start new thread")
        return super().submit(*args, **kwargs)

leasefence.ThreadPoolExecutor = Limited
try:
    leasefence.claim_many(sys.argv[1], "j", ["a", "b", "c", "d"], 0.0, 10.0)
except RuntimeError as err:
    print("raised", err)
"""


def test_claim_many_raises_when_a_thread_cannot_start_instead_of_hanging(db: Path, tmp_path: Path):
    # The threads already started waited at the barrier for all the owners, forever: the call
    # never returned (nor did the interpreter exit, which joins the pool's threads).
    leasefence.enqueue(db, "j")
    script = tmp_path / "no_thread.py"
    script.write_text(NO_THREAD_SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script), str(db)], capture_output=True, text=True, timeout=20
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "raised can't start new thread"
    assert read_row(db, "j") == ("j", None, 0.0, 0, None, 0)  # no owner claimed


def test_claim_many_uses_a_thread_pool_executor(db: Path, monkeypatch):
    import concurrent.futures

    made = []
    real = concurrent.futures.ThreadPoolExecutor

    class Counting(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs):
            made.append(kwargs.get("max_workers", args[0] if args else None))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(leasefence, "ThreadPoolExecutor", Counting)
    leasefence.enqueue(db, "j")
    leasefence.claim_many(db, "j", ["a", "b", "c"], 0.0, 1.0)
    assert made == [3]


# ─── paths and types ────────────────────────────────────────────────────────────────────────


def test_path_may_be_str_or_pathlike(tmp_path: Path):
    path = tmp_path / "p.db"
    leasefence.init_db(str(path))
    assert leasefence.enqueue(path, "j") is True
    assert leasefence.state(str(path), "j")["id"] == "j"

    class Custom:
        def __fspath__(self):
            return str(path)

    assert leasefence.claim(Custom(), "j", "A", 0.0, 1.0) == 1


def test_wrong_types_are_type_errors_naming_the_argument(db: Path):
    leasefence.enqueue(db, "j")
    with pytest.raises(TypeError, match="now"):
        leasefence.claim(db, "j", "A", "soon", 1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="job_id"):
        leasefence.enqueue(db, 42)  # type: ignore[arg-type]
    assert read_row(db, "j") == ("j", None, 0.0, 0, None, 0)


def test_integers_are_accepted_for_clock_and_ttl(db: Path):
    leasefence.enqueue(db, "j")
    assert leasefence.claim(db, "j", "A", 0, 10) == 1
    assert read_row(db, "j")[2] == 10.0

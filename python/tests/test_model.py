"""Model-based test: random sequences of the eight functions against a pure-Python model of
the design note (a dict of rows), on one SQLite file. Every return value and every stored row
(read through the standard sqlite3 module) must equal the model's after each step.

``LEASEFENCE_MODEL_EXAMPLES`` scales it (default 150 sequences); the seed Hypothesis prints on a
failure reproduces it.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from typing import Dict, Optional, Tuple

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import leasefence

IDS = st.sampled_from(["a", "b", "c"])
OWNERS = st.sampled_from(["A", "B", "C"])
# A few values around each other, so that boundaries (now == until) come up often.
TIMES = st.sampled_from([0.0, 1.0, 2.0, 3.0, 5.0, 8.0, 10.0, 13.0])
TTLS = st.sampled_from([1.0, 2.0, 5.0])
FENCES = st.integers(min_value=0, max_value=6)
EXAMPLES = int(os.environ.get("LEASEFENCE_MODEL_EXAMPLES", "150"))

Row = Tuple[str, Optional[str], float, int, Optional[str], int]


class Model:
    """The design note, in plain Python."""

    def __init__(self) -> None:
        self.rows: Dict[str, list] = {}

    def enqueue(self, job_id: str) -> bool:
        if job_id in self.rows:
            return False
        self.rows[job_id] = [job_id, None, 0.0, 0, None, 0]
        return True

    def claim(self, job_id, owner, now, ttl) -> Optional[int]:
        row = self.rows.get(job_id)
        if row is None or row[5] == 1 or row[2] > now:
            return None
        row[1], row[2], row[3] = owner, now + ttl, row[3] + 1
        return row[3]

    def _live(self, job_id, owner, fence, now) -> bool:
        row = self.rows.get(job_id)
        return (
            row is not None and row[1] == owner and row[3] == fence and row[5] == 0 and row[2] > now
        )

    def renew(self, job_id, owner, fence, now, ttl) -> bool:
        if not self._live(job_id, owner, fence, now):
            return False
        self.rows[job_id][2] = now + ttl
        return True

    def complete(self, job_id, owner, fence, now, result) -> bool:
        if not self._live(job_id, owner, fence, now):
            return False
        row = self.rows[job_id]
        row[4], row[5] = result, 1
        return True

    def release(self, job_id, owner, fence) -> bool:
        row = self.rows.get(job_id)
        if row is None or row[1] != owner or row[3] != fence or row[5] != 0:
            return False
        row[1], row[2] = None, 0.0
        return True


class EightFunctions(RuleBasedStateMachine):
    @initialize()
    def fresh_file(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "jobs.db")
        leasefence.init_db(self.path)
        self.model = Model()
        self.now = 0.0

    def teardown(self) -> None:
        self.dir.cleanup()

    @rule(job_id=IDS)
    def enqueue(self, job_id):
        assert leasefence.enqueue(self.path, job_id) == self.model.enqueue(job_id)

    @rule(job_id=IDS, owner=OWNERS, now=TIMES, ttl=TTLS)
    def claim(self, job_id, owner, now, ttl):
        assert leasefence.claim(self.path, job_id, owner, now, ttl) == self.model.claim(
            job_id, owner, now, ttl
        )

    @rule(job_id=IDS, owner=OWNERS, fence=FENCES, now=TIMES, ttl=TTLS)
    def renew(self, job_id, owner, fence, now, ttl):
        assert leasefence.renew(self.path, job_id, owner, fence, now, ttl) == self.model.renew(
            job_id, owner, fence, now, ttl
        )

    @rule(job_id=IDS, owner=OWNERS, fence=FENCES, now=TIMES, result=st.sampled_from(["r1", "r2"]))
    def complete(self, job_id, owner, fence, now, result):
        got = leasefence.complete(self.path, job_id, owner, fence, now, result)
        assert got == self.model.complete(job_id, owner, fence, now, result)

    @rule(job_id=IDS, owner=OWNERS, fence=FENCES)
    def release(self, job_id, owner, fence):
        got = leasefence.release(self.path, job_id, owner, fence)
        assert got == self.model.release(job_id, owner, fence)

    @rule(job_id=IDS, now=TIMES, ttl=TTLS)
    def claim_many(self, job_id, now, ttl):
        results = leasefence.claim_many(self.path, job_id, ["A", "B", "C"], now, ttl)
        winners = [i for i, r in enumerate(results) if r is not None]
        expected = self.model.rows.get(job_id)
        claimable = expected is not None and expected[5] == 0 and expected[2] <= now
        assert len(winners) == (1 if claimable else 0)
        if winners:
            assert self.model.claim(job_id, "ABC"[winners[0]], now, ttl) == results[winners[0]]

    @rule(job_id=IDS)
    def state(self, job_id):
        row = self.model.rows.get(job_id)
        expected = None if row is None else dict(zip(["id", "owner", "until", "fence", "result", "done"], row))
        assert leasefence.state(self.path, job_id) == expected

    @rule()
    def restart(self):
        leasefence.init_db(self.path)

    @invariant()
    def stored_rows_match_the_model(self):
        if not hasattr(self, "path"):
            return
        con = sqlite3.connect(self.path)
        try:
            stored = {
                r[0]: list(r)
                for r in con.execute("SELECT id, owner, until, fence, result, done FROM jobs")
            }
        finally:
            con.close()
        assert stored == self.model.rows


EightFunctions.TestCase.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_eight_functions_against_the_model = EightFunctions.TestCase

"""Job leases with fencing tokens: a stalled worker can still run, but it can no longer store
anything.

Every ``claim`` of a job hands out a *fence* one higher than the last; ``renew``, ``complete``
and ``release`` succeed only for the current owner **and** the current fence while the lease
is live, so a late write from an older generation is refused instead of overwriting the result
of the worker that replaced it::

    >>> import leasefence, tempfile, os
    >>> db = os.path.join(tempfile.mkdtemp(), "jobs.db")
    >>> leasefence.init_db(db)
    >>> leasefence.enqueue(db, "invoice-42")
    True
    >>> a = leasefence.claim(db, "invoice-42", "A", 0.0, 10.0)       # fence 1; A stalls
    >>> b = leasefence.claim(db, "invoice-42", "B", 10.0, 10.0)      # expired: fence 2
    >>> leasefence.complete(db, "invoice-42", "B", b, 12.0, "paid")
    True
    >>> leasefence.complete(db, "invoice-42", "A", a, 13.0, "paid twice")  # refused
    False
    >>> leasefence.state(db, "invoice-42")["result"]
    'paid'

The eight functions of the design note (``init_db``, ``enqueue``, ``state``, ``claim``,
``renew``, ``complete``, ``release``, ``claim_many``) open the file for each call. A
:class:`Store` keeps one connection (an SQLite file, or PostgreSQL by URL) and has the queue's
operations; a :class:`Worker` runs Python callables on Rust threads that renew the lease while
the handler runs. The core is Rust (``leasefence._native``); every call releases the GIL.
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Union

from . import _native
from ._native import (
    Attempt,
    Failed,
    History,
    Job,
    JobInfo,
    Lease,
    NewJob,
    QueueInfo,
    Refusal,
    ScheduleInfo,
    Stats,
    Store,
    Tick,
    WorkerStats,
    claim,
    complete,
    enqueue,
    init_db,
    release,
    renew,
    state,
)
from .errors import (
    BackendError,
    Busy,
    CannotConnect,
    CannotOpen,
    ConnectionLost,
    Corrupt,
    Error,
    InvalidArgument,
    LeaseLost,
    NotADatabase,
    ReadOnly,
    Retryable,
    SchemaMismatch,
    StorageFull,
    Unavailable,
    Unsupported,
)

__version__: str = _native.__version__

__all__ = [
    # the design note's eight functions
    "init_db",
    "enqueue",
    "state",
    "claim",
    "renew",
    "complete",
    "release",
    "claim_many",
    # the queue
    "Store",
    "NewJob",
    "Lease",
    "JobInfo",
    "Stats",
    "QueueInfo",
    "Failed",
    "History",
    "Attempt",
    "Refusal",
    "ScheduleInfo",
    "Tick",
    "Worker",
    "Job",
    "WorkerStats",
    # errors
    "Error",
    "Retryable",
    "InvalidArgument",
    "Busy",
    "Unavailable",
    "ConnectionLost",
    "SchemaMismatch",
    "NotADatabase",
    "CannotOpen",
    "CannotConnect",
    "StorageFull",
    "ReadOnly",
    "Corrupt",
    "Unsupported",
    "BackendError",
    "LeaseLost",
]

PathArg = Union[str, "os.PathLike[str]"]


def claim_many(
    path: PathArg, job_id: str, owners: Iterable[str], now: float, ttl: float
) -> List[Optional[int]]:
    """Calls :func:`claim` for every owner at the same time, each on its own thread (a
    ``ThreadPoolExecutor``, all released at once by a barrier) and its own connection, and
    returns the results in the order of ``owners``. On a claimable job exactly one owner gets a
    fence and all others ``None``.

    Every owner's arguments are checked before any thread starts: a bad one raises
    :class:`InvalidArgument` (a ``ValueError``) and nothing changes. ``owners`` is a list (any
    iterable) of names; a single ``str`` is a ``TypeError`` naming ``owners``. Otherwise the first error
    any thread met, in input order, is raised once all have finished.
    """
    try:
        path = os.fspath(path)
    except TypeError:
        raise TypeError(
            "invalid argument `path`: must be a str or os.PathLike, not "
            f"{type(path).__name__}"
        ) from None
    if isinstance(owners, (str, bytes)):
        # A str is iterable: it would claim under each of its characters.
        raise TypeError(
            "invalid argument `owners`: must be a list of owner names, not a single "
            f"{type(owners).__name__}; pass [owner]"
        )
    owners = list(owners)
    for owner in owners:
        # check_claim_args reads None as "no owner": it must not pass for one of the owners,
        # or the others' threads would claim while this call raises.
        if not isinstance(owner, str):
            raise TypeError(
                "invalid argument `owners`: every owner must be a str, not "
                f"{type(owner).__name__}"
            )
        _native.check_claim_args(job_id, owner, now, ttl)
    if not owners:
        _native.check_claim_args(job_id, None, now, ttl)  # bad arguments are bad without owners
        return []
    barrier = threading.Barrier(len(owners))

    def one(owner: str) -> Optional[int]:
        barrier.wait()
        return claim(path, job_id, owner, now, ttl)

    with ThreadPoolExecutor(max_workers=len(owners)) as pool:
        try:
            futures = [pool.submit(one, owner) for owner in owners]
        except BaseException:
            # A thread that could not start (or Ctrl-C): the started ones would wait at the
            # barrier for it forever; broken, they return without claiming.
            barrier.abort()
            raise
        return [future.result() for future in futures]


Handler = Callable[[Job], Optional[Union[str, bytes]]]

# The native workers whose run() has not returned. Python does not join a daemon thread at
# exit, and a worker's Rust threads calling handlers while the interpreter finalizes crash the
# process: at exit each is stopped at once and waited for (handlers get `job.lost`).
_running: "set[_native.Worker]" = set()
_running_lock = threading.Lock()


@atexit.register
def _stop_running_workers() -> None:
    with _running_lock:
        running = list(_running)
    for worker in running:
        worker.stop_at_exit()


def _mapping(name: str, value: Optional[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    """``value`` as a ``dict``; anything but a mapping is a ``TypeError`` naming the argument
    (``dict()`` would take a list of pairs, or fail with a bare ``ValueError``)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError(
            f"invalid argument `{name}`: must be a mapping (a dict), not {type(value).__name__}"
        )
    return dict(value)


class Worker:
    """Runs ``handler(job)`` for every ready job of a store, on Rust threads.

    A handler is a plain callable; an ``async def`` function, a generator function or an async
    generator function is refused with a ``TypeError`` (its body would never run).

    Each thread claims a job (``claim_next``), renews its lease on a heartbeat while the
    handler runs, and stores the outcome only through the fence: the handler's return value
    (``str``, UTF-8 ``bytes`` or ``None``) as the result, or its exception as a failure (retried
    with backoff until the job's attempts run out). When the lease is lost the job's
    :attr:`Job.lost` flag is set and :meth:`Job.raise_if_lost` raises :class:`LeaseLost`;
    whatever the handler returns then is refused by the store.

    ``db`` is what :class:`Store` takes (``schema`` names the PostgreSQL schema, default
    ``leasefence``; ``synchronous="normal"`` opts out of durable SQLite commits). ``kinds`` maps job kinds to their own handlers; ``queues`` maps queue names to thread
    counts (default: ``concurrency`` threads over every queue; ``concurrency`` is then not used,
    and other than 1 it is refused). ``timeout`` limits a handler's
    run time (seconds); ``drain=True`` stops once nothing is ready. :meth:`run` blocks; SIGTERM
    or SIGINT (Ctrl-C) stop it gracefully — no new claims, running handlers get up to
    ``shutdown_deadline`` seconds, then their leases are given back — and a second signal stops
    it at once.

    ``scheduler=True`` also takes the **scheduler role** when no other worker holds it: a
    thread of its own enqueues the due runs of every schedule (:meth:`Store.add_schedule`)
    under a lease and fence of its own, so a slot is never enqueued twice; any number of
    workers may ask, one holds the role and the others take over within ``ttl`` when it stops.
    """

    def __init__(
        self,
        db: PathArg,
        handler: Optional[Handler] = None,
        *,
        kinds: Optional[Mapping[str, Handler]] = None,
        concurrency: int = 1,
        queues: Optional[Mapping[str, int]] = None,
        ttl: float = 30.0,
        timeout: Optional[float] = None,
        drain: bool = False,
        poll_interval: float = 0.5,
        owner_prefix: Optional[str] = None,
        shutdown_deadline: float = 30.0,
        batch: Optional[int] = None,
        synchronous: str = "full",
        schema: Optional[str] = None,
        scheduler: bool = False,
    ) -> None:
        self._native = _native.Worker(
            db,
            handler,
            kinds=_mapping("kinds", kinds),
            concurrency=concurrency,
            queues=_mapping("queues", queues),
            ttl=ttl,
            timeout=timeout,
            drain=drain,
            poll_interval=poll_interval,
            owner_prefix=owner_prefix,
            shutdown_deadline=shutdown_deadline,
            batch=batch,
            synchronous=synchronous,
            schema=schema,
            scheduler=scheduler,
        )

    def run(self, *, handle_signals: bool = True) -> WorkerStats:
        """Runs until shut down (or, with ``drain=True``, until nothing is ready) and returns
        the counters. With ``handle_signals`` (and on the main thread) SIGTERM and SIGINT shut
        it down gracefully, a second one at once; the previous handlers are restored afterwards,
        also when it fails (a signal whose handler was installed by C code, which
        ``signal.getsignal`` reports as ``None``, is left to that handler).

        Returns once every handler has returned: one that outlives the shutdown deadline is
        told (``job.lost``) and its lease given back, and ``run()`` waits for it. A handler
        raising ``SystemExit`` or ``KeyboardInterrupt`` stops the worker (gracefully; that job
        is given back, its attempt refunded), and ``run()`` raises it once the worker stopped.
        """
        previous: Dict[int, Any] = {}
        started = False
        try:
            if handle_signals and threading.current_thread() is threading.main_thread():
                signals_seen = [0]

                def on_signal(signum: int, frame: Any) -> None:
                    signals_seen[0] += 1
                    if signals_seen[0] == 1:
                        self._native.shutdown()
                    else:
                        self._native.shutdown_now()

                for stop in (signal.SIGTERM, signal.SIGINT):
                    old = signal.getsignal(stop)
                    # None: a handler installed by C code, which Python could not put back;
                    # that signal is left to it.
                    if old is not None:
                        signal.signal(stop, on_signal)
                        previous[stop] = old
            self._native.start()
            with _running_lock:
                _running.add(self._native)
            started = True
            try:
                # Short GIL-free waits, so that Python runs its signal handlers in between.
                while not self._native.wait(0.05):
                    pass
            except BaseException:
                self._native.shutdown_now()
                self._native.join()
                raise
        finally:
            # Restored in every case, a failed start() included: Ctrl-C must not be left
            # calling shutdown() on a worker that is no longer running.
            for signum, old in previous.items():
                signal.signal(signum, old)
            if started:  # and stopped: wait() said so, or shutdown_now() and join() above
                with _running_lock:
                    _running.discard(self._native)
        return self._native.join()

    def shutdown(self) -> None:
        """Graceful stop (from another thread): no new claims; running handlers may finish
        until the shutdown deadline, then their leases are given back (fence kept)."""
        self._native.shutdown()

    def shutdown_now(self) -> None:
        """Immediate stop: running handlers' leases are given back now and their
        :attr:`Job.lost` flags set."""
        self._native.shutdown_now()

    @property
    def shutting_down(self) -> bool:
        """Whether a shutdown was asked for."""
        return self._native.shutting_down

    def stats(self) -> WorkerStats:
        """The counters so far."""
        return self._native.stats()

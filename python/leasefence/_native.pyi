"""Type stubs of the Rust extension ``leasefence._native`` (re-exported by ``leasefence``)."""

import os
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union, final

_Path = Union[str, "os.PathLike[str]"]
_Queues = Union[None, str, Sequence[str]]
_Ids = Union[str, Sequence[str]]

__version__: str

def init_db(path: _Path) -> None: ...
def enqueue(path: _Path, job_id: str) -> bool: ...
def state(path: _Path, job_id: str) -> Optional[Dict[str, Any]]: ...
def claim(path: _Path, job_id: str, owner: str, now: float, ttl: float) -> Optional[int]: ...
def renew(path: _Path, job_id: str, owner: str, fence: int, now: float, ttl: float) -> bool: ...
def complete(path: _Path, job_id: str, owner: str, fence: int, now: float, result: str) -> bool: ...
def release(path: _Path, job_id: str, owner: str, fence: int) -> bool: ...
def check_claim_args(job_id: str, owner: Optional[str], now: float, ttl: float) -> None: ...

@final
class Lease:
    """A lease handed out by a claim; immutable, hashable, picklable."""
    def __init__(
        self,
        job_id: str,
        owner: str,
        fence: int,
        until: float,
        queue: str = "default",
        kind: Optional[str] = None,
        payload: Optional[bytes] = None,
        priority: int = 0,
        max_attempts: int = 0,
        last_error: Optional[str] = None,
        attempt: int = 1,
    ) -> None: ...
    @property
    def job_id(self) -> str: ...
    @property
    def owner(self) -> str: ...
    @property
    def fence(self) -> int: ...
    @property
    def until(self) -> float: ...
    @property
    def queue(self) -> str: ...
    @property
    def kind(self) -> Optional[str]: ...
    @property
    def payload(self) -> Optional[bytes]: ...
    @property
    def priority(self) -> int: ...
    @property
    def attempt(self) -> int: ...
    @property
    def max_attempts(self) -> int: ...
    @property
    def last_error(self) -> Optional[str]: ...
    def __hash__(self) -> int: ...

@final
class NewJob:
    """A job to enqueue, validated when made."""
    def __init__(
        self,
        job_id: str,
        payload: Optional[bytes] = None,
        *,
        queue: Optional[str] = None,
        kind: Optional[str] = None,
        priority: int = 0,
        not_before: Optional[float] = None,
        max_attempts: Optional[int] = None,
        unique_key: Optional[str] = None,
        unique_for: Optional[float] = None,
    ) -> None: ...
    @property
    def job_id(self) -> str: ...

@final
class JobInfo:
    """One job with every field and its status at the call's clock reading."""
    id: str
    status: str
    owner: Optional[str]
    until: float
    fence: int
    result: Optional[str]
    done: bool
    queue: str
    kind: Optional[str]
    unique_key: Optional[str]
    payload: Optional[bytes]
    priority: int
    not_before: float
    max_attempts: int
    attempts: int
    error: Optional[str]
    finished_at: Optional[float]
    outcome: Optional[str]
    enqueued_at: Optional[float]

@final
class Stats:
    """Jobs by status."""
    ready: int
    scheduled: int
    leased: int
    expired: int
    retrying: int
    done: int
    dead: int
    cancelled: int
    total: int

@final
class QueueInfo:
    """A queue, whether it is paused, and its jobs by status."""
    name: str
    paused: bool
    stats: Stats

@final
class Failed:
    """What a recorded failure led to."""
    dead: bool
    retry_at: Optional[float]

@final
class Store:
    """A kept connection to an SQLite file or a PostgreSQL database.

    ``synchronous``: ``"full"`` (durable, the default) or ``"normal"`` (SQLite only).
    ``busy_timeout``: seconds a write waits for a lock before raising ``Busy`` — SQLite's
    write lock, PostgreSQL's ``lock_timeout`` — from 0 to 2147483.647 (2^31 - 1 ms, the most
    PostgreSQL takes); 5 by default. ``schema``: PostgreSQL's schema (``leasefence``).
    A value out of range raises ``InvalidArgument`` naming it, and opens nothing.
    """
    def __init__(
        self,
        db: _Path,
        *,
        synchronous: str = "full",
        busy_timeout: Optional[float] = None,
        schema: Optional[str] = None,
    ) -> None: ...
    @property
    def backend(self) -> str: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Store": ...
    def __exit__(self, *args: object) -> None: ...
    def state(self, job_id: str) -> Optional[Dict[str, Any]]: ...
    def enqueue(
        self,
        job_id: str,
        payload: Optional[bytes] = None,
        *,
        queue: Optional[str] = None,
        kind: Optional[str] = None,
        priority: int = 0,
        not_before: Optional[float] = None,
        max_attempts: Optional[int] = None,
        unique_key: Optional[str] = None,
        unique_for: Optional[float] = None,
    ) -> bool: ...
    def enqueue_many(self, jobs: Iterable[Union[str, NewJob]]) -> List[bool]: ...
    def claim(self, job_id: str, owner: str, ttl: float, *, now: Optional[float] = None) -> Optional[Lease]: ...
    def claim_next(
        self, owner: str, ttl: float = 30.0, *, queues: _Queues = None, now: Optional[float] = None
    ) -> Optional[Lease]: ...
    def claim_batch(
        self, owner: str, n: int, ttl: float = 30.0, *, queues: _Queues = None, now: Optional[float] = None
    ) -> List[Lease]: ...
    def renew(self, lease: Lease, ttl: float, *, now: Optional[float] = None) -> Optional[Lease]: ...
    def complete(self, lease: Lease, result: str, *, now: Optional[float] = None) -> bool: ...
    def complete_batch(
        self, completions: Iterable[Tuple[Lease, str]], now: Optional[float] = None
    ) -> List[bool]: ...
    def fail(
        self, lease: Lease, error: str, *, now: Optional[float] = None, retry_at: Optional[float] = None
    ) -> Optional[Failed]: ...
    def release(self, lease: Lease) -> bool: ...
    def cancel(self, job_id: str, now: Optional[float] = None) -> bool: ...
    def retry(self, job_ids: _Ids, now: Optional[float] = None) -> List[bool]: ...
    def retry_dead(self, queues: _Queues = None, now: Optional[float] = None) -> int: ...
    def delete(self, job_ids: _Ids) -> List[bool]: ...
    def purge(self, finished_before: float) -> int: ...
    def list(
        self,
        status: Optional[str] = None,
        after: Optional[str] = None,
        limit: int = 100,
        now: Optional[float] = None,
    ) -> List[JobInfo]: ...
    def inspect(self, job_id: str, now: Optional[float] = None) -> Optional[JobInfo]: ...
    def pause(self, queue: str) -> bool: ...
    def resume(self, queue: str) -> bool: ...
    def queues(self, now: Optional[float] = None) -> List[QueueInfo]: ...
    def stats(self, now: Optional[float] = None) -> Stats: ...
    def admit(self, resource: str, fence: int) -> bool: ...

@final
class Job:
    """The job a worker's handler is called with."""
    @property
    def lease(self) -> Lease: ...
    @property
    def id(self) -> str: ...
    @property
    def fence(self) -> int: ...
    @property
    def attempt(self) -> int: ...
    @property
    def queue(self) -> str: ...
    @property
    def kind(self) -> Optional[str]: ...
    @property
    def payload(self) -> Optional[bytes]: ...
    @property
    def owner(self) -> str: ...
    @property
    def lost(self) -> bool: ...
    def wait(self, timeout: float) -> bool: ...
    def raise_if_lost(self) -> None: ...
    def check_lease(self) -> bool: ...
    def admit(self, resource: str) -> bool: ...

@final
class WorkerStats:
    """A worker's counters."""
    claimed: int
    renewed: int
    completed: int
    retried: int
    dead: int
    lost: int
    stale_refused: int
    released: int
    cancelled: int
    timed_out: int
    errors: int

@final
class Worker:
    """The native worker (``leasefence.Worker`` wraps it)."""
    def __init__(
        self,
        db: _Path,
        handler: Optional[Callable[[Job], Any]] = None,
        *,
        kinds: Optional[Mapping[str, Callable[[Job], Any]]] = None,
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
    ) -> None: ...
    def start(self) -> None: ...
    def wait(self, timeout: float) -> bool: ...
    def join(self) -> WorkerStats: ...
    def shutdown(self) -> None: ...
    def shutdown_now(self) -> None: ...
    @property
    def shutting_down(self) -> bool: ...
    def stats(self) -> WorkerStats: ...

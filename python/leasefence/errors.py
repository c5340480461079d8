"""The exceptions of leasefence, in one hierarchy.

Every error the package raises is a :class:`Error`. Catch :class:`Retryable` to retry a call
that met a busy or unavailable database (nothing was written); :class:`InvalidArgument` is also
a :class:`ValueError` and names the bad argument in :attr:`InvalidArgument.argument`.

A stale write is *not* an error: ``complete``, ``renew`` and ``release`` return ``False`` and
``claim`` returns ``None``. Inside a worker's handler, :class:`LeaseLost` is the exception to
raise (or that :meth:`leasefence.Job.raise_if_lost` raises) once the lease is gone.
"""

from __future__ import annotations

from typing import Optional

__all__ = [
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


class Error(Exception):
    """Base class of every leasefence error."""

    #: Whether the same call may succeed when made again (nothing was written).
    retryable: bool = False


class Retryable(Error):
    """The database could not take the call now; nothing was written. Retry it."""

    retryable = True


class InvalidArgument(Error, ValueError):
    """An argument is out of its domain (``ttl <= 0``, an empty id, a non-finite clock …).

    Nothing was changed. :attr:`argument` names the argument.
    """

    #: The name of the bad argument, e.g. ``"ttl"``.
    argument: Optional[str] = None


class Busy(Retryable):
    """Another connection held the database's lock past the busy timeout."""


class Unavailable(Retryable):
    """The database is unavailable for now (e.g. PostgreSQL is restarting)."""


class ConnectionLost(Error):
    """The connection to PostgreSQL broke during the call; its outcome is unknown."""


class SchemaMismatch(Error):
    """The file has no ``jobs`` table (run ``init_db`` first) or one lacking one of the six
    columns; nothing was modified."""


class NotADatabase(Error):
    """The file is not an SQLite database; nothing was modified."""


class CannotOpen(Error):
    """The database file cannot be opened: a missing folder, or a missing file where the call
    does not create one (``state``, ``claim``, … on a file ``init_db`` never made)."""


class CannotConnect(Error):
    """PostgreSQL cannot be reached."""


class StorageFull(Error):
    """The disk is full or the size limit is reached; nothing was written."""


class ReadOnly(Error):
    """The database is read-only; nothing was written."""


class Corrupt(Error):
    """The database file is corrupt."""


class Unsupported(Error):
    """The database cannot be used (e.g. a PostgreSQL server too old)."""


class BackendError(Error):
    """Any other failure of the database."""


class LeaseLost(Error):
    """Raised in a handler whose lease is gone: nothing this attempt stores will be accepted."""

//! [`AsyncStore`]: the blocking [`Store`] for async code — a pool of store connections whose
//! every call runs on tokio's blocking pool, never on the runtime's worker threads.
//!
//! Every guarantee stays where it was: each call is one call of the library's [`Store`] on one
//! connection, so owner, fence and the live lease are checked in the database, in the write's
//! own transaction. Nothing about a lease is kept in this process: a second server, or this one
//! restarted, sees exactly what the store holds.

use std::sync::{Arc, Mutex};
use std::time::Duration;

#[cfg(feature = "postgres")]
use crate::PgOptions;
use crate::{AnyOptions, AnyStore, SqliteOptions, Store, Target};
use tokio::sync::Semaphore;

/// How an [`AsyncStore`] opens its connections.
#[derive(Debug, Clone)]
pub struct AsyncOptions {
    connections: u32,
    acquire_timeout: Option<Duration>,
    sqlite: SqliteOptions,
    #[cfg(feature = "postgres")]
    postgres: PgOptions,
}

impl Default for AsyncOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl AsyncOptions {
    /// Four connections; SQLite files must exist and be initialised (`leasefence init`), with
    /// the library's defaults (WAL, `synchronous = FULL`); PostgreSQL in the schema
    /// `leasefence`, judging every lease by the **database's** clock.
    pub fn new() -> Self {
        AsyncOptions {
            connections: 4,
            acquire_timeout: None,
            sqlite: SqliteOptions::new().init(false),
            #[cfg(feature = "postgres")]
            postgres: PgOptions::new().database_clock(true),
        }
    }

    /// How many store connections run calls at once (at least 1). More calls wait, without
    /// blocking a thread, for a connection to come free.
    pub fn connections(mut self, connections: u32) -> Self {
        self.connections = connections.max(1);
        self
    }

    /// How long a call may wait for a free connection (default: as long as it takes). Past it
    /// the call is [`Error::Unavailable`](crate::Error::Unavailable), retryable, and nothing
    /// of it ran. Once a call has its connection it runs to the end. An
    /// [`AsyncWorker`](crate::AsyncWorker) sharing the store tries an outcome's write again
    /// until a connection comes free (for up to its ttl), so a busy spell costs no result.
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = Some(timeout);
        self
    }

    /// The options of an SQLite store.
    pub fn sqlite(mut self, options: SqliteOptions) -> Self {
        self.sqlite = options;
        self
    }

    /// The options of a PostgreSQL store (cargo feature `postgres`). Each pooled store holds
    /// one connection
    /// (`pool_size(1)` is set here), so `connections` is the number of database sessions.
    #[cfg(feature = "postgres")]
    pub fn postgres(mut self, options: PgOptions) -> Self {
        self.postgres = options;
        self
    }
}

/// A pool of [`AnyStore`] connections for async code: `store.call(|s| s.claim_next(…)).await`
/// runs the closure on tokio's blocking pool with a connection of its own.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), leasefence::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = dir.path().join("jobs.db");
/// # leasefence::init_db(&db)?;
/// use leasefence::{AsyncOptions, AsyncStore, NewJob, Now, Owner, Store, Ttl};
///
/// let store = AsyncStore::open(db.to_str().unwrap(), AsyncOptions::new()).await?;
/// store.call(|s| s.enqueue_job(NewJob::new("mail-1")?)).await?;
/// let lease = store
///     .call(|s| s.claim_next(Owner::new("w1")?, Now::system(), Ttl::new(30.0)?))
///     .await?
///     .expect("a ready job");
/// assert_eq!((lease.job_id.as_str(), lease.fence), ("mail-1", 1));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct AsyncStore {
    inner: Arc<Inner>,
}

/// What every clone of an [`AsyncStore`] shares.
struct Inner {
    options: AnyOptions,
    target: Target,
    /// Connections not in use. At most `connections` exist: one per permit.
    idle: Mutex<Vec<AnyStore>>,
    /// One permit per connection; a call holds one for its whole run.
    permits: Arc<Semaphore>,
    connections: u32,
    acquire_timeout: Option<Duration>,
    backend: &'static str,
    shown: String,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The PostgreSQL driver's synchronous client runs a runtime of its own, which must not
        // be entered from an async task: when the last clone is dropped inside one (a server
        // shutting down), the connections are closed on a thread of their own.
        let idle = std::mem::take(self.idle.get_mut().unwrap_or_else(|e| e.into_inner()));
        if idle.is_empty() {
            return;
        }
        if tokio::runtime::Handle::try_current().is_ok() {
            let closer = std::thread::spawn(move || drop(idle));
            let _ = closer.join();
        } else {
            drop(idle);
        }
    }
}

impl std::fmt::Debug for AsyncStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `shown` is the target without its password.
        f.debug_struct("AsyncStore")
            .field("db", &self.inner.shown)
            .field("backend", &self.inner.backend)
            .field("connections", &self.inner.connections)
            .finish()
    }
}

impl AsyncStore {
    /// Opens the store `db` names — an SQLite path or a PostgreSQL URL / libpq string, as the
    /// CLI's `--db` takes it — with its first connection, so a bad path or an unreachable
    /// server is reported here rather than at the first call.
    ///
    /// # Errors
    /// `InvalidArgument` naming `db`; the backend's opening errors.
    pub async fn open(db: &str, options: AsyncOptions) -> crate::Result<AsyncStore> {
        let target = Target::parse(db)?;
        Self::open_target(target, options).await
    }

    /// [`AsyncStore::open`] of a parsed [`Target`].
    ///
    /// # Errors
    /// The backend's opening errors.
    pub async fn open_target(target: Target, options: AsyncOptions) -> crate::Result<AsyncStore> {
        let backend = if target.is_postgres() {
            "postgres"
        } else {
            "sqlite"
        };
        let shown = target.to_string();
        let options_any = AnyOptions::new().sqlite(options.sqlite);
        #[cfg(feature = "postgres")]
        let options_any = options_any.postgres(options.postgres.pool_size(1));
        // The first connection is opened here, so a bad path or an unreachable server is
        // reported to the caller of `open`; the others are opened on demand.
        let first = {
            let (opts, target) = (options_any.clone(), target.clone());
            tokio::task::spawn_blocking(move || opts.open_target(&target))
                .await
                .map_err(join_error)??
        };
        Ok(AsyncStore {
            inner: Arc::new(Inner {
                options: options_any,
                target,
                idle: Mutex::new(vec![first]),
                permits: Arc::new(Semaphore::new(options.connections as usize)),
                connections: options.connections,
                acquire_timeout: options.acquire_timeout,
                backend,
                shown,
            }),
        })
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn backend(&self) -> &'static str {
        self.inner.backend
    }

    /// The database, as shown to people: the path, or the URL with its password replaced.
    pub fn shown(&self) -> &str {
        &self.inner.shown
    }

    /// Runs `op` on a connection of the pool, on tokio's blocking pool. Waits without blocking
    /// a thread while every connection is busy. A call that finds its connection lost drops
    /// that connection; the next call opens a new one.
    ///
    /// # Errors
    /// `op`'s error, or the backend's error opening a connection.
    pub async fn call<T, F>(&self, op: F) -> crate::Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&AnyStore) -> crate::Result<T> + Send + 'static,
    {
        let acquire = Arc::clone(&self.inner.permits).acquire_owned();
        let permit = match self.inner.acquire_timeout {
            None => acquire.await,
            Some(limit) => tokio::time::timeout(limit, acquire).await.map_err(|_| {
                crate::Error::Unavailable {
                    target: self.inner.shown.clone(),
                    reason: format!(
                        "every one of its {} connections stayed busy for {} s; nothing was run",
                        self.inner.connections,
                        limit.as_secs_f64()
                    ),
                }
            })?,
        }
        .expect("the semaphore is never closed");
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let idle = inner.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let store = match idle {
                Some(store) => store,
                None => inner.options.open_target(&inner.target)?,
            };
            let result = op(&store);
            // A connection found lost is dropped; the next call opens a new one.
            let lost = matches!(
                &result,
                Err(crate::Error::ConnectionLost { .. } | crate::Error::CannotConnect { .. })
            );
            if !lost {
                inner
                    .idle
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(store);
            }
            result
        })
        .await
        .map_err(join_error)?
    }

    /// The clock reading leases are judged at: the database's on PostgreSQL, else this
    /// host's system clock.
    ///
    /// # Errors
    /// Connection or backend failures reading the database's clock.
    pub async fn now(&self) -> crate::Result<crate::Now> {
        self.call(|s| Ok(s.database_now()?.unwrap_or_else(crate::Now::system)))
            .await
    }
}

/// A call that panicked: reported as an error, never propagated into the server.
fn join_error(e: tokio::task::JoinError) -> crate::Error {
    crate::Error::Unsupported {
        database: "the store call".into(),
        detail: format!("the call did not finish: {e}"),
    }
}

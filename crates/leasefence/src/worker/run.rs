//! [`Worker`](crate::Worker): its threads, the claim → run → finish loop of each, and the
//! supervising loop of
//! [`Worker::run`](crate::Worker::run) that heartbeats until shutdown.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::batch::{batch_size_for, run_batch};
use super::cancel::CancelToken;
use super::heartbeat::{
    enforce_expiry, enforce_timeouts, heartbeat, mark_released, release, retry_pause,
};
use super::job::Job;
use super::shared::{RECONNECT_WAIT, Shared, TICK, is_connection_fault};
use super::shutdown::ShutdownHandle;
use super::stats::{WorkerStats, bump};
use super::sync::lock;
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::sqlite::SqliteStore;
use crate::store::Store;
use crate::types::{BatchSize, Owner};

/// The shortest wait for cancelled handlers to return after the shutdown deadline, and the
/// whole wait after [`ShutdownHandle::shutdown_now`].
const GRACE: Duration = Duration::from_millis(100);

/// How long a shutdown waits at least for the leases released at its deadline to be given
/// back, when the store is slow to answer; a store that does not answer by then (a host cut
/// off from it) is left to let them expire.
const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// Opens one store; called once per thread, plus once for the heartbeat.
pub(super) type Opener<S> = dyn Fn() -> Result<S> + Send + Sync;

/// A pool of threads that claim jobs, run a handler on each, keep its lease alive, and store
/// its outcome through the fence. See the [module docs](crate::worker) for the whole cycle.
///
/// ```
/// # fn main() -> Result<(), leasefence::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// use leasefence::{NewJob, SqliteStore, Store, Worker};
///
/// let path = dir.path().join("jobs.db");
/// let store = SqliteStore::open(&path)?;
/// store.enqueue_many(&[
///     NewJob::new("greet-1")?.payload(b"ada".to_vec()),
///     NewJob::new("greet-2")?.payload(b"grace".to_vec()),
/// ])?;
///
/// let stats = Worker::sqlite(&path)
///     .concurrency(2)
///     .ttl(30.0)
///     .drain(true) // return once the queue is empty
///     .build(|ctx| {
///         let name = String::from_utf8_lossy(ctx.payload().unwrap_or_default());
///         Ok(format!("hello, {name}"))
///     })?
///     .run()?;
///
/// assert_eq!(stats.completed, 2);
/// let row = store.state(leasefence::JobId::new("greet-2")?)?.unwrap();
/// assert_eq!(row.result.as_deref(), Some("hello, grace"));
/// # Ok(()) }
/// ```
pub struct Worker<S = SqliteStore> {
    pub(super) open: Box<Opener<S>>,
    pub(super) shared: Arc<Shared<S>>,
}

impl<S> fmt::Debug for Worker<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("threads", &self.shared.slots.len())
            .field("owner_prefix", &self.shared.config.owner_prefix)
            .field("stats", &self.shared.counters.snapshot())
            .finish_non_exhaustive()
    }
}

impl<S: Store + Send + 'static> Worker<S> {
    /// A handle to stop the worker and read its counters from another thread (or a signal
    /// handler).
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            stop: self.shared.stop.clone(),
            now: self.shared.now.clone(),
            counters: self.shared.counters.clone(),
        }
    }

    /// Runs until [`ShutdownHandle::shutdown`](crate::ShutdownHandle::shutdown) (or, with
    /// [`drain`](crate::WorkerBuilder::drain), until
    /// no job is ready and none is in flight), then shuts down gracefully: no more claims,
    /// in-flight jobs get until the shutdown deadline to finish, then their tokens are cancelled
    /// and their leases released (fenced, fence kept) so another worker can claim them at once.
    /// Returns the final counters.
    ///
    /// [`ShutdownHandle::shutdown_now`](crate::ShutdownHandle::shutdown_now), even during the
    /// wait, cuts the deadline to zero: what is in flight is cancelled and released at once.
    ///
    /// Threads whose handler still has not returned after a second deadline (100 ms after
    /// `shutdown_now`) are left running in the background; whatever they try to store later is
    /// refused by the fence.
    ///
    /// The heartbeat renews on a thread of its own, and the clock's limits are kept by another:
    /// a store call that hangs (a host cut off from its database or server) never delays giving
    /// a lease up when it ends, a [`timeout`](crate::WorkerBuilder::timeout), or the shutdown
    /// deadline. Leases released at the deadline that the store has not taken back within the
    /// deadline again (at least 5 s) are left to expire.
    ///
    /// # Errors
    /// A store that could not be opened (before anything was claimed), a non-finite clock
    /// reading, a non-retryable store error while claiming (the worker then shut down
    /// gracefully first), or [`Error::InvalidArgument`] naming `concurrency` when the system
    /// refuses to start one of the worker threads (likewise, after a graceful shutdown of those
    /// it started). Busy databases are retried, not returned; so are connections to a
    /// database server that fail once running ([`Error::ConnectionLost`](crate::Error::ConnectionLost),
    /// [`Error::CannotConnect`](crate::Error::CannotConnect): a restart, a terminated
    /// session, a server out of connections): the worker waits and goes on with new
    /// connections, and logs such an outage once as it begins and once as it ends (target
    /// [`OUTAGE_TARGET`](crate::OUTAGE_TARGET)). An outcome write whose answer was lost with its connection is tried again
    /// and, when refused, read back: stored under the job's own fence, it is reported as what
    /// it was, never written twice.
    ///
    /// # Panics
    /// When the system refuses to start the heartbeat's thread (a worker thread it refuses is
    /// the error above, naming `concurrency`).
    pub fn run(self) -> Result<WorkerStats> {
        let mut shared = self.shared;
        let mut stores = Vec::with_capacity(shared.slots.len() + 1);
        for _ in 0..=shared.slots.len() {
            stores.push((self.open)()?);
        }
        let beat_store = stores
            .pop()
            .expect("one store per thread plus the heartbeat's");
        let asked = Instant::now();
        if let Some(database) = beat_store.database_now()? {
            // The reading was taken somewhere during the round trip: assume halfway.
            let reading = database.seconds() + asked.elapsed().as_secs_f64() / 2.0;
            match Arc::get_mut(&mut shared) {
                // With no clock of the caller's to respect, follow the database's on a
                // monotonic timer, so a step of this host's clock cannot shift the heartbeats.
                Some(only) => only.clock.follow(reading),
                None => shared.clock.shift_to(reading),
            }
            tracing::info!(
                database = reading,
                "the store judges leases by the database's clock; the worker's clock follows it"
            );
        }
        tracing::info!(
            threads = shared.slots.len(),
            owner_prefix = %shared.config.owner_prefix,
            ttl = shared.config.ttl.seconds(),
            "worker started"
        );
        let watcher = watch(&shared, &beat_store);
        #[cfg(feature = "cron")]
        let scheduler = match shared.config.scheduler {
            true => Some(super::scheduler::spawn(&shared, (self.open)()?)),
            false => None,
        };
        // The heartbeat makes its store calls on a thread of its own, so that one which hangs
        // (a host cut off from its database or server, waiting out a TCP timeout) never keeps
        // this thread from giving leases up by the clock, from the run-time limits, or from
        // the shutdown deadline. Started before the worker threads, so that a limit on threads
        // is met by a worker thread (an error, below), never by the heartbeat's.
        let beats = Arc::new(Beats::default());
        let beater = spawn_heartbeat(&shared, beat_store, &beats);

        // A thread the system refuses to start (a limit on threads or memory) stops the worker
        // as a fatal error would: the threads already started stop claiming and give back
        // what they hold, and `run` returns the error, naming the setting to lower.
        let wanted = stores.len();
        let mut threads: Vec<JoinHandle<()>> = Vec::with_capacity(wanted);
        for (index, store) in stores.into_iter().enumerate() {
            let worker_shared = shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("leasefence-worker-{index}"))
                .spawn(move || work(&worker_shared, index, store));
            match spawned {
                Ok(thread) => threads.push(thread),
                Err(e) => {
                    shared.fatal(Error::invalid(
                        "concurrency",
                        format!(
                            "the system refused to start worker thread {} of {wanted} ({e}); \
                             give the worker fewer threads",
                            index + 1
                        ),
                    ));
                    break;
                }
            }
        }

        // Running: the clock's limits enforced every tick, until asked to stop (or drained).
        loop {
            enforce_timeouts(&shared);
            enforce_expiry(&shared);
            if shared.stop.is_cancelled() {
                break;
            }
            if shared.config.drain && shared.drained() {
                tracing::info!("queue drained: no ready job, none in flight");
                shared.stop.cancel();
                break;
            }
            if threads.iter().all(JoinHandle::is_finished) {
                break;
            }
            shared.stop.wait_timeout(TICK);
        }

        // Shutting down: keep renewing what is in flight until it finishes or the deadline,
        // which `shutdown_now` cuts to zero whenever it comes.
        let mut deadline = Deadline::after(shared.config.deadline);
        while !threads.iter().all(JoinHandle::is_finished) {
            if shared.now.is_cancelled() {
                deadline = deadline.earlier(Deadline::after(Duration::ZERO));
            }
            if deadline.passed() {
                // Told at once; their leases given back by the heartbeat's thread.
                *lock(&beats.releasing) = mark_released(&shared);
                break;
            }
            enforce_timeouts(&shared);
            enforce_expiry(&shared);
            std::thread::sleep(TICK.min(deadline.left()));
        }
        beats.ended.cancel();
        // The cancelled handlers' grace to return: as long again as the deadline (at least
        // `GRACE`), cut to `GRACE` by `shutdown_now`. The heartbeat's to give their leases
        // back: as long again as the deadline, at least `RELEASE_WAIT`, never cut.
        let mut grace = Deadline::after(shared.config.deadline.max(GRACE));
        let releases = Deadline::after(shared.config.deadline.max(RELEASE_WAIT));
        while !((threads.iter().all(JoinHandle::is_finished) || grace.passed())
            && (beater.is_finished() || releases.passed()))
        {
            if shared.now.is_cancelled() {
                grace = grace.earlier(Deadline::after(GRACE));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        if !beater.is_finished() {
            bump(&shared.counters.errors);
            tracing::warn!(
                "a renewal or release has not returned from the store; leaving the heartbeat's \
                 thread behind (the leases it could not give back expire instead)"
            );
        } else if beater.join().is_err() {
            bump(&shared.counters.errors);
            tracing::error!("the worker's heartbeat thread panicked");
        }
        #[cfg(feature = "cron")]
        if let Some(scheduler) = scheduler
            && scheduler.join().is_err()
        {
            bump(&shared.counters.errors);
            tracing::error!("the worker's scheduler thread panicked");
        }
        if let Some(watcher) = watcher
            && watcher.join().is_err()
        {
            bump(&shared.counters.errors);
            tracing::error!("the worker's watch thread panicked");
        }
        for thread in threads {
            if thread.is_finished() {
                if thread.join().is_err() {
                    bump(&shared.counters.errors);
                    tracing::error!("a worker thread panicked outside its handler");
                }
            } else {
                tracing::warn!("a handler ignored its cancellation; leaving its thread behind");
            }
        }
        let stats = shared.counters.snapshot();
        tracing::info!(?stats, "worker stopped");
        match lock(&shared.fatal).take() {
            Some(error) => Err(error),
            None => Ok(stats),
        }
    }
}

/// What the supervising thread tells the heartbeat's thread.
#[derive(Default)]
struct Beats {
    /// Renew no more: give back `releasing`, then end.
    ended: CancelToken,
    /// The jobs marked released at the shutdown deadline, whose leases are still held.
    releasing: std::sync::Mutex<Vec<Arc<Job>>>,
}

/// Starts the heartbeat's thread: renews what is due every tick until `beats.ended`, then gives
/// back the leases of `beats.releasing`.
fn spawn_heartbeat<S: Store + Send + 'static>(
    shared: &Arc<Shared<S>>,
    store: S,
    beats: &Arc<Beats>,
) -> JoinHandle<()> {
    let (shared, beats) = (Arc::clone(shared), Arc::clone(beats));
    std::thread::Builder::new()
        .name("leasefence-heartbeat".into())
        .spawn(move || {
            while !beats.ended.is_cancelled() {
                // A failed renewal waits a while: a server that refuses at once must not be
                // asked every tick. The pause counts from when the try began, so a try that
                // failed slowly (a busy database's timeout) is made again at once.
                let began = Instant::now();
                let pause = match heartbeat(&shared, &store) {
                    true => TICK,
                    false => retry_pause(&shared)
                        .saturating_sub(began.elapsed())
                        .max(TICK),
                };
                beats.ended.wait_timeout(pause);
            }
            let releasing = std::mem::take(&mut *lock(&beats.releasing));
            release(&shared, &store, releasing);
        })
        .expect("spawn the heartbeat thread")
}

/// How long the watch thread waits per call, so that it notices a shutdown in time.
const WATCH_SLICE: Duration = Duration::from_millis(100);

/// The longest wait between two tries of a watch whose connection keeps failing (idle threads
/// poll meanwhile, so nothing waits longer than the poll interval for it).
const WATCH_BACKOFF: Duration = Duration::from_secs(5);

/// Starts the thread that wakes idle worker threads as soon as the store's
/// [`Watch`](crate::Watch) says jobs may be ready, so an enqueue does not wait out the poll
/// interval. Without a watch (a store that has none, or one that cannot be opened) the
/// threads just poll.
fn watch<S: Store>(shared: &Arc<Shared<S>>, store: &S) -> Option<JoinHandle<()>> {
    let mut watch = match store.watch() {
        Ok(Some(watch)) => watch,
        Ok(None) => return None,
        Err(e) => {
            tracing::warn!(error = %e, "no watch on the store: idle threads poll");
            return None;
        }
    };
    let stop = shared.stop.clone();
    let outage = shared.outage_flag();
    std::thread::Builder::new()
        .name("leasefence-watch".into())
        .spawn(move || {
            // After a failed connection, the wait before the next: doubled up to `WATCH_BACKOFF`
            // while the server stays away, so a server out of connections is not asked 10 times
            // a second.
            let mut pause = WATCH_SLICE;
            while !stop.is_cancelled() {
                // While the claims cannot reach the store, the watch holds no session: a
                // server out of connections gets it back for the claims (a fleet whose every
                // worker held only its watch's session would wait for ever). Idle threads
                // poll meanwhile; the watch listens again once a claim is answered.
                if outage.load(Ordering::SeqCst) {
                    watch.disconnect();
                    stop.wait_timeout(WATCH_SLICE);
                    continue;
                }
                match watch.wait(WATCH_SLICE) {
                    Ok(true) => {
                        pause = WATCH_SLICE;
                        stop.nudge();
                    }
                    Ok(false) => pause = WATCH_SLICE,
                    // The watch reconnects on its next wait (a server restart, say).
                    Err(e) if is_connection_fault(&e) => {
                        tracing::debug!(error = %e, "the store's watch lost its connection; listening again");
                        stop.wait_timeout(pause);
                        pause = (pause * 2).min(WATCH_BACKOFF);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the store's watch failed: idle threads poll");
                        return;
                    }
                }
            }
        })
        .map_err(|e| tracing::warn!(error = %e, "no watch thread: idle threads poll"))
        .ok()
}

/// One worker thread: claim, run, record, until asked to stop.
fn work<S: Store + 'static>(shared: &Shared<S>, index: usize, store: S) {
    let owner = format!("{}-{index}", shared.config.owner_prefix);
    let slot = &shared.slots[index];
    // How many jobs the next claim asks for: starts at one, follows the handlers' speed.
    let mut want = 1;
    while !shared.stop.is_cancelled() {
        // Taken before looking for work: a wake-up that comes while the claim runs is not lost.
        let seen = shared.stop.nudges();
        let now = match shared.now() {
            Ok(now) => now,
            Err(e) => return shared.fatal(e),
        };
        let claimed = Owner::new(&owner).and_then(|o| {
            store.claim_batch_in(
                &slot.queues,
                o,
                now,
                shared.config.ttl,
                BatchSize::new(want)?,
            )
        });
        match claimed {
            Ok(leases) if !leases.is_empty() => {
                shared.reachable(&owner);
                slot.idle.store(false, Ordering::SeqCst);
                let per_job = run_batch(shared, slot, &store, leases, now.seconds());
                want = batch_size_for(per_job, shared);
            }
            Ok(_) => {
                shared.reachable(&owner);
                slot.idle.store(true, Ordering::SeqCst);
                // Until the poll interval, or earlier when the store's watch says jobs may be
                // ready (see `watch`).
                shared.stop.wait_nudged(seen, shared.config.poll);
            }
            Err(e) if e.is_retryable() => {
                slot.idle.store(false, Ordering::SeqCst);
                bump(&shared.counters.errors);
                // Unavailable, or busy past the busy timeout: said once on the outage target
                // (the CLI prints it), and once more when a claim is answered again.
                shared.unreachable(&owner, &e);
                shared.stop.wait_timeout(shared.config.poll);
            }
            // The server restarted, ended the session or has no connection to spare: a claim
            // whose answer was lost may have taken a lease, which expires unused (its fence
            // is never handed out again). Wait, and claim again on a new connection.
            Err(e) if is_connection_fault(&e) => {
                slot.idle.store(false, Ordering::SeqCst);
                bump(&shared.counters.errors);
                shared.unreachable(&owner, &e);
                shared
                    .stop
                    .wait_timeout(shared.config.poll.min(RECONNECT_WAIT * 5));
            }
            Err(e) => {
                bump(&shared.counters.errors);
                shared.fatal(e);
            }
        }
    }
}

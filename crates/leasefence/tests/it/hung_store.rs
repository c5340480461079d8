//! A store call that hangs — a host cut off from its database or server, whose request waits
//! out a TCP timeout — must not suspend the worker's own clock: the lease is given up at its
//! end, the run-time limit and the shutdown deadline are kept, while the renewal still hangs.
//! (`tests/partition.rs` cuts a real network; these pin the rule on one machine, exactly.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;
use leasefence::{
    Error, JobId, JobOutcome, Lease, ManualClock, NewJob, Now, Owner, SqliteStore, Status, Store,
    Ttl, Worker, WorkerBuilder, WorkerStats,
};

const PATIENCE: Duration = Duration::from_secs(10);

/// Whether the next renewals hang, and whether one is hanging now.
#[derive(Default)]
struct Gate {
    state: Mutex<(bool, bool)>,
    cv: Condvar,
}

impl Gate {
    /// From now on every `renew_batch` hangs until [`Gate::open`].
    fn close(&self) {
        self.state.lock().unwrap().0 = true;
    }
    fn open(&self) {
        *self.state.lock().unwrap() = (false, false);
        self.cv.notify_all();
    }
    /// Waits (bounded) until a renewal hangs inside the store.
    #[track_caller]
    fn wait_hanging(&self) {
        let st = self.state.lock().unwrap();
        let (st, _) = self.cv.wait_timeout_while(st, PATIENCE, |s| !s.1).unwrap();
        assert!(st.1, "no renewal reached the store");
    }
    fn hanging(&self) -> bool {
        self.state.lock().unwrap().1
    }
    /// Called by a renewal: hangs while the gate is closed (bounded, so a failed test ends).
    fn pass(&self) {
        let mut st = self.state.lock().unwrap();
        if st.0 {
            st.1 = true;
            self.cv.notify_all();
            let _ = self
                .cv
                .wait_timeout_while(st, 3 * PATIENCE, |s| s.0)
                .unwrap();
        }
    }
}

/// A store that forwards everything to SQLite, except that its renewals hang while the gate is
/// closed, its first `unreachable` claims fail as a server that cannot be reached would, and
/// its first `busy_releases` releases hang while their own gate is closed, then fail busy (or,
/// with `releases_land`, are made after all).
struct Hung {
    inner: SqliteStore,
    gate: Arc<Gate>,
    unreachable: Arc<AtomicUsize>,
    busy_releases: Arc<AtomicUsize>,
    release_gate: Arc<Gate>,
    releases_land: bool,
    renewals: Arc<Renewals>,
}

/// The renewals a [`Hung`] store was asked for, and whether they fail at once as a server that
/// refuses connections (or a proxy answering 503) would.
#[derive(Default)]
struct Renewals {
    failing: std::sync::atomic::AtomicBool,
    /// Renewals fail busy after `SLOW_BUSY`, as a busy database does after its busy timeout.
    slow_busy: std::sync::atomic::AtomicBool,
    calls: Mutex<Vec<Instant>>,
}

/// How long a renewal of a [`Renewals::slow_busy`] store waits before it fails busy: longer
/// than the heartbeat's pause after a failure (1 s with a 30 s lease).
const SLOW_BUSY: Duration = Duration::from_millis(1200);

fn worker(db: &Db, clock: &ManualClock, gate: &Arc<Gate>) -> WorkerBuilder<Hung> {
    let (path, gate) = (db.path.clone(), gate.clone());
    Worker::builder(move || {
        Ok(Hung {
            inner: SqliteStore::open(&path)?,
            gate: gate.clone(),
            unreachable: Arc::default(),
            busy_releases: Arc::default(),
            release_gate: Arc::default(),
            releases_land: false,
            renewals: Arc::default(),
        })
    })
    .clock(clock.clone())
    .owner_prefix("cut")
    .poll_interval(Duration::from_millis(2))
    .shutdown_deadline(Duration::from_millis(200))
    .ttl(30.0)
}

/// The worker's handle, its thread, its handler's start and whether its handler was told.
type Running = (
    leasefence::ShutdownHandle,
    std::thread::JoinHandle<Result<WorkerStats, Error>>,
    Receiver<()>,
    Receiver<bool>,
    Receiver<JobOutcome>,
);

/// A worker whose one handler reports its start and then waits (bounded) for its token;
/// `told` receives whether the token was cancelled, the last receiver each outcome.
fn run_one(w: WorkerBuilder<Hung>) -> Running {
    let (started_tx, started) = channel();
    let (told_tx, told) = channel();
    let (outcome_tx, outcomes) = channel();
    let (started_tx, told_tx) = (Mutex::new(started_tx), Mutex::new(told_tx));
    let outcome_tx = Mutex::new(outcome_tx);
    let w = w
        .on_outcome(move |_, outcome| {
            let _ = outcome_tx.lock().unwrap().send(outcome.clone());
        })
        .build(move |ctx| {
            started_tx.lock().unwrap().send(()).unwrap();
            let cancelled = ctx.token().wait_timeout(3 * PATIENCE);
            told_tx.lock().unwrap().send(cancelled).unwrap();
            Err("stopped".into())
        })
        .unwrap();
    let handle = w.shutdown_handle();
    let run = std::thread::spawn(move || w.run());
    (handle, run, started, told, outcomes)
}

fn one_job(db: &Db) {
    SqliteStore::open(&db.path)
        .unwrap()
        .enqueue_many(&[job("j")])
        .unwrap();
}

#[test]
fn a_renewal_that_hangs_does_not_keep_the_worker_from_giving_the_lease_up_at_its_end() {
    let db = Db::new();
    one_job(&db);
    let (clock, gate) = (ManualClock::new(0.0), Arc::new(Gate::default()));
    let (handle, run, started, told, outcomes) = run_one(worker(&db, &clock, &gate));
    started.recv_timeout(PATIENCE).unwrap();
    gate.close();
    clock.set(10.0); // a third of the ttl: the renewal is due, and hangs
    gate.wait_hanging();
    clock.set(30.0); // the lease's end on the worker's clock
    let cancelled = told
        .recv_timeout(PATIENCE)
        .expect("the handler is told at the lease's end");
    assert!(cancelled, "told by its token, not by its own timeout");
    assert!(gate.hanging(), "told while the renewal still hangs");
    assert_eq!(handle.stats().lost, 1, "{:?}", handle.stats());
    // Its failure, written at 30 by the worker's clock, is refused: the lease has ended.
    let outcome = outcomes.recv_timeout(PATIENCE).expect("an outcome");
    assert_eq!(outcome, JobOutcome::Refused);
    assert_eq!(handle.stats().stale_refused, 1, "{:?}", handle.stats());
    assert!(gate.hanging(), "refused while the renewal still hangs");
    gate.open();
    handle.shutdown();
    let stats = run.join().unwrap().expect("run ends without an error");
    assert_eq!(
        (
            stats.lost,
            stats.stale_refused,
            stats.completed,
            stats.retried
        ),
        (1, 1, 0, 0),
        "{stats:?}"
    );
    // Nothing stored under fence 1 (the job, claimable again at 30, may have been taken once
    // more before the shutdown and given back).
    let row = db.row("j").unwrap();
    assert_eq!((row.done, row.result.as_deref()), (0, None), "{row:?}");
    assert!(
        row.fence == 1 || (row.fence == 2 && stats.released == 1),
        "{row:?} {stats:?}"
    );
}

#[test]
fn a_run_time_limit_is_kept_while_a_renewal_hangs() {
    let db = Db::new();
    one_job(&db);
    let (clock, gate) = (ManualClock::new(0.0), Arc::new(Gate::default()));
    let (handle, run, started, told, _outcomes) = run_one(worker(&db, &clock, &gate).timeout(15.0));
    started.recv_timeout(PATIENCE).unwrap();
    gate.close();
    clock.set(10.0);
    gate.wait_hanging();
    clock.set(15.0); // the limit; the lease (until 30) still runs
    assert!(told.recv_timeout(PATIENCE).expect("timed out at the limit"));
    assert!(gate.hanging(), "timed out while the renewal still hangs");
    assert_eq!(handle.stats().timed_out, 1, "{:?}", handle.stats());
    gate.open();
    handle.shutdown();
    let stats = run.join().unwrap().expect("run ends without an error");
    assert_eq!((stats.timed_out, stats.lost), (1, 0), "{stats:?}");
    // The timed-out attempt is recorded as a failure, under its fence, once the store answers.
    let state = SqliteStore::open(&db.path)
        .unwrap()
        .inspect(JobId::new("j").unwrap(), Now::new(16.0).unwrap())
        .unwrap()
        .unwrap();
    assert_eq!((state.state.fence, state.state.owner), (1, None));
    assert_ne!(state.status, Status::Done);
}

#[test]
fn the_shutdown_deadline_is_kept_while_a_renewal_hangs() {
    let db = Db::new();
    one_job(&db);
    let (clock, gate) = (ManualClock::new(0.0), Arc::new(Gate::default()));
    let w = worker(&db, &clock, &gate).shutdown_deadline(Duration::from_millis(200));
    let (handle, run, started, told, _outcomes) = run_one(w);
    started.recv_timeout(PATIENCE).unwrap();
    gate.close();
    clock.set(10.0);
    gate.wait_hanging();
    let asked = Instant::now();
    handle.shutdown();
    assert!(
        told.recv_timeout(PATIENCE)
            .expect("cancelled at the deadline")
    );
    // run returns once its wait for the hung store is over (5 s), the renewal still hanging.
    let waited = Instant::now();
    while !run.is_finished() && waited.elapsed() < PATIENCE {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        run.is_finished(),
        "run returned {:?} after the shutdown",
        asked.elapsed()
    );
    assert!(gate.hanging(), "returned while the renewal still hangs");
    let stats = run.join().unwrap().expect("run ends without an error");
    assert_eq!((stats.released, stats.lost), (0, 0), "{stats:?}");
    assert!(
        stats.errors >= 1,
        "the heartbeat left behind is counted: {stats:?}"
    );
    // Not given back: the lease (fence 1, until 30) expires instead; nothing was stored.
    let row = db.row("j").unwrap();
    assert_eq!((row.fence, row.done, row.until), (1, 0, 30.0), "{row:?}");
    gate.open();
}

/// An outage of the store is logged once as it begins, with the reason and without the
/// error's advice to retry (the worker does), and once as it ends — not at every retry.
/// The shutdown deadline, reached while a handler's own release (`JobContext::release`) is
/// being written, takes the release over: the handler's try fails (busy) while the worker's
/// own release lands, the handler is told at once (its token cancelled), and the job is
/// reported released — neither left held by a handler that has nothing left to wait for, nor
/// failed.
#[test]
fn the_shutdown_deadline_takes_over_a_release_its_handler_is_writing() {
    deadline_takes_over_a_release(false);
}

/// The same, with the handler's release landing after the deadline's: refused, it answers
/// `false`, and the job is still reported released — not cancelled by an operator, as a
/// refusal on the same fence with no owner would otherwise be read.
#[test]
fn a_handlers_release_refused_after_the_deadlines_own_is_still_a_release() {
    deadline_takes_over_a_release(true);
}

fn deadline_takes_over_a_release(lands: bool) {
    let db = Db::new();
    one_job(&db);
    let (path, release_gate) = (db.path.clone(), Arc::new(Gate::default()));
    release_gate.close();
    let busy = Arc::new(AtomicUsize::new(1));
    let (gate, failing) = (release_gate.clone(), busy.clone());
    let (tx, said) = channel();
    let tx = Mutex::new(tx);
    let (seen_tx, seen) = channel();
    let w = Worker::builder(move || {
        Ok(Hung {
            inner: SqliteStore::open(&path)?,
            gate: Arc::default(),
            unreachable: Arc::default(),
            busy_releases: failing.clone(),
            release_gate: gate.clone(),
            releases_land: lands,
            renewals: Arc::default(),
        })
    })
    .clock(ManualClock::new(0.0))
    .owner_prefix("cut")
    .poll_interval(Duration::from_millis(2))
    .on_outcome(move |_, outcome| {
        let _ = seen_tx.send(outcome.clone());
    })
    .build(move |ctx| {
        let answer = ctx.release().map_err(|e| matches!(e, Error::Busy));
        tx.lock().unwrap().send((answer, ctx.is_cancelled()))?;
        Ok("not written".to_owned())
    })
    .unwrap();
    let handle = w.shutdown_handle();
    let run = std::thread::spawn(move || w.run());
    release_gate.wait_hanging(); // the handler's release is in the store
    handle.shutdown_now();
    let start = Instant::now();
    while db.row("j").unwrap().owner.is_some() {
        assert!(
            start.elapsed() < PATIENCE,
            "the deadline did not release the job"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    release_gate.open();
    let answer = if lands { Ok(false) } else { Err(true) };
    assert_eq!(
        said.recv_timeout(PATIENCE).unwrap(),
        (answer, true),
        "the handler's try failed busy or was refused; it is told the attempt is over"
    );
    assert_eq!(seen.recv_timeout(PATIENCE).unwrap(), JobOutcome::Released);
    let stats = run.join().unwrap().unwrap();
    assert_eq!(
        (
            stats.released,
            stats.completed,
            stats.retried,
            stats.stale_refused,
            stats.errors
        ),
        (1, 0, 0, 0, 0),
        "{stats:?}"
    );
    let row = db.row("j").unwrap();
    assert_eq!(
        (row.owner, row.fence, row.done, row.result),
        (None, 1, 0, None)
    );
    assert_eq!(db.queue_row("j").attempts, 0, "the attempt is refunded");
    assert_eq!(busy.load(Ordering::SeqCst), 0);
}

#[test]
fn an_outage_is_logged_once_as_it_begins_and_once_as_it_ends() {
    let db = Db::new();
    let marker = crate::logs::marker("outage");
    let logs = crate::logs::capture(&marker);
    let (path, gate, gone) = (
        db.path.clone(),
        Arc::new(Gate::default()),
        Arc::new(AtomicUsize::new(5)),
    );
    let failing = gone.clone();
    let w = Worker::builder(move || {
        Ok(Hung {
            inner: SqliteStore::open(&path)?,
            gate: gate.clone(),
            unreachable: failing.clone(),
            busy_releases: Arc::default(),
            release_gate: Arc::default(),
            releases_land: false,
            renewals: Arc::default(),
        })
    })
    .owner_prefix(&marker)
    .poll_interval(Duration::from_millis(2))
    .build(|_ctx| Ok("never run".to_owned()))
    .unwrap();
    let handle = w.shutdown_handle();
    let run = std::thread::spawn(move || w.run());
    let waited = Instant::now();
    while logs.with("the store answers again").is_empty() && waited.elapsed() < PATIENCE {
        std::thread::sleep(Duration::from_millis(2));
    }
    handle.shutdown();
    let stats = run.join().unwrap().expect("run ends without an error");
    assert_eq!(gone.load(Ordering::SeqCst), 0, "five claims failed");
    assert_eq!(stats.errors, 5, "{stats:?}");
    let began = logs.with("the store cannot be reached");
    assert_eq!(began.len(), 1, "{began:?}");
    assert!(began[0].contains("WARN"), "{began:?}");
    assert!(
        began[0].contains("connection refused (os error 111)")
            && !began[0].contains("retry the call"),
        "{began:?}"
    );
    let ended = logs.with("the store answers again");
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert!(ended[0].contains("seconds="), "{ended:?}");
}

impl Store for Hung {
    fn enqueue(&self, job_id: JobId<'_>) -> Result<bool, Error> {
        self.inner.enqueue(job_id)
    }
    fn state(&self, job_id: JobId<'_>) -> Result<Option<leasefence::JobState>, Error> {
        self.inner.state(job_id)
    }
    fn claim(
        &self,
        id: JobId<'_>,
        o: Owner<'_>,
        now: Now,
        ttl: Ttl,
    ) -> Result<Option<Lease>, Error> {
        self.inner.claim(id, o, now, ttl)
    }
    fn renew(
        &self,
        id: JobId<'_>,
        o: Owner<'_>,
        f: i64,
        now: Now,
        ttl: Ttl,
    ) -> Result<bool, Error> {
        self.inner.renew(id, o, f, now, ttl)
    }
    fn complete(
        &self,
        id: JobId<'_>,
        o: Owner<'_>,
        f: i64,
        now: Now,
        r: &str,
    ) -> Result<bool, Error> {
        self.inner.complete(id, o, f, now, r)
    }
    fn release(&self, id: JobId<'_>, o: Owner<'_>, f: i64) -> Result<bool, Error> {
        self.inner.release(id, o, f)
    }
    fn enqueue_jobs(&self, jobs: &[NewJob]) -> Result<Vec<leasefence::Enqueued>, Error> {
        self.inner.enqueue_jobs(jobs)
    }
    fn claim_batch_in(
        &self,
        queues: &leasefence::Queues,
        o: Owner<'_>,
        now: Now,
        ttl: Ttl,
        n: leasefence::BatchSize,
    ) -> Result<Vec<Lease>, Error> {
        let gone = self
            .unreachable
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |k| k.checked_sub(1));
        if gone.is_ok() {
            return Err(Error::Unavailable {
                target: "http://10.0.0.9:7878".into(),
                reason: "connection refused (os error 111)".into(),
            });
        }
        self.inner.claim_batch_in(queues, o, now, ttl, n)
    }
    fn pause(&self, queue: &leasefence::Queue) -> Result<bool, Error> {
        self.inner.pause(queue)
    }
    fn resume(&self, queue: &leasefence::Queue) -> Result<bool, Error> {
        self.inner.resume(queue)
    }
    fn queues(&self, now: Now) -> Result<Vec<leasefence::QueueInfo>, Error> {
        self.inner.queues(now)
    }
    fn fail(
        &self,
        l: &Lease,
        now: Now,
        e: &str,
        at: Option<Now>,
    ) -> Result<Option<leasefence::Failed>, Error> {
        self.inner.fail(l, now, e, at)
    }
    fn cancel(&self, id: JobId<'_>, now: Now) -> Result<bool, Error> {
        self.inner.cancel(id, now)
    }
    fn purge(&self, before: Now) -> Result<u64, Error> {
        self.inner.purge(before)
    }
    fn list(
        &self,
        now: Now,
        s: Option<Status>,
        after: Option<JobId<'_>>,
        limit: usize,
    ) -> Result<Vec<leasefence::JobInfo>, Error> {
        self.inner.list(now, s, after, limit)
    }
    fn history(&self, id: JobId<'_>) -> Result<Option<leasefence::History>, Error> {
        self.inner.history(id)
    }
    fn add_schedule(&self, schedule: &leasefence::Schedule, now: Now) -> leasefence::Result<bool> {
        self.inner.add_schedule(schedule, now)
    }
    fn remove_schedule(&self, name: leasefence::ScheduleName<'_>) -> leasefence::Result<bool> {
        self.inner.remove_schedule(name)
    }
    fn schedules(&self) -> leasefence::Result<Vec<leasefence::ScheduleInfo>> {
        self.inner.schedules()
    }
    fn enqueue_slots(
        &self,
        scheduler: &Lease,
        now: Now,
        runs: &[leasefence::SlotRun],
    ) -> leasefence::Result<Option<Vec<Option<leasefence::Enqueued>>>> {
        self.inner.enqueue_slots(scheduler, now, runs)
    }
    fn inspect(&self, id: JobId<'_>, now: Now) -> Result<Option<leasefence::JobInfo>, Error> {
        self.inner.inspect(id, now)
    }
    fn retry(&self, ids: &[JobId<'_>], now: Now) -> Result<Vec<bool>, Error> {
        self.inner.retry(ids, now)
    }
    fn retry_dead_in(&self, queues: &leasefence::Queues, now: Now) -> Result<u64, Error> {
        self.inner.retry_dead_in(queues, now)
    }
    fn delete(&self, ids: &[JobId<'_>]) -> Result<Vec<bool>, Error> {
        self.inner.delete(ids)
    }
    fn stats(&self, now: Now) -> Result<leasefence::Stats, Error> {
        self.inner.stats(now)
    }
    fn admit(&self, resource: leasefence::Resource<'_>, f: i64) -> Result<bool, Error> {
        self.inner.admit(resource, f)
    }
    fn complete_lease(&self, l: &Lease, now: Now, r: &str) -> Result<bool, Error> {
        self.inner.complete_lease(l, now, r)
    }
    fn complete_batch(&self, c: &[(&Lease, &str)], now: Now) -> Result<Vec<bool>, Error> {
        self.inner.complete_batch(c, now)
    }
    fn release_lease(&self, l: &Lease) -> Result<bool, Error> {
        let busy = self
            .busy_releases
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if busy {
            self.release_gate.pass();
            if !self.releases_land {
                return Err(Error::Busy);
            }
        }
        self.inner.release_lease(l)
    }
    fn renew_batch(&self, leases: &[&Lease], now: Now, ttl: Ttl) -> Result<Vec<bool>, Error> {
        self.renewals.calls.lock().unwrap().push(Instant::now());
        if self.renewals.failing.load(Ordering::SeqCst) {
            return Err(Error::Unavailable {
                target: "http://10.0.0.9:7878".into(),
                reason: "503 Service Unavailable".into(),
            });
        }
        if self.renewals.slow_busy.load(Ordering::SeqCst) {
            std::thread::sleep(SLOW_BUSY);
            return Err(Error::Busy);
        }
        self.gate.pass();
        self.inner.renew_batch(leases, now, ttl)
    }
}

/// One job held by a worker whose renewals go through `renewals` (its clock at 0, a 30 s
/// lease), once its handler has started.
fn holding_one(db: &Db, renewals: &Arc<Renewals>, prefix: &str) -> (ManualClock, Running) {
    one_job(db);
    let (path, seen) = (db.path.clone(), renewals.clone());
    let clock = ManualClock::new(0.0);
    let w = Worker::builder(move || {
        Ok(Hung {
            inner: SqliteStore::open(&path)?,
            gate: Arc::default(),
            unreachable: Arc::default(),
            busy_releases: Arc::default(),
            release_gate: Arc::default(),
            releases_land: false,
            renewals: seen.clone(),
        })
    })
    .clock(clock.clone())
    .owner_prefix(prefix)
    .poll_interval(Duration::from_millis(2))
    .shutdown_deadline(Duration::from_millis(200))
    .ttl(30.0);
    let running = run_one(w);
    running.2.recv_timeout(PATIENCE).unwrap();
    (clock, running)
}

/// When each renewal began, once `n` have (bounded by `PATIENCE`).
fn tries(renewals: &Renewals, n: usize) -> Vec<Instant> {
    let waited = Instant::now();
    while renewals.calls.lock().unwrap().len() < n && waited.elapsed() < PATIENCE {
        std::thread::sleep(Duration::from_millis(5));
    }
    let tried = renewals.calls.lock().unwrap().clone();
    assert!(tried.len() >= n, "the heartbeat gave up trying: {tried:?}");
    tried
}

/// Waits (bounded) for the renewal the store now grants, then stops the worker: renewed once,
/// nothing lost.
fn renews_then_stops((handle, run, _, told, _): Running) {
    let waited = Instant::now();
    while handle.stats().renewed == 0 && waited.elapsed() < PATIENCE {
        std::thread::sleep(Duration::from_millis(5));
    }
    let stats = handle.stats();
    assert_eq!((stats.renewed, stats.lost), (1, 0), "{stats:?}");
    handle.shutdown();
    assert!(told.recv_timeout(PATIENCE).expect("told at the shutdown"));
    run.join().unwrap().expect("run ends without an error");
}

/// A renewal that fails at once (a server down, a proxy answering 503) is not asked again
/// every tick: the heartbeat waits a tenth of what the lease has left when it is first due,
/// at most a second — and still renews once the store answers.
#[test]
fn a_renewal_that_fails_at_once_is_tried_again_after_a_pause_not_every_tick() {
    let (db, renewals) = (Db::new(), Arc::new(Renewals::default()));
    let (clock, running) = holding_one(&db, &renewals, "paced");
    renewals.failing.store(true, Ordering::SeqCst);
    clock.set(10.0); // a third of the ttl: due, and every try fails at once
    // 20 s of the lease left when due: a tenth is 2 s, so a pause of the 1 s cap (a tick is 10 ms).
    for pair in tries(&renewals, 3).windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= Duration::from_millis(900),
            "a failed renewal was tried again after {gap:?}, not after a pause"
        );
        assert!(
            gap < Duration::from_secs(3),
            "a pause of {gap:?}, not at most 1 s"
        );
    }
    let stats = running.0.stats();
    assert_eq!(stats.renewed, 0, "{stats:?}");
    assert!(stats.errors >= 3, "{stats:?}");
    // The store answers again: the next try renews, before the lease has ended.
    renewals.failing.store(false, Ordering::SeqCst);
    renews_then_stops(running);
    let row = db.row("j").unwrap();
    assert_eq!(row.fence, 1, "{row:?}");
    assert!(
        row.until >= 40.0 || row.owner.is_none(),
        "renewed to 10 + 30, or given back at the shutdown: {row:?}"
    );
}

/// A renewal that failed slowly — a busy database answers after its busy timeout — is made again
/// at once: the pause counts from when the try began, so the tries cover the lease without gaps
/// in which a freed lock would go unused.
#[test]
fn a_renewal_that_failed_slowly_is_tried_again_at_once() {
    let (db, renewals) = (Db::new(), Arc::new(Renewals::default()));
    let (clock, running) = holding_one(&db, &renewals, "slow");
    renewals.slow_busy.store(true, Ordering::SeqCst);
    clock.set(10.0); // due; every try waits SLOW_BUSY, then fails busy
    for pair in tries(&renewals, 3).windows(2) {
        let gap = pair[1] - pair[0];
        // The try itself took SLOW_BUSY, more than the 1 s pause: the next one follows at once
        // (a pause counted from the failure would make the gap SLOW_BUSY + 1 s).
        assert!(
            gap >= SLOW_BUSY && gap < SLOW_BUSY + Duration::from_millis(500),
            "tried again {gap:?} after the last try began"
        );
    }
    renewals.slow_busy.store(false, Ordering::SeqCst);
    renews_then_stops(running);
}

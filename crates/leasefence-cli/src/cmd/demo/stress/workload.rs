//! The shape of a stress run, its jobs, the queue the workers share, and what each worker
//! tallies.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use indicatif::{ProgressBar, ProgressStyle};
use leasefence::{AnyStore, Clock, Fence, Now, Ttl};

use crate::ctx::Purpose;

/// The shape of one stress run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Number of jobs.
    pub jobs: usize,
    /// Number of worker threads.
    pub workers: usize,
    /// Lease duration.
    pub ttl: Ttl,
    /// Fraction of first claims after which the worker stalls past its lease.
    pub stall_rate: f64,
    /// How the backend makes commits durable, for the notes of the report.
    pub durability: &'static str,
    /// How the jobs are enqueued, for the notes of the report.
    pub setup_note: &'static str,
}

/// Opens a fresh store for a purpose. Every store must take `now` from the caller: the run
/// judges its invariants on its own clock.
pub type Opener<'a> = dyn Fn(Purpose) -> leasefence::Result<AnyStore> + Sync + 'a;

/// What one acknowledged `complete` stored, as the worker was told.
#[derive(Debug, Clone, PartialEq)]
pub struct Ack {
    pub owner: String,
    pub fence: Fence,
    pub result: String,
}

/// Counters each worker keeps and the run sums up.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    /// Claims after which the worker stalled past its lease.
    pub stalls: u64,
    /// Renews and completes of stalled workers that were refused (as they must be).
    pub stale_refused: u64,
    /// Renews and completes of stalled workers that the store accepted: broken.
    pub stale_accepted: u64,
    /// Claims refused because another worker's lease was live (as they must be).
    pub leased_refused: u64,
    /// Claims granted while a lease known to this run was still live: broken.
    pub live_claimed: u64,
    /// Claims refused on a job that was neither done nor leased: broken.
    pub claimable_refused: u64,
    /// Completes refused although owner, fence and a live lease were current: broken.
    pub live_refused: u64,
    /// Completes refused because the lease ran out before they got the write lock.
    pub late_refused: u64,
    /// Calls tried again after a busy database.
    pub busy_retries: u64,
    /// The longest time from the start of a claim to the return of its complete (stalls aside).
    pub slowest: Duration,
}

impl Counts {
    pub fn add(&mut self, o: Counts) {
        self.stalls += o.stalls;
        self.stale_refused += o.stale_refused;
        self.stale_accepted += o.stale_accepted;
        self.leased_refused += o.leased_refused;
        self.live_claimed += o.live_claimed;
        self.claimable_refused += o.claimable_refused;
        self.live_refused += o.live_refused;
        self.late_refused += o.late_refused;
        self.busy_retries += o.busy_retries;
        self.slowest = self.slowest.max(o.slowest);
    }
}

/// What one worker reports when it stops: the completes it was told about, and its counters.
#[derive(Debug, Default)]
pub struct Tally {
    pub acks: Vec<(usize, Ack)>,
    pub counts: Counts,
}

/// A job in the queue.
#[derive(Debug, Clone, Copy)]
pub struct Item {
    /// Index into the job ids.
    pub job: usize,
    /// Not to be tried before this clock reading.
    pub not_before: f64,
    /// The end of a lease on this job known to be live (0 when none): a claim granted before
    /// it breaks the contract.
    pub leased_until: f64,
}

impl Item {
    /// A job anyone may try at once.
    pub fn ready(job: usize) -> Item {
        Item {
            job,
            not_before: 0.0,
            leased_until: 0.0,
        }
    }
}

/// What the workers share.
pub struct Shared<'a> {
    pub open: &'a Opener<'a>,
    pub ids: &'a [String],
    pub config: &'a Config,
    /// The clock leases are judged on (seconds since the Unix epoch).
    clock: &'a dyn Clock,
    queue: Mutex<VecDeque<Item>>,
    /// Jobs not yet finished: queued, or held by a worker that has not completed them.
    outstanding: AtomicUsize,
    /// Set when a worker failed or the run stopped making progress; the others stop.
    abort: AtomicBool,
    /// Stalls so far, over all workers.
    stalls: AtomicU64,
    /// When the run started, in real time: the watchdog's reference.
    started: Instant,
    /// Milliseconds since `started` at the last finished job.
    last_progress_ms: AtomicU64,
    pub progress: ProgressBar,
}

impl<'a> Shared<'a> {
    /// Every job queued and ready, the progress bar drawn.
    pub fn new(
        open: &'a Opener<'a>,
        ids: &'a [String],
        config: &'a Config,
        clock: &'a dyn Clock,
    ) -> anyhow::Result<Self> {
        let progress = ProgressBar::new(config.jobs as u64);
        progress.set_style(
            ProgressStyle::with_template(
                "{spinner} stress run [{elapsed}] {wide_bar} {pos}/{len} jobs done ({per_sec})",
            )
            .context("progress bar template")?,
        );
        Ok(Shared {
            open,
            ids,
            config,
            clock,
            queue: Mutex::new((0..config.jobs).map(Item::ready).collect()),
            outstanding: AtomicUsize::new(config.jobs),
            abort: AtomicBool::new(false),
            stalls: AtomicU64::new(0),
            started: Instant::now(),
            last_progress_ms: AtomicU64::new(0),
            progress,
        })
    }

    /// The clock reading, in seconds.
    pub fn seconds(&self) -> f64 {
        self.clock.now()
    }

    /// The clock reading, checked.
    pub fn now(&self) -> leasefence::Result<Now> {
        Now::new(self.clock.now())
    }

    pub fn pop(&self) -> Option<Item> {
        self.lock().pop_front()
    }

    pub fn push(&self, item: Item) {
        self.lock().push_back(item);
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Item>> {
        // A worker that panicked holding the lock cannot leave the queue half-updated.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the workers should stop: one failed, or the run stopped making progress.
    pub fn aborted(&self) -> bool {
        self.abort.load(Ordering::SeqCst)
    }

    /// Passes `outcome` on; an error stops the other workers too.
    pub fn abort_on_error<T>(&self, outcome: anyhow::Result<T>) -> anyhow::Result<T> {
        if outcome.is_err() {
            self.abort.store(true, Ordering::SeqCst);
        }
        outcome
    }

    /// Whether every job is finished.
    pub fn all_finished(&self) -> bool {
        self.outstanding.load(Ordering::SeqCst) == 0
    }

    /// The number of this stall among all workers', from 0.
    pub fn next_stall(&self) -> u64 {
        self.stalls.fetch_add(1, Ordering::SeqCst)
    }

    /// One more job finished (done, as acknowledged or not).
    pub fn finished(&self) {
        self.outstanding.fetch_sub(1, Ordering::SeqCst);
        self.last_progress_ms
            .store(self.started.elapsed().as_millis() as u64, Ordering::SeqCst);
        self.progress.inc(1);
    }

    /// Waits a moment for other workers; fails when no job finished for much longer than any
    /// stall could take.
    pub fn idle(&self) -> anyhow::Result<()> {
        let limit =
            Duration::from_secs(30) + Duration::from_secs_f64(4.0 * self.config.ttl.seconds());
        let idle = self.started.elapsed()
            - Duration::from_millis(self.last_progress_ms.load(Ordering::SeqCst));
        if idle > limit {
            bail!(
                "no job finished for {:.0} s with {} outstanding; giving up",
                idle.as_secs_f64(),
                self.outstanding.load(Ordering::SeqCst)
            );
        }
        std::thread::sleep(Duration::from_millis(1));
        Ok(())
    }
}

/// A small, fast pseudo-random generator (SplitMix64); good enough to pick stalls.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// `true` with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

//! The operations the state machine draws, and how it draws them from the model's state.
//!
//! Small pools make collisions likely: 4 ids, 3 owners, 2 resources. The clock mostly moves
//! forward by halves, sometimes backward (callers may pass any `now`), and is often aimed at a
//! stored `until`, `not_before` or `finished_at`, so that `now == until` boundaries come up.
//! Fences are drawn from the current one, one above and below it, 0 and stale ones handed out
//! earlier. A few arguments are invalid at the type level (empty id or owner, non-finite `now`,
//! `ttl <= 0` or above 10^12 s, `n == 0`, an empty resource, a non-finite not-before).

use proptest::prelude::*;
use proptest::sample::select;
use proptest_state_machine::ReferenceStateMachine;

use leasefence::{Lease, Status};

use super::reference::Model;

/// The fifth is the scheduler's job: claimed, renewed, completed like any other, and its
/// leases (current or stale) drive the scheduler's tick.
const IDS: [&str; 5] = ["a", "b", "c", "d", leasefence::SCHEDULER_JOB];
const OWNERS: [&str; 3] = ["A", "B", "C"];
const RESOURCES: [&str; 2] = ["r", "s"];
const RESULTS: [&str; 3] = ["r1", "r2", ""];
/// The third is what the worker's time limit writes: the ledger records it as `timed out`.
const ERRORS: [&str; 3] = [
    "e1",
    "boom",
    "timed out after 1 s (the worker's time limit)",
];
/// Two queues: the default one and another; `""` is drawn rarely, as an invalid name.
pub const QUEUES: [&str; 2] = ["default", "q"];

/// A job for `enqueue_many`, with its queue settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    pub id: String,
    pub payload: Option<Vec<u8>>,
    pub priority: i64,
    pub not_before: f64,
    pub max_attempts: u32,
    pub queue: String,
    pub kind: Option<String>,
    /// One key is drawn, so that jobs often compete for it.
    pub unique_key: Option<String>,
}

impl Spec {
    /// What `enqueue(id)` inserts: every default.
    pub fn plain(id: &str) -> Spec {
        Spec {
            id: id.to_owned(),
            payload: None,
            priority: 0,
            not_before: 0.0,
            max_attempts: 0,
            queue: leasefence::DEFAULT_QUEUE.to_owned(),
            kind: None,
            unique_key: None,
        }
    }
}

/// One call of a `Store` method, with raw (not yet validated) arguments.
#[derive(Debug, Clone)]
pub enum Op {
    Enqueue {
        id: String,
    },
    EnqueueMany {
        jobs: Vec<Spec>,
    },
    State {
        id: String,
    },
    Claim {
        id: String,
        owner: String,
        now: f64,
        ttl: f64,
    },
    Renew {
        id: String,
        owner: String,
        fence: i64,
        now: f64,
        ttl: f64,
    },
    Complete {
        id: String,
        owner: String,
        fence: i64,
        now: f64,
        result: String,
    },
    Release {
        id: String,
        owner: String,
        fence: i64,
    },
    /// `claim_next` when `next`, else `claim_batch` of `n`; from every queue (`None`, the
    /// methods without `_in`) or the named ones.
    ClaimBatch {
        owner: String,
        now: f64,
        ttl: f64,
        n: usize,
        next: bool,
        queues: Option<Vec<String>>,
    },
    /// `pause`, or `resume` when `resume`.
    Pause {
        queue: String,
        resume: bool,
    },
    Queues {
        now: f64,
    },
    Fail {
        lease: Lease,
        now: f64,
        error: String,
        retry_at: Option<f64>,
    },
    RenewLease {
        lease: Lease,
        now: f64,
        ttl: f64,
    },
    CompleteLease {
        lease: Lease,
        now: f64,
        result: String,
    },
    ReleaseLease {
        lease: Lease,
    },
    Cancel {
        id: String,
        now: f64,
    },
    /// The operator verbs: retry dead or cancelled jobs by id, every dead one, delete by id.
    Retry {
        ids: Vec<String>,
        now: f64,
    },
    RetryDead {
        now: f64,
    },
    Delete {
        ids: Vec<String>,
    },
    Purge {
        before: f64,
    },
    List {
        now: f64,
        status: Option<Status>,
        limit: usize,
    },
    Stats {
        now: f64,
    },
    Admit {
        resource: String,
        fence: i64,
    },
    /// The scheduler's tick (`leasefence::tick`) under a lease handed out earlier (on any
    /// job, current or stale), for the schedule `beat` (`* * * * * *`) every case starts with.
    Tick {
        lease: Lease,
        now: f64,
    },
    /// A worker restart: `init_db` again, a new store on the same database.
    Restart,
}

/// The reference state machine of proptest-state-machine: the model drives generation (and
/// shrinking keeps only sequences it accepts — here every sequence).
pub struct Machine;

impl ReferenceStateMachine for Machine {
    type State = Model;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<Model> {
        Just(Model::default()).boxed()
    }

    fn transitions(model: &Model) -> BoxedStrategy<Op> {
        transitions(model)
    }

    fn apply(mut model: Model, op: &Op) -> Model {
        model.apply(op);
        model
    }
}

fn ids() -> BoxedStrategy<String> {
    prop_oneof![
        100 => select(&IDS[..]).prop_map(str::to_owned),
        1 => Just(String::new()),
    ]
    .boxed()
}

fn any_owner() -> BoxedStrategy<String> {
    prop_oneof![
        100 => select(&OWNERS[..]).prop_map(str::to_owned),
        1 => Just(String::new()),
    ]
    .boxed()
}

/// Mostly the stored owner of the job (when it has one), else any.
fn owner_like(current: Option<String>) -> BoxedStrategy<String> {
    match current {
        Some(owner) => prop_oneof![4 => Just(owner), 2 => any_owner()].boxed(),
        None => any_owner(),
    }
}

/// The current fence, one off either way, 0, or a stale one handed out earlier.
fn fence_like(current: i64, stale: Vec<i64>) -> BoxedStrategy<i64> {
    let near = prop_oneof![
        8 => Just(current),
        1 => Just(current + 1),
        1 => Just(current - 1),
        1 => Just(0),
    ];
    if stale.is_empty() {
        near.boxed()
    } else {
        prop_oneof![5 => near, 1 => select(stale)].boxed()
    }
}

/// A clock reading: forward by halves from the last one, at a stored mark (or half a second
/// either side), backward, or (rarely) not finite.
fn clock(model: &Model) -> BoxedStrategy<f64> {
    let c = model.clock;
    let forward = select(vec![0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0]).prop_map(move |d| c + d);
    let back = select(vec![0.5, 1.0, 3.0]).prop_map(move |d| c - d);
    let bad = select(vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY]);
    let marks = model.marks();
    if marks.is_empty() {
        prop_oneof![48 => forward, 8 => back, 1 => bad].boxed()
    } else {
        let near = (select(marks), select(vec![0.0, -0.5, 0.5])).prop_map(|(m, d)| m + d);
        prop_oneof![48 => forward, 24 => near, 8 => back, 1 => bad].boxed()
    }
}

/// A clock reading, often exactly at (or half a second around) the end of a lease: the
/// boundary where `now == until` has expired.
fn around(until: f64, now: BoxedStrategy<f64>) -> BoxedStrategy<f64> {
    prop_oneof![
        3 => now,
        2 => Just(until),
        1 => select(vec![until - 0.5, until + 0.5]),
    ]
    .boxed()
}

/// Integers and halves, so that `now + ttl` lands on other marks; rarely invalid.
fn ttl() -> BoxedStrategy<f64> {
    prop_oneof![
        80 => select(vec![0.5, 1.0, 1.5, 2.0, 3.0, 10.0]),
        1 => select(vec![0.0, -1.0, f64::NAN, f64::INFINITY, 1e13]),
    ]
    .boxed()
}

/// `(now, ttl)` for the operations that compute `now + ttl`; rarely the largest of both (a ttl
/// past 10^12 s: bad input).
fn lease_time(now: BoxedStrategy<f64>) -> BoxedStrategy<(f64, f64)> {
    prop_oneof![
        60 => (now, ttl()),
        1 => Just((f64::MAX, f64::MAX)),
    ]
    .boxed()
}

/// A job to aim at: its id, stored owner, current fence, the stale fences handed out for it and
/// the end of its lease.
type Target = BoxedStrategy<(String, Option<String>, i64, Vec<i64>, f64)>;

fn target(model: &Model) -> Target {
    let model = model.clone();
    ids()
        .prop_map(move |id| {
            let owner = model.job(&id).and_then(|j| j.owner.clone());
            let fence = model.fence_of(&id);
            let stale = model
                .issued
                .iter()
                .filter(|(i, f)| *i == id && *f != fence)
                .map(|(_, f)| *f)
                .collect();
            let until = model.job(&id).map_or(0.0, |j| j.until);
            (id, owner, fence, stale, until)
        })
        .boxed()
}

/// A lease to hand to `fail` and the lease methods: one handed out earlier (current or stale),
/// sometimes with its fence off by one, or one made up for a job.
fn lease(model: &Model, target: Target) -> BoxedStrategy<Lease> {
    // A lease is made by the store and never validated again: no empty owner or id here.
    let made_up = target
        .prop_filter("a valid id", |(id, ..)| !id.is_empty())
        .prop_flat_map(|(id, owner, fence, stale, until)| {
            let valid_owner = select(&OWNERS[..]).prop_map(str::to_owned);
            let owner = match owner {
                Some(owner) => prop_oneof![2 => Just(owner), 1 => valid_owner].boxed(),
                None => valid_owner.boxed(),
            };
            (owner, fence_like(fence, stale)).prop_map(move |(owner, fence)| Lease {
                queue: leasefence::DEFAULT_QUEUE.to_owned(),
                kind: None,
                job_id: id.clone(),
                owner,
                fence,
                until,
                payload: None,
                priority: 0,
                max_attempts: 0,
                last_error: None,
                attempt: u32::try_from(fence).unwrap_or(0),
            })
        });
    let Some(recent) = model.leases.last().cloned() else {
        return made_up.boxed();
    };
    let known = select(model.leases.clone());
    let off_by_one = (known.clone(), select(vec![-1, 1])).prop_map(|(l, d)| Lease {
        fence: l.fence + d,
        ..l
    });
    prop_oneof![
        6 => Just(recent),
        6 => known,
        1 => off_by_one,
        2 => made_up,
    ]
    .boxed()
}

fn spec(now: BoxedStrategy<f64>) -> BoxedStrategy<Spec> {
    let not_before = prop_oneof![
        8 => Just(0.0),
        8 => now.prop_filter("a finite not-before", |t| t.is_finite()),
        1 => Just(f64::NAN),
    ];
    let payload = prop_oneof![
        Just(None),
        Just(Some(Vec::new())),
        Just(Some(vec![0x00, 0xff, b'p'])),
    ];
    let kind = prop_oneof![2 => Just(None), 1 => Just(Some("k".to_owned()))];
    let unique_key = prop_oneof![1 => Just(None), 1 => Just(Some("u".to_owned()))];
    (
        ids(),
        payload,
        select(vec![0i64, 0, 1, 2, -1]),
        not_before,
        select(vec![0u32, 0, 1, 2, 3]),
        queue(),
        kind,
        unique_key,
    )
        .prop_map(
            |(id, payload, priority, not_before, max_attempts, queue, kind, unique_key)| Spec {
                id,
                payload,
                priority,
                not_before,
                max_attempts,
                queue,
                kind,
                unique_key,
            },
        )
        .boxed()
}

/// A queue name: mostly the default one, rarely an invalid (empty) one.
fn queue() -> BoxedStrategy<String> {
    prop_oneof![
        20 => Just(QUEUES[0].to_owned()),
        12 => Just(QUEUES[1].to_owned()),
        1 => Just(String::new()),
    ]
    .boxed()
}

/// The queues of a claim: every queue (the methods without `_in`), one, both, or rarely none
/// (an invalid set).
fn queue_set() -> BoxedStrategy<Option<Vec<String>>> {
    prop_oneof![
        6 => Just(None),
        4 => queue().prop_map(|q| Some(vec![q])),
        1 => Just(Some(QUEUES.iter().map(|q| (*q).to_owned()).collect())),
        1 => Just(Some(Vec::new())),
    ]
    .boxed()
}

fn status() -> BoxedStrategy<Option<Status>> {
    prop_oneof![2 => Just(None), 8 => select(Status::ALL.to_vec()).prop_map(Some)].boxed()
}

fn transitions(model: &Model) -> BoxedStrategy<Op> {
    // Each strategy over the model is built once per step and shared (a clone is an `Arc`).
    let now = clock(model);
    let timed = lease_time(now.clone());
    let target = target(model);
    let lease = lease(model, target.clone());
    // Enqueue more while few jobs exist, so that sequences get to the interesting states.
    let enqueue_weight = if model.jobs.len() < 2 { 12 } else { 3 };

    let enqueue = ids().prop_map(|id| Op::Enqueue { id });
    let enqueue_many =
        prop::collection::vec(spec(now.clone()), 1..=3).prop_map(|jobs| Op::EnqueueMany { jobs });
    let state = ids().prop_map(|id| Op::State { id });
    let n = now.clone();
    let claim = target.clone().prop_flat_map(move |(id, .., until)| {
        (any_owner(), lease_time(around(until, n.clone()))).prop_map(move |(owner, (now, ttl))| {
            Op::Claim {
                id: id.clone(),
                owner,
                now,
                ttl,
            }
        })
    });
    let n = now.clone();
    let renew = target
        .clone()
        .prop_flat_map(move |(id, owner, fence, stale, until)| {
            (
                owner_like(owner),
                fence_like(fence, stale),
                lease_time(around(until, n.clone())),
            )
                .prop_map(move |(owner, fence, (now, ttl))| Op::Renew {
                    id: id.clone(),
                    owner,
                    fence,
                    now,
                    ttl,
                })
        });
    let n = now.clone();
    let complete = target
        .clone()
        .prop_flat_map(move |(id, owner, fence, stale, until)| {
            (
                owner_like(owner),
                fence_like(fence, stale),
                around(until, n.clone()),
                select(&RESULTS[..]),
            )
                .prop_map(move |(owner, fence, now, result)| Op::Complete {
                    id: id.clone(),
                    owner,
                    fence,
                    now,
                    result: result.to_owned(),
                })
        });
    let release = target.prop_flat_map(|(id, owner, fence, stale, _)| {
        (owner_like(owner), fence_like(fence, stale)).prop_map(move |(owner, fence)| Op::Release {
            id: id.clone(),
            owner,
            fence,
        })
    });
    // A lease and a clock reading around its end.
    let n = now.clone();
    let lease_at = lease
        .clone()
        .prop_flat_map(move |l| (around(l.until, n.clone()), Just(l)))
        .boxed();
    let claim_batch = (
        any_owner(),
        timed.clone(),
        prop_oneof![1 => Just(0usize), 20 => 1usize..=3, 4 => Just(5usize)],
        any::<bool>(),
        queue_set(),
    )
        .prop_map(|(owner, (now, ttl), n, next, queues)| Op::ClaimBatch {
            owner,
            now,
            ttl,
            n,
            next,
            queues,
        });
    let pause = (queue(), any::<bool>()).prop_map(|(queue, resume)| Op::Pause { queue, resume });
    let queues = now.clone().prop_map(|now| Op::Queues { now });
    let retry_at = prop_oneof![
        1 => Just(None),
        4 => now.clone().prop_filter("a finite retry time", |t| t.is_finite()).prop_map(Some),
    ];
    let fail = (lease_at.clone(), select(&ERRORS[..]), retry_at).prop_map(
        |((now, lease), error, retry_at)| Op::Fail {
            lease,
            now,
            error: error.to_owned(),
            retry_at,
        },
    );
    let renew_lease =
        (lease_at.clone(), ttl(), 0..60u8).prop_map(|((now, lease), ttl, overflow)| {
            // Rarely, the largest of both (a ttl past 10^12 s).
            let (now, ttl) = if overflow == 0 {
                (f64::MAX, f64::MAX)
            } else {
                (now, ttl)
            };
            Op::RenewLease { lease, now, ttl }
        });
    let tick = lease_at
        .clone()
        .prop_map(|(now, lease)| Op::Tick { lease, now });
    let complete_lease =
        (lease_at, select(&RESULTS[..])).prop_map(|((now, lease), result)| Op::CompleteLease {
            lease,
            now,
            result: result.to_owned(),
        });
    let release_lease = lease.prop_map(|lease| Op::ReleaseLease { lease });
    let cancel = (ids(), now.clone()).prop_map(|(id, now)| Op::Cancel { id, now });
    let purge = now.clone().prop_map(|before| Op::Purge { before });
    let retry = (prop::collection::vec(ids(), 0..3), now.clone())
        .prop_map(|(ids, now)| Op::Retry { ids, now });
    let retry_dead = now.clone().prop_map(|now| Op::RetryDead { now });
    let delete = prop::collection::vec(ids(), 0..3).prop_map(|ids| Op::Delete { ids });
    let list = (
        now.clone(),
        status(),
        prop_oneof![1 => Just(0usize), 6 => 1usize..=5],
    )
        .prop_map(|(now, status, limit)| Op::List { now, status, limit });
    let stats = now.prop_map(|now| Op::Stats { now });
    let gate = model
        .fence_gate
        .values()
        .copied()
        .chain(model.issued.iter().map(|(_, f)| *f))
        .collect::<Vec<_>>();
    let admit_fence = if gate.is_empty() {
        (-1i64..=3).boxed()
    } else {
        prop_oneof![
            (-1i64..=3),
            select(gate).prop_flat_map(|f| select(vec![f - 1, f, f + 1]))
        ]
        .boxed()
    };
    let admit = (
        prop_oneof![20 => select(&RESOURCES[..]).prop_map(str::to_owned), 1 => Just(String::new())],
        admit_fence,
    )
        .prop_map(|(resource, fence)| Op::Admit { resource, fence });

    prop_oneof![
        enqueue_weight => enqueue,
        enqueue_weight => enqueue_many,
        2 => state,
        10 => claim,
        8 => renew,
        6 => complete,
        5 => release,
        8 => claim_batch,
        5 => fail,
        3 => renew_lease,
        3 => complete_lease,
        4 => tick,
        2 => release_lease,
        3 => cancel,
        3 => purge,
        2 => retry,
        1 => retry_dead,
        2 => delete,
        2 => list,
        2 => stats,
        3 => admit,
        3 => pause,
        1 => queues,
        1 => Just(Op::Restart),
    ]
    .boxed()
}

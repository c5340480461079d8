//! Unit tests of the connection's plumbing: the busy handler's sleeps and deadline, the jitter,
//! the write gate.

use std::sync::Arc;

use super::*;

#[test]
fn the_jitter_is_xorshift64_and_each_connection_gets_its_own_sequence() {
    // Marsaglia's published first outputs of xorshift64 (13, 7, 17) from this seed.
    let mut known = Jitter(88_172_645_463_325_252);
    let outputs = [known.next(), known.next(), known.next()];
    assert_eq!(
        outputs,
        [
            8_748_534_153_485_358_512,
            3_040_900_993_826_735_515,
            3_453_997_556_048_239_312
        ]
    );
    // Seeds that differ in any one input differ, even where the inputs share bits, and
    // are never zero.
    let seeds = [
        Jitter::seeded(1, 0b0100, 0b0010).0,
        Jitter::seeded(1, 0b0110, 0b0010).0,
        Jitter::seeded(2, 0b0100, 0b0010).0,
        Jitter::seeded(1, 0b0100, 1 << 32 | 0b0010).0,
        Jitter::seeded(0, 0, 0).0,
    ];
    for (i, a) in seeds.iter().enumerate() {
        assert_eq!(a % 2, 1, "seed {i} is odd: {a:#x}");
        for b in &seeds[i + 1..] {
            assert_ne!(a, b);
        }
    }
    // Inputs that cancel to 1 still give a nonzero (odd) seed.
    assert_eq!(Jitter::seeded(0, 1, 0).0, 1);
    assert_eq!(Jitter::seeded(0, 0b11, 0b10).0, 1);
}

#[test]
fn each_wait_gives_up_its_limit_after_its_own_first_refusal() {
    let limit = Duration::from_millis(100);
    let opened = Instant::now();
    let at = |ms: u64| opened + Duration::from_secs(3600) + Duration::from_millis(ms);
    // Opened an hour before the first refusal: the wait counts from that refusal.
    let mut waiter = Waiter::new(limit, Jitter::seeded(1, 2, 3), opened);
    let first = waiter
        .refused(0, at(0))
        .expect("waits at the first refusal");
    assert!(first <= Duration::from_micros(50), "first sleep {first:?}");
    assert!(waiter.refused(1, at(60)).is_some(), "60 ms of 100 waited");
    assert!(waiter.refused(2, at(99)).unwrap() <= Duration::from_millis(1));
    assert_eq!(waiter.refused(3, at(100)), None, "gives up at the limit");
    // The next wait (SQLite counts from 0 again) has the whole limit anew.
    assert!(waiter.refused(0, at(500)).is_some());
    assert!(waiter.refused(1, at(599)).is_some());
    assert_eq!(waiter.refused(2, at(600)), None);
}

#[test]
fn a_sleep_never_runs_past_the_waiters_limit() {
    let limit = Duration::from_millis(10);
    assert_eq!(
        nap(4_000, limit, Duration::from_millis(1)),
        Duration::from_millis(4)
    );
    assert_eq!(
        nap(4_000, limit, Duration::from_millis(9)),
        Duration::from_millis(1)
    );
    assert_eq!(
        nap(50, limit, Duration::from_millis(9)),
        Duration::from_micros(50)
    );
    assert_eq!(nap(4_000, limit, limit), Duration::ZERO);
    assert_eq!(nap(4_000, limit, Duration::from_secs(1)), Duration::ZERO);
}

#[test]
fn sleeps_double_from_50_us_to_4_ms_and_stay_short_for_a_starving_waiter() {
    let fresh = Duration::from_millis(1);
    let ceilings: Vec<u64> = (0..10).map(|count| ceiling(count, fresh)).collect();
    assert_eq!(
        ceilings,
        [50, 100, 200, 400, 800, 1600, 3200, 4000, 4000, 4000]
    );
    assert_eq!(ceiling(-1, fresh), 50);
    assert_eq!(ceiling(3, Duration::from_micros(14_999)), 400);
    assert_eq!(ceiling(3, Duration::from_millis(15)), 100);
    assert_eq!(ceiling(9, Duration::from_secs(1)), 100);
    let mut jitter = Jitter::seeded(7, 123_456_789, 0x7f00_dead_beef);
    let sleeps: Vec<u64> = (0..1000).map(|_| jitter.below(4_000)).collect();
    assert!(sleeps.iter().all(|s| (2_000..4_000).contains(s)));
    let distinct: std::collections::BTreeSet<_> = sleeps.iter().collect();
    assert!(
        distinct.len() > 500,
        "jittered: {} distinct",
        distinct.len()
    );
}

#[test]
fn the_gate_admits_one_store_at_a_time_and_answers_busy_past_the_limit() {
    let gate = WriteGate::default();
    let held = gate.enter(Duration::ZERO).unwrap();
    let started = Instant::now();
    let err = gate
        .enter(Duration::from_millis(50))
        .err()
        .expect("the gate is held");
    assert!(started.elapsed() >= Duration::from_millis(45), "it waited");
    assert_eq!(err.sqlite_error_code(), Some(ErrorCode::DatabaseBusy));
    assert!(matches!(map_error(Path::new("x"), err), Error::Busy));
    drop(held);
    let again = gate.enter(Duration::ZERO);
    assert!(again.is_ok(), "free again once the holder is done");
}

#[test]
fn a_store_waiting_at_the_gate_passes_when_the_holder_leaves() {
    let gate = Arc::new(WriteGate::default());
    let held = gate.enter(Duration::ZERO).unwrap();
    let waiter = {
        let gate = gate.clone();
        std::thread::spawn(move || {
            let began = Instant::now();
            let passed = gate.enter(Duration::from_secs(30)).is_ok();
            (began, passed, Instant::now())
        })
    };
    // The holder gives the waiter 100 ms to start waiting (the timestamps prove it did).
    std::thread::sleep(Duration::from_millis(100));
    let leaving = Instant::now();
    drop(held);
    let (began, passed, through) = waiter.join().unwrap();
    assert!(passed);
    assert!(began < leaving && through >= leaving);
    assert!(
        through - leaving < Duration::from_secs(10),
        "woken by the holder leaving, not by its own time limit"
    );
}

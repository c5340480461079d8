//! How many missed slots a tick reports: each schedule's are counted up to 100,000, and
//! `skipped_at_least` says when a count stopped there — never for counts that are exact, even
//! when their sum passes the limit.

use leasefence::{Now, Schedule, ScheduleInfo, due_runs};

const T0: i64 = 1_796_083_200; // 2026-12-01T00:00:00Z

fn every_second(name: &str) -> ScheduleInfo {
    ScheduleInfo {
        schedule: Schedule::new(name, "* * * * * *").unwrap(),
        created_at: T0 as f64,
        last_slot: T0,
    }
}

#[test]
fn exact_counts_are_exact_even_when_their_sum_passes_the_limit() {
    // 60,000 s later: 59,999 slots passed over by each of two schedules, 119,998 in all.
    let due = due_runs(
        &[every_second("a"), every_second("b")],
        Now::new((T0 + 60_000) as f64).unwrap(),
    )
    .unwrap();
    assert_eq!(due.runs.len(), 2);
    assert_eq!((due.skipped, due.skipped_at_least), (119_998, false));
}

#[test]
fn a_count_stopped_at_the_limit_says_at_least() {
    // Three days: 259,199 passed over, counted up to 100,000.
    let due = due_runs(
        &[every_second("a")],
        Now::new((T0 + 3 * 86_400) as f64).unwrap(),
    )
    .unwrap();
    assert_eq!((due.skipped, due.skipped_at_least), (100_000, true));
    // Exactly at the limit plus one slot: 100,000 passed over, all counted.
    let due = due_runs(
        &[every_second("a")],
        Now::new((T0 + 100_001) as f64).unwrap(),
    )
    .unwrap();
    assert_eq!((due.skipped, due.skipped_at_least), (100_000, false));
}

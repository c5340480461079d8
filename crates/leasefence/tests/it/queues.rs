//! `queues`: every queue with jobs or a pause, its paused flag and its counts by status.

use crate::common::*;
use leasefence::{Queue, QueueInfo, Stats};

contract!(
    fn lists_every_queue_with_its_counts_and_whether_it_is_paused(api, db, s) {
        assert_eq!(s.queues(now(0.0)).unwrap(), []);
        s.enqueue_many(&[
            job("d1"),
            job("d2").not_before(50.0).unwrap(),
            job("m1").queue("mail").unwrap(),
            job("m2").queue("mail").unwrap(),
        ])
        .unwrap();
        let lease = s.claim_batch_in(
            &leasefence::Queues::only(["mail"]).unwrap(),
            owner("w"),
            now(0.0),
            ttl(10.0),
            bs(2),
        )
        .unwrap();
        assert_eq!(lease.len(), 2);
        assert!(s.complete_lease(&lease[0], now(1.0), "ok").unwrap());
        assert!(s.pause(&Queue::new("idle").unwrap()).unwrap());
        assert_eq!(
            s.queues(now(2.0)).unwrap(),
            [
                QueueInfo {
                    name: "default".into(),
                    paused: false,
                    stats: Stats { ready: 1, scheduled: 1, ..Stats::default() },
                },
                QueueInfo { name: "idle".into(), paused: true, stats: Stats::default() },
                QueueInfo {
                    name: "mail".into(),
                    paused: false,
                    stats: Stats { leased: 1, done: 1, ..Stats::default() },
                },
            ]
        );
        // At 20 the lease has run out: the counts are judged at the given time.
        assert_eq!(s.queues(now(20.0)).unwrap()[2].stats.expired, 1);
    }
);

contract!(
    fn agrees_with_stats_on_every_status(api, db, s) {
        crate::status::zoo(api, s);
        let queues = s.queues(now(10.0)).unwrap();
        assert_eq!(queues.len(), 1);
        assert_eq!(queues[0].name, "default");
        assert_eq!(queues[0].stats, s.stats(now(10.0)).unwrap());
    }
);

/// A queue displays as its name; `Queues::contains` says which queues a claim takes from.
#[test]
fn a_queue_displays_as_its_name_and_queues_say_what_they_take() {
    use leasefence::Queues;
    let mail = Queue::new("mail").unwrap();
    assert_eq!(mail.to_string(), "mail");
    assert_eq!(format!("[{mail}]"), "[mail]");
    assert!(Queues::All.contains("mail") && Queues::All.contains("default"));
    let some = Queues::only(["mail", "reports", "mail"]).unwrap();
    assert_eq!(
        some.names().unwrap().len(),
        2,
        "a name given twice counts once"
    );
    assert!(some.contains("mail") && some.contains("reports"));
    assert!(!some.contains("default") && !some.contains("mai"));
    assert!(!Queues::one(mail).contains("reports"));
}

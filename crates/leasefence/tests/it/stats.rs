//! `stats`: a count per status.

use crate::common::*;
use crate::status::zoo;
use leasefence::Stats;

contract!(
    fn counts_every_status(api, db, s) {
        zoo(api, s);
        let stats = s.stats(now(10.0)).unwrap();
        assert_eq!(
            stats,
            Stats {
                ready: 1,
                scheduled: 1,
                leased: 1,
                expired: 1,
                retrying: 1,
                done: 1,
                dead: 2,
                cancelled: 1,
            }
        );
        assert_eq!(stats.total(), 9);
        // the clock moves on: the lease ran out, the schedule and the retry came due
        let later = s.stats(now(30.0)).unwrap();
        assert_eq!(
            (later.leased, later.expired, later.scheduled, later.ready),
            (0, 2, 0, 2)
        );
    }
);

//! `inspect`: one job with every field and its status — what `list` shows of it — and `None`
//! for an unknown id; a read that changes nothing.

use crate::common::*;
use crate::status::zoo;
use leasefence::{JobId, Status};

contract!(
    fn shows_every_field_of_one_job_as_list_does(api, db, s) {
        zoo(api, s);
        let before = db.rows();
        let listed = s.list(now(10.0), None, None, 100).unwrap();
        assert!(!listed.is_empty());
        for job in &listed {
            let one = s.inspect(JobId::new(job.id()).unwrap(), now(10.0)).unwrap();
            assert_eq!(one.as_ref(), Some(job), "inspect and list agree on {}", job.id());
        }
        // Every status is seen by inspect exactly as list and stats count it.
        let stats = s.stats(now(10.0)).unwrap();
        for status in Status::ALL {
            let n = listed
                .iter()
                .filter(|j| {
                    s.inspect(JobId::new(j.id()).unwrap(), now(10.0))
                        .unwrap()
                        .is_some_and(|i| i.status == status)
                })
                .count();
            assert_eq!(n as u64, stats.get(status), "{status}");
        }
        let done = s.inspect(JobId::new("done").unwrap(), now(10.0)).unwrap().unwrap();
        assert_eq!(
            (done.status, done.outcome.as_deref(), done.state.result.as_deref(), done.finished_at),
            (Status::Done, Some("completed"), Some("r"), Some(1.0))
        );
        assert!(done.enqueued_at.is_some_and(|t| t > 1.0e9), "a Unix time: {done:?}");
        let dead = s.inspect(JobId::new("dead").unwrap(), now(10.0)).unwrap().unwrap();
        assert_eq!(dead.outcome.as_deref(), Some("dead"));
        assert_eq!(s.inspect(JobId::new("ghost").unwrap(), now(10.0)).unwrap(), None);
        assert_eq!(db.rows(), before, "a read changes nothing");
    }
);

//! `list`: each job with its status, filtered and limited.

use crate::common::*;
use crate::status::zoo;
use leasefence::Status;

contract!(
    fn shows_each_job_with_its_status_and_filters_and_limits(api, db, s) {
        zoo(api, s);
        let all = s.list(now(10.0), None, 100).unwrap();
        let seen: Vec<(&str, Status)> = all
            .iter()
            .map(|j| (j.state.id.as_str(), j.status))
            .collect();
        assert_eq!(
            seen,
            [
                ("ready", Status::Ready),
                ("scheduled", Status::Scheduled),
                ("leased", Status::Leased),
                ("expired", Status::Expired),
                ("retrying", Status::Retrying),
                ("done", Status::Done),
                ("dead", Status::Dead),
                ("cancelled", Status::Cancelled),
                ("exhausted", Status::Dead),
            ]
        );
        // each listed row is the stored one
        for j in &all {
            assert_eq!(j.state, db.row(&j.state.id).unwrap().as_state());
        }
        // list agrees with stats, status by status
        let stats = s.stats(now(10.0)).unwrap();
        for status in Status::ALL {
            let listed = s.list(now(10.0), Some(status), 100).unwrap();
            assert_eq!(listed.len() as u64, stats.get(status), "{status}");
            assert!(listed.iter().all(|j| j.status == status));
        }
        let done = &s.list(now(10.0), Some(Status::Done), 100).unwrap()[0];
        assert_eq!(done.state.result.as_deref(), Some("r"));
        assert_eq!(done.finished_at, Some(1.0));
        let retrying = &s.list(now(10.0), Some(Status::Retrying), 1).unwrap()[0];
        assert_eq!(
            (retrying.error.as_deref(), retrying.not_before),
            (Some("e"), 30.0)
        );
        assert_eq!(s.list(now(10.0), None, 3).unwrap().len(), 3);
        assert!(s.list(now(10.0), None, 0).unwrap().is_empty());
    }
);

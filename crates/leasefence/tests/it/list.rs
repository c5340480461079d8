//! `list`: each job with its status, filtered and limited.

use crate::common::*;
use crate::status::zoo;
use leasefence::Status;

contract!(
    fn shows_each_job_with_its_status_and_filters_and_limits(api, db, s) {
        zoo(api, s);
        let all = s.list(now(10.0), None, None, 100).unwrap();
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
            let listed = s.list(now(10.0), Some(status), None, 100).unwrap();
            assert_eq!(listed.len() as u64, stats.get(status), "{status}");
            assert!(listed.iter().all(|j| j.status == status));
        }
        let done = &s.list(now(10.0), Some(Status::Done), None, 100).unwrap()[0];
        assert_eq!(done.state.result.as_deref(), Some("r"));
        assert_eq!(done.finished_at, Some(1.0));
        let retrying = &s.list(now(10.0), Some(Status::Retrying), None, 1).unwrap()[0];
        assert_eq!(
            (retrying.error.as_deref(), retrying.not_before),
            (Some("e"), 30.0)
        );
        assert_eq!(s.list(now(10.0), None, None, 3).unwrap().len(), 3);
        assert!(s.list(now(10.0), None, None, 0).unwrap().is_empty());
    }
);

contract!(
    /// A keyset cursor: `after` the last id of a page gives the next page, every job exactly
    /// once in enqueue order, also while jobs finish between pages; an unknown cursor is an
    /// error naming `after` that changes nothing.
    fn pages_with_a_keyset_cursor_every_job_once(api, db, s) {
        let jobs: Vec<leasefence::NewJob> = (0..25).map(|i| job(&format!("j{i:02}"))).collect();
        s.enqueue_many(&jobs).unwrap();
        let mut seen = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let cursor = after.as_deref().map(|a| leasefence::JobId::new(a).unwrap());
            let page = s.list(now(0.0), None, cursor, 10).unwrap();
            if page.is_empty() {
                break;
            }
            assert!(page.len() <= 10);
            // A job finishing between pages moves nothing.
            if seen.is_empty() {
                let f = api.claim("j03", "w", 0.0, 10.0).unwrap().unwrap();
                assert!(api.complete("j03", "w", f, 1.0, "r").unwrap());
            }
            seen.extend(page.iter().map(|j| j.id().to_owned()));
            after = Some(page.last().unwrap().id().to_owned());
        }
        let expected: Vec<String> = (0..25).map(|i| format!("j{i:02}")).collect();
        assert_eq!(seen, expected);
        // With a status filter the cursor still counts in enqueue order.
        let done_after = s
            .list(now(0.0), Some(Status::Ready), Some(leasefence::JobId::new("j20").unwrap()), 100)
            .unwrap();
        assert_eq!(
            done_after.iter().map(|j| j.id()).collect::<Vec<_>>(),
            ["j21", "j22", "j23", "j24"]
        );
        let before = db.rows();
        assert_invalid(
            s.list(now(0.0), None, Some(leasefence::JobId::new("ghost").unwrap()), 10),
            "after",
        );
        assert_eq!(db.rows(), before);
    }
);

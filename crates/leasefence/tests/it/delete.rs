//! `delete`: the operator removes jobs by id, finished or not; the fence floor keeps every
//! fence the id ever had from being handed out again.

use crate::common::*;
use leasefence::JobId;

fn job_ids<'a>(names: &[&'a str]) -> Vec<JobId<'a>> {
    names.iter().map(|n| JobId::new(n).unwrap()).collect()
}

contract!(
    fn removes_jobs_finished_or_not_and_keeps_the_fence_floor(api, db, s) {
        s.enqueue_many(&[job("held"), job("done"), job("kept")]).unwrap();
        let held = s.claim_next(owner("a"), now(0.0), ttl(100.0)).unwrap().unwrap();
        assert_eq!(held.job_id, "held");
        let f = api.claim("done", "w", 0.0, 10.0).unwrap().unwrap();
        assert!(api.complete("done", "w", f, 1.0, "r").unwrap());
        assert_eq!(
            s.delete(&job_ids(&["held", "done", "ghost", "held"])).unwrap(),
            [true, true, false, true]
        );
        assert_eq!(db.rows().iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["kept"]);
        assert_eq!((db.fence_floor("held"), db.fence_floor("done")), (Some(1), Some(1)));
        // The holder of the deleted job's live lease can store nothing.
        assert!(!s.complete_lease(&held, now(2.0), "late").unwrap());
        assert!(db.row("held").is_none());
        // Enqueued again, the id continues above its old fence.
        s.enqueue_many(&[job("held")]).unwrap();
        assert_eq!(api.claim("held", "b", 3.0, 10.0).unwrap(), Some(2));
        assert_eq!(s.delete(&[]).unwrap(), Vec::<bool>::new());
    }
);

//! A claim by id spends an attempt like any claim: none beyond the job's budget.

use crate::common::*;
use leasefence::{JobId, Status};

contract!(
    fn a_spent_attempts_budget_is_not_claimed_by_id_either(api, db, s) {
        s.enqueue_many(&[job("j").max_attempts(1), job("free")])
            .unwrap();
        assert_eq!(api.claim("j", "a", 0.0, 5.0).unwrap(), Some(1));
        // its one attempt's lease expired: neither the holder nor anyone else gets a second
        let spent = db.row("j").unwrap();
        for (who, at) in [("b", 5.0), ("a", 10.0)] {
            assert_eq!(api.claim("j", who, at, 5.0).unwrap(), None, "{who} at {at}");
            assert_eq!(db.row("j").unwrap(), spent, "a refused claim changes nothing");
        }
        let info = s.inspect(JobId::new("j").unwrap(), now(10.0)).unwrap().unwrap();
        assert_eq!((info.attempts, info.state.fence), (1, 1));
        // without a budget (max_attempts 0) every expired lease is claimable again
        for (k, at) in [0.0, 5.0, 10.0, 15.0].into_iter().enumerate() {
            assert_eq!(api.claim("free", "a", at, 5.0).unwrap(), Some(k as i64 + 1));
        }
        // the next claim of any job buries the spent one as dead
        assert_eq!(s.claim_next(owner("w"), now(19.0), ttl(5.0)).unwrap(), None);
        let buried = s.inspect(JobId::new("j").unwrap(), now(19.0)).unwrap().unwrap();
        assert_eq!((buried.status, buried.state.done), (Status::Dead, true));
    }
);

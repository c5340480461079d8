//! `admit`: the fence gate admits a fence only if it is at least the highest admitted.

use crate::common::*;
use leasefence::{SqliteStore, Store};

contract!(
    fn admits_a_fence_only_if_it_is_at_least_the_highest_admitted(api, db, s) {
        assert!(s.admit(res("s3://bucket/report"), 3).unwrap());
        assert!(
            s.admit(res("s3://bucket/report"), 3).unwrap(),
            "the same generation may write again"
        );
        assert!(s.admit(res("s3://bucket/report"), 5).unwrap());
        assert!(
            !s.admit(res("s3://bucket/report"), 4).unwrap(),
            "an older generation is fenced out"
        );
        assert!(!s.admit(res("s3://bucket/report"), 3).unwrap());
        assert_eq!(db.fence_gate("s3://bucket/report"), Some(5));
        // per resource
        assert!(s.admit(res("other"), 1).unwrap());
        assert_eq!(db.fence_gate("other"), Some(1));
        assert_invalid(leasefence::Resource::new(""), "resource");
        assert_eq!(db.fence_gate(""), None);
    }
);

contract!(
    fn a_fence_no_claim_hands_out_is_refused_by_name_and_records_nothing(api, db, s) {
        // On a resource never admitted, a fence of 0 or below would become its highest.
        for fence in [0, -1, i64::MIN] {
            assert_invalid(s.admit(res("fresh"), fence), "fence");
        }
        assert_eq!(db.fence_gate("fresh"), None);
        // On an admitted one, the refusal is an error, not a stale `false`, and keeps the gate.
        assert!(s.admit(res("kept"), 2).unwrap());
        assert_invalid(s.admit(res("kept"), 0), "fence");
        assert_eq!(db.fence_gate("kept"), Some(2));
        assert!(s.admit(res("kept"), 1).is_ok_and(|admitted| !admitted));
    }
);

#[test]
fn racing_generations_never_let_an_older_one_in_after_a_newer_one() {
    let db = Db::new();
    let admitted: Vec<Vec<i64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let path = &db.path;
                scope.spawn(move || {
                    let s = SqliteStore::open(path).unwrap();
                    (0..50)
                        .map(|i| i * 4 + t + 1)
                        .filter(|&f| s.admit(res("r"), f).unwrap())
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // within each thread, admitted fences only grow, and the gate ends at the highest
    for seq in &admitted {
        assert!(seq.windows(2).all(|w| w[0] < w[1]));
    }
    assert_eq!(db.fence_gate("r"), Some(200));
    assert!(admitted.iter().flatten().any(|&f| f == 200));
    // and once the race is over, every older generation is refused and changes nothing
    let s = open(&db);
    for older in [199, 100, 1] {
        assert!(
            !s.admit(res("r"), older).unwrap(),
            "fence {older} after 200"
        );
    }
    assert_eq!(db.fence_gate("r"), Some(200));
}

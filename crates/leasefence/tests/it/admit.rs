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
                        .map(|i| i * 4 + t)
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
    assert_eq!(db.fence_gate("r"), Some(199));
    assert!(admitted.iter().flatten().any(|&f| f == 199));
    // and once the race is over, every older generation is refused and changes nothing
    let s = open(&db);
    for older in [198, 100, 0] {
        assert!(
            !s.admit(res("r"), older).unwrap(),
            "fence {older} after 199"
        );
    }
    assert_eq!(db.fence_gate("r"), Some(199));
}

//! Step 2 — `enqueue` inserts only unknown ids; a known id keeps its state.

use crate::common::*;

contract!(
    fn inserts_an_unknown_id_with_the_default_state(api, db) {
        assert!(api.enqueue("job-1").unwrap());
        assert_eq!(db.rows(), vec![Row::fresh("job-1")]);
        assert!(api.enqueue("job-2").unwrap());
        assert_eq!(db.rows(), vec![Row::fresh("job-1"), Row::fresh("job-2")]);
    }
);

contract!(
    fn a_known_id_returns_false_and_keeps_an_in_flight_lease(api, db) {
        assert!(api.enqueue("job").unwrap());
        let fence = api.claim("job", "w", 10.0, 30.0).unwrap().unwrap();
        let leased = db.row("job").unwrap();
        assert!(!api.enqueue("job").unwrap());
        assert_eq!(db.row("job").unwrap(), leased);
        // The lease still works for its holder, and nobody else can claim.
        assert_eq!(api.claim("job", "other", 20.0, 30.0).unwrap(), None);
        assert!(api.renew("job", "w", fence, 20.0, 30.0).unwrap());
    }
);

contract!(
    fn a_known_id_keeps_a_finished_result(api, db) {
        let done = Row {
            owner: Some("w".into()),
            until: 50.0,
            fence: 4,
            result: Some("the answer".into()),
            done: 1,
            ..Row::fresh("job")
        };
        db.put(&done);
        assert!(!api.enqueue("job").unwrap());
        assert_eq!(db.rows(), vec![done]);
        assert_eq!(api.claim("job", "w2", 100.0, 1.0).unwrap(), None);
    }
);

contract!(
    fn a_released_job_keeps_its_fence_when_enqueued_again(api, db) {
        api.enqueue("job").unwrap();
        let f = api.claim("job", "w", 0.0, 5.0).unwrap().unwrap();
        assert!(api.release("job", "w", f).unwrap());
        assert!(!api.enqueue("job").unwrap());
        assert_eq!(db.row("job").unwrap().fence, f);
        assert_eq!(api.claim("job", "w", 1.0, 5.0).unwrap(), Some(f + 1));
    }
);

contract!(
    fn an_empty_id_is_an_invalid_argument_and_inserts_nothing(api, db) {
        assert_invalid(api.enqueue(""), "job_id");
        assert_eq!(db.rows(), vec![]);
    }
);

contract!(
    fn ids_are_stored_verbatim(api, db) {
        let mut odd = vec!["x'); DROP TABLE jobs; --", "ünïcødé ✓", " spaced ", "%_*"];
        if db.text_holds_nul() {
            odd.insert(3, "a\0b");
        } else {
            // PostgreSQL text cannot hold NUL: refused up front, nothing stored.
            assert_invalid(api.enqueue("a\0b"), "job_id");
            assert_invalid(api.state("a\0b"), "job_id");
            assert_eq!(db.rows(), vec![]);
        }
        for id in odd.iter().copied() {
            assert!(api.enqueue(id).unwrap(), "{id:?}");
        }
        for id in odd.iter().copied() {
            assert_eq!(db.row(id), Some(Row::fresh(id)), "{id:?}");
            assert_eq!(api.state(id).unwrap(), Some(Row::fresh(id).as_state()));
        }
        assert_eq!(db.rows().len(), odd.len());
        // "a\0b" is not "a": no truncation at the NUL.
        assert_eq!(api.state("a").unwrap(), None);
    }
);

//! Step 3 — `state` returns the stored row, or `None` for an unknown id.

use crate::common::*;

contract!(
    fn an_unknown_id_is_none_not_an_empty_record(api, db) {
        assert_eq!(api.state("nope").unwrap(), None);
        api.enqueue("other").unwrap();
        assert_eq!(api.state("nope").unwrap(), None);
        assert_eq!(db.rows().len(), 1);
    }
);

contract!(
    fn returns_every_stored_column(api, db) {
        let row = Row {
            owner: Some("w-9".into()),
            until: 1234.5,
            fence: 17,
            result: Some("r".into()),
            done: 1,
            ..Row::fresh("job")
        };
        db.put(&row);
        db.put(&Row::fresh("fresh"));
        assert_eq!(api.state("job").unwrap(), Some(row.as_state()));
        assert_eq!(api.state("fresh").unwrap(), Some(Row::fresh("fresh").as_state()));
    }
);

contract!(
    fn shows_what_is_stored_not_a_cache(api, db) {
        api.enqueue("job").unwrap();
        assert_eq!(api.state("job").unwrap().unwrap().fence, 0);
        // Another process changes the row behind our back.
        let changed = db.leased("job", "elsewhere", 3, 99.0);
        assert_eq!(api.state("job").unwrap(), Some(changed.as_state()));
        db.exec("DELETE FROM jobs WHERE id = 'job'");
        assert_eq!(api.state("job").unwrap(), None);
    }
);

contract!(
    fn an_empty_id_is_an_invalid_argument(api, db) {
        assert_invalid(api.state(""), "job_id");
        let _ = db;
    }
);

#[test]
fn is_leased_at_treats_now_equal_to_until_as_expired_and_done_as_not_leased() {
    let leased = Row {
        owner: Some("w".into()),
        until: 10.0,
        fence: 1,
        ..Row::fresh("job")
    }
    .as_state();
    assert!(leased.is_leased_at(9.5));
    assert!(leased.is_leased_at(-1e9));
    assert!(!leased.is_leased_at(10.0));
    assert!(!leased.is_leased_at(10.5));
    let done = leasefence::JobState {
        done: true,
        ..leased.clone()
    };
    assert!(!done.is_leased_at(9.5));
    assert!(!done.is_leased_at(10.5));
    assert!(!Row::fresh("job").as_state().is_leased_at(0.0));
}

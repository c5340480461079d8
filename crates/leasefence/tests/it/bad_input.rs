//! The bad-input table: every value the contract refuses is refused by name and changes
//! nothing, on every configuration; every unusual value it allows is stored verbatim.

use crate::common::*;
use leasefence::Error;

/// Calls that must fail as invalid arguments, with the argument each must name.
type Call<'a> = (&'static str, Box<dyn Fn() -> Result<(), Error> + 'a>);

contract!(
    fn every_bad_argument_is_refused_by_name_and_changes_nothing(api, db) {
        api.enqueue("j").unwrap();
        let fence = api.claim("j", "w", 0.0, 10.0).unwrap().unwrap();
        let before = db.rows();
        let ok = |r: Result<bool, Error>| r.map(|_| ());
        let some = |r: Result<Option<i64>, Error>| r.map(|_| ());
        let nan = f64::NAN;
        let (inf, ninf) = (f64::INFINITY, f64::NEG_INFINITY);
        let mut table: Vec<Call<'_>> = vec![];
        for now in [nan, inf, ninf] {
            table.push(("now", Box::new(move || some(api.claim("j", "v", now, 10.0)))));
            table.push(("now", Box::new(move || ok(api.renew("j", "w", fence, now, 10.0)))));
            table.push(("now", Box::new(move || ok(api.complete("j", "w", fence, now, "r")))));
        }
        for ttl in [0.0, -0.0, -1.0, -1e300, nan, inf, ninf, 1.000_000_1e12, 1e300] {
            table.push(("ttl", Box::new(move || some(api.claim("j", "v", 20.0, ttl)))));
            table.push(("ttl", Box::new(move || ok(api.renew("j", "w", fence, 1.0, ttl)))));
        }
        // a ttl whose lease end would overflow is refused too (it is past Ttl::MAX)
        table.push(("ttl", Box::new(move || some(api.claim("j", "v", 1e308, 1e308)))));
        table.push(("job_id", Box::new(move || ok(api.enqueue("")))));
        table.push(("job_id", Box::new(move || api.state("").map(|_| ()))));
        table.push(("job_id", Box::new(move || some(api.claim("", "w", 20.0, 1.0)))));
        table.push(("job_id", Box::new(move || ok(api.renew("", "w", 1, 1.0, 1.0)))));
        table.push(("job_id", Box::new(move || ok(api.complete("", "w", 1, 1.0, "r")))));
        table.push(("job_id", Box::new(move || ok(api.release("", "w", 1)))));
        table.push(("owner", Box::new(move || some(api.claim("j", "", 20.0, 1.0)))));
        table.push(("owner", Box::new(move || ok(api.renew("j", "", fence, 1.0, 1.0)))));
        table.push(("owner", Box::new(move || ok(api.complete("j", "", fence, 1.0, "r")))));
        table.push(("owner", Box::new(move || ok(api.release("j", "", fence)))));
        if !db.text_holds_nul() {
            table.push(("job_id", Box::new(move || ok(api.enqueue("a\0b")))));
            table.push(("owner", Box::new(move || some(api.claim("j", "v\0", 20.0, 1.0)))));
            table.push(("result", Box::new(move || ok(api.complete("j", "w", fence, 1.0, "\0")))));
        }
        if let Some(max) = db.max_key_bytes() {
            let long = "k".repeat(max + 1);
            table.push(("job_id", Box::new(move || ok(api.enqueue(&long)))));
        }
        for (argument, call) in &table {
            assert_invalid(call(), argument);
            assert_eq!(db.rows(), before, "a refused call changed nothing ({argument})");
        }
    }
);

contract!(
    fn unusual_but_allowed_values_are_stored_verbatim(api, db) {
        let sql = "x'); DROP TABLE jobs; --";
        let tricky = [
            sql,
            "' OR '1'='1",
            "%_*",
            "ünïcødé 🔒",
            " leading and trailing ",
            "tab\there",
        ];
        for (i, id) in tricky.iter().enumerate() {
            assert!(api.enqueue(id).unwrap(), "{id:?}");
            let owner = tricky[(i + 1) % tricky.len()];
            let now = i as f64;
            let fence = api.claim(id, owner, now, 5.0).unwrap().unwrap();
            assert!(api.complete(id, owner, fence, now + 1.0, sql).unwrap());
            let row = db.row(id).unwrap_or_else(|| panic!("{id:?} not stored: {:?}", db.rows()));
            assert_eq!(
                (row.owner.as_deref(), row.result.as_deref(), row.until),
                (Some(owner), Some(sql), now + 5.0),
                "{id:?}"
            );
        }
        assert_eq!(db.rows().len(), tricky.len(), "no statement was injected");
        // now may be negative: it only has to be finite (a fresh job's lease ended at 0, so it
        // is not claimable before then)
        assert!(api.enqueue("early").unwrap());
        assert_eq!(api.claim("early", "w", -5.0, 1.0).unwrap(), None);
        assert_eq!(api.claim("early", "w", 0.0, 1.0).unwrap(), Some(1));
        // long values: a 1 MiB owner and result everywhere; a 1 MiB id where the backend's
        // keys allow it
        let mib = "m".repeat(1 << 20);
        assert!(api.enqueue("big").unwrap());
        let fence = api.claim("big", &mib, 0.0, 5.0).unwrap().unwrap();
        assert!(api.complete("big", &mib, fence, 1.0, &mib).unwrap());
        let row = db.row("big").unwrap();
        assert_eq!(row.owner.as_deref().map(str::len), Some(1 << 20));
        assert_eq!(row.result.as_deref(), Some(mib.as_str()));
        match db.max_key_bytes() {
            None => {
                assert!(api.enqueue(&mib).unwrap());
                assert_eq!(api.claim(&mib, "w", 0.0, 1.0).unwrap(), Some(1));
                assert_eq!(db.row(&mib).unwrap().fence, 1);
            }
            Some(max) => {
                let longest = "k".repeat(max);
                assert!(api.enqueue(&longest).unwrap());
                assert_eq!(api.claim(&longest, "w", 0.0, 1.0).unwrap(), Some(1));
                assert_invalid(api.enqueue(&mib), "job_id");
            }
        }
    }
);

#[cfg(unix)]
#[test]
fn a_non_utf8_path_works_like_any_other() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir
        .path()
        .join(std::ffi::OsStr::from_bytes(b"jobs-\xff\xfe.db"));
    leasefence::init_db(&path).unwrap();
    assert!(leasefence::enqueue(&path, "j").unwrap());
    assert_eq!(
        leasefence::claim(&path, "j", "w", 0.0, 1.0).unwrap(),
        Some(1)
    );
    let row = leasefence::state(&path, "j").unwrap().unwrap();
    assert_eq!((row.owner.as_deref(), row.fence), (Some("w"), 1));
    assert!(path.exists());
    // and a missing one is named in the error, readably
    let missing = dir
        .path()
        .join(std::ffi::OsStr::from_bytes(b"gone-\xff"))
        .join("jobs.db");
    let err = leasefence::enqueue(&missing, "j").unwrap_err();
    assert!(matches!(err, Error::CannotOpen { .. }), "{err:?}");
    assert!(err.to_string().contains("gone-"), "{err}");
}

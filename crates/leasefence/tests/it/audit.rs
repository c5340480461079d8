//! `record_audit` and `audit_log`: the operator's actions, appended and read back newest
//! first, in pages; a bad record is refused by name and adds nothing.

use crate::common::*;
use leasefence::AuditRecord;

fn record<'a>(action: &'a str, target: &'a str) -> AuditRecord<'a> {
    AuditRecord {
        actor: "alice@127.0.0.1",
        action,
        target,
        result: "cancelled",
    }
}

contract!(viewed
    fn actions_are_appended_and_read_back_newest_first(api, db, s) {
        let a = s.record_audit(&record("cancel", "job:a"), now(100.0)).unwrap();
        let b = s.record_audit(&record("retry", "job:<b>"), now(101.5)).unwrap();
        let c = s.record_audit(&record("pause", "queue:mail"), now(102.0)).unwrap();
        assert!(a < b && b < c);
        // as stored, read through the test's own connection
        let stored = db.audit();
        assert_eq!(stored.len(), 3);
        assert_eq!(
            stored[1],
            (b, 101.5, "alice@127.0.0.1".into(), "retry".into(), "job:<b>".into(), "cancelled".into())
        );
        let log = s.audit_log(None, 10).unwrap();
        assert_eq!(log.iter().map(|e| e.seq).collect::<Vec<_>>(), [c, b, a]);
        assert_eq!((log[0].action.as_str(), log[0].target.as_str(), log[0].at), ("pause", "queue:mail", 102.0));
        let page = s.audit_log(None, 2).unwrap();
        assert_eq!(page.len(), 2);
        let rest = s.audit_log(Some(page[1].seq), 2).unwrap();
        assert_eq!(rest.iter().map(|e| e.seq).collect::<Vec<_>>(), [a]);
    }
);

contract!(viewed
    fn a_bad_record_is_refused_by_name_and_adds_nothing(api, db, s) {
        let arg = |r: AuditRecord<'_>| s.record_audit(&r, now(0.0)).unwrap_err().argument();
        assert_eq!(arg(AuditRecord { actor: "", ..record("cancel", "job:a") }), Some("actor"));
        assert_eq!(arg(AuditRecord { action: "", ..record("cancel", "job:a") }), Some("action"));
        assert_eq!(arg(record("cancel", "job:\0")), Some("target"));
        let long = "x".repeat(5000);
        assert_eq!(arg(AuditRecord { result: &long, ..record("cancel", "job:a") }), Some("result"));
        assert!(db.audit().is_empty());
        assert!(s.audit_log(None, 10).unwrap().is_empty());
    }
);

contract!(viewed
    fn a_field_of_exactly_max_audit_len_bytes_is_recorded(api, db, s) {
        let longest = "x".repeat(leasefence::MAX_AUDIT_LEN);
        let one_more = "x".repeat(leasefence::MAX_AUDIT_LEN + 1);
        let seq = s.record_audit(&AuditRecord { result: &longest, ..record("cancel", "job:a") }, now(0.0)).unwrap();
        assert_eq!(db.audit().iter().map(|r| (r.0, r.5.len())).collect::<Vec<_>>(), [(seq, longest.len())]);
        let err = s.record_audit(&AuditRecord { target: &one_more, ..record("cancel", "job:a") }, now(1.0)).unwrap_err();
        assert_eq!(err.argument(), Some("target"));
        assert_eq!(db.audit().len(), 1, "the refused record added nothing");
    }
);

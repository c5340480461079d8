//! `PgOptions::init(false)`: a schema without the store's tables is refused and nothing is
//! created (what a read-only tool opens with); an existing schema opens as always.

use crate::common::*;
use leasefence::{Error, JobId, Store};

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn without_init_a_missing_schema_is_refused_and_not_created() {
    let Some(db) = PgDb::new() else { return };
    let absent = format!("{}_absent", db.schema);
    let exists = |schema: &str| {
        !db.query_i64(&format!(
            "SELECT 1::int8 FROM pg_namespace WHERE nspname = '{schema}'"
        ))
        .is_empty()
    };
    let opened = leasefence::PgOptions::new()
        .schema(&absent)
        .init(false)
        .open(&db.url);
    let created = exists(&absent);
    db.exec(&format!("DROP SCHEMA IF EXISTS {absent} CASCADE"));
    match opened {
        Err(Error::SchemaMismatch { detail, .. }) => {
            assert!(detail.contains("no `jobs` table"), "{detail}");
        }
        other => panic!("expected SchemaMismatch, got {other:?}"),
    }
    assert!(!created, "init(false) created the schema {absent}");

    // The test's own schema exists: it opens without init, and reads and writes as usual.
    let store = db.options().init(false).open(&db.url).unwrap();
    let job = JobId::new("j").unwrap();
    assert!(store.enqueue(job).unwrap());
    assert_eq!(db.query_i64("SELECT count(*) FROM jobs"), vec![1]);
}

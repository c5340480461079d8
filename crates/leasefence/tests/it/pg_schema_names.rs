//! A PostgreSQL schema name that PostgreSQL reserves — `pg_*` (its catalog, `pg_temp`) or
//! `information_schema` — is bad input: `InvalidArgument` naming `schema`, before any
//! connection is made. `information_schema` was taken, and the store's tables and functions
//! created inside the standard's catalog; `pg_temp` failed as a backend error.

use crate::common::assert_invalid;
use leasefence::PgOptions;

#[test]
fn system_schemas_are_refused_by_name_before_connecting() {
    // Nothing listens there: an answer other than InvalidArgument would mean it connected.
    let url = "postgres://nobody@127.0.0.1:1/none";
    for schema in [
        "pg_temp",
        "pg_catalog",
        "pg_toast",
        "pg_mine",
        "information_schema",
    ] {
        assert_invalid(PgOptions::new().schema(schema).open(url), "schema");
    }
    // Names that only look alike are a user's own.
    let err = PgOptions::new().schema("pgq").open(url).unwrap_err();
    assert!(
        matches!(err, leasefence::Error::CannotConnect { .. }),
        "pgq is a valid schema name: {err:?}"
    );
}

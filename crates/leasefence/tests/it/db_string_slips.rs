//! Slips in a database string, found by a new user's tour: a misspelt URL scheme, white space
//! around a URL, a libpq key in capitals. Each is read as the user meant it or refused by
//! name — never opened as a file named after the URL, and the password never shown.

use crate::common::*;
use leasefence::{AnyStore, Target};

const SECRET: &str = "S3cretPW";

#[test]
fn a_misspelt_scheme_is_refused_naming_only_the_scheme() {
    for db in [
        format!("postgress://app:{SECRET}@127.0.0.1/jobs"),
        format!("mysql://app:{SECRET}@127.0.0.1/jobs"),
        format!("  pg://app:{SECRET}@127.0.0.1/jobs"),
    ] {
        let err = Target::parse(&db).unwrap_err();
        assert_eq!(err.argument(), Some("db"), "{db}: {err}");
        let shown = format!("{err} {err:?}");
        assert!(shown.contains("unknown scheme"), "{shown}");
        assert!(!shown.contains(SECRET), "{shown}");
        assert_invalid(AnyStore::open(&db), "db");
    }
    // `sqlite://` is the one other scheme, and a file path may hold `:` and `/` freely.
    assert!(!Target::parse("sqlite://jobs.db").unwrap().is_postgres());
    assert!(!Target::parse("./a:b/jobs.db").unwrap().is_postgres());
}

#[test]
fn white_space_around_a_url_is_not_part_of_it() {
    let target = Target::parse(&format!(" postgres://app:{SECRET}@127.0.0.1:1/jobs\n")).unwrap();
    assert_eq!(
        target,
        Target::Postgres(format!("postgres://app:{SECRET}@127.0.0.1:1/jobs"))
    );
    assert!(!target.to_string().contains(SECRET));
}

#[test]
fn a_password_key_in_any_case_or_without_its_equals_sign_is_masked() {
    for db in [
        format!("host=127.0.0.1 port=1 user=app PASSWORD={SECRET} dbname=jobs"),
        format!("Password={SECRET}"),
        // Its `=` forgotten: the word after `password` is still the password.
        format!("host=127.0.0.1 port=1 password {SECRET} dbname=jobs"),
    ] {
        let target = Target::parse(&db).unwrap();
        assert!(target.is_postgres(), "{db}");
        let shown = format!("{target} {target:?}");
        assert!(!shown.contains(SECRET), "{shown}");
        // libpq refuses the key by its name; the error shows no password either.
        let err = AnyStore::open(&db).unwrap_err();
        assert_eq!(err.argument(), Some("db"), "{err}");
        assert!(!format!("{err} {err:?}").contains(SECRET), "{err:?}");
    }
}

//! Unit tests of how a SQL file (a migration) is split into the statements that run
//! (`statements` and `added_column` in `sqlite/mod.rs`; the tests live beside the SQL files so
//! that a new test leaves the code file's blob, and with it cargo-mutants' verdicts, unchanged).

use super::super::{added_column, statements};

#[test]
fn statements_end_at_each_semicolon() {
    assert_eq!(
        statements("SELECT 1;\nSELECT 2 - 1;\nSELECT 3"),
        ["SELECT 1", "SELECT 2 - 1", "SELECT 3"],
        "a lone `-` is subtraction, not a comment"
    );
}

#[test]
fn a_semicolon_in_a_comment_does_not_end_a_statement() {
    assert_eq!(
        statements("SELECT 1; -- one; two\nSELECT 2;"),
        ["SELECT 1", "-- one; two\nSELECT 2"]
    );
    assert_eq!(
        statements("-- only a comment;\n"),
        Vec::<&str>::new(),
        "a fragment that is all comment is no statement"
    );
}

#[test]
fn a_semicolon_in_a_quoted_string_does_not_end_a_statement() {
    assert_eq!(
        statements("SELECT 'a;b'; SELECT 'c'"),
        ["SELECT 'a;b'", "SELECT 'c'"]
    );
    assert_eq!(
        statements("-- it's a comment\nSELECT 1; SELECT 2"),
        ["-- it's a comment\nSELECT 1", "SELECT 2"],
        "a quote inside a comment opens no string"
    );
    assert_eq!(
        statements("SELECT '--'; SELECT 2"),
        ["SELECT '--'", "SELECT 2"],
        "`--` inside a string opens no comment"
    );
}

#[test]
fn a_trigger_body_is_one_statement_with_its_end() {
    let sql = "CREATE TRIGGER t AFTER INSERT ON jobs BEGIN\n  UPDATE a SET n = n + 1;\n  \
               UPDATE b SET n = n + 1;\nEND;\nSELECT 1;";
    assert_eq!(
        statements(sql),
        [
            "CREATE TRIGGER t AFTER INSERT ON jobs BEGIN\n  UPDATE a SET n = n + 1;\n  \
             UPDATE b SET n = n + 1;\nEND",
            "SELECT 1"
        ]
    );
}

#[test]
fn added_column_reads_the_name_after_add_column() {
    assert_eq!(
        added_column("-- why\nALTER TABLE jobs ADD COLUMN queue TEXT NOT NULL DEFAULT 'default'")
            .as_deref(),
        Some("queue")
    );
    assert_eq!(added_column("CREATE INDEX i ON jobs (id)"), None);
}

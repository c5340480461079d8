//! The built `leasefence` binary on PostgreSQL (`--db postgres://…`): exit statuses, output,
//! and the stored rows read back through an independent `postgres` connection.
//!
//! The database comes from `LEASEFENCE_TEST_PG` (`host=127.0.0.1 user=postgres dbname=test`,
//! turned into a `postgres://` URL for `--db`, or a URL). Each test gets a schema of its own,
//! given to the binary with `--pg-schema` (or `LEASEFENCE_PG_SCHEMA`) and dropped afterwards.
//! Without `LEASEFENCE_TEST_PG` the tests print why and pass without running, except in CI
//! (`CI` set), where that is a failure. The bad-URL test needs no server and always runs.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use leasefence::postgres::{Client, NoTls};
use serde_json::{Value, json};

mod support;
use support::Run;

/// `LEASEFENCE_TEST_PG`, as `crates/leasefence/tests/it/common.rs` reads it.
fn pg_conn() -> Option<String> {
    match std::env::var("LEASEFENCE_TEST_PG") {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => panic!(
            "CI is set but LEASEFENCE_TEST_PG is not: the PostgreSQL cases must run in CI, \
             never skip (e.g. LEASEFENCE_TEST_PG='host=127.0.0.1 user=postgres dbname=test')"
        ),
        _ => {
            eprintln!("skipped: LEASEFENCE_TEST_PG is not set, so the PostgreSQL case did not run");
            None
        }
    }
}

/// A libpq `key=value` string as a `postgres://` URL (the CLI takes both; these cases use the
/// URL, `pg_connect.rs` the `key=value` form); a URL is returned as it is.
fn as_url(conn: &str) -> String {
    let conn = conn.trim();
    if conn.starts_with("postgres://") || conn.starts_with("postgresql://") {
        return conn.to_owned();
    }
    let (mut user, mut password, mut host, mut port, mut dbname) = (None, None, None, None, None);
    let mut query = Vec::new();
    for pair in conn.split_whitespace() {
        let (key, value) = pair
            .split_once('=')
            .unwrap_or_else(|| panic!("LEASEFENCE_TEST_PG: {pair:?} is not key=value"));
        let value = value.trim_matches('\'');
        match key {
            "user" => user = Some(value),
            "password" => password = Some(value),
            "host" => host = Some(value),
            "port" => port = Some(value),
            "dbname" => dbname = Some(value),
            _ => query.push(format!("{key}={value}")),
        }
    }
    let mut url = "postgres://".to_owned();
    if let Some(user) = user {
        url.push_str(user);
        if let Some(password) = password {
            url.push(':');
            url.push_str(password);
        }
        url.push('@');
    }
    match host {
        Some(host) if host.starts_with('/') => query.push(format!("host={host}")),
        Some(host) => url.push_str(host),
        None => {}
    }
    if let Some(port) = port {
        url.push(':');
        url.push_str(port);
    }
    url.push('/');
    url.push_str(dbname.unwrap_or(""));
    if !query.is_empty() {
        url.push('?');
        url.push_str(&query.join("&"));
    }
    url
}

/// A schema of its own in the test database (created by the binary, dropped afterwards) and
/// an independent connection to read what the binary stored.
struct Pg {
    url: String,
    schema: String,
    client: Mutex<Client>,
}

/// One stored row of `jobs`, as an independent connection sees it.
#[derive(Debug, PartialEq)]
struct Row {
    owner: Option<String>,
    until: f64,
    fence: i64,
    result: Option<String>,
    done: i32,
}

fn row(owner: Option<&str>, until: f64, fence: i64, result: Option<&str>, done: i32) -> Row {
    Row {
        owner: owner.map(str::to_owned),
        until,
        fence,
        result: result.map(str::to_owned),
        done,
    }
}

/// Runs the binary with exactly `args`, `stdin` and `env`, with no `LEASEFENCE_*` variables
/// inherited, in a temporary working directory (so that a stray SQLite file would show).
fn raw(args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let out = Run::of(dir.path(), args, stdin, env);
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "nothing is written locally: {left:?}");
    out
}

impl Pg {
    /// A fresh schema name and a connection, or `None` (reason printed) without a database.
    fn new() -> Option<Pg> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let conn = pg_conn()?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let schema = format!(
            "lf_cli_{}_{}_{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let client = Client::connect(&conn, NoTls)
            .unwrap_or_else(|e| panic!("LEASEFENCE_TEST_PG={conn:?} is set but unreachable: {e}"));
        Some(Pg {
            url: as_url(&conn),
            schema,
            client: Mutex::new(client),
        })
    }

    /// `leasefence --db URL --pg-schema SCHEMA ARGS`.
    fn lf(&self, args: &[&str]) -> Run {
        self.lf_in(args, None)
    }

    fn lf_in(&self, args: &[&str], stdin: Option<&str>) -> Run {
        let mut all = vec!["--db", &self.url, "--pg-schema", &self.schema];
        all.extend_from_slice(args);
        raw(&all, stdin, &[])
    }

    fn query(
        &self,
        sql: &str,
        params: &[&(dyn leasefence::postgres::types::ToSql + Sync)],
    ) -> Vec<leasefence::postgres::Row> {
        let sql = sql.replace("{schema}", &format!("\"{}\"", self.schema));
        self.client
            .lock()
            .unwrap()
            .query(&sql, params)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// The stored row of `id`, read through the test's own connection.
    fn row(&self, id: &str) -> Option<Row> {
        self.query(
            "SELECT owner, until, fence, result, done FROM {schema}.jobs WHERE id = $1",
            &[&id],
        )
        .first()
        .map(|r| Row {
            owner: r.get(0),
            until: r.get(1),
            fence: r.get(2),
            result: r.get(3),
            done: r.get(4),
        })
    }

    /// The database server's clock.
    fn now(&self) -> f64 {
        self.query("SELECT extract(epoch FROM clock_timestamp())::float8", &[])[0].get(0)
    }

    fn schema_exists(&self, schema: &str) -> bool {
        !self
            .query("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&schema])
            .is_empty()
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        if let Ok(mut client) = self.client.lock() {
            let _ = client.batch_execute(&format!(
                "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
                self.schema
            ));
        }
    }
}

#[test]
fn the_test_database_string_becomes_a_url() {
    assert_eq!(
        as_url("host=127.0.0.1 user=postgres dbname=test"),
        "postgres://postgres@127.0.0.1/test"
    );
    assert_eq!(
        as_url("host=db port=6543 user=u password=p dbname=d sslmode=disable"),
        "postgres://u:p@db:6543/d?sslmode=disable"
    );
    assert_eq!(as_url("postgres://x@y/z"), "postgres://x@y/z");
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn the_contract_round_trip_on_postgres_refuses_the_stale_fence() {
    let Some(pg) = Pg::new() else { return };
    pg.lf(&["init"])
        .ok()
        .says(&format!("schema {}: jobs table ready", pg.schema));
    assert!(pg.schema_exists(&pg.schema));
    pg.lf(&["init"]).ok(); // idempotent

    pg.lf(&["enqueue", "invoice-42"])
        .ok()
        .says("enqueued invoice-42");
    assert_eq!(pg.row("invoice-42"), Some(row(None, 0.0, 0, None, 0)));
    pg.lf(&["enqueue", "invoice-42"]).refused();

    pg.lf(&[
        "claim",
        "invoice-42",
        "--owner",
        "A",
        "--ttl",
        "10",
        "--now",
        "0",
    ])
    .ok()
    .says("claimed invoice-42 as A: fence 1, lease until 10");
    assert_eq!(pg.row("invoice-42"), Some(row(Some("A"), 10.0, 1, None, 0)));
    // A's lease is live at t=5; `now == until` is expired.
    pg.lf(&[
        "claim",
        "invoice-42",
        "--owner",
        "B",
        "--ttl",
        "10",
        "--now",
        "5",
    ])
    .refused();
    assert_eq!(pg.row("invoice-42"), Some(row(Some("A"), 10.0, 1, None, 0)));
    let claimed = pg
        .lf(&[
            "--json",
            "claim",
            "invoice-42",
            "--owner",
            "B",
            "--ttl",
            "10",
            "--now",
            "10",
        ])
        .ok()
        .json();
    assert_eq!(
        (&claimed["fence"], &claimed["until"], &claimed["ok"]),
        (&Value::from(2), &Value::from(20.0), &Value::from(true))
    );

    // A wakes at t=11: every write under fence 1 is refused and changes nothing.
    pg.lf(&[
        "renew",
        "invoice-42",
        "--owner",
        "A",
        "--fence",
        "1",
        "--ttl",
        "10",
        "--now",
        "11",
    ])
    .refused();
    pg.lf(&[
        "complete",
        "invoice-42",
        "--owner",
        "A",
        "--fence",
        "1",
        "--result",
        "paid twice",
        "--now",
        "11",
    ])
    .refused();
    pg.lf(&["release", "invoice-42", "--owner", "A", "--fence", "1"])
        .refused();
    assert_eq!(pg.row("invoice-42"), Some(row(Some("B"), 20.0, 2, None, 0)));

    pg.lf(&[
        "renew",
        "invoice-42",
        "--owner",
        "B",
        "--fence",
        "2",
        "--ttl",
        "10",
        "--now",
        "12",
    ])
    .ok()
    .says("lease until 22");
    assert_eq!(pg.row("invoice-42"), Some(row(Some("B"), 22.0, 2, None, 0)));
    pg.lf(&[
        "complete",
        "invoice-42",
        "--owner",
        "B",
        "--fence",
        "2",
        "--result",
        "paid",
        "--now",
        "13",
    ])
    .ok()
    .says("result stored (4 bytes)");
    pg.lf(&[
        "complete",
        "invoice-42",
        "--owner",
        "A",
        "--fence",
        "1",
        "--result",
        "paid twice",
        "--now",
        "14",
    ])
    .refused()
    .status(1);
    assert_eq!(
        pg.row("invoice-42"),
        Some(row(Some("B"), 22.0, 2, Some("paid"), 1))
    );
    let state = pg.lf(&["--json", "state", "invoice-42"]).ok().json();
    assert_eq!(state["result"], "paid");
    assert_eq!(state["fence"], 2);
    assert_eq!(state["done"], true);
    assert_eq!(state["ledger"]["refused"], 4);
    pg.lf(&["state", "nobody"]).refused();

    // The ledger: A's attempt was lost to B's takeover, B's completed, and A's four late
    // writes (renew, complete twice, release) are counted under fence 1.
    pg.lf(&["history", "invoice-42"])
        .ok()
        .says("invoice-42: 2 attempts (1 completed, 1 lost), 4 writes refused");
    let history = pg.lf(&["--json", "history", "invoice-42"]).ok().json();
    assert_eq!(
        (
            &history["attempts"][0]["owner"],
            &history["attempts"][0]["outcome"]
        ),
        (&Value::from("A"), &Value::from("lost"))
    );
    assert_eq!(history["attempts"][0]["refused"], 4);
    assert_eq!(history["attempts"][1]["outcome"], "completed");
    let stored: Vec<(i64, String, Option<String>)> = pg
        .query(
            "SELECT fence, owner, outcome FROM {schema}.attempts WHERE job_id = $1 ORDER BY fence",
            &[&"invoice-42"],
        )
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        stored,
        [
            (1, "A".into(), Some("lost".into())),
            (2, "B".into(), Some("completed".into()))
        ]
    );
    pg.lf(&["history", "nobody"]).refused();

    // Release keeps the fence: the next claim gets a higher one.
    pg.lf(&["enqueue", "r"]).ok();
    pg.lf(&["claim", "r", "--owner", "A", "--ttl", "10", "--now", "0"])
        .ok();
    pg.lf(&["release", "r", "--owner", "A", "--fence", "1"])
        .ok();
    assert_eq!(pg.row("r"), Some(row(None, 0.0, 1, None, 0)));
    pg.lf(&["release", "r", "--owner", "A", "--fence", "1"])
        .refused();
    pg.lf(&["claim", "r", "--owner", "B", "--ttl", "10", "--now", "1"])
        .ok()
        .says("fence 2");

    // Bad arguments: exit 2 naming the argument, nothing stored.
    pg.lf(&["claim", "r", "--owner", "C", "--ttl", "0", "--now", "50"])
        .error("`ttl`");
    pg.lf(&["claim", "r", "--owner", "", "--ttl", "1", "--now", "50"])
        .error("`owner`");
    assert_eq!(pg.row("r"), Some(row(Some("B"), 11.0, 2, None, 0)));
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn without_now_postgres_judges_leases_by_the_database_clock() {
    let Some(pg) = Pg::new() else { return };
    pg.lf(&["enqueue", "j"]).ok();
    let before = pg.now();
    let claimed = pg
        .lf(&["--json", "claim", "j", "--owner", "A", "--ttl", "30"])
        .ok()
        .json();
    let after = pg.now();
    let stored = pg.row("j").unwrap();
    // The stored lease end is the server's clock plus the ttl, and that is what was printed.
    assert!(
        (before + 30.0..=after + 30.0).contains(&stored.until),
        "{before} + 30 <= {} <= {after} + 30",
        stored.until
    );
    assert_eq!(claimed["until"], stored.until);
    let now = claimed["now"].as_f64().unwrap();
    assert!(
        (before..=after).contains(&now),
        "{before} <= {now} <= {after}"
    );

    // Still leased on the server's clock, whatever this host's clock says.
    pg.lf(&["claim", "j", "--owner", "B", "--ttl", "30"])
        .refused();
    pg.lf(&["renew", "j", "--owner", "A", "--fence", "1", "--ttl", "60"])
        .ok();
    let renewed = pg.row("j").unwrap();
    assert!(renewed.until >= after + 60.0, "{renewed:?}");
    pg.lf(&[
        "complete", "j", "--owner", "A", "--fence", "1", "--result", "r",
    ])
    .ok();
    assert_eq!(pg.row("j").unwrap().done, 1);
    // An explicit --now is the caller's clock: t=0 is long before this lease's end.
    pg.lf(&["enqueue", "k"]).ok();
    pg.lf(&["claim", "k", "--owner", "A", "--ttl", "5"]).ok();
    pg.lf(&["claim", "k", "--owner", "B", "--ttl", "5", "--now", "0"])
        .refused();
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn leasefence_db_is_used_when_db_is_absent() {
    let Some(pg) = Pg::new() else { return };
    let env = [
        ("LEASEFENCE_DB", pg.url.as_str()),
        ("LEASEFENCE_PG_SCHEMA", pg.schema.as_str()),
    ];
    raw(&["enqueue", "from-env"], None, &env).ok();
    raw(
        &[
            "claim", "from-env", "--owner", "A", "--ttl", "10", "--now", "0",
        ],
        None,
        &env,
    )
    .ok()
    .says("fence 1");
    assert_eq!(pg.row("from-env"), Some(row(Some("A"), 10.0, 1, None, 0)));

    // The flag wins over the environment: LEASEFENCE_DB names an SQLite file that must not be
    // created, while the job lands in PostgreSQL.
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("LEASEFENCE_DB", "local.db"),
        ("LEASEFENCE_PG_SCHEMA", pg.schema.as_str()),
    ];
    Run::of(
        dir.path(),
        &["--db", &pg.url, "enqueue", "from-flag"],
        None,
        &env,
    )
    .ok();
    assert!(!dir.path().join("local.db").exists());
    assert_eq!(pg.row("from-flag"), Some(row(None, 0.0, 0, None, 0)));
    // And --pg-schema wins over LEASEFENCE_PG_SCHEMA.
    let other = format!("{}_other", pg.schema);
    let env = [
        ("LEASEFENCE_DB", pg.url.as_str()),
        ("LEASEFENCE_PG_SCHEMA", "nope"),
    ];
    raw(
        &["--pg-schema", &pg.schema, "state", "from-flag"],
        None,
        &env,
    )
    .ok();
    // A schema that does not exist is not read (nor created) by a read-only verb.
    raw(&["--pg-schema", &other, "state", "from-flag"], None, &env)
        .error(&format!("schema {other}"))
        .error("no `jobs` table");
    assert!(!pg.schema_exists(&other));
    assert!(!pg.schema_exists("nope"));
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn the_queue_commands_run_on_postgres() {
    let Some(pg) = Pg::new() else { return };
    pg.lf(&[
        "enqueue",
        "resize-1",
        "--payload",
        "{\"w\":640}",
        "--priority",
        "5",
        "--max-attempts",
        "3",
    ])
    .ok()
    .says("priority 5, at most 3 attempts, payload 9 bytes");
    pg.lf_in(
        &["enqueue", "--ids-from", "-", "--not-before", "60"],
        Some("mail-1\nmail-2\n"),
    )
    .ok()
    .says("enqueued 2 of 2 jobs from stdin");
    pg.lf(&[
        "claim", "resize-1", "--owner", "w1", "--ttl", "30", "--now", "10",
    ])
    .ok();
    pg.lf(&["cancel", "mail-2", "--now", "11"]).ok();
    pg.lf(&["cancel", "mail-2", "--now", "12"]).refused();
    let listed: Vec<(String, String)> = pg
        .lf(&["--json", "list", "--now", "12"])
        .ok()
        .jsons()
        .iter()
        .map(|r| {
            (
                r["job_id"].as_str().unwrap().to_owned(),
                r["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("resize-1", "leased"),
        ("mail-1", "scheduled"),
        ("mail-2", "cancelled"),
    ]
    .map(|(a, b)| (a.to_owned(), b.to_owned()));
    assert_eq!(listed, expected);
    let stats = pg.lf(&["--json", "stats", "--now", "12"]).ok().json();
    assert_eq!(
        (
            &stats["leased"],
            &stats["scheduled"],
            &stats["cancelled"],
            &stats["total"]
        ),
        (
            &Value::from(1),
            &Value::from(1),
            &Value::from(1),
            &Value::from(3)
        )
    );
    pg.lf(&["purge", "--finished-before", "100"])
        .ok()
        .says("purged 1 finished job");
    assert_eq!(pg.row("mail-2"), None);
    assert_eq!(pg.row("resize-1"), Some(row(Some("w1"), 40.0, 1, None, 0)));
}

/// `not_before`, `error` and `outcome` of `id`, read through the test's own connection.
fn failure_columns(pg: &Pg, id: &str) -> (f64, Option<String>, Option<String>) {
    let rows = pg.query(
        "SELECT not_before, error, outcome FROM {schema}.jobs WHERE id = $1",
        &[&id],
    );
    (rows[0].get(0), rows[0].get(1), rows[0].get(2))
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn claim_batch_fail_and_admit_on_postgres_refuse_the_stale_fence() {
    let Some(pg) = Pg::new() else { return };
    pg.lf(&[
        "enqueue",
        "a",
        "--payload",
        "hi",
        "--priority",
        "5",
        "--max-attempts",
        "2",
    ])
    .ok();
    pg.lf(&["enqueue", "b"]).ok();

    // claim-batch: best first, one line (or object) per lease, as stored.
    let leases = pg
        .lf(&[
            "--json",
            "claim-batch",
            "--owner",
            "w",
            "--ttl",
            "30",
            "--n",
            "5",
            "--now",
            "100",
        ])
        .ok()
        .jsons();
    let got: Vec<(&str, i64, f64, &Value)> = leases
        .iter()
        .map(|l| {
            (
                l["job_id"].as_str().unwrap(),
                l["fence"].as_i64().unwrap(),
                l["until"].as_f64().unwrap(),
                &l["payload_bytes"],
            )
        })
        .collect();
    assert_eq!(
        got,
        [("a", 1, 130.0, &json!(2)), ("b", 1, 130.0, &json!(null))]
    );
    assert_eq!(pg.row("a"), Some(row(Some("w"), 130.0, 1, None, 0)));
    assert_eq!(pg.row("b"), Some(row(Some("w"), 130.0, 1, None, 0)));
    pg.lf(&[
        "claim-batch",
        "--owner",
        "x",
        "--ttl",
        "30",
        "--n",
        "5",
        "--now",
        "100",
    ])
    .refused()
    .warns("no job is ready");

    // fail: retrying, then the stale fence is refused, then the last attempt is dead.
    pg.lf(&[
        "fail",
        "a",
        "--owner",
        "w",
        "--fence",
        "1",
        "--error",
        "boom",
        "--retry-at",
        "200",
        "--now",
        "101",
    ])
    .ok()
    .says("retrying, claimable again at 200");
    assert_eq!(pg.row("a"), Some(row(None, 0.0, 1, None, 0)));
    assert_eq!(
        failure_columns(&pg, "a"),
        (200.0, Some("boom".to_owned()), None)
    );
    pg.lf(&[
        "claim-batch",
        "--owner",
        "v",
        "--ttl",
        "30",
        "--n",
        "1",
        "--now",
        "200",
    ])
    .ok()
    .says("claimed a as v: fence 2, lease until 230");
    let run = pg.lf(&[
        "--json", "fail", "a", "--owner", "w", "--fence", "1", "--error", "stale", "--now", "201",
    ]);
    run.refused();
    assert_eq!(run.json()["ok"], false);
    assert_eq!(pg.row("a"), Some(row(Some("v"), 230.0, 2, None, 0)));
    let v = pg
        .lf(&[
            "--json", "fail", "a", "--owner", "v", "--fence", "2", "--error", "boom 2", "--now",
            "202",
        ])
        .ok()
        .json();
    assert_eq!(
        (&v["outcome"], &v["retry_at"]),
        (&json!("dead"), &json!(null))
    );
    assert_eq!(pg.row("a").unwrap().done, 1);
    assert_eq!(failure_columns(&pg, "a").2.as_deref(), Some("dead"));

    // admit: the gate keeps the highest fence; a lower one is refused.
    let gate = |resource: &str| -> Option<i64> {
        pg.query(
            "SELECT fence FROM {schema}.fence_gate WHERE resource = $1",
            &[&resource],
        )
        .first()
        .map(|r| r.get(0))
    };
    pg.lf(&["admit", "bucket/x", "--fence", "2"]).ok();
    pg.lf(&["admit", "bucket/x", "--fence", "2"]).ok();
    let run = pg.lf(&["--json", "admit", "bucket/x", "--fence", "1"]);
    run.refused().warns("fence 1 is lower");
    assert_eq!(
        (&run.json()["ok"], &run.json()["resource"]),
        (&json!(false), &json!("bucket/x"))
    );
    assert_eq!(gate("bucket/x"), Some(2));
    pg.lf(&["admit", "bucket/x", "--fence", "7"]).ok();
    assert_eq!(gate("bucket/x"), Some(7));
    pg.lf(&["admit", "", "--fence", "1"]).error("resource");
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn claim_batch_and_fail_without_now_use_the_database_clock() {
    let Some(pg) = Pg::new() else { return };
    pg.lf(&["enqueue", "j"]).ok();
    let before = pg.now();
    let lease = pg
        .lf(&[
            "--json",
            "claim-batch",
            "--owner",
            "A",
            "--ttl",
            "30",
            "--n",
            "1",
        ])
        .ok()
        .json();
    let after = pg.now();
    let stored = pg.row("j").unwrap();
    assert!(
        (before + 30.0..=after + 30.0).contains(&stored.until),
        "{before} + 30 <= {} <= {after} + 30",
        stored.until
    );
    assert_eq!(lease["until"], stored.until);

    // fail judges the lease on the server's clock and backs off from it.
    let failed = pg
        .lf(&[
            "--json", "fail", "j", "--owner", "A", "--fence", "1", "--error", "e",
        ])
        .ok()
        .json();
    let at = failed["retry_at"].as_f64().unwrap();
    assert!((before + 0.8..=pg.now() + 1.2).contains(&at), "{failed}");
    assert_eq!(failure_columns(&pg, "j").0, at);
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn work_exec_drains_a_postgres_queue() {
    let Some(pg) = Pg::new() else { return };
    pg.lf_in(
        &["enqueue", "--ids-from", "-", "--payload", "hello"],
        Some("a\nb\nc\nd\n"),
    )
    .ok();
    pg.lf(&["enqueue", "bad", "--max-attempts", "1"]).ok();
    let exec = r#"if [ "$LEASEFENCE_JOB_ID" = bad ]; then echo boom >&2; exit 3; fi; cat; printf -- "-%s" "$LEASEFENCE_JOB_ID""#;
    let run = pg.lf(&[
        "--json",
        "work",
        "--exec",
        exec,
        "--drain",
        "--concurrency",
        "2",
        "--poll",
        "0.05",
        "--ttl",
        "10",
    ]);
    run.ok();
    let lines = run.jsons();
    let stopped = lines.last().unwrap();
    assert_eq!(stopped["event"], "stopped");
    assert_eq!(
        (
            &stopped["completed"],
            &stopped["dead"],
            &stopped["stale_refused"]
        ),
        (&Value::from(4), &Value::from(1), &Value::from(0))
    );
    for id in ["a", "b", "c", "d"] {
        let stored = pg.row(id).unwrap();
        assert_eq!(
            (stored.result.as_deref(), stored.fence, stored.done),
            (Some(format!("hello-{id}").as_str()), 1, 1),
            "{id}"
        );
        assert!(stored.owner.is_some());
    }
    let dead = pg.query(
        "SELECT outcome, error, done FROM {schema}.jobs WHERE id = 'bad'",
        &[],
    );
    let (outcome, error, done): (Option<String>, Option<String>, i32) =
        (dead[0].get(0), dead[0].get(1), dead[0].get(2));
    assert_eq!((outcome.as_deref(), done), (Some("dead"), 1));
    assert!(error.unwrap().contains("exit status 3: boom"));
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn demo_on_postgres_refuses_every_stale_write_and_does_every_job_once() {
    let Some(pg) = Pg::new() else { return };
    const JOBS: usize = 300;
    let run = pg.lf(&[
        "--json",
        "demo",
        "--jobs",
        &JOBS.to_string(),
        "--workers",
        "4",
        "--stall-rate",
        "0.05",
    ]);
    run.ok();
    let lines = run.jsons();
    let setup = &lines[0];
    assert_eq!(
        (&setup["phase"], &setup["schema"], &setup["temporary"]),
        (
            &Value::from("setup"),
            &Value::from(pg.schema.as_str()),
            &Value::from(false)
        )
    );
    let prefix = setup["job_prefix"].as_str().unwrap().to_owned();
    assert!(prefix.starts_with("demo-"), "{prefix}");
    let stress = lines.iter().find(|l| l["phase"] == "stress").unwrap();
    assert_eq!(stress["done_exactly_once"], JOBS);
    assert_eq!(stress["stale_writes_accepted"], 0);
    assert_eq!(stress["results_overwritten"], 0);
    assert_eq!(stress["ok"], true);
    let refused = stress["stale_writes_refused"].as_u64().unwrap();
    assert_eq!(refused, 2 * stress["stalls"].as_u64().unwrap());
    let verdict = lines.last().unwrap();
    assert_eq!(
        (&verdict["phase"], &verdict["ok"]),
        (&Value::from("verdict"), &Value::from(true))
    );

    // The rows: every stress job done once, by the owner and under the fence its result names;
    // no stale result stored anywhere.
    let rows = pg.query(
        "SELECT id, owner, fence, result, done FROM {schema}.jobs WHERE id LIKE $1 ORDER BY id",
        &[&format!("{prefix}job-%")],
    );
    assert_eq!(rows.len(), JOBS);
    for r in &rows {
        let (id, owner, fence, result, done): (String, String, i64, String, i32) =
            (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4));
        assert_eq!(done, 1, "{id}");
        assert_eq!(
            result,
            format!("result of {id} by {owner} under fence {fence}")
        );
    }
    let story = pg.row(&format!("{prefix}seed-job")).unwrap();
    assert_eq!(story, row(Some("B"), 20.0, 2, Some("B's result"), 1));
    assert_eq!(
        pg.query(
            "SELECT count(*) FROM {schema}.jobs WHERE result LIKE 'STALE%'",
            &[]
        )[0]
        .get::<_, i64>(0),
        0
    );
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn demo_on_postgres_without_a_schema_uses_a_fresh_one_and_drops_it() {
    let Some(pg) = Pg::new() else { return };
    // A job of someone else's, in another schema: the demo must leave it alone.
    pg.lf(&["enqueue", "theirs"]).ok();
    pg.lf(&[
        "claim", "theirs", "--owner", "X", "--ttl", "10", "--now", "0",
    ])
    .ok();
    let run = raw(
        &[
            "--db",
            &pg.url,
            "--json",
            "demo",
            "--jobs",
            "40",
            "--workers",
            "2",
        ],
        None,
        &[],
    );
    run.ok();
    let lines = run.jsons();
    let setup = &lines[0];
    assert_eq!(setup["temporary"], true);
    assert_eq!(setup["job_prefix"], "");
    let schema = setup["schema"].as_str().unwrap();
    assert!(schema.starts_with("leasefence_demo_"), "{schema}");
    assert_eq!(lines.last().unwrap()["ok"], true);
    assert!(
        !pg.schema_exists(schema),
        "the demo's schema {schema} is dropped"
    );
    assert_eq!(pg.row("theirs"), Some(row(Some("X"), 10.0, 1, None, 0)));
}

#[test]
fn a_typo_in_a_connection_string_names_the_key_not_the_password() {
    // No server needed: the string is refused before connecting. The message says which key
    // is wrong (it said only "invalid connection string"), and never shows the password.
    for (db, key) in [
        (
            "host=127.0.0.1 user=postgres password=S3cretPW dbnmae=test",
            "unknown option `dbnmae`",
        ),
        (
            "host=127.0.0.1 port=abc user=postgres password=S3cretPW dbname=test",
            "invalid value for option `port`",
        ),
        (
            "postgres://postgres:S3cretPW@127.0.0.1/test?connect_timeout=soon",
            "invalid value for option `connect_timeout`",
        ),
        // The driver shows the character it did not expect: here the password's first.
        (
            "host=127.0.0.1 user=postgres password S3cretPW dbname=test",
            "expected `=`",
        ),
        // A key in capitals is still the password, masked in the command's own context.
        (
            "host=127.0.0.1 user=postgres PASSWORD=S3cretPW dbname=test",
            "unknown option `PASSWORD`",
        ),
        // A misspelt scheme is refused by its name, not opened as a file named by the URL.
        (
            "postgress://postgres:S3cretPW@127.0.0.1/test",
            "unknown scheme `postgress://`",
        ),
    ] {
        let run = raw(&["--db", db, "stats"], None, &[]);
        run.error("invalid argument `db`").error(key);
        assert!(!run.stderr.contains("S3cretPW"), "{run:#?}");
        let run = raw(&["--json", "--db", db, "init"], None, &[]);
        assert!(!run.stdout.contains("S3cretPW"), "{run:#?}");
        assert!(!run.stderr.contains("S3cretPW"), "{run:#?}");
        assert!(!run.stderr.contains("`S`"), "{run:#?}");
    }
}

#[test]
fn a_bad_database_url_is_an_error_naming_the_argument() {
    // No server needed: these fail before connecting, or connect to a closed port.
    raw(
        &["--db", "postgres://u@h:notaport/d", "state", "j"],
        None,
        &[],
    )
    .error("invalid argument `db`")
    .error("not a PostgreSQL connection string");
    raw(
        &["--db", "postgresql://u@h:99999999/d", "enqueue", "j"],
        None,
        &[],
    )
    .error("invalid argument `db`");
    raw(&["--db", "", "state", "j"], None, &[]).status(2);
    assert!(
        raw(&["--db", "", "state", "j"], None, &[])
            .stderr
            .contains("--db")
    );
    raw(
        &[
            "--db",
            "postgres://u@h/d",
            "--pg-schema",
            "Bad-Name",
            "state",
            "j",
        ],
        None,
        &[],
    )
    .error("invalid argument `schema`");
    raw(
        &[
            "--db",
            "postgres://u@h/d",
            "--pg-schema",
            "Bad-Name",
            "demo",
        ],
        None,
        &[],
    )
    .error("invalid argument `schema`");
    // Nothing listens on port 1: a connection error with a hint, exit 3 (run it again).
    let run = raw(
        &["--db", "postgres://postgres@127.0.0.1:1/test", "state", "j"],
        None,
        &[],
    );
    run.busy("127.0.0.1");
    assert!(
        run.stderr.contains("hint: no PostgreSQL server answered"),
        "{run:#?}"
    );
}

/// `leasefence --db URL --pg-schema S serve --bind 127.0.0.1:0`, and its address.
#[cfg(unix)]
fn serve_pg(pg: &Pg) -> (std::process::Child, String) {
    use std::io::BufRead as _;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_leasefence"))
        .args(["--db", &pg.url, "--pg-schema", &pg.schema])
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env_remove("LEASEFENCE_DB")
        .env_remove("LEASEFENCE_WORKER_TOKEN")
        .env_remove("LEASEFENCE_ADMIN_TOKEN")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_owned();
    (child, url)
}

#[test]
#[cfg(unix)]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn serve_on_postgres_refuses_the_stale_fence_by_the_database_clock() {
    let Some(pg) = Pg::new() else { return };
    let (mut server, url) = serve_pg(&pg);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let post = |path: &str, body: Value| -> (u16, Value) {
        let mut resp = agent.post(&format!("{url}{path}")).send_json(body).unwrap();
        let status = resp.status().as_u16();
        (status, resp.body_mut().read_json().unwrap())
    };
    assert_eq!(post("/v1/jobs", json!({"id": "r", "payload": "x"})).0, 201);
    let (_, a) = post("/v1/claims", json!({"owner": "A", "ttl": 0.3}));
    let until = a["leases"][0]["until"].as_f64().unwrap();
    // The lease end is on the database's clock, as stored.
    assert_eq!(pg.row("r").unwrap().until, until);
    while pg.now() <= until {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let (status, b) = post(
        "/v1/claims",
        json!({"owner": "B", "ttl": 60, "job_id": "r"}),
    );
    assert_eq!(
        (status, b["leases"][0]["fence"].as_i64()),
        (200, Some(2)),
        "{b}"
    );
    let (status, refused) = post(
        "/v1/jobs/r/complete",
        json!({"owner": "A", "fence": 1, "result": "stale"}),
    );
    assert_eq!(
        (status, refused["reason"].as_str()),
        (409, Some("stale_fence"))
    );
    let (status, _) = post(
        "/v1/jobs/r/complete",
        json!({"owner": "B", "fence": 2, "result": "fresh"}),
    );
    assert_eq!(status, 200);
    let stored = pg.row("r").unwrap();
    assert_eq!(
        (
            stored.owner.as_deref(),
            stored.fence,
            stored.result.as_deref(),
            stored.done
        ),
        (Some("B"), 2, Some("fresh"), 1)
    );
    // A worker over HTTP drains the rest through the same server.
    for id in ["w1", "w2", "w3"] {
        assert_eq!(post("/v1/jobs", json!({"id": id, "payload": id})).0, 201);
    }
    let run = raw(
        &[
            "work",
            "--server",
            &url,
            "--exec",
            "tr a-z A-Z",
            "--drain",
            "--poll",
            "0.05",
        ],
        None,
        &[],
    );
    run.ok();
    for id in ["w1", "w2", "w3"] {
        assert_eq!(pg.row(id).unwrap().result, Some(id.to_uppercase()));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(server.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(server.wait().unwrap().success());
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn work_exec_admit_from_the_command_uses_the_workers_schema() {
    // `work --help`: the command gets LEASEFENCE_DB "so that the command can run `leasefence
    // admit`". With the schema given as --pg-schema, the command's admit must reach the fence
    // gate of that schema, not the default `leasefence` one.
    let Some(pg) = Pg::new() else { return };
    let resource = format!("review/{}", pg.schema);
    let env = [
        ("LEASEFENCE_DB", pg.url.as_str()),
        ("LF", env!("CARGO_BIN_EXE_leasefence")),
        ("RES", resource.as_str()),
    ];
    raw(&["--pg-schema", &pg.schema, "init"], None, &env).ok();
    raw(&["--pg-schema", &pg.schema, "enqueue", "g"], None, &env).ok();
    raw(
        &[
            "--pg-schema",
            &pg.schema,
            "work",
            "--drain",
            "--exec",
            r#""$LF" admit "$RES" --fence "$LEASEFENCE_FENCE""#,
        ],
        None,
        &env,
    )
    .ok();
    let in_worker_schema = pg.query(
        "SELECT fence FROM {schema}.fence_gate WHERE resource = $1",
        &[&resource],
    );
    // Clean up what went to the default schema, if anything did.
    let _ = pg.client.lock().unwrap().execute(
        "DELETE FROM leasefence.fence_gate WHERE resource = $1",
        &[&resource],
    );
    assert_eq!(
        in_worker_schema.len(),
        1,
        "the command's admit went to another schema's fence gate; state: {:#?}",
        raw(&["--pg-schema", &pg.schema, "state", "g"], None, &env)
    );
}

/// As on SQLite (`queue::retry_says_when_a_held_unique_key_keeps_a_job_as_it_is`): a job
/// whose unique key another unfinished job holds is left as it is, and `retry` says why.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn retry_on_postgres_says_when_a_held_unique_key_keeps_a_job_as_it_is() {
    let Some(pg) = Pg::new() else { return };
    pg.lf(&["enqueue", "a", "--unique-key", "K"]).ok();
    pg.lf(&["cancel", "a", "--now", "1"]).ok();
    pg.lf(&["enqueue", "b", "--unique-key", "K"]).ok();
    let run = pg.lf(&["retry", "a", "--now", "2"]);
    run.refused();
    assert!(
        run.stderr.contains(
            "a is cancelled, but another unfinished job of the queue default holds its unique \
             key \"K\""
        ),
        "{}",
        run.stderr
    );
    assert_eq!(failure_columns(&pg, "a").2.as_deref(), Some("cancelled"));
    pg.lf(&["enqueue", "c", "--unique-key", "K2", "--max-attempts", "1"])
        .ok();
    pg.lf(&["claim", "c", "--owner", "w", "--ttl", "30", "--now", "0"])
        .ok();
    pg.lf(&[
        "fail", "c", "--owner", "w", "--fence", "1", "--error", "boom", "--now", "1",
    ])
    .ok();
    pg.lf(&["enqueue", "d", "--unique-key", "K2"]).ok();
    pg.lf(&["retry", "--dead", "--now", "3"])
        .ok()
        .says("retried 0 dead jobs")
        .says("1 dead job left as it is");
    assert_eq!(failure_columns(&pg, "c").2.as_deref(), Some("dead"));
}

#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_read_only_verb_on_a_schema_that_does_not_exist_creates_nothing() {
    let Some(pg) = Pg::new() else { return };
    // A mistyped --pg-schema: each read-only verb fails as on an uninitialised SQLite file,
    // and the schema is still not there afterwards.
    for args in [
        &["state", "j"][..],
        &["list"],
        &["stats"],
        &["history", "j"],
        &["queue", "list"],
        &["schedule", "list"],
    ] {
        pg.lf(args).error("no `jobs` table; run `leasefence init`");
        assert!(!pg.schema_exists(&pg.schema), "{args:?} created the schema");
    }
    let v = pg.lf(&["--json", "stats"]).json();
    assert_eq!(
        (&v["ok"], &v["error"]),
        (&json!(false), &json!("schema_mismatch")),
        "{v}"
    );
    assert!(!pg.schema_exists(&pg.schema));
    // A verb that writes still creates it, as documented; then the readers work.
    pg.lf(&["enqueue", "j"]).ok();
    assert!(pg.schema_exists(&pg.schema));
    pg.lf(&["state", "j"]).ok().says("j");
    let v = pg.lf(&["--json", "stats"]).ok().json();
    assert_eq!(v["ready"], json!(1), "{v}");
}

//! Bad input gets a 400 naming the field, an oversize body a 413, and neither changes anything.

use leasefence_server::ServerConfig;
use serde_json::json;

use crate::support::{Db, Server, backends};

backends! {
    fn bad_input_names_the_field_and_changes_nothing(db: &Db) {
        let server = Server::start(db);
        let c = server.client(None);
        c.enqueue("j");
        let cases = [
            ("/v1/claims", json!({"owner": "A", "ttl": 0}), "ttl"),
            ("/v1/claims", json!({"owner": "A", "ttl": -1}), "ttl"),
            ("/v1/claims", json!({"owner": "A", "ttl": "ten"}), "ttl"),
            ("/v1/claims", json!({"ttl": 5}), "owner"),
            ("/v1/claims", json!({"owner": "", "ttl": 5}), "owner"),
            ("/v1/claims", json!({"owner": "A", "ttl": 5, "n": 0}), "n"),
            ("/v1/claims", json!({"owner": "A", "ttl": 5, "n": 100000}), "n"),
            ("/v1/claims", json!({"owner": "A", "ttl": 5, "queues": ["Bad Queue!"]}), "queues"),
            ("/v1/claims", json!({"owner": "A", "ttl": 5, "queues": [""]}), "queues"),
            ("/v1/claims", json!({"owner": "A", "ttl": 5, "tll": 5}), "tll"),
            ("/v1/jobs", json!({"id": ""}), "id"),
            ("/v1/jobs", json!({"jobs": [{"id": "a"}, {"id": ""}]}), "jobs[1].id"),
            ("/v1/jobs", json!({"id": "h8", "unique_for": 5}), "unique_for"),
            ("/v1/jobs", json!({"jobs": [{"id": "ok"}, {"id": "x", "payload_base64": "%%%"}]}), "jobs[1].payload_base64"),
            ("/v1/jobs", json!({"jobs": [{"id": "ok"}, {"id": "y", "priority": "high"}]}), "jobs[1].priority"),
            ("/v1/jobs/j/renew", json!({"owner": "A", "fence": "1", "ttl": 5}), "fence"),
            ("/v1/jobs/j/fail", json!({"owner": "A", "fence": 1, "retry_in": -5}), "retry_in"),
            ("/v1/jobs/j/fail", json!({"owner": "A", "fence": 1, "retry_in": 1e300}), "retry_in"),
            ("/v1/jobs", json!({"id": "far", "delay": 1e300}), "delay"),
            // A lease longer than 10^12 s is a mistake, not a lease that never ends.
            ("/v1/claims", json!({"owner": "A", "ttl": 1e308}), "ttl"),
            ("/v1/jobs/j/renew", json!({"owner": "A", "fence": 1, "ttl": 1.000_000_1e12}), "ttl"),
            ("/v1/renewals", json!({"ttl": 5, "leases": [
                {"job_id": "j", "owner": "A", "fence": 1},
                {"job_id": "", "owner": "A", "fence": 1}]}), "leases[1].job_id"),
        ];
        for (path, body, field) in cases {
            let (status, answer) = c.post(path, body.clone());
            assert_eq!(status, 400, "{path} {body}: {answer}");
            assert_eq!(answer["error"], "bad_request");
            assert_eq!(answer["field"], field, "{path} {body}: {answer}");
        }
        for raw in [&b"{\"owner\": \"A\", "[..], b"", b"[1, 2]", b"\xff\xfe"] {
            let (status, answer) = c.post_raw("/v1/claims", raw);
            assert_eq!((status, answer["field"].as_str()), (400, Some("body")), "{answer}");
        }
        // The message names the item's field once, with the library's reason (not a second
        // "invalid argument" prefix), and numbers far from a second in a short form.
        let (_, answer) = c.post("/v1/renewals", json!({"ttl": 5, "leases": [
            {"job_id": "j", "owner": "A", "fence": 1}, {"job_id": "", "owner": "A", "fence": 1}]}));
        assert_eq!(
            answer["message"],
            "invalid `leases[1].job_id`: must not be empty; nothing was changed",
            "{answer}"
        );
        let (_, answer) = c.post("/v1/jobs", json!({"id": "far", "delay": 1e300}));
        let message = answer["message"].as_str().unwrap();
        assert!(message.contains("got 1e300;") && message.len() < 200, "{answer}");
        let (_, answer) = c.post("/v1/claims", json!({"owner": "A", "ttl": 1e300}));
        let message = answer["message"].as_str().unwrap();
        assert!(message.contains("at most 1e12, got 1e300;") && message.len() < 200, "{answer}");
        let (status, answer) = c.get("/v1/jobs?limit=0");
        assert_eq!((status, answer["field"].as_str()), (400, Some("limit")), "{answer}");
        let (status, answer) = c.get("/v1/jobs?status=sleeping");
        assert_eq!((status, answer["field"].as_str()), (400, Some("status")), "{answer}");
        // Nothing was claimed or inserted by any of them.
        assert_eq!(db.count(), 1);
        let row = db.row("j").unwrap();
        assert_eq!((row.fence, row.owner), (0, None));
    }

    fn an_oversize_body_is_413_and_inserts_nothing(db: &Db) {
        let config = ServerConfig { max_body_bytes: 64 * 1024, ..ServerConfig::default() };
        let server = Server::with(db, config);
        let c = server.client(None);
        let big = "x".repeat(100 * 1024);
        let (status, answer, headers) = c.post_with_headers("/v1/jobs", json!({"id": "big", "payload": big}));
        assert_eq!((status, answer["error"].as_str()), (413, Some("too_large")), "{answer}");
        // Answered before the body was read: the client is told not to reuse the connection.
        assert_eq!(headers.get("connection").map(|v| v.to_str().unwrap()), Some("close"));
        let many: Vec<_> = (0..5000).map(|i| json!({"id": format!("job-{i:05}")})).collect();
        let (status, _) = c.post("/v1/jobs", json!({"jobs": many}));
        assert_eq!(status, 413);
        assert_eq!(db.count(), 0);
        // Under the limit it is taken.
        let (status, _) = c.post("/v1/jobs", json!({"id": "small", "payload": "x".repeat(1000)}));
        assert_eq!(status, 201);
    }
}

#[test]
fn unknown_routes_are_404_with_a_json_body() {
    let db = Db::new(crate::support::Backend::Sqlite).unwrap();
    let server = Server::start(&db);
    let (status, body) = server.client(None).get("/v2/jobs");
    assert_eq!(
        (status, body["error"].as_str()),
        (404, Some("not_found")),
        "{body}"
    );
}

/// An independent connection holding SQLite's write lock until dropped (committed).
struct Lock(rusqlite::Connection);

impl Lock {
    fn take(db: &Db) -> Lock {
        let conn = rusqlite::Connection::open(&db.db).unwrap();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        Lock(conn)
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        self.0.execute_batch("COMMIT").unwrap();
    }
}

#[test]
fn a_busy_database_is_a_retryable_503_that_changes_nothing() {
    let db = Db::new(crate::support::Backend::Sqlite).unwrap();
    let options = leasefence::AsyncOptions::new().sqlite(
        leasefence::SqliteOptions::new()
            .init(false)
            .busy_timeout(std::time::Duration::from_millis(100)),
    );
    let server = Server::with_options(&db, ServerConfig::default(), options);
    let c = server.client(None);
    c.enqueue("j");
    let lock = Lock::take(&db);
    let (status, body, headers) =
        c.post_with_headers("/v1/claims", json!({"owner": "A", "ttl": 30}));
    assert_eq!(
        (status, body["error"].as_str()),
        (503, Some("busy")),
        "{body}"
    );
    assert_eq!(headers["retry-after"], "1");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .ends_with("nothing was done, retry the request"),
        "{body}"
    );
    drop(lock);
    assert_eq!(
        (db.row("j").unwrap().fence, db.row("j").unwrap().owner),
        (0, None)
    );
    // Retried once the lock is gone: taken.
    assert_eq!(c.claim("j", "A", 30.0), 1);
}

#[test]
fn a_request_that_waits_past_the_limit_for_a_connection_is_a_503_and_runs_nothing() {
    let db = Db::new(crate::support::Backend::Sqlite).unwrap();
    let options = leasefence::AsyncOptions::new()
        .connections(1)
        .acquire_timeout(std::time::Duration::from_millis(200));
    let server = Server::with_options(&db, ServerConfig::default(), options);
    let c = server.client(None);
    c.enqueue("j");
    let lock = Lock::take(&db);
    // The one connection waits for the lock (5 s busy timeout) inside a claim...
    let first = {
        let c = c.clone();
        std::thread::spawn(move || c.post("/v1/claims", json!({"owner": "A", "ttl": 30})))
    };
    // A read never waits for the write lock (WAL), only for the connection: it is refused
    // as busy exactly while the claim holds the one connection.
    crate::support::wait_until("the first claim holds the connection", || {
        let (status, body) = c.get("/v1/jobs/j");
        status == 503 && body["error"] == "busy"
    });
    // ... so another request waits 200 ms for it, then is told to retry, and ran nothing.
    let started = std::time::Instant::now();
    let (status, body, headers) = c.post_with_headers("/v1/jobs", json!({"id": "late"}));
    assert_eq!(
        (status, body["error"].as_str()),
        (503, Some("busy")),
        "{body}"
    );
    assert_eq!(headers["retry-after"], "1");
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
    drop(lock);
    // The first claim, once it had its connection, ran to its end: its lease is delivered.
    let (status, body) = first.join().unwrap();
    assert_eq!(
        (status, body["leases"][0]["fence"].as_i64()),
        (200, Some(1)),
        "{body}"
    );
    assert!(db.row("late").is_none());
    assert_eq!(c.get("/healthz").0, 200);
}

#[test]
fn a_body_that_does_not_arrive_in_time_is_a_503_timeout() {
    use std::io::{Read as _, Write as _};
    let db = Db::new(crate::support::Backend::Sqlite).unwrap();
    let config = ServerConfig {
        request_timeout: std::time::Duration::from_millis(200),
        ..ServerConfig::default()
    };
    let server = Server::with(&db, config);
    let addr = server.url.strip_prefix("http://").unwrap();
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    // Headers promise 100 bytes; one arrives.
    conn.write_all(b"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        .unwrap();
    let mut answer = String::new();
    conn.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut buf = [0u8; 4096];
    let n = conn.read(&mut buf).unwrap();
    answer.push_str(&String::from_utf8_lossy(&buf[..n]));
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("\"error\":\"timeout\""), "{answer}");
    assert_eq!(db.count(), 0);
}

/// A client that opens a connection and never finishes its headers is closed once the request
/// timeout runs out, instead of holding the connection — and a shutdown — for as long as it
/// likes; a shutdown with such a connection open ends without waiting for the client.
#[test]
fn headers_that_do_not_arrive_in_time_close_the_connection() {
    use std::io::{Read as _, Write as _};
    use std::time::{Duration, Instant};
    let db = Db::new(crate::support::Backend::Sqlite).unwrap();
    let config = ServerConfig {
        request_timeout: Duration::from_millis(300),
        ..ServerConfig::default()
    };
    let server = Server::with(&db, config);
    let addr = server.url.strip_prefix("http://").unwrap().to_owned();
    let half_sent = || {
        let mut conn = std::net::TcpStream::connect(&addr).unwrap();
        conn.write_all(b"GET /v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        conn
    };
    let mut conn = half_sent();
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    let closed = match conn.read(&mut buf) {
        Ok(n) => !String::from_utf8_lossy(&buf[..n]).contains("200 OK"),
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    };
    assert!(closed, "the server answered or held a half-sent request");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "closed after {:?}",
        started.elapsed()
    );
    // Answered requests still work, and a shutdown does not wait for a silent client.
    assert_eq!(server.client(None).get("/healthz").0, 200);
    let _silent = half_sent();
    let stopping = Instant::now();
    server.stop();
    assert!(
        stopping.elapsed() < Duration::from_secs(15),
        "stopped after {:?}",
        stopping.elapsed()
    );
}

/// A request timeout of centuries (`--request-timeout 1e19`, accepted) still serves: the
/// header timeout it sets is capped, never added to the clock unchecked (which panicked every
/// connection).
#[test]
fn the_longest_request_timeout_still_serves() {
    let db = Db::new(crate::support::Backend::Sqlite).unwrap();
    let config = ServerConfig {
        request_timeout: std::time::Duration::MAX,
        ..ServerConfig::default()
    };
    let server = Server::with(&db, config);
    let c = server.client(None);
    assert_eq!(c.get("/healthz").0, 200);
    c.enqueue("j");
    assert_eq!(db.count(), 1);
}

backends! {
    // docs/http.md: a 400's `field` names the bad input — a query parameter as itself, not as
    // the whole query; one the route does not know is named in the message.
    fn a_bad_query_parameter_is_named_as_its_field(db: &Db) {
        let server = Server::start(db);
        let c = server.client(None);
        c.enqueue("j");
        for query in ["limit=abc", "limit=-1", "limit=1.5", "limit="] {
            let (status, body) = c.get(&format!("/v1/jobs?{query}"));
            assert_eq!(
                (status, body["field"].as_str()),
                (400, Some("limit")),
                "GET /v1/jobs?{query}: {body}"
            );
        }
        let (status, body) = c.get("/v1/jobs?limt=5");
        assert_eq!((status, body["field"].as_str()), (400, Some("query")), "{body}");
        assert!(body["message"].as_str().unwrap().contains("`limt`"), "{body}");
        // The parameters it knows still work.
        let (status, body) = c.get("/v1/jobs?limit=1&status=ready");
        assert_eq!((status, body["jobs"][0]["id"].as_str()), (200, Some("j")), "{body}");
    }
}

/// A claim names at most 1,000 queues (as it asks for at most 1,000 jobs): their names are
/// checked and de-duplicated on the server before the claim, so an unbounded list let one
/// worker token stall the server (30,000 names held `/healthz` for 7 s). Too many is a 400
/// naming `queues`; 1,000 distinct names are served.
#[test]
fn a_claim_names_at_most_a_thousand_queues() {
    let db = Db::new(crate::support::Backend::Sqlite).unwrap();
    let server = Server::start(&db);
    let c = server.client(None);
    c.enqueue("j");
    let names = |n: usize| -> Vec<String> { (0..n).map(|i| format!("q{i}")).collect() };
    let (status, body) = c.post(
        "/v1/claims",
        json!({"owner": "A", "ttl": 30, "queues": names(1001)}),
    );
    assert_eq!(
        (status, body["field"].as_str()),
        (400, Some("queues")),
        "{body}"
    );
    assert!(body["message"].as_str().unwrap().contains("1001"), "{body}");
    let mut queues = names(999);
    queues.push("default".into());
    let (status, body) = c.post(
        "/v1/claims",
        json!({"owner": "A", "ttl": 30, "queues": queues}),
    );
    assert_eq!(
        (status, body["leases"][0]["job_id"].as_str()),
        (200, Some("j")),
        "{body}"
    );
}

backends! {
    // A value PostgreSQL cannot store (a NUL byte; a job id over `PgStore::MAX_KEY_BYTES`) in
    // one item of a batch: on PostgreSQL a 400 naming that item's field (`completions[1].result`,
    // as the docs promise for `jobs[3].queue`), not a bare `result` that leaves a client with a
    // thousand items guessing; nothing of the batch is taken. SQLite stores such values.
    fn a_batch_item_postgres_cannot_store_is_named_with_its_index(db: &Db) {
        let server = Server::start(db);
        let c = server.client(None);
        c.enqueue("a");
        c.enqueue("b");
        let (fa, fb) = (c.claim("a", "w", 60.0), c.claim("b", "w", 60.0));
        let long = "k".repeat(leasefence::PgStore::MAX_KEY_BYTES + 1);
        let cases = [
            ("/v1/jobs", json!({"jobs": [{"id": "c"}, {"id": "d\u{0}"}]}), "jobs[1].id"),
            ("/v1/jobs", json!({"jobs": [{"id": "c"}, {"id": long}]}), "jobs[1].id"),
            ("/v1/completions", json!({"completions": [
                {"job_id": "a", "owner": "w", "fence": fa, "result": "ok"},
                {"job_id": "b", "owner": "w", "fence": fb, "result": "bin\u{0}ary"}]}), "completions[1].result"),
            ("/v1/completions", json!({"completions": [
                {"job_id": "a", "owner": "w", "fence": fa, "result": "ok"},
                {"job_id": "b", "owner": "w\u{0}", "fence": fb, "result": "ok"}]}), "completions[1].owner"),
            ("/v1/renewals", json!({"ttl": 60, "leases": [
                {"job_id": "a", "owner": "w", "fence": fa},
                {"job_id": long, "owner": "w", "fence": fb}]}), "leases[1].job_id"),
        ];
        for (path, body, field) in cases {
            let (status, answer) = c.post(path, body);
            match db.backend {
                crate::support::Backend::Pg => {
                    assert_eq!((status, answer["field"].as_str()), (400, Some(field)), "{path}: {answer}");
                    assert!(!db.row("a").unwrap().done && db.row("c").is_none(), "nothing of the batch was taken");
                }
                crate::support::Backend::Sqlite => assert_eq!(status, 200, "{path}: {answer}"),
            }
        }
    }
}

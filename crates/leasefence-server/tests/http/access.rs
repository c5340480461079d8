//! Tokens: without one a request changes nothing (401); a worker token cannot do an admin's
//! verbs (403); the admin token can do everything.

use leasefence_server::{ServerConfig, Token, Tokens};
use serde_json::json;

use crate::support::{Db, Server, backends};

const WORKER: &str = "worker-token-7d1c0a9e4b";
const ADMIN: &str = "admin-token-51f0e2c8aa3";

fn config() -> ServerConfig {
    ServerConfig {
        tokens: Tokens {
            worker: Some(Token::new(WORKER, "worker token").unwrap()),
            admin: Some(Token::new(ADMIN, "admin token").unwrap()),
        },
        ..ServerConfig::default()
    }
}

backends! {
    fn requests_without_the_right_token_change_nothing(db: &Db) {
        let server = Server::with(db, config());
        let (none, wrong, worker, admin) = (
            server.client(None),
            server.client(Some("not-the-token-at-all-0000")),
            server.client(Some(WORKER)),
            server.client(Some(ADMIN)),
        );
        for c in [&none, &wrong] {
            let (status, body) = c.post("/v1/jobs", json!({"id": "sneaky"}));
            assert_eq!((status, body["error"].as_str()), (401, Some("unauthorized")), "{body}");
            assert_eq!(c.get("/v1/stats").0, 401);
            assert_eq!(c.post("/v1/claims", json!({"owner": "x", "ttl": 5})).0, 401);
        }
        assert_eq!(db.count(), 0, "a refused enqueue inserted nothing");
        let (_, _, headers) = none.get_text("/v1/jobs/x");
        assert!(headers.get("www-authenticate").is_some());

        worker.enqueue("j");
        let f = worker.claim("j", "A", 60.0);
        // The worker token cannot cancel, retry, delete or pause.
        for (status, body) in [
            worker.post_empty("/v1/jobs/j/cancel"),
            worker.post_empty("/v1/jobs/j/retry"),
            worker.delete("/v1/jobs/j"),
            worker.post_empty("/v1/queues/default/pause"),
        ] {
            assert_eq!((status, body["error"].as_str()), (403, Some("forbidden")), "{body}");
        }
        let row = db.row("j").unwrap();
        assert_eq!((row.done, row.fence, row.owner.as_deref()), (false, 1, Some("A")));
        let (_, stats) = worker.get("/v1/stats");
        assert_eq!(stats["queues"][0]["paused"], false);

        // The admin token can; a cancelled job's holder then stores nothing.
        assert_eq!(admin.post_empty("/v1/jobs/j/cancel").0, 200);
        let (status, body) = worker.post("/v1/jobs/j/complete", json!({"owner": "A", "fence": f}));
        assert_eq!((status, body["reason"].as_str()), (409, Some("done")), "{body}");
        assert_eq!(admin.post("/v1/jobs", json!({"id": "k"})).0, 201);
        assert_eq!(admin.delete("/v1/jobs/k").0, 200);
        assert!(db.row("k").is_none());

        // Health and metrics need no token.
        assert_eq!(none.get("/healthz").0, 200);
        assert_eq!(none.get("/readyz").0, 200);
        assert_eq!(none.get_text("/metrics").0, 200);
    }
}

#[test]
fn a_worker_token_alone_leaves_the_admin_routes_closed() {
    let db = Db::new(crate::support::Backend::Sqlite).unwrap();
    let config = ServerConfig {
        tokens: Tokens {
            worker: Some(Token::new(WORKER, "worker token").unwrap()),
            admin: None,
        },
        ..ServerConfig::default()
    };
    let server = Server::with(&db, config);
    let worker = server.client(Some(WORKER));
    worker.enqueue("j");
    let (status, body) = worker.post_empty("/v1/jobs/j/cancel");
    assert_eq!(status, 403);
    assert!(
        body["message"].as_str().unwrap().contains("has none set"),
        "{body}"
    );
    assert!(!db.row("j").unwrap().done);
}

/// A request to a server without tokens sent over a raw connection with `host` as its `Host`
/// header; the status and the body.
fn with_host(server: &Server, method_path: &str, host: &str, body: &str) -> (u16, String) {
    with_host_and_origin(server, method_path, host, &format!("http://{host}"), body)
}

/// [`with_host`] with an `Origin` header of its own (the page a browser sent it from) and a
/// `text/plain` body: what any web page may send without a preflight.
fn with_host_and_origin(
    server: &Server,
    method_path: &str,
    host: &str,
    origin: &str,
    body: &str,
) -> (u16, String) {
    use std::io::{Read as _, Write as _};
    let addr = server.url.strip_prefix("http://").unwrap();
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.write_all(
        format!(
            "{method_path} HTTP/1.1\r\nHost: {host}\r\nOrigin: {origin}\r\nContent-Type: \
             text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .unwrap();
    conn.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    (status, answer)
}

/// A server without tokens is open to whoever reaches its loopback address — but a web page
/// reaches it too, under a name of its own that it re-points at 127.0.0.1 (DNS rebinding):
/// the browser then treats the server as that page's own origin, lets it read the dashboard's
/// CSRF token and call every route. So such a server answers only requests addressed to a
/// loopback name (`localhost`, `127.0.0.1`, `[::1]`), and refuses the rest, changing nothing.
#[test]
fn an_open_server_answers_only_requests_addressed_to_loopback() {
    let db = Db::new(crate::support::Backend::Sqlite).unwrap();
    let server = Server::start(&db);
    let port = server.url.rsplit(':').next().unwrap().to_owned();
    let rebound = format!("rebind.attacker.example:{port}");
    let (status, answer) = with_host(&server, "POST /v1/jobs", &rebound, r#"{"id": "pwn"}"#);
    assert_eq!(status, 403, "{answer}");
    assert!(answer.contains("\"error\":\"forbidden\""), "{answer}");
    assert_eq!(db.count(), 0, "nothing was enqueued");
    let (status, answer) = with_host(&server, "GET /dashboard", &rebound, "");
    assert_eq!(status, 403, "{answer}");
    assert!(!answer.contains("csrf-token"), "{answer}");
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("LOCALHOST:{port}"),
        "localhost".to_owned(),
        format!("[::1]:{port}"),
        format!("127.0.0.2:{port}"),
    ] {
        let (status, answer) = with_host(&server, "GET /v1/stats", &host, "");
        assert_eq!(status, 200, "{host}: {answer}");
    }
    // With tokens, the token is the credential: any name is served.
    drop(server);
    let server = Server::with(&db, config());
    let (status, answer) = with_host(&server, "GET /healthz", &rebound, "");
    assert_eq!(status, 200, "{answer}");
}

/// A server without tokens takes no request a web page on another site sent: a browser lets
/// any page POST a `text/plain` body to 127.0.0.1 without asking first, so such a page could
/// enqueue, claim, cancel and pause. A request whose `Origin` is not a loopback page is refused,
/// changing nothing; clients that are not browsers send no `Origin`, and this server's own
/// dashboard pages are loopback pages.
#[test]
fn an_open_server_refuses_what_a_page_of_another_site_sends() {
    let db = Db::new(crate::support::Backend::Sqlite).unwrap();
    let server = Server::start(&db);
    let c = server.client(None);
    c.enqueue("kept");
    let host = server.url.strip_prefix("http://").unwrap().to_owned();
    for origin in [
        "https://evil.example",
        "null",
        "http://127.0.0.1.evil.example",
    ] {
        for (method_path, body) in [
            ("POST /v1/jobs", r#"{"id": "planted"}"#),
            ("POST /v1/jobs/kept/cancel", ""),
            ("POST /v1/claims", r#"{"owner": "evil", "ttl": 60}"#),
        ] {
            let (status, answer) = with_host_and_origin(&server, method_path, &host, origin, body);
            assert_eq!(status, 403, "{origin} {method_path}: {answer}");
        }
    }
    let row = db.row("kept").unwrap();
    assert!(
        !row.done && row.owner.is_none() && row.fence == 0,
        "{row:?}"
    );
    assert!(db.row("planted").is_none());
    // A page of this server (the dashboard's forms), and clients that send no Origin, are served.
    let port = host.rsplit(':').next().unwrap();
    for origin in [format!("http://{host}"), format!("http://localhost:{port}")] {
        let (status, answer) = with_host_and_origin(&server, "GET /v1/stats", &host, &origin, "");
        assert_eq!(status, 200, "{origin}: {answer}");
    }
    assert_eq!(c.get("/v1/stats").0, 200);
}

/// The scheme of an `Authorization` header is case-insensitive (RFC 9110, 11.1): a client that
/// sends `BEARER` or `bearer`, or a dashboard client `basic`, is let in like one that sends
/// `Bearer`, not told that no token was sent.
#[test]
fn the_authorization_scheme_is_case_insensitive() {
    use base64::Engine as _;
    let db = Db::new(crate::support::Backend::Sqlite).unwrap();
    let server = Server::with(&db, config());
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let status = |path: &str, authorization: &str| {
        agent
            .get(&format!("{}{path}", server.url))
            .header("Authorization", authorization)
            .call()
            .unwrap()
            .status()
            .as_u16()
    };
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        assert_eq!(
            status("/v1/stats", &format!("{scheme} {WORKER}")),
            200,
            "{scheme}"
        );
        assert_eq!(
            status("/dashboard", &format!("{scheme} {WORKER}")),
            200,
            "{scheme}"
        );
    }
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("me:{ADMIN}"));
    for scheme in ["Basic", "basic", "BASIC"] {
        assert_eq!(
            status("/dashboard", &format!("{scheme} {basic}")),
            200,
            "{scheme}"
        );
    }
    assert_eq!(status("/v1/stats", &format!("Token {WORKER}")), 401);
}

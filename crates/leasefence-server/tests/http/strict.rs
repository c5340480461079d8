//! What the server takes as a body and a path is exactly one thing: one JSON object (nothing
//! after it, no key twice), uncompressed, no larger than the limit (refused at once when the
//! `Content-Length` says so), and path segments that decode to UTF-8 — each refusal in the
//! API's JSON, and none of them changes anything.

use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

use leasefence_server::ServerConfig;
use serde_json::Value;

use crate::support::{Server, backends};

/// Sends `request` whole on a new connection and returns the status and the JSON body of the
/// answer (read until the server closes or 5 s pass).
fn raw(server: &Server, request: &str) -> (u16, Value) {
    let addr = server.url.strip_prefix("http://").unwrap();
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    conn.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = conn.read(&mut buf) {
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&answer);
        if let Some((head, body)) = text.split_once("\r\n\r\n")
            && let Some(len) = head.lines().find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length: ")
                    .map(str::to_owned)
            })
            && body.len() >= len.trim().parse::<usize>().unwrap()
        {
            break;
        }
    }
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

backends! {
    fn a_body_is_one_json_object_with_each_key_once(db: &Db) {
        let server = Server::start(db);
        let c = server.client(None);
        let cases: [(&[u8], &str); 5] = [
            (br#"{"id":"x1"}{"id":"x2"}"#, "body"),
            (br#"{"id":"x1"} trailing"#, "body"),
            (br#"{"id":"x1","id":"x2"}"#, "id"),
            (br#"{"jobs":[{"id":"x1"},{"id":"x2","id":"x3"}]}"#, "jobs[1].id"),
            (br#"{"id":"x1","payload":{"a":1,"a":2}}"#, "payload.a"),
        ];
        for (body, field) in cases {
            let (status, answer) = c.post_raw("/v1/jobs", body);
            let shown = String::from_utf8_lossy(body);
            assert_eq!(status, 400, "{shown}: {answer}");
            assert_eq!(answer["error"], "bad_request", "{shown}: {answer}");
            assert_eq!(answer["field"], field, "{shown}: {answer}");
        }
        // Whitespace after the object is still one object.
        let (status, answer) = c.post_raw("/v1/jobs", b"{\"id\":\"ok\"}\r\n ");
        assert_eq!(status, 201, "{answer}");
        assert_eq!(db.count(), 1);
        assert!(db.row("x1").is_none() && db.row("x2").is_none() && db.row("x3").is_none());
    }

    fn a_compressed_body_is_415_and_changes_nothing(db: &Db) {
        let server = Server::start(db);
        let body = r#"{"id":"zipped"}"#;
        for encoding in ["gzip", "br", "deflate, gzip"] {
            let (status, answer) = raw(&server, &format!(
                "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
                 Content-Encoding: {encoding}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ));
            assert_eq!((status, answer["error"].as_str()), (415, Some("unsupported_encoding")), "{answer}");
        }
        // A second header cannot hide the first's coding.
        let (status, answer) = raw(&server, &format!(
            "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Encoding: identity\r\n\
             Content-Encoding: gzip\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ));
        assert_eq!((status, answer["error"].as_str()), (415, Some("unsupported_encoding")), "{answer}");
        assert_eq!(db.count(), 0);
        // `identity` is no encoding at all.
        let (status, answer) = raw(&server, &format!(
            "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Encoding: Identity\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ));
        assert_eq!(status, 201, "{answer}");
        assert!(db.row("zipped").is_some());
    }

    fn a_body_announced_too_large_is_413_before_it_is_sent(db: &Db) {
        let config = ServerConfig {
            max_body_bytes: 100,
            request_timeout: Duration::from_secs(20),
            ..ServerConfig::default()
        };
        let server = Server::with(db, config);
        // The client waits for `100 Continue` and sends one byte of the million it announced:
        // the answer must not wait for the rest (nor for the 20 s body timeout).
        let started = Instant::now();
        let (status, answer) = raw(&server,
            "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\n\
             Content-Length: 1000000\r\n\r\n{");
        assert_eq!((status, answer["error"].as_str()), (413, Some("too_large")), "{answer}");
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        // At the limit exactly, a body is taken.
        let frame = r#"{"id":"edge","payload":""}"#.len();
        let body = format!(r#"{{"id":"edge","payload":"{}"}}"#, "x".repeat(100 - frame));
        assert_eq!(body.len(), 100);
        let (status, answer) = server.client(None).post_raw("/v1/jobs", body.as_bytes());
        assert_eq!(status, 201, "{answer}");
        assert_eq!(db.count(), 1);
    }

    fn a_path_segment_that_is_not_utf8_is_a_json_400_naming_it(db: &Db) {
        let server = Server::start(db);
        let c = server.client(None);
        c.enqueue("j");
        let cases = [
            ("POST", "/v1/jobs/%ff/complete", "id"),
            ("GET", "/v1/jobs/%ff", "id"),
            ("GET", "/v1/jobs/%ff/history", "id"),
            ("POST", "/v1/fences/%ff/admit", "resource"),
            ("POST", "/v1/queues/%ff/pause", "name"),
            ("DELETE", "/v1/schedules/%C3%28", "name"),
        ];
        for (method, path, field) in cases {
            let (status, answer) = raw(&server, &format!(
                "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
            ));
            assert_eq!(status, 400, "{method} {path}: {answer}");
            assert_eq!(answer["error"], "bad_request", "{method} {path}: {answer}");
            assert_eq!(answer["field"], field, "{method} {path}: {answer}");
        }
        assert_eq!(db.count(), 1);
        let row = db.row("j").unwrap();
        assert_eq!((row.fence, row.owner), (0, None));
    }
}

backends! {
    fn names_come_back_under_their_own_keys(db: &Db) {
        let server = Server::start(db);
        let c = server.client(None);
        let (status, answer) = c.post_empty("/v1/queues/mail/pause");
        assert_eq!(status, 200, "{answer}");
        assert_eq!((answer["queue"].as_str(), answer["job_id"].as_str()), (Some("mail"), Some("mail")), "{answer}");
        let (status, answer) = c.post("/v1/fences/bucket%2Fa/admit", serde_json::json!({"fence": 3}));
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["resource"].as_str(), Some("bucket/a"), "{answer}");
        let schedule = serde_json::json!({"name": "nightly", "cron": "0 3 * * *"});
        let (status, answer) = c.post("/v1/schedules", schedule.clone());
        assert_eq!(status, 201, "{answer}");
        assert_eq!(answer["schedule"].as_str(), Some("nightly"), "{answer}");
        // A second add is refused, and says it is about a schedule.
        let (status, answer) = c.post("/v1/schedules", schedule);
        assert_eq!((status, answer["reason"].as_str()), (409, Some("known")), "{answer}");
        assert!(answer["message"].as_str().unwrap().contains("a schedule of that name exists"), "{answer}");
        let (status, answer) = c.delete("/v1/schedules/nightly");
        assert_eq!((status, answer["schedule"].as_str()), (200, Some("nightly")), "{answer}");
    }
}

//! Metrics, health and the OpenAPI document.

use std::collections::BTreeSet;

use serde_json::json;

use crate::support::{Db, Server, backends, wait_expired};

/// The samples of a Prometheus text (`openmetrics`: OpenMetrics 1.0, else the classic format):
/// `name{labels}` → value. Panics on a line that is neither a comment nor a sample, and on a
/// sample of a family whose `# TYPE` does not name it.
fn samples(text: &str, openmetrics: bool) -> std::collections::BTreeMap<String, f64> {
    assert_eq!(
        text.ends_with("# EOF\n"),
        openmetrics,
        "only OpenMetrics ends with # EOF"
    );
    let mut family = String::new();
    let mut out = std::collections::BTreeMap::new();
    for line in text.lines() {
        if line.starts_with('#') {
            let mut words = line.split(' ');
            assert_eq!(words.next(), Some("#"));
            let word = words.next();
            assert!(
                matches!(word, Some("HELP" | "TYPE" | "UNIT" | "EOF")),
                "{line}"
            );
            if word == Some("TYPE") {
                family = words.next().unwrap().to_owned();
            }
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        let name_end = series.find('{').unwrap_or(series.len());
        assert!(
            series[..name_end]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{line}"
        );
        if name_end < series.len() {
            assert!(series.ends_with('}'), "{line}");
        }
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("{line}"));
        let name = &series[..name_end];
        if !openmetrics {
            // Classic: a counter's family is its `_total` series; a histogram's series add a
            // suffix to the family.
            assert!(
                name == family
                    || ["_bucket", "_sum", "_count"]
                        .iter()
                        .any(|s| name == format!("{family}{s}")),
                "{line} is not of the family {family}"
            );
        }
        out.insert(series.to_owned(), value);
    }
    out
}

backends! {
    fn metrics_count_what_happened(db: &Db) {
        let server = Server::start(db);
        let c = server.client(None);
        for id in ["a", "b"] { c.enqueue(id); }
        let fa = c.claim("a", "A", 0.3);
        wait_expired(&c, "a");
        let fb = c.claim("a", "B", 60.0);
        assert_eq!(c.post("/v1/jobs/a/complete", json!({"owner": "A", "fence": fa})).0, 409);
        assert_eq!(c.post("/v1/jobs/a/renew", json!({"owner": "A", "fence": fa, "ttl": 5})).0, 409);
        assert_eq!(c.post("/v1/jobs/a/renew", json!({"owner": "B", "fence": fb, "ttl": 60})).0, 200);
        assert_eq!(c.post("/v1/jobs/a/complete", json!({"owner": "B", "fence": fb})).0, 200);
        // Classic text format by default; OpenMetrics when asked for.
        let (status, text, headers) = c.get_text("/metrics");
        assert_eq!(status, 200);
        assert!(headers["content-type"].to_str().unwrap().starts_with("text/plain; version=0.0.4"));
        assert!(text.contains("# TYPE leasefence_claims_total counter\n"), "{text}");
        let classic = samples(&text, false);
        let (status, text, headers) = c.get_text_accepting(
            "/metrics", "application/openmetrics-text; version=1.0.0,text/plain;q=0.5");
        assert_eq!(status, 200);
        assert!(headers["content-type"].to_str().unwrap().starts_with("application/openmetrics-text"));
        let m = samples(&text, true);
        // The same samples either way (but the scrape's own request, counted in between).
        for (series, value) in &m {
            if !series.starts_with("leasefence_requests_total{op=\"GET /metrics\"")
                && !series.contains("GET /metrics")
            {
                assert_eq!(classic.get(series), Some(value), "{series}");
            }
        }
        assert_eq!(m["leasefence_claims_total"], 2.0);
        assert_eq!(m["leasefence_completions_total"], 1.0);
        assert_eq!(m["leasefence_stale_writes_refused_total{op=\"complete\"}"], 1.0);
        assert_eq!(m["leasefence_stale_writes_refused_total{op=\"renew\"}"], 1.0);
        assert_eq!(m["leasefence_leases_lost_total"], 1.0);
        assert_eq!(m["leasefence_heartbeat_headroom_seconds_count"], 1.0);
        assert_eq!(m["leasefence_jobs{queue=\"default\",status=\"done\"}"], 1.0);
        assert_eq!(m["leasefence_jobs{queue=\"default\",status=\"ready\"}"], 1.0);
        assert_eq!(m["leasefence_store_up"], 1.0);
        assert_eq!(m["leasefence_requests_total{op=\"POST /v1/jobs/{id}/complete\",status=\"409\"}"], 1.0);
        assert!(m["leasefence_operation_duration_seconds_count{op=\"POST /v1/claims\"}"] >= 2.0);
    }

    fn batch_renewals_observe_the_heartbeat_headroom(db: &Db) {
        // Workers (`work --server`, HttpStore) heartbeat through POST /v1/renewals: the
        // headroom histogram must see those renews too, not only the single-job route's.
        let server = Server::start(db);
        let c = server.client(None);
        for id in ["a", "b"] { c.enqueue(id); }
        let fa = c.claim("a", "A", 60.0);
        let fb = c.claim("b", "B", 60.0);
        let (status, answer) = c.post("/v1/renewals", json!({"ttl": 60, "leases": [
            {"job_id": "a", "owner": "A", "fence": fa},
            {"job_id": "b", "owner": "B", "fence": fb},
            {"job_id": "b", "owner": "B", "fence": fb + 1},
        ]}));
        assert_eq!(status, 200, "{answer}");
        let (_, text, _) = c.get_text_accepting("/metrics", "application/openmetrics-text");
        let m = samples(&text, true);
        // Two renews taken (the refused one has no lease time left to measure), each with
        // most of its 60 s lease ahead.
        assert_eq!(m["leasefence_heartbeat_headroom_seconds_count"], 2.0, "{text}");
        assert!(m["leasefence_heartbeat_headroom_seconds_sum"] > 100.0, "{text}");
        assert_eq!(m["leasefence_stale_writes_refused_total{op=\"renew\"}"], 1.0);
    }
}

#[test]
fn the_openapi_document_lists_every_route() {
    let db = Db::new(crate::support::Backend::Sqlite).unwrap();
    let server = Server::start(&db);
    let (status, doc) = server.client(None).get("/v1/openapi.json");
    assert_eq!(status, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    let paths: BTreeSet<String> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, ops)| {
            ops.as_object()
                .unwrap()
                .keys()
                .map(move |m| format!("{} {path}", m.to_uppercase()))
        })
        .collect();
    let expected: BTreeSet<String> = [
        "POST /v1/jobs",
        "GET /v1/jobs",
        "GET /v1/jobs/{id}",
        "DELETE /v1/jobs/{id}",
        "GET /v1/jobs/{id}/history",
        "POST /v1/jobs/{id}/cancel",
        "POST /v1/jobs/{id}/retry",
        "POST /v1/claims",
        "POST /v1/jobs/{id}/renew",
        "POST /v1/jobs/{id}/complete",
        "POST /v1/jobs/{id}/fail",
        "POST /v1/jobs/{id}/release",
        "POST /v1/fences/{resource}/admit",
        "GET /v1/stats",
        "POST /v1/queues/{name}/pause",
        "POST /v1/queues/{name}/resume",
        "GET /healthz",
        "GET /readyz",
        "GET /metrics",
        "POST /v1/renewals",
        "POST /v1/completions",
        "GET /v1/clock",
        "GET /v1/schedules",
        "POST /v1/schedules",
        "DELETE /v1/schedules/{name}",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(paths, expected);
    let schemes = doc["components"]["securitySchemes"].as_object().unwrap();
    assert!(schemes.contains_key("worker") && schemes.contains_key("admin"));
    // Every route the document names answers something other than "no such route".
    for path in &expected {
        let (method, path) = path.split_once(' ').unwrap();
        let path = path
            .replace("{id}", "x")
            .replace("{name}", "q")
            .replace("{resource}", "r");
        let c = server.client(None);
        let (status, body) = match method {
            "GET" => c.get(&path),
            "DELETE" => c.delete(&path),
            _ => c.post_raw(&path, b"{}"),
        };
        assert!(
            status != 404
                || body["error"] != "not_found"
                || body["message"] != "no such route; see /v1/openapi.json",
            "{method} {path}: {status} {body}"
        );
    }
}

/// A scrape while the store cannot be read still answers 200 with the server's own counters,
/// without job counts, and says so: `leasefence_store_up` 0.
#[test]
fn metrics_are_served_while_the_store_cannot_be_read() {
    let db = Db::new(crate::support::Backend::Sqlite).unwrap();
    let server = Server::start(&db);
    let c = server.client(None);
    c.enqueue("a");
    c.claim("a", "A", 60.0);
    // The store's table gone from under it (a broken database stands in for one that is down).
    let raw = leasefence::rusqlite::Connection::open(&db.db).unwrap();
    raw.execute_batch("ALTER TABLE jobs RENAME TO jobs_gone")
        .unwrap();
    let (status, text, _) = c.get_text_accepting("/metrics", "application/openmetrics-text");
    assert_eq!(status, 200, "{text}");
    let m = samples(&text, true);
    assert_eq!(m["leasefence_store_up"], 0.0, "{text}");
    assert_eq!(m["leasefence_claims_total"], 1.0, "{text}");
    assert!(
        !m.keys().any(|k| k.starts_with("leasefence_jobs{")),
        "{text}"
    );
    // And back: the counts again, store_up 1.
    raw.execute_batch("ALTER TABLE jobs_gone RENAME TO jobs")
        .unwrap();
    let (status, text, _) = c.get_text_accepting("/metrics", "application/openmetrics-text");
    assert_eq!(status, 200, "{text}");
    let m = samples(&text, true);
    assert_eq!(m["leasefence_store_up"], 1.0, "{text}");
    assert_eq!(
        m["leasefence_jobs{queue=\"default\",status=\"leased\"}"], 1.0,
        "{text}"
    );
}

#[test]
fn health_and_readiness_answer_without_a_token() {
    let db = Db::new(crate::support::Backend::Sqlite).unwrap();
    let server = Server::start(&db);
    let c = server.client(None);
    assert_eq!(c.get("/readyz").0, 200);
    assert_eq!(c.get("/healthz").1, json!({"status": "ok"}));
}

//! `leasefence work --server URL`: the same worker — heartbeats, fenced writes, time limits,
//! signals — through `leasefence serve` instead of the database. A worker frozen past its lease
//! stores nothing after a takeover; a cancelled job's command is stopped.

#![cfg(unix)]

mod support;

use std::io::{BufRead as _, BufReader, Read as _};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::Sandbox;
use support::serving::{self, Serving};

const WORKER: &str = "work-server-worker-93e1";
const ADMIN: &str = "work-server-admin-17c4f";

/// `leasefence work --server URL ARGS…` with the worker token, without any database.
fn worker(sb: &Sandbox, url: &str, args: &[&str]) -> Child {
    serving::work_command(sb, url, WORKER, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for the worker to exit by itself; its status, stdout and stderr.
fn finish(mut child: Child) -> (i32, String, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "the worker did not stop by itself"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (mut out, mut err) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (child.wait().unwrap().code().unwrap(), out, err)
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn serve(sb: &Sandbox) -> Serving {
    Serving::start(
        sb,
        &[],
        &[
            ("LEASEFENCE_WORKER_TOKEN", WORKER),
            ("LEASEFENCE_ADMIN_TOKEN", ADMIN),
        ],
    )
}

/// `POST /v1/jobs` with the worker token, answered `status` (201 for one job, 200 for a batch).
fn enqueue(serving: &Serving, body: Value, status: u16) {
    let (got, answer) = serving.post("/v1/jobs", Some(WORKER), body);
    assert_eq!(got, status, "{answer}");
}

fn status(serving: &Serving, id: &str) -> Value {
    serving.get(&format!("/v1/jobs/{id}"), Some(WORKER)).1
}

#[test]
fn a_drained_queue_over_http_stores_every_result() {
    let sb = Sandbox::new();
    let serving = serve(&sb);
    let jobs: Vec<Value> = (1..=5)
        .map(|i| json!({"id": format!("j{i}"), "payload": format!("hello {i}")}))
        .collect();
    enqueue(&serving, json!({ "jobs": jobs }), 200);
    // The command sees no token: the worker's credentials are not the job's.
    let (code, out, err) = finish(worker(
        &sb,
        &serving.url,
        &[
            "--exec",
            r#"tr a-z A-Z; printf " %s" "${LEASEFENCE_WORKER_TOKEN:-no-token}""#,
            "--drain",
            "--concurrency",
            "2",
        ],
    ));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("stopped: 5 claimed, 5 completed"), "{out}");
    for i in 1..=5 {
        let state = sb.lf(&["--json", "state", &format!("j{i}")]).ok().json();
        assert_eq!(state["result"], format!("HELLO {i} no-token"));
        assert_eq!(state["done"], true);
    }
    assert!(!err.contains(WORKER), "the token is never echoed");
}

/// A result larger than the server takes (`--max-body-bytes`) can never be stored: the
/// attempt is recorded as failed, saying why (here the last attempt: dead), and the small
/// result of the job beside it is stored — not both left leased to expire and run again.
#[test]
fn a_result_larger_than_the_server_takes_fails_its_attempt() {
    let sb = Sandbox::new();
    let serving = Serving::start(
        &sb,
        &["--max-body-bytes", "4096"],
        &[
            ("LEASEFENCE_WORKER_TOKEN", WORKER),
            ("LEASEFENCE_ADMIN_TOKEN", ADMIN),
        ],
    );
    let jobs = json!([
        {"id": "big", "payload": "10000", "max_attempts": 1},
        {"id": "small", "payload": "10", "max_attempts": 1},
    ]);
    enqueue(&serving, json!({ "jobs": jobs }), 200);
    let (code, out, err) = finish(worker(
        &sb,
        &serving.url,
        &[
            "--exec",
            r#"head -c "$(cat)" /dev/zero | tr '\0' a"#,
            "--drain",
        ],
    ));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("stopped: 2 claimed, 1 completed, 0 retried, 1 dead"),
        "{out}\n{err}"
    );
    let small = sb.lf(&["--json", "state", "small"]).ok().json();
    assert_eq!(
        (&small["done"], small["result"].as_str().map(str::len)),
        (&json!(true), Some(10))
    );
    let big = sb.lf(&["--json", "state", "big"]).ok().json();
    let error = big["error"].as_str().unwrap_or_default();
    assert_eq!(
        (&big["status"], &big["fence"], &big["result"]),
        (&json!("dead"), &json!(1), &Value::Null),
        "{big}"
    );
    assert!(
        error.starts_with("the result could not be stored: ") && error.contains("limit"),
        "{error}"
    );
}

#[test]
fn a_frozen_http_worker_stores_nothing_after_a_takeover() {
    let sb = Sandbox::new();
    let serving = serve(&sb);
    enqueue(&serving, json!({ "id": "report" }), 201);
    let child = worker(
        &sb,
        &serving.url,
        &["--exec", "sleep 1; echo stale", "--ttl", "1", "--drain"],
    );
    wait_for("the worker holds the lease", || {
        status(&serving, "report")["status"] == "leased"
    });
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    wait_for("the lease ran out", || {
        status(&serving, "report")["status"] == "expired"
    });
    let (code, body) = serving.post(
        "/v1/claims",
        Some(WORKER),
        json!({"owner": "B", "ttl": 60, "job_id": "report"}),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["leases"][0]["fence"], 2);
    let (code, _) = serving.post(
        "/v1/jobs/report/complete",
        Some(WORKER),
        json!({"owner": "B", "fence": 2, "result": "fresh"}),
    );
    assert_eq!(code, 200);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    let (code, out, err) = finish(child);
    assert_eq!(code, 0, "{out}\n{err}");
    let state = sb.lf(&["--json", "state", "report"]).ok().json();
    assert_eq!(
        (state["result"].as_str(), state["fence"].as_i64()),
        (Some("fresh"), Some(2))
    );
    let history = sb.lf(&["--json", "history", "report"]).ok().json();
    assert!(history.to_string().contains("\"lost\""), "{history}");
    assert!(
        out.contains("1 leases lost") || !out.contains("0 stale writes refused"),
        "the worker saw its lease lost or its write refused: {out}"
    );
}

#[test]
fn a_job_cancelled_over_http_stops_its_command() {
    let sb = Sandbox::new();
    let serving = serve(&sb);
    enqueue(&serving, json!({ "id": "long" }), 201);
    let child = worker(
        &sb,
        &serving.url,
        &["--exec", "sleep 30", "--ttl", "1", "--drain"],
    );
    wait_for("the worker holds the lease", || {
        status(&serving, "long")["status"] == "leased"
    });
    assert_eq!(
        serving
            .post("/v1/jobs/long/cancel", Some(ADMIN), json!({}))
            .0,
        200
    );
    let started = Instant::now();
    let (code, out, err) = finish(child);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the command was stopped, not waited for"
    );
    assert!(out.contains("1 cancelled by an operator"), "{out}");
    let state = sb.lf(&["--json", "state", "long"]).ok().json();
    assert_eq!(
        (state["status"].as_str(), state["result"].as_str()),
        (Some("cancelled"), None)
    );
}

#[test]
fn sigterm_releases_the_running_job_for_another_worker() {
    let sb = Sandbox::new();
    let serving = serve(&sb);
    enqueue(&serving, json!({ "id": "r" }), 201);
    let mut child = worker(
        &sb,
        &serving.url,
        &["--exec", "sleep 30", "--shutdown-deadline", "0"],
    );
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    wait_for("the worker holds the lease", || {
        status(&serving, "r")["status"] == "leased"
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let mut out = String::new();
    let mut line = String::new();
    while stdout.read_line(&mut line).unwrap() > 0 {
        out.push_str(&line);
        line.clear();
    }
    let code = child.wait().unwrap().code().unwrap();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("1 released at shutdown"), "{out}");
    // Released with its fence kept: the next claim gets fence 2 at once.
    let job = status(&serving, "r");
    assert_eq!(
        (job["status"].as_str(), job["fence"].as_i64()),
        (Some("ready"), Some(1)),
        "{job}"
    );
    let (_, body) = serving.post("/v1/claims", Some(WORKER), json!({"owner": "B", "ttl": 5}));
    assert_eq!(body["leases"][0]["fence"], 2);
}

#[test]
fn bad_server_settings_are_refused() {
    let sb = Sandbox::new();
    let run = |args: &[&str]| support::Run::of(sb.dir.path(), args, None, &[]);
    run(&["work", "--server", "ftp://x", "--exec", "true"]).bad("`server`");
    run(&[
        "work",
        "--server",
        "http://127.0.0.1:9",
        "--exec",
        "true",
        "--scheduler",
    ])
    .bad("`--scheduler`");
    run(&[
        "--db",
        "x.db",
        "work",
        "--server",
        "http://127.0.0.1:9",
        "--exec",
        "true",
    ])
    .bad("`--server`");
}

/// A database exported for the other verbs (`LEASEFENCE_DB`) and `work --server`: refused, with
/// nothing claimed anywhere, in words that name the variable — not "give --db … or --server,
/// not both" to a user who gave no `--db`.
#[test]
fn a_database_from_the_environment_with_server_is_named_as_the_variable() {
    let sb = Sandbox::new();
    let db = sb.db();
    sb.lf(&["enqueue", "kept"]).ok();
    let run = support::Run::of(
        sb.dir.path(),
        &[
            "work",
            "--server",
            "http://127.0.0.1:9",
            "--exec",
            "true",
            "--drain",
        ],
        None,
        &[
            ("LEASEFENCE_DB", db.to_str().unwrap()),
            ("LEASEFENCE_WORKER_TOKEN", WORKER),
        ],
    );
    run.error("LEASEFENCE_DB");
    let fence: i64 = sb
        .conn()
        .query_row("SELECT fence FROM jobs WHERE id = 'kept'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(fence, 0, "nothing was claimed");
}

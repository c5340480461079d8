//! `leasefence serve` as an operator runs it: the address on stdout, tokens from a file or the
//! environment (never echoed), refusals of unsafe or bad settings (exit 2, changing nothing),
//! and a clean stop on SIGTERM; the jobs it serves read back through the CLI.

#![cfg(unix)]

mod support;

use serde_json::json;
use support::Sandbox;
use support::serving::Serving;

const WORKER: &str = "cli-worker-token-5d2e91";
const ADMIN: &str = "cli-admin-token-0b7f44a";

#[test]
fn serve_answers_and_stops_cleanly_on_sigterm() {
    let sb = Sandbox::new();
    let serving = Serving::start(&sb, &[], &[("LEASEFENCE_ADMIN_TOKEN", ADMIN)]);
    let (status, _) = serving.post("/v1/jobs", None, json!({"id": "j"}));
    assert_eq!(status, 401);
    let (status, _) = serving.post("/v1/jobs", Some(ADMIN), json!({"id": "j"}));
    assert_eq!(status, 201);
    let (status, body) = serving.post("/v1/claims", Some(ADMIN), json!({"owner": "w", "ttl": 60}));
    assert_eq!(status, 200, "{body}");
    let fence = body["leases"][0]["fence"].as_i64().unwrap();
    let (status, _) = serving.post(
        "/v1/jobs/j/complete",
        Some(ADMIN),
        json!({"owner": "w", "fence": fence, "result": "via http"}),
    );
    assert_eq!(status, 200);
    let (code, stderr) = serving.stop();
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("admin token required"), "{stderr}");
    assert!(stderr.contains("leasefence: stopped"), "{stderr}");
    assert!(
        !stderr.contains(ADMIN),
        "the token is never echoed: {stderr}"
    );
    // The CLI reads what the server stored.
    let state = sb.lf(&["--json", "state", "j"]).ok().json();
    assert_eq!(
        (
            state["owner"].as_str(),
            state["fence"].as_i64(),
            state["result"].as_str()
        ),
        (Some("w"), Some(1), Some("via http"))
    );
}

#[test]
fn a_worker_token_file_is_read_and_trimmed() {
    let sb = Sandbox::new();
    let file = sb.dir.path().join("worker.token");
    std::fs::write(&file, format!("  {WORKER}\n")).unwrap();
    let serving = Serving::start(&sb, &["--worker-token-file", file.to_str().unwrap()], &[]);
    let (status, _) = serving.post("/v1/jobs", Some(WORKER), json!({"id": "k"}));
    assert_eq!(status, 201);
    // No admin token: the admin routes are closed, even to the worker token.
    let (status, _) = serving.post("/v1/jobs/k/cancel", Some(WORKER), json!({}));
    assert_eq!(status, 403);
    let (code, stderr) = serving.stop();
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("admin routes refused"), "{stderr}");
    assert!(!stderr.contains(WORKER));
    assert_eq!(sb.lf(&["--json", "state", "k"]).ok().json()["done"], false);
}

#[test]
fn unsafe_or_bad_settings_are_refused_before_serving() {
    let sb = Sandbox::new();
    // Another address than loopback without a token.
    sb.lf(&["serve", "--bind", "0.0.0.0:0"]).bad("`bind`");
    // A token too short to be one; the error names it and never shows it.
    let run = support::Run::of(
        sb.dir.path(),
        &[
            "--db",
            sb.db().to_str().unwrap(),
            "serve",
            "--bind",
            "127.0.0.1:0",
        ],
        None,
        &[("LEASEFENCE_WORKER_TOKEN", "hunter2")],
    );
    run.bad("`worker token`");
    assert!(!run.stderr.contains("hunter2"), "{}", run.stderr);
    // The same token for workers and the admin would make every worker an admin.
    support::Run::of(
        sb.dir.path(),
        &[
            "--db",
            sb.db().to_str().unwrap(),
            "serve",
            "--bind",
            "127.0.0.1:0",
        ],
        None,
        &[
            ("LEASEFENCE_WORKER_TOKEN", "one-token-for-both-0000"),
            ("LEASEFENCE_ADMIN_TOKEN", "one-token-for-both-0000"),
        ],
    )
    .bad("`admin token`");
    // A missing token file names the file.
    sb.lf(&["serve", "--worker-token-file", "nope.token"])
        .bad("nope.token");
    // A host name is not an address: the error says what to give instead.
    sb.lf(&["serve", "--bind", "localhost:7399"])
        .bad("--bind")
        .bad("such as 127.0.0.1:7878");
    // Bad numbers name their flag.
    sb.lf(&["serve", "--connections", "0"]).bad("`connections`");
    sb.lf(&["serve", "--max-body-bytes", "0"])
        .bad("`max-body-bytes`");
    sb.lf(&["serve", "--request-timeout", "0"])
        .bad("`request-timeout`");
    // Too long to be a duration at all: refused by name, not a panic.
    sb.lf(&["serve", "--request-timeout", "1e30"])
        .bad("`request-timeout`");
    sb.lf(&["serve", "--synchronous", "fast"])
        .bad("`synchronous`");
    // SQLite's setting on a PostgreSQL target would be silently meaningless: refused before
    // any connection is made.
    support::Run::of(
        sb.dir.path(),
        &[
            "--db",
            "host=127.0.0.1 user=nobody dbname=nothing",
            "serve",
            "--synchronous",
            "normal",
        ],
        None,
        &[],
    )
    .bad("`synchronous`")
    .bad("SQLite file only");
    // A token given both in a file and in the environment: which one holds is not guessed.
    let file = sb.dir.path().join("worker.token");
    std::fs::write(&file, "from-the-file-000000000").unwrap();
    let run = support::Run::of(
        sb.dir.path(),
        &[
            "--db",
            sb.db().to_str().unwrap(),
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--worker-token-file",
            file.to_str().unwrap(),
        ],
        None,
        &[("LEASEFENCE_WORKER_TOKEN", "from-the-environment-00")],
    );
    run.bad("`worker token`")
        .bad("--worker-token-file and by LEASEFENCE_WORKER_TOKEN");
    assert!(
        !run.stderr.contains("from-the-file") && !run.stderr.contains("from-the-environment"),
        "{}",
        run.stderr
    );
    // A folder that does not exist: said, naming the database, and nothing is created.
    support::Run::of(
        sb.dir.path(),
        &[
            "--db",
            "no/such/folder/jobs.db",
            "serve",
            "--bind",
            "127.0.0.1:0",
        ],
        None,
        &[],
    )
    .bad("no/such/folder/jobs.db");
    assert!(!sb.dir.path().join("no").exists());
}

/// Runs `leasefence ARGS` with `var` set to `value` and returns its exit status and stderr; a
/// server that starts instead of refusing is killed after 20 s and the case fails, never hangs.
fn refused_with(
    dir: &std::path::Path,
    args: &[&str],
    var: &str,
    value: &std::ffi::OsStr,
) -> (i32, String) {
    use std::io::Read as _;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_leasefence"))
        .args(args)
        .current_dir(dir)
        .env_remove("LEASEFENCE_DB")
        .env_remove("LEASEFENCE_WORKER_TOKEN")
        .env_remove("LEASEFENCE_ADMIN_TOKEN")
        .env(var, value)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{var}={value:?}: serve started instead of refusing the token");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (status.code().unwrap_or(-1), stderr)
}

#[test]
fn a_token_variable_set_empty_or_not_utf8_is_refused_not_read_as_unset() {
    let sb = Sandbox::new();
    let db = sb.db();
    let args = [
        "--db",
        db.to_str().unwrap(),
        "serve",
        "--bind",
        "127.0.0.1:0",
    ];
    for var in ["LEASEFENCE_WORKER_TOKEN", "LEASEFENCE_ADMIN_TOKEN"] {
        let what = if var.contains("WORKER") {
            "`worker token`"
        } else {
            "`admin token`"
        };
        // Empty, as `LEASEFENCE_WORKER_TOKEN=$(cat missing)` leaves it: without a token every
        // route would be open.
        let (code, stderr) = refused_with(sb.dir.path(), &args, var, std::ffi::OsStr::new(""));
        assert_eq!(code, 2, "{stderr}");
        assert!(stderr.contains(what), "{stderr}");
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt as _;
            let bad = std::ffi::OsStr::from_bytes(b"\xff\xfeaaaaaaaaaaaaaaaaaaaa");
            let (code, stderr) = refused_with(sb.dir.path(), &args, var, bad);
            assert_eq!(code, 2, "{stderr}");
            assert!(
                stderr.contains(what) && stderr.contains("UTF-8"),
                "{stderr}"
            );
        }
    }
    // `work --server` reads its token the same way.
    let work = [
        "work",
        "--server",
        "http://127.0.0.1:9",
        "--exec",
        "true",
        "--drain",
    ];
    let (code, stderr) = refused_with(
        sb.dir.path(),
        &work,
        "LEASEFENCE_WORKER_TOKEN",
        std::ffi::OsStr::new(""),
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("`worker token`"), "{stderr}");
}

/// A SIGTERM sent the moment the address line is read — a supervisor that stops what it just
/// started — stops the server gracefully (exit 0, "stopped"): the handlers are in place before
/// that line is printed. (They were installed later, when the server first polled its
/// shutdown; a loaded machine let such a signal end the process by its default action.)
#[test]
fn a_sigterm_right_after_the_address_line_stops_the_server_gracefully() {
    let sb = Sandbox::new();
    for round in 0..5 {
        let serving = Serving::start(&sb, &[], &[]);
        let (code, stderr) = serving.stop();
        assert_eq!(code, 0, "round {round}: {stderr}");
        assert!(
            stderr.contains("leasefence: stopped"),
            "round {round}: {stderr}"
        );
    }
}

#[test]
fn serve_creates_a_missing_database_and_never_resets_one() {
    let sb = Sandbox::new();
    sb.lf(&["enqueue", "kept"]).ok();
    sb.lf(&["claim", "kept", "--owner", "a", "--ttl", "600"])
        .ok();
    // A new file next to it is created with its tables.
    let fresh = Sandbox {
        dir: tempfile::tempdir().unwrap(),
    };
    assert!(!fresh.db().exists());
    let serving = Serving::start(&fresh, &[], &[]);
    assert_eq!(serving.post("/v1/jobs", None, json!({"id": "n"})).0, 201);
    assert_eq!(serving.stop().0, 0);
    assert_eq!(fresh.lf(&["--json", "state", "n"]).ok().json()["fence"], 0);
    // An existing one keeps its rows and fences.
    let serving = Serving::start(&sb, &[], &[]);
    let (status, body) = serving.get("/v1/jobs/kept", None);
    assert_eq!(
        (status, body["fence"].as_i64(), body["owner"].as_str()),
        (200, Some(1), Some("a"))
    );
    assert_eq!(serving.stop().0, 0);
}

#[test]
fn with_json_the_address_line_is_an_object() {
    use std::io::BufRead as _;
    let sb = Sandbox::new();
    let db = sb.db();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_leasefence"))
        .args(["--json", "--db", db.to_str().unwrap()])
        .args(["serve", "--bind", "127.0.0.1:0"])
        .current_dir(sb.dir.path())
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
    let v: serde_json::Value = serde_json::from_str(line.trim()).expect("one JSON object");
    assert_eq!((&v["op"], &v["ok"]), (&json!("serve"), &json!(true)), "{v}");
    let url = v["url"].as_str().unwrap();
    assert!(url.starts_with("http://127.0.0.1:"), "{v}");
    assert_eq!(v["dashboard"], json!(format!("{url}/dashboard")), "{v}");
    // The address is the one it serves on; once it has answered, its stop signal is in place.
    let health = ureq::get(format!("{url}/healthz")).call().unwrap();
    assert_eq!(health.status(), 200);
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

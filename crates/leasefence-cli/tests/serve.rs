//! `leasefence serve` as an operator runs it: the address on stdout, tokens from a file or the
//! environment (never echoed), refusals of unsafe or bad settings (exit 2, changing nothing),
//! and a clean stop on SIGTERM; the jobs it serves read back through the CLI.

#![cfg(unix)]

mod support;

use std::io::{BufRead as _, BufReader, Read as _};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};
use support::Sandbox;

const WORKER: &str = "cli-worker-token-5d2e91";
const ADMIN: &str = "cli-admin-token-0b7f44a";

/// A running `leasefence serve` and its address.
struct Serving {
    child: Child,
    url: String,
}

impl Serving {
    /// `leasefence --db DB serve --bind 127.0.0.1:0 ARGS…` in `sb`, with `env` (and no token
    /// from this process's environment).
    fn start(sb: &Sandbox, args: &[&str], env: &[(&str, &str)]) -> Serving {
        let db = sb.db();
        let mut child = Command::new(env!("CARGO_BIN_EXE_leasefence"))
            .args([
                "--db",
                db.to_str().unwrap(),
                "serve",
                "--bind",
                "127.0.0.1:0",
            ])
            .args(args)
            .current_dir(sb.dir.path())
            .env_remove("LEASEFENCE_DB")
            .env_remove("LEASEFENCE_WORKER_TOKEN")
            .env_remove("LEASEFENCE_ADMIN_TOKEN")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("the first line names the address: {line:?}"))
            .to_owned();
        Serving { child, url }
    }

    fn post(&self, path: &str, token: Option<&str>, body: Value) -> (u16, Value) {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut req = agent.post(&format!("{}{path}", self.url));
        if let Some(t) = token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        let mut resp = req.send_json(body).unwrap();
        let status = resp.status().as_u16();
        (status, resp.body_mut().read_json().unwrap())
    }

    /// SIGTERM; the exit status and everything it wrote to stderr.
    fn stop(mut self) -> (i32, String) {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let status = self.child.wait().unwrap();
        let mut stderr = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        (status.code().expect("exited, not killed"), stderr)
    }
}

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
    // A missing token file names the file.
    sb.lf(&["serve", "--worker-token-file", "nope.token"])
        .bad("nope.token");
    // Bad numbers name their flag.
    sb.lf(&["serve", "--connections", "0"]).bad("`connections`");
    sb.lf(&["serve", "--request-timeout", "0"])
        .bad("`request-timeout`");
    sb.lf(&["serve", "--synchronous", "fast"])
        .bad("`synchronous`");
    // No database: said, with the hint to create one.
    let empty = tempfile::tempdir().unwrap();
    support::Run::of(empty.path(), &["serve", "--bind", "127.0.0.1:0"], None, &[])
        .bad("leasefence.db");
    assert!(
        !empty.path().join("leasefence.db").exists(),
        "serve creates no database"
    );
}

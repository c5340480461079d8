//! The dashboard in a real browser: headless Chromium, driven by Playwright
//! (`tests/browser/dashboard.test.mjs`), against a server over a known history — a takeover
//! whose stale write was refused, an expired and a live lease, dead jobs, a paused queue, XSS
//! payloads, a thousand ready jobs, a schedule and a fence-gate entry. The script signs in,
//! reads every page (axe-core finds no serious accessibility violation on any), filters, pages
//! through the thousand jobs, opens the takeover's timeline, checks the XSS payloads render
//! inert, performs every action with the admin token and is refused each without it, and
//! saves a screenshot of each page; this test then reads every action's effect back from
//! the store.
//!
//! It runs when `LEASEFENCE_TEST_BROWSER` is set (`.ci/run` installs Chromium and the
//! script's two npm packages, then sets it); otherwise it is reported as ignored, with the
//! reason — and with `CI` set, it runs and fails when the browser is missing.
//! `LEASEFENCE_SCREENSHOTS=docs/dashboard` keeps the screenshots there (how the README's are
//! made).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use leasefence::{JobId, Now, Observe, Schedule, Store};
use leasefence_server::ServerConfig;

use crate::dashboard::{ADMIN, WORKER, XSS_ID, arrange, direct, tokens};
use crate::support::{Backend, Db, Server};

/// The ready jobs the fixture adds to page through.
const READY: usize = 1000;

fn chromium() -> PathBuf {
    if let Ok(p) = std::env::var("LEASEFENCE_CHROMIUM") {
        return p.into();
    }
    for p in [
        "/usr/bin/chromium",
        "/usr/bin/chromium-browser",
        "/usr/bin/google-chrome",
    ] {
        if Path::new(p).exists() {
            return p.into();
        }
    }
    panic!("no Chromium: install Debian's `chromium` (or set LEASEFENCE_CHROMIUM); .ci/run does");
}

#[test]
#[cfg_attr(
    not(leasefence_browser),
    ignore = "LEASEFENCE_TEST_BROWSER is unset: the browser test needs Chromium and its npm packages"
)]
fn the_dashboard_in_a_real_browser() {
    let script_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    assert!(
        script_dir.join("node_modules/playwright-core").exists(),
        "the browser test's packages are missing: run `npm ci --prefix {}` (.ci/run does)",
        script_dir.display()
    );
    let db = Db::new(Backend::Sqlite).unwrap();
    let s = direct(&db);
    arrange(&s, READY);
    let nightly = Schedule::new("nightly", "0 3 * * *").unwrap();
    assert!(s.add_schedule(&nightly, Now::system()).unwrap());
    let srv = Server::with(
        &db,
        ServerConfig {
            tokens: tokens(),
            ..ServerConfig::default()
        },
    );
    let shots = match std::env::var("LEASEFENCE_SCREENSHOTS") {
        Ok(dir) => {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(dir);
            std::fs::create_dir_all(&dir).unwrap();
            dir
        }
        Err(_) => tempfile::tempdir().unwrap().keep(),
    };
    let started = Instant::now();
    let out = Command::new("node")
        .arg(script_dir.join("dashboard.test.mjs"))
        .current_dir(&script_dir)
        .env("LF_URL", &srv.url)
        .env("LF_ADMIN", ADMIN)
        .env("LF_WORKER", WORKER)
        .env("LF_XSS_ID", XSS_ID)
        .env("LF_CHROMIUM", chromium())
        .env("LF_SHOTS", &shots)
        .env("LF_READY", READY.to_string())
        .output()
        .expect("node runs (Debian's nodejs; .ci/run checks for it)");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the browser script failed:\n{report}");
    eprintln!("{report}(in {:.1?})", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(600));
    for page in [
        "overview",
        "jobs",
        "job",
        "queues",
        "schedules",
        "fences",
        "audit",
    ] {
        let png = shots.join(format!("{page}.png"));
        let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
        assert!(
            bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000,
            "{page}.png"
        );
    }
    // Every action the script took, read back through the test's own connection.
    let now = Now::system();
    let stuck = db.row("stuck").unwrap();
    assert_eq!(
        (stuck.owner, stuck.fence, stuck.until),
        (None, 1, 0.0),
        "released, fence kept"
    );
    let live = s
        .inspect(JobId::new("live").unwrap(), now)
        .unwrap()
        .unwrap();
    assert_eq!(
        (live.state.done, live.attempts, live.state.fence),
        (false, 0, 1),
        "cancelled, then retried"
    );
    assert!(db.row("binary").is_none(), "deleted");
    assert!(
        !db.row("dead-1").unwrap().done,
        "the mail queue's dead job retried"
    );
    assert!(
        db.row(XSS_ID).unwrap().done,
        "another queue's dead job left dead"
    );
    let queues = s.queues(now).unwrap();
    let paused = |name: &str| queues.iter().any(|q| q.name == name && q.paused);
    assert!(!paused("mail") && paused("default"));
    let log = s.audit_log(None, 20).unwrap();
    assert_eq!(log.len(), 7);
    assert!(
        log.iter().all(|e| e.actor == "ann from 127.0.0.1"),
        "{log:?}"
    );
    assert!(
        s.history(JobId::new("live").unwrap())
            .unwrap()
            .unwrap()
            .attempts
            .len()
            == 1
    );
}

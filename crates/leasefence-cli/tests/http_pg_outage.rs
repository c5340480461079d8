//! `leasefence work --server` behind `leasefence serve` on a private PostgreSQL cluster that
//! goes down for about a second while a command finishes: the completion is answered 503
//! (`unavailable`, nothing written, retryable) until the server is back. A worker on the
//! database itself tries an outcome write again for up to a ttl (docs/reliability.md,
//! "PostgreSQL server faults"); the HTTP worker must do the same, not give the result up and
//! run the job a second time under a new fence.

#[path = "../../leasefence/tests/support/cluster.rs"]
mod cluster;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster::{APP, Cluster};

const WORKER_TOKEN: &str = "outage-worker-token-5b2e81";
const ADMIN_TOKEN: &str = "outage-admin-token-0c47d2";

fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let since = Instant::now();
    while !cond() {
        assert!(since.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

fn get(url: &str, path: &str) -> (u16, serde_json::Value) {
    let mut resp = agent()
        .get(&format!("{url}{path}"))
        .header("Authorization", &format!("Bearer {WORKER_TOKEN}"))
        .call()
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.body_mut().read_json().unwrap_or_default())
}

fn post(url: &str, path: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
    let mut resp = agent()
        .post(&format!("{url}{path}"))
        .header("Authorization", &format!("Bearer {WORKER_TOKEN}"))
        .send_json(body)
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.body_mut().read_json().unwrap_or_default())
}

/// The job's row, read through the test's own connection: (fence, result, done).
fn row(cluster: &Cluster, id: &str) -> Option<(i64, Option<String>, bool)> {
    cluster
        .admin()
        .query_opt(
            "SELECT fence, result, done::bigint = 1 FROM leasefence.jobs WHERE id = $1",
            &[&id],
        )
        .unwrap()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
}

fn kill_term(child: &mut Child) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = child.wait();
}

#[test]
fn a_result_finished_while_postgres_restarts_behind_serve_is_stored_under_its_fence() {
    let Some(cluster) = Cluster::start_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pg = format!("postgres://{APP}@127.0.0.1:{}/postgres", cluster.port);
    let lf = env!("CARGO_BIN_EXE_leasefence");
    let init = Command::new(lf)
        .args(["--db", &pg, "init"])
        .env_remove("LEASEFENCE_DB")
        .output()
        .unwrap();
    assert!(init.status.success(), "{init:?}");

    let mut serve = Command::new(lf)
        .args([
            "--db",
            &pg,
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--connections",
            "2",
        ])
        .env_remove("LEASEFENCE_DB")
        .env("LEASEFENCE_WORKER_TOKEN", WORKER_TOKEN)
        .env("LEASEFENCE_ADMIN_TOKEN", ADMIN_TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(serve.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .expect("serve names its address first")
        .to_owned();

    let (code, _) = post(&url, "/v1/jobs", serde_json::json!({"id": "j"}));
    assert_eq!(code, 201);

    let gate = dir.path().join("go");
    let runs = dir.path().join("runs");
    let exec = format!(
        "echo \"$LEASEFENCE_FENCE\" >> {runs}; while [ ! -e {gate} ]; do sleep 0.02; done; \
         echo \"fence $LEASEFENCE_FENCE\"",
        runs = runs.display(),
        gate = gate.display()
    );
    let mut worker = Command::new(lf)
        .args(["work", "--server", &url, "--exec", &exec])
        .args(["--ttl", "10", "--poll", "0.05"])
        .env_remove("LEASEFENCE_DB")
        .env("LEASEFENCE_WORKER_TOKEN", WORKER_TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let output = Arc::new(Mutex::new(String::new()));
    let reader = {
        let (out, output) = (worker.stdout.take().unwrap(), output.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let mut all = output.lock().unwrap();
                all.push_str(&line);
                all.push('\n');
            }
        })
    };
    wait_for("the job to be claimed", Duration::from_secs(20), || {
        row(&cluster, "j").is_some_and(|(fence, _, _)| fence == 1)
    });

    // The database goes away; `serve` notices (its store connections fail and are dropped,
    // so that its answers are quick 503s, as they are while any worker polls it).
    cluster.pg_ctl(&["stop", "-m", "fast", "-w"]).unwrap();
    wait_for(
        "serve to answer 503 at once",
        Duration::from_secs(30),
        || {
            let asked = Instant::now();
            let (code, _) = get(&url, "/v1/clock");
            code == 503 && asked.elapsed() < Duration::from_millis(500)
        },
    );
    // The command finishes now, while the database is down: its completion meets 503s.
    std::fs::write(&gate, "").unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    cluster.pg_ctl(&["start", "-w", "-t", "60"]).unwrap();
    let back = Instant::now();

    wait_for("the job to be done", Duration::from_secs(40), || {
        row(&cluster, "j").is_some_and(|(_, _, done)| done)
    });
    let took = back.elapsed();
    kill_term(&mut worker);
    reader.join().unwrap();
    kill_term(&mut serve);

    let said = output.lock().unwrap().clone();
    let ran = std::fs::read_to_string(&runs).unwrap();
    assert_eq!(
        row(&cluster, "j"),
        Some((1, Some("fence 1\n".to_owned()), true)),
        "the result finished under fence 1 was given up while the database restarted \
         (done {:.1} s after it was back); runs: {ran:?}; the worker said:\n{said}",
        took.as_secs_f64()
    );
    assert_eq!(ran, "1\n", "the job ran once");
    assert!(
        !said.contains("could not record the outcome"),
        "the worker said:\n{said}"
    );
}

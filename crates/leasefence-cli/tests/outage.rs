//! A worker whose store goes away and comes back says so on stderr once each — the store
//! unreachable, with the reason, then answering again — instead of nothing (or a line per
//! retry), and goes on by itself.

#![cfg(unix)]

mod support;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use support::Sandbox;
use support::serving::{self, Serving};

const WORKER: &str = "outage-worker-5d1e";

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `serve` on `bind` (an address of a server stopped before, to come back on the same one).
fn serve_on(sb: &Sandbox, bind: &str) -> Serving {
    Serving::start_on(sb, bind, &[], &[("LEASEFENCE_WORKER_TOKEN", WORKER)])
}

fn done(sb: &Sandbox, id: &str) -> bool {
    let run = sb.lf(&["--json", "state", id]);
    run.code == 0 && run.json()["done"] == json!(true)
}

/// `leasefence work --server URL ARGS…`, the lines of one of its outputs (`stderr` or stdout)
/// gathered as they come, and the thread gathering them.
fn worker(
    sb: &Sandbox,
    url: &str,
    args: &[&str],
    stderr: bool,
) -> (Child, Arc<Mutex<String>>, std::thread::JoinHandle<()>) {
    let (out, err) = if stderr {
        (Stdio::null(), Stdio::piped())
    } else {
        (Stdio::piped(), Stdio::null())
    };
    let mut child = serving::work_command(sb, url, WORKER, args)
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap();
    let pipe: Box<dyn std::io::Read + Send> = if stderr {
        Box::new(child.stderr.take().unwrap())
    } else {
        Box::new(child.stdout.take().unwrap())
    };
    let text = Arc::new(Mutex::new(String::new()));
    let gathered = text.clone();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let mut all = gathered.lock().unwrap();
            all.push_str(&line.unwrap());
            all.push('\n');
        }
    });
    (child, text, reader)
}

#[test]
fn a_worker_says_once_when_its_server_goes_away_and_once_when_it_answers_again() {
    let sb = Sandbox::new();
    let first = Serving::start(&sb, &[], &[("LEASEFENCE_WORKER_TOKEN", WORKER)]);
    let url = first.url.clone();
    let bind = url.trim_start_matches("http://").to_owned();
    let (worker, stderr, reader) = worker(&sb, &url, &["--exec", "cat", "--poll", "0.05"], true);
    let said = |needle: &str| stderr.lock().unwrap().matches(needle).count();

    let enqueue = |serving: &Serving, id: &str| {
        let body = json!({"jobs": [{"id": id, "payload": id}]});
        assert_eq!(serving.post("/v1/jobs", Some(WORKER), body).0, 200);
    };
    enqueue(&first, "before");
    wait_for("the first job is done", || done(&sb, "before"));
    assert_eq!(said("cannot be reached"), 0, "{}", stderr.lock().unwrap());

    let (code, _) = first.stop();
    assert_eq!(code, 0);
    wait_for("the worker says the store cannot be reached", || {
        said("the store cannot be reached") == 1
    });
    // It keeps claiming every 50 ms meanwhile; it says so only once.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(said("cannot be reached"), 1, "{}", stderr.lock().unwrap());
    assert!(
        said("Connection refused") >= 1,
        "the reason: {}",
        stderr.lock().unwrap()
    );

    let second = serve_on(&sb, &bind);
    enqueue(&second, "after");
    wait_for("the job enqueued after the outage is done", || {
        done(&sb, "after")
    });
    wait_for("the worker says the store answers again", || {
        said("the store answers again") == 1
    });

    stop_worker(worker, reader);
    let all = stderr.lock().unwrap().clone();
    assert_eq!(
        (said("cannot be reached"), said("answers again")),
        (1, 1),
        "{all}"
    );
    assert!(!all.contains(WORKER), "the token is never echoed: {all}");
    second.stop();
}

/// A worker running job `id` through a server that then stops: the command waits for the file
/// `gate` and prints `echo` (a shell word list); the server's address to start it again on.
struct Cut {
    worker: Child,
    output: Arc<Mutex<String>>,
    reader: std::thread::JoinHandle<()>,
    bind: String,
    gate: std::path::PathBuf,
}

fn claimed_then_cut(sb: &Sandbox, id: &str, ttl: &str, stderr: bool, echo: &str) -> Cut {
    let first = Serving::start(sb, &[], &[("LEASEFENCE_WORKER_TOKEN", WORKER)]);
    let url = first.url.clone();
    let gate = sb.dir.path().join("go");
    let exec = format!(
        "while [ ! -e {0} ]; do sleep 0.02; done; echo {echo}",
        gate.display()
    );
    let (worker, output, reader) = worker(
        sb,
        &url,
        &["--exec", &exec, "--poll", "0.05", "--ttl", ttl],
        stderr,
    );
    let body = json!({"jobs": [{"id": id, "payload": ""}]});
    assert_eq!(first.post("/v1/jobs", Some(WORKER), body).0, 200);
    wait_for("the job to be claimed", || {
        first.get(&format!("/v1/jobs/{id}"), Some(WORKER)).1["fence"] == json!(1)
    });
    let (code, _) = first.stop();
    assert_eq!(code, 0);
    Cut {
        worker,
        output,
        reader,
        bind: url.trim_start_matches("http://").to_owned(),
        gate,
    }
}

/// SIGTERM to the worker: it exits 0; its output is gathered whole.
fn stop_worker(mut worker: Child, reader: std::thread::JoinHandle<()>) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(worker.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(worker.wait().unwrap().code(), Some(0));
    reader.join().unwrap();
}

/// A result finished while the server is gone cannot be recorded: the line says so, without the
/// library's "retry the call" (the worker has retried), and the job runs again — under a higher
/// fence — once the server is back and the lease has ended.
#[test]
fn a_result_that_cannot_be_recorded_says_the_job_runs_again_and_it_does() {
    let sb = Sandbox::new();
    // The first run waits for the test's go (the server stopped by then); later runs at once.
    let cut = claimed_then_cut(&sb, "r", "2", false, "\"fence $LEASEFENCE_FENCE\"");
    std::fs::write(&cut.gate, "").unwrap();
    let stdout = cut.output.clone();
    wait_for("the failed record to be reported", || {
        stdout
            .lock()
            .unwrap()
            .contains("error r (fence 1): could not record the outcome")
    });
    let line = stdout
        .lock()
        .unwrap()
        .lines()
        .find(|l| l.starts_with("error r (fence 1)"))
        .unwrap()
        .to_owned();
    assert!(
        line.ends_with("the job runs again once its lease ends"),
        "{line}"
    );
    assert!(!line.contains("retry the call"), "{line}");

    let second = serve_on(&sb, &cut.bind);
    wait_for("the job done again, under fence 2", || done(&sb, "r"));
    let state = sb.lf(&["--json", "state", "r"]).json();
    assert_eq!(
        (&state["fence"], &state["result"]),
        (&json!(2), &json!("fence 2\n"))
    );
    stop_worker(cut.worker, cut.reader);
    second.stop();
}

/// An outage while the worker's only thread runs a command (no claim to notice it) is said by
/// the heartbeat: once as its renewal fails, once as one is granted again; the job then
/// completes under its fence.
#[test]
fn an_outage_during_a_running_command_is_said_by_the_heartbeat() {
    let sb = Sandbox::new();
    let cut = claimed_then_cut(&sb, "h", "6", true, "done");
    let stderr = cut.output.clone();
    let said = |needle: &str| stderr.lock().unwrap().matches(needle).count();
    // The next renewal (every 2 s) fails: said once, while the command still runs.
    wait_for("the heartbeat to say the store cannot be reached", || {
        said("the store cannot be reached") == 1
    });
    let second = serve_on(&sb, &cut.bind);
    wait_for("the heartbeat to say the store answers again", || {
        said("the store answers again") == 1
    });
    std::fs::write(&cut.gate, "").unwrap();
    wait_for("the job to be done under fence 1", || done(&sb, "h"));
    let state = sb.lf(&["--json", "state", "h"]).json();
    assert_eq!(
        (&state["fence"], &state["result"]),
        (&json!(1), &json!("done\n"))
    );
    stop_worker(cut.worker, cut.reader);
    let all = stderr.lock().unwrap().clone();
    assert_eq!(
        (said("cannot be reached"), said("answers again")),
        (1, 1),
        "{all}"
    );
    assert!(!all.contains("retry the call"), "{all}");
    second.stop();
}

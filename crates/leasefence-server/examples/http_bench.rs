//! The HTTP API against the direct `Store`, side by side in one run (issue 15's targets):
//!
//! 1. claim → complete of single jobs, 4 threads, SQLite FULL: the direct `Store` (a
//!    `SqliteStore` per thread) against `leasefence serve` with 4 HTTP/1.1 keep-alive clients
//!    on loopback;
//! 2. batched claims and completions (`n` = 100 per request) against single ones, over HTTP;
//! 3. latency of a mixed open-loop load at a fixed request rate, SQLite NORMAL: p50, p99, max,
//!    measured from each request's scheduled start (so a slow answer delays the count, not
//!    the schedule).
//!
//! Rounds alternate between the subjects; medians with min–max over the rounds.
//!
//! `cargo run --release -p leasefence-server --example http_bench [-- --rounds N --jobs N --rate R --seconds S]`

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use leasefence::{
    AsyncOptions, AsyncStore, NewJob, Now, Owner, SqliteOptions, SqliteStore, Store, Synchronous,
    Ttl,
};
use leasefence_server::ServerConfig;
use serde_json::{Value, json};

struct Args {
    rounds: usize,
    jobs: usize,
    rate: f64,
    seconds: f64,
}

fn args() -> Args {
    let mut a = Args {
        rounds: 5,
        jobs: 2000,
        rate: 1000.0,
        seconds: 5.0,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let value = pair.get(1).map(String::as_str).unwrap_or("");
        match pair[0].as_str() {
            "--rounds" => a.rounds = value.parse().expect("--rounds N"),
            "--jobs" => a.jobs = value.parse().expect("--jobs N"),
            "--rate" => a.rate = value.parse().expect("--rate R"),
            "--seconds" => a.seconds = value.parse().expect("--seconds S"),
            other => panic!("unknown argument {other}"),
        }
    }
    a
}

/// A fresh database with `jobs` ready jobs.
fn fresh(jobs: usize, sync: Synchronous) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.db");
    let store = SqliteOptions::new().synchronous(sync).open(&path).unwrap();
    let batch: Vec<NewJob> = (0..jobs)
        .map(|i| NewJob::new(format!("job-{i:07}")).unwrap())
        .collect();
    store.enqueue_many(&batch).unwrap();
    (dir, path)
}

/// Jobs per second of claim → complete by `threads` direct stores.
fn direct(jobs: usize, threads: usize, sync: Synchronous) -> f64 {
    let (_dir, path) = fresh(jobs, sync);
    let start = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (path, start) = (path.clone(), Arc::clone(&start));
            std::thread::spawn(move || {
                let store = SqliteOptions::new().synchronous(sync).open(&path).unwrap();
                let owner = format!("direct-{t}");
                start.wait();
                loop {
                    match claim_retrying(&store, &owner) {
                        Some(lease) => while !complete_retrying(&store, &lease) {},
                        None => return,
                    }
                }
            })
        })
        .collect();
    start.wait();
    let t0 = Instant::now();
    for h in handles {
        h.join().unwrap();
    }
    jobs as f64 / t0.elapsed().as_secs_f64()
}

fn claim_retrying(store: &SqliteStore, owner: &str) -> Option<leasefence::Lease> {
    loop {
        match store.claim_next(
            Owner::new(owner).unwrap(),
            Now::system(),
            Ttl::new(60.0).unwrap(),
        ) {
            Ok(lease) => return lease,
            Err(e) if e.is_retryable() => continue,
            Err(e) => panic!("{e}"),
        }
    }
}

fn complete_retrying(store: &SqliteStore, lease: &leasefence::Lease) -> bool {
    match store.complete_lease(lease, Now::system(), "r") {
        Ok(done) => {
            assert!(done, "a fresh lease is current");
            true
        }
        Err(e) if e.is_retryable() => false,
        Err(e) => panic!("{e}"),
    }
}

/// A server on a loopback port over `path`; its address, and the handle that stops it.
fn serve(
    path: &std::path::Path,
    sync: Synchronous,
) -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<()>,
) {
    let path = path.to_str().unwrap().to_owned();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let options =
                AsyncOptions::new().sqlite(SqliteOptions::new().init(false).synchronous(sync));
            let store = AsyncStore::open(&path, options).await.unwrap();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            let router = leasefence_server::router(store, &ServerConfig::default());
            leasefence_server::serve(listener, router, async move {
                let _ = stop_rx.await;
            })
            .await
            .unwrap();
        });
    });
    (
        format!("http://{}", addr_rx.recv().unwrap()),
        stop_tx,
        thread,
    )
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

fn post(agent: &ureq::Agent, url: &str, body: Value) -> (u16, Value) {
    let mut resp = agent.post(url).send_json(body).unwrap();
    let status = resp.status().as_u16();
    (status, resp.body_mut().read_json().unwrap_or(Value::Null))
}

/// Jobs per second of claim → complete over HTTP by `clients`, `batch` jobs per request.
fn http(jobs: usize, clients: usize, batch: usize, sync: Synchronous) -> f64 {
    let (_dir, path) = fresh(jobs, sync);
    let (base, stop, thread) = serve(&path, sync);
    let start = Arc::new(Barrier::new(clients + 1));
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let (base, start) = (base.clone(), Arc::clone(&start));
            std::thread::spawn(move || {
                let agent = agent();
                let owner = format!("http-{c}");
                start.wait();
                loop {
                    let (status, body) = post(&agent, &format!("{base}/v1/claims"), json!({"owner": owner, "ttl": 60, "n": batch}));
                    if status == 503 {
                        continue;
                    }
                    let leases = body["leases"].as_array().cloned().unwrap_or_default();
                    if leases.is_empty() {
                        return;
                    }
                    if batch == 1 {
                        let l = &leases[0];
                        let url = format!("{base}/v1/jobs/{}/complete", l["job_id"].as_str().unwrap());
                        while post(&agent, &url, json!({"owner": owner, "fence": l["fence"], "result": "r"})).0 == 503 {}
                    } else {
                        let items: Vec<Value> = leases
                            .iter()
                            .map(|l| json!({"job_id": l["job_id"], "owner": owner, "fence": l["fence"], "result": "r"}))
                            .collect();
                        while post(&agent, &format!("{base}/v1/completions"), json!({"completions": items})).0 == 503 {}
                    }
                }
            })
        })
        .collect();
    start.wait();
    let t0 = Instant::now();
    for h in handles {
        h.join().unwrap();
    }
    let rate = jobs as f64 / t0.elapsed().as_secs_f64();
    let _ = stop.send(());
    thread.join().unwrap();
    rate
}

/// Latencies (ms) of a mixed open-loop load at `rate` requests/s for `seconds`: enqueue,
/// claim, complete and read, a quarter each.
fn mixed(rate: f64, seconds: f64, sync: Synchronous) -> (Vec<f64>, usize) {
    let (_dir, path) = fresh(2000, sync);
    let (base, stop, thread) = serve(&path, sync);
    let clients = 32;
    let per_client = rate / clients as f64;
    let total = (rate * seconds) as usize;
    let leases: Arc<Mutex<Vec<(String, i64, String)>>> = Arc::default();
    let next_id = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now() + Duration::from_millis(100);
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let (base, leases, next_id) = (base.clone(), Arc::clone(&leases), Arc::clone(&next_id));
            std::thread::spawn(move || {
                let agent = agent();
                let owner = format!("mix-{c}");
                let mut latencies = Vec::new();
                let count = total / clients;
                for i in 0..count {
                    // Client c's i-th request is due at (i + c/clients) / per_client seconds.
                    let due = t0
                        + Duration::from_secs_f64(
                            (i as f64 + c as f64 / clients as f64) / per_client,
                        );
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    match (i + c) % 4 {
                        0 => {
                            let id = format!("new-{}", next_id.fetch_add(1, Ordering::Relaxed));
                            post(&agent, &format!("{base}/v1/jobs"), json!({"id": id}));
                        }
                        1 => {
                            let (_, body) = post(
                                &agent,
                                &format!("{base}/v1/claims"),
                                json!({"owner": owner, "ttl": 60}),
                            );
                            if let Some(l) = body["leases"].get(0) {
                                leases.lock().unwrap().push((
                                    l["job_id"].as_str().unwrap().to_owned(),
                                    l["fence"].as_i64().unwrap(),
                                    owner.clone(),
                                ));
                            }
                        }
                        2 => {
                            let held = leases.lock().unwrap().pop();
                            if let Some((id, fence, holder)) = held {
                                post(
                                    &agent,
                                    &format!("{base}/v1/jobs/{id}/complete"),
                                    json!({"owner": holder, "fence": fence, "result": "r"}),
                                );
                            } else {
                                let _ = agent.get(&format!("{base}/v1/stats")).call();
                            }
                        }
                        _ => {
                            let _ = agent
                                .get(&format!("{base}/v1/jobs/job-{:07}", i % 2000))
                                .call();
                        }
                    }
                    latencies.push(due.elapsed().as_secs_f64() * 1000.0);
                }
                latencies
            })
        })
        .collect();
    let mut all: Vec<f64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort_by(f64::total_cmp);
    let _ = stop.send(());
    thread.join().unwrap();
    let n = all.len();
    (all, n)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn spread(v: &[f64]) -> String {
    let (lo, hi) = (
        v.iter().copied().fold(f64::MAX, f64::min),
        v.iter().copied().fold(0.0, f64::max),
    );
    format!("{lo:.0}–{hi:.0}")
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let a = args();
    let (mut d, mut h1, mut hb) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..a.rounds {
        d.push(direct(a.jobs, 4, Synchronous::Full));
        h1.push(http(a.jobs, 4, 1, Synchronous::Full));
        hb.push(http(a.jobs * 5, 4, 100, Synchronous::Full));
        eprintln!(
            "round {}: direct {:.0}/s, http {:.0}/s, http batched {:.0}/s",
            round + 1,
            d[round],
            h1[round],
            hb[round]
        );
    }
    let (sd, sh1, shb) = (spread(&d), spread(&h1), spread(&hb));
    let (md, mh1, mhb) = (median(&mut d), median(&mut h1), median(&mut hb));
    println!(
        "| subject (SQLite FULL, 4 threads / clients, claim → complete) | jobs/s median | min–max |"
    );
    println!("|---|---|---|");
    println!("| direct `Store` (a SqliteStore per thread) | {md:.0} | {sd} |");
    println!("| HTTP, one job per request | {mh1:.0} | {sh1} |");
    println!("| HTTP, 100 jobs per claim and per completion | {mhb:.0} | {shb} |");
    println!();
    println!(
        "HTTP ÷ direct: {:.2}×; batched ÷ single over HTTP: {:.1}×",
        mh1 / md,
        mhb / mh1
    );
    let (lat, n) = mixed(a.rate, a.seconds, Synchronous::Normal);
    println!();
    println!(
        "Mixed open-loop load, SQLite NORMAL, {} requests at {:.0}/s: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        n,
        a.rate,
        pct(&lat, 0.5),
        pct(&lat, 0.99),
        lat[n - 1]
    );
}

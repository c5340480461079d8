//! The dashboard's pages with a million jobs in the store (issue 16's target: every page
//! renders in at most 100 ms of server time, from index-backed queries only).
//!
//! Builds a store of `--jobs` jobs (default 1,000,000) over four queues: 90 % completed, 8 %
//! ready, 1 % dead, 0.5 % scheduled, and a few hundred leased, expired and retrying, with a
//! takeover whose stale write was refused. Then asks a real server on loopback for each page
//! `--runs` times (after 3 warm-ups) and reports the server time of each — the `Server-Timing`
//! the dashboard sends (store calls and rendering, not the network) — as median, p90 and max.
//!
//! `cargo run --release -p leasefence-server --example dashboard_bench [-- --jobs N --runs N --pg]`
//! (`--pg`: on the PostgreSQL of `LEASEFENCE_TEST_PG` instead of an SQLite file; `--keep`:
//! leave its schema, to look at the plans).

use std::time::{Duration, Instant};

use leasefence::{
    AnyOptions, AnyStore, AsyncOptions, AsyncStore, BatchSize, NewJob, Now, Owner, PgOptions,
    SqliteOptions, Store, Synchronous, Ttl,
};
use leasefence_server::{ServerConfig, Token, Tokens};

const ADMIN: &str = "bench-admin-token-0123456789";

struct Args {
    jobs: usize,
    runs: usize,
    pg: bool,
    keep: bool,
}

fn args() -> Args {
    let mut a = Args {
        jobs: 1_000_000,
        runs: 20,
        pg: false,
        keep: false,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut it = argv.iter();
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--jobs" => a.jobs = it.next().and_then(|v| v.parse().ok()).expect("--jobs N"),
            "--runs" => a.runs = it.next().and_then(|v| v.parse().ok()).expect("--runs N"),
            "--pg" => a.pg = true,
            "--keep" => a.keep = true,
            other => panic!("unknown argument {other}"),
        }
    }
    a
}

/// The bulk of the jobs, straight into the table by one statement per 100,000 (the triggers
/// count them as any write would); the rest through the library.
fn fill(s: &AnyStore, db: &str, jobs: usize) {
    let started = Instant::now();
    let now = Now::system().seconds();
    let bulk = jobs - jobs / 100; // the last 1 % through the library
    let step = 100_000;
    for from in (0..bulk).step_by(step) {
        let to = (from + step).min(bulk);
        // Of each 100: 0..90 completed, 90..98 ready, 98..99 dead, 99 scheduled.
        let values = format!(
            "SELECT 'job-' || printf('%08d', i), \
                    CASE WHEN i % 100 < 90 OR i % 100 = 98 THEN 'w' END, \
                    CASE WHEN i % 100 < 90 OR i % 100 = 98 THEN {now} - 3600 ELSE 0 END, \
                    CASE WHEN i % 100 < 90 OR i % 100 = 98 THEN 1 ELSE 0 END, \
                    CASE WHEN i % 100 < 90 THEN 'ok' END, \
                    CASE WHEN i % 100 < 90 OR i % 100 = 98 THEN 1 ELSE 0 END, \
                    CASE WHEN i % 100 < 90 THEN 'completed' WHEN i % 100 = 98 THEN 'dead' END, \
                    CASE WHEN i % 100 < 90 OR i % 100 = 98 THEN {now} - 3600 END, \
                    CASE WHEN i % 100 = 99 THEN {now} + 86400 ELSE 0 END, \
                    {now} - 7200 + i * 0.001, \
                    CASE i % 4 WHEN 0 THEN 'default' WHEN 1 THEN 'mail' WHEN 2 THEN 'reports' ELSE 'sync' END, \
                    CASE WHEN i % 100 < 90 OR i % 100 = 98 THEN 1 ELSE 0 END"
        );
        let insert = "INSERT INTO jobs (id, owner, until, fence, result, done, outcome, \
                      finished_at, not_before, enqueued_at, queue, attempts) ";
        match s.as_postgres() {
            None => {
                let c = leasefence::rusqlite::Connection::open(db).expect("the file");
                c.execute_batch(&format!(
                    "PRAGMA synchronous = OFF; \
                     WITH RECURSIVE n(i) AS (SELECT {from} UNION ALL SELECT i + 1 FROM n WHERE i + 1 < {to}) \
                     {insert}{values} FROM n"
                ))
                .expect("bulk insert");
            }
            Some(pg) => {
                let mut c = leasefence::postgres::Client::connect(db, leasefence::postgres::NoTls)
                    .expect("the database");
                c.batch_execute(&format!(
                    "SET search_path TO {}; {insert}{} FROM generate_series({from}, {}) AS g(i)",
                    pg.schema(),
                    values.replace("printf('%08d', i)", "lpad(i::text, 8, '0')"),
                    to - 1
                ))
                .expect("bulk insert");
            }
        }
    }
    // The rest as workers make them: ready jobs, then leases live, expired, retrying, and a
    // takeover whose stale complete is refused.
    let rest: Vec<NewJob> = (bulk..jobs)
        .map(|i| {
            NewJob::new(format!("job-{i:08}"))
                .unwrap()
                .queue("mail")
                .unwrap()
        })
        .collect();
    for chunk in rest.chunks(5000) {
        s.enqueue_many(chunk).unwrap();
    }
    let t = Now::system();
    let w = Owner::new("bench-worker").unwrap();
    let live = s
        .claim_batch(w, t, Ttl::new(600.0).unwrap(), BatchSize::new(200).unwrap())
        .unwrap();
    let short = s
        .claim_batch(w, t, Ttl::new(0.5).unwrap(), BatchSize::new(300).unwrap())
        .unwrap();
    let failing = s
        .claim_batch(w, t, Ttl::new(600.0).unwrap(), BatchSize::new(100).unwrap())
        .unwrap();
    for l in &failing {
        s.fail(
            l,
            t,
            "upstream 502",
            Some(Now::new(t.seconds() + 3600.0).unwrap()),
        )
        .unwrap();
    }
    std::thread::sleep(Duration::from_millis(600));
    let later = Now::system();
    let taken = s
        .claim_next(
            Owner::new("bench-other").unwrap(),
            later,
            Ttl::new(600.0).unwrap(),
        )
        .unwrap()
        .unwrap();
    if let Some(stale) = short.iter().find(|l| l.job_id == taken.job_id) {
        assert!(!s.complete_lease(stale, later, "late").unwrap());
    }
    if let Some(pg) = s.as_postgres() {
        // What autovacuum does after a bulk load: without statistics the planner guesses the
        // sizes of the partial indexes, and may walk the wrong one.
        let mut c = leasefence::postgres::Client::connect(db, leasefence::postgres::NoTls).unwrap();
        c.batch_execute(&format!(
            "SET search_path TO {}; ANALYZE jobs; ANALYZE attempts",
            pg.schema()
        ))
        .unwrap();
    }
    let stats = s.stats(Now::system()).unwrap();
    eprintln!(
        "filled {} jobs in {:.0?}: {stats:?} ({} live leases held)",
        stats.total(),
        started.elapsed(),
        live.len()
    );
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let a = args();
    let dir = tempfile::tempdir().unwrap();
    let (db, options) = if a.pg {
        let url = std::env::var("LEASEFENCE_TEST_PG").expect("--pg needs LEASEFENCE_TEST_PG");
        let schema = format!("lf_dash_bench_{}", std::process::id());
        (
            url,
            AnyOptions::new().postgres(PgOptions::new().schema(&schema)),
        )
    } else {
        let path = dir.path().join("dash.db");
        (
            path.to_str().unwrap().to_owned(),
            AnyOptions::new().sqlite(SqliteOptions::new().synchronous(Synchronous::Off)),
        )
    };
    let loader = options.open(&db).unwrap();
    fill(&loader, &db, a.jobs);
    let schema = loader.as_postgres().map(|p| p.schema().to_owned());
    drop(loader);

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut async_options = AsyncOptions::new().connections(4);
    if let Some(schema) = &schema {
        async_options = async_options.postgres(PgOptions::new().schema(schema));
    }
    let store = runtime
        .block_on(AsyncStore::open(&db, async_options))
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let config = ServerConfig {
        tokens: Tokens {
            worker: None,
            admin: Some(Token::new(ADMIN, "admin").unwrap()),
        },
        ..ServerConfig::default()
    };
    let router = leasefence_server::router(store, &config);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = runtime.spawn(leasefence_server::serve(listener, router, async {
        let _ = stopped.await;
    }));

    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let pages = [
        ("overview", "/dashboard".to_owned()),
        ("live counts (the poll)", "/dashboard/live".to_owned()),
        ("jobs, newest first", "/dashboard/jobs".to_owned()),
        (
            "jobs, oldest first",
            "/dashboard/jobs?order=oldest".to_owned(),
        ),
        (
            "jobs, status=ready",
            "/dashboard/jobs?status=ready".to_owned(),
        ),
        (
            "jobs, status=dead (sparse)",
            "/dashboard/jobs?status=dead".to_owned(),
        ),
        (
            "jobs, status=leased (sparser)",
            "/dashboard/jobs?status=leased".to_owned(),
        ),
        ("jobs, queue=mail", "/dashboard/jobs?queue=mail".to_owned()),
        (
            "jobs, owner (none match)",
            "/dashboard/jobs?owner=nobody".to_owned(),
        ),
        ("jobs, id prefix", "/dashboard/jobs?id=job-0050".to_owned()),
        ("jobs, page 2 (cursor)", String::new()),
        (
            "job detail",
            format!("/dashboard/jobs/job-{:08}", a.jobs / 2),
        ),
        ("queues", "/dashboard/queues".to_owned()),
        ("schedules", "/dashboard/schedules".to_owned()),
        ("fence gate", "/dashboard/fences".to_owned()),
        ("audit log", "/dashboard/audit".to_owned()),
    ];
    let get = |path: &str| -> (u16, f64, String) {
        let mut r = agent
            .get(&format!("{url}{path}"))
            .header("Authorization", &format!("Bearer {ADMIN}"))
            .call()
            .unwrap();
        let timing = r
            .headers()
            .get("server-timing")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("app;dur="))
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN);
        (
            r.status().as_u16(),
            timing,
            r.body_mut().read_to_string().unwrap_or_default(),
        )
    };
    // page 2: the first page's cursor
    let (_, _, first) = get("/dashboard/jobs");
    let next = first
        .find("\" rel=\"next\"")
        .and_then(|end| {
            first[..end]
                .rfind("href=\"")
                .map(|s| first[s + 6..end].replace("&#38;", "&"))
        })
        .expect("a next page");
    println!(
        "| page ({} jobs, {}) | median ms | p90 ms | max ms |",
        a.jobs,
        if a.pg { "PostgreSQL" } else { "SQLite" }
    );
    println!("|---|---|---|---|");
    let mut worst: f64 = 0.0;
    for (name, path) in &pages {
        let path = if path.is_empty() {
            next.as_str()
        } else {
            path.as_str()
        };
        for _ in 0..3 {
            let (status, _, body) = get(path);
            assert_eq!(status, 200, "{path}: {body}");
        }
        let mut times: Vec<f64> = (0..a.runs).map(|_| get(path).1).collect();
        times.sort_by(f64::total_cmp);
        let (median, p90, max) = (
            percentile(&times, 0.5),
            percentile(&times, 0.9),
            times[times.len() - 1],
        );
        worst = worst.max(max);
        println!("| {name} | {median:.2} | {p90:.2} | {max:.2} |");
    }
    println!("\nslowest page, slowest run: {worst:.2} ms (target: at most 100 ms)");
    stop.send(()).ok();
    runtime.block_on(server).unwrap().unwrap();
    if let Some(schema) = schema
        && !a.keep
        && let Ok(url) = std::env::var("LEASEFENCE_TEST_PG")
        && let Ok(mut c) = leasefence::postgres::Client::connect(&url, leasefence::postgres::NoTls)
    {
        let _ = c.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"));
    }
}

//! The async worker's outcome writes whose connection is lost at the worst moment, provoked by
//! a proxy that speaks enough of PostgreSQL's wire protocol to pick one statement: the
//! completion or failure **landed** (committed) and only its answer is lost — the worker tries
//! again, is refused (the job is no longer held), reads the job back and reports what it
//! stored; or the statement is lost **before** reaching the server and the job is taken over
//! meanwhile — the worker reports the stale write refused, and nothing of it is stored.
//! Every case reads the job back through an independent connection.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasefence::postgres::config::Host;
use leasefence::{
    AsyncJob, AsyncOptions, AsyncStore, AsyncWorker, Backoff, JobId, JobOutcome, NewJob, Owner,
    Status, Store, Ttl, WorkerStats,
};
use tokio::sync::mpsc;

use crate::common::{PgDb, Probe};

/// Where the proxy drops the chosen statement's connection.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Cut {
    /// After the server committed it and answered: the answer is withheld.
    AfterCommit,
    /// Before the server sees it: it never runs.
    BeforeSent,
}

/// A TCP proxy in front of the test's PostgreSQL server. While armed, the first statement
/// whose SQL starts with `marker` (bound on any connection) is cut as `cut` says: both sides of
/// its connection are shut, once. Every other byte is passed through as is.
struct Proxy {
    port: u16,
    state: Arc<ProxyState>,
}

struct ProxyState {
    marker: &'static str,
    cut: Cut,
    armed: AtomicBool,
    /// How many statements were cut (the fault happened: at most once).
    cuts: AtomicUsize,
    /// Runs when a statement is cut, before its connection is shut.
    on_cut: Box<dyn Fn() + Send + Sync>,
}

impl Proxy {
    fn start(
        upstream: String,
        marker: &'static str,
        cut: Cut,
        on_cut: impl Fn() + Send + Sync + 'static,
    ) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(ProxyState {
            marker,
            cut,
            armed: AtomicBool::new(true),
            cuts: AtomicUsize::new(0),
            on_cut: Box::new(on_cut),
        });
        let s = state.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let server = TcpStream::connect(&upstream).expect("the proxy reaches PostgreSQL");
                let conn = Arc::new(Conn {
                    client,
                    server,
                    statements: Mutex::default(),
                    target: AtomicBool::new(false),
                });
                let (up, down) = (conn.clone(), s.clone());
                let s2 = s.clone();
                std::thread::spawn(move || up.client_to_server(&down));
                std::thread::spawn(move || conn.server_to_client(&s2));
            }
        });
        Proxy { port, state }
    }

    fn cuts(&self) -> usize {
        self.state.cuts.load(Ordering::SeqCst)
    }
}

/// One proxied connection.
struct Conn {
    client: TcpStream,
    server: TcpStream,
    /// The SQL of each statement the client prepared, by name (`Parse`).
    statements: Mutex<std::collections::HashMap<String, String>>,
    /// The statement bound last is the armed one (set before its `Bind` is passed on, so
    /// before the server can answer it).
    target: AtomicBool,
}

/// The next whole message in `buf` (`typed`: a type byte first; the startup message has
/// none), taken out of it.
fn next_message(buf: &mut Vec<u8>, typed: bool) -> Option<Vec<u8>> {
    let at = usize::from(typed);
    if buf.len() < at + 4 {
        return None;
    }
    let len = u32::from_be_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
    (buf.len() >= at + len).then(|| buf.drain(..at + len).collect())
}

/// The NUL-terminated strings at the start of a message's body.
fn c_strings(body: &[u8], n: usize) -> Vec<String> {
    body.split(|b| *b == 0)
        .take(n)
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

impl Conn {
    fn shut(&self) {
        let _ = self.client.shutdown(Shutdown::Both);
        let _ = self.server.shutdown(Shutdown::Both);
    }

    fn client_to_server(&self, s: &ProxyState) {
        let (mut from, mut to) = (&self.client, &self.server);
        let (mut buf, mut started, mut chunk) = (Vec::new(), false, [0u8; 8192]);
        loop {
            let n = match from.read(&mut chunk) {
                Ok(0) | Err(_) => return self.shut(),
                Ok(n) => n,
            };
            buf.extend_from_slice(&chunk[..n]);
            while let Some(message) = next_message(&mut buf, started) {
                if started {
                    match message[0] {
                        b'P' => {
                            let [name, sql] = <[String; 2]>::try_from(c_strings(&message[5..], 2))
                                .expect("Parse: a name and a query");
                            self.statements.lock().unwrap().insert(name, sql);
                        }
                        b'B' => {
                            let names = c_strings(&message[5..], 2);
                            let statements = self.statements.lock().unwrap();
                            let sql = statements.get(&names[1]).map_or("", String::as_str);
                            let hit = s.armed.load(Ordering::SeqCst) && sql.starts_with(s.marker);
                            if hit && s.cut == Cut::BeforeSent {
                                s.armed.store(false, Ordering::SeqCst);
                                (s.on_cut)();
                                s.cuts.fetch_add(1, Ordering::SeqCst);
                                return self.shut();
                            }
                            self.target.store(hit, Ordering::SeqCst);
                        }
                        b'Q' => self.target.store(false, Ordering::SeqCst),
                        _ => {}
                    }
                }
                started = true;
                if to.write_all(&message).is_err() {
                    return self.shut();
                }
            }
        }
    }

    fn server_to_client(&self, s: &ProxyState) {
        let (mut from, mut to) = (&self.server, &self.client);
        let (mut buf, mut held, mut chunk) = (Vec::new(), Vec::new(), [0u8; 8192]);
        loop {
            let n = match from.read(&mut chunk) {
                Ok(0) | Err(_) => return self.shut(),
                Ok(n) => n,
            };
            buf.extend_from_slice(&chunk[..n]);
            while let Some(message) = next_message(&mut buf, true) {
                let watched = s.cut == Cut::AfterCommit
                    && s.armed.load(Ordering::SeqCst)
                    && self.target.load(Ordering::SeqCst);
                if !watched {
                    if to.write_all(&message).is_err() {
                        return self.shut();
                    }
                    continue;
                }
                // The armed statement's answer is held back until its transaction ends
                // (`ReadyForQuery`: committed by then), then withheld if it changed a row.
                held.push(message.clone());
                if message[0] != b'Z' {
                    continue;
                }
                let landed = held.iter().any(|m| {
                    m[0] == b'C'
                        && c_strings(&m[5..], 1)[0]
                            .rsplit(' ')
                            .next()
                            .is_some_and(|n| n.parse::<u64>().is_ok_and(|n| n > 0))
                });
                if landed {
                    s.armed.store(false, Ordering::SeqCst);
                    (s.on_cut)();
                    s.cuts.fetch_add(1, Ordering::SeqCst);
                    return self.shut();
                }
                self.target.store(false, Ordering::SeqCst);
                for m in held.drain(..) {
                    if to.write_all(&m).is_err() {
                        return self.shut();
                    }
                }
            }
        }
    }
}

/// The test database's connection settings, pointed at `port` on loopback (TLS off, so the
/// proxy can read the protocol), and the real server's address.
fn through_proxy(url: &str) -> (impl Fn(u16) -> String, String) {
    let config: leasefence::postgres::Config = url.parse().expect("LEASEFENCE_TEST_PG parses");
    let upstream = match config.get_hosts().first() {
        Some(Host::Tcp(host)) => {
            format!(
                "{host}:{}",
                config.get_ports().first().copied().unwrap_or(5432)
            )
        }
        _ => panic!("the lost-answer cases need LEASEFENCE_TEST_PG to name a TCP host"),
    };
    let mut settings = format!(
        "user={} dbname={} sslmode=disable",
        config.get_user().unwrap_or("postgres"),
        config.get_dbname().unwrap_or("postgres")
    );
    if let Some(password) = config.get_password() {
        let password = String::from_utf8_lossy(password).replace('\\', "\\\\");
        settings.push_str(&format!(" password='{}'", password.replace('\'', "\\'")));
    }
    (
        move |port| format!("host=127.0.0.1 port={port} {settings}"),
        upstream,
    )
}

/// What a one-job run through the proxy ended with.
struct Ran {
    outcome: JobOutcome,
    stats: WorkerStats,
    cuts: usize,
}

/// Runs an async worker on `db` through a proxy cutting the first statement that starts with
/// `marker` as `cut` says, `on_cut` run at the cut; its handler answers `answer`. The one job
/// `a` is enqueued first.
fn run_through_proxy(
    db: &PgDb,
    marker: &'static str,
    cut: Cut,
    on_cut: impl Fn() + Send + Sync + 'static,
    answer: Result<&'static str, &'static str>,
) -> Ran {
    db.store().enqueue_job(NewJob::new("a").unwrap()).unwrap();
    let (url_at, upstream) = through_proxy(&db.url);
    let proxy = Proxy::start(upstream, marker, cut, on_cut);
    let url = url_at(proxy.port);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let options = AsyncOptions::new().postgres(db.options().database_clock(true));
        let store = AsyncStore::open(&url, options).await.unwrap();
        let (out_tx, mut outcomes) = mpsc::unbounded_channel();
        let w = AsyncWorker::builder(store)
            .owner("proxied")
            .ttl(60.0) // no heartbeat during the case
            .poll_interval(Duration::from_millis(5))
            .drain(true)
            // A failed attempt's retry well after the run: one attempt per case.
            .backoff(Backoff {
                base: 3600.0,
                factor: 1.0,
                max: 3600.0,
                jitter: 0.0,
            })
            .on_outcome(move |_, o| {
                let _ = out_tx.send(o.clone());
            })
            .build(
                move |_job: AsyncJob| async move { answer.map(str::to_owned).map_err(Into::into) },
            )
            .unwrap();
        let stats = tokio::time::timeout(Duration::from_secs(60), w.run(std::future::pending()))
            .await
            .expect("the drained run ends")
            .expect("the run ends without an error");
        let outcome = outcomes.try_recv().expect("one outcome reported");
        assert!(outcomes.try_recv().is_err(), "exactly one outcome reported");
        Ran {
            outcome,
            stats,
            cuts: proxy.cuts(),
        }
    })
}

/// Job `a` read back through the test's own connection, done: its fence, owner and result.
fn done_row(db: &PgDb) -> (i64, String, String) {
    let row = db.row("a").unwrap();
    assert_eq!(row.done, 1, "{row:?}");
    (row.fence, row.owner.unwrap(), row.result.unwrap())
}

/// The completion committed, its answer lost with the connection: the worker's next try is
/// refused (the job is done), the job read back is done with this lease's result — reported
/// completed and counted so, not refused, not an error; stored once, under fence 1.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_completion_committed_before_its_answer_was_lost_is_reported_completed() {
    let Some(db) = PgDb::new() else { return };
    let ran = run_through_proxy(&db, "-- complete:", Cut::AfterCommit, || {}, Ok("a done"));
    assert_eq!(ran.cuts, 1, "the completion's answer was lost once");
    assert_eq!(ran.outcome, JobOutcome::Completed);
    let s = &ran.stats;
    assert_eq!(
        (s.completed, s.stale_refused, s.cancelled),
        (1, 0, 0),
        "{s:?}"
    );
    assert!(s.errors >= 1, "the lost connection is counted: {s:?}");
    assert_eq!(done_row(&db), (1, "proxied".into(), "a done".into()));
}

/// The failure recorded, its answer lost: read back, the worker reports the retry it recorded
/// (at the time stored), not a refusal or a cancel.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_failure_recorded_before_its_answer_was_lost_is_reported_retrying() {
    let Some(db) = PgDb::new() else { return };
    let ran = run_through_proxy(&db, "-- fail:", Cut::AfterCommit, || {}, Err("boom"));
    assert_eq!(ran.cuts, 1, "the failure's answer was lost once");
    let store = db.store();
    let info = store
        .inspect(JobId::new("a").unwrap(), store.now().unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(
        ran.outcome,
        JobOutcome::Retrying {
            at: info.not_before,
            error: "boom".into()
        }
    );
    let s = &ran.stats;
    assert_eq!(
        (s.retried, s.dead, s.stale_refused, s.cancelled),
        (1, 0, 0, 0),
        "{s:?}"
    );
    assert_eq!(
        (
            info.status,
            info.state.fence,
            info.state.owner,
            info.error.as_deref()
        ),
        (Status::Retrying, 1, None, Some("boom"))
    );
}

/// A completion lost before the server saw it while another worker took the expired job over
/// and completed it: the worker's next try is refused, and the job read back is done under
/// another fence — a stale write, reported refused; the taker's result stands.
#[test]
#[cfg_attr(
    not(leasefence_pg),
    ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case"
)]
fn a_completion_lost_unsent_while_the_job_was_taken_over_is_reported_refused() {
    let Some(db) = PgDb::new() else { return };
    let (url, schema) = (db.url.clone(), db.schema.clone());
    let take_over = move || {
        let taker = leasefence::PgOptions::new()
            .schema(&schema)
            .database_clock(true)
            .open(&url)
            .unwrap();
        let mut admin =
            leasefence::postgres::Client::connect(&url, leasefence::postgres::NoTls).unwrap();
        admin
            .execute(
                &format!("UPDATE {schema}.jobs SET until = 0 WHERE id = 'a'"),
                &[],
            )
            .unwrap();
        let at = taker.now().unwrap();
        let lease = taker
            .claim(
                JobId::new("a").unwrap(),
                Owner::new("taker").unwrap(),
                at,
                Ttl::new(30.0).unwrap(),
            )
            .unwrap()
            .expect("the expired job is taken over");
        assert!(taker.complete_lease(&lease, at, "taken").unwrap());
    };
    let ran = run_through_proxy(&db, "-- complete:", Cut::BeforeSent, take_over, Ok("stale"));
    assert_eq!(ran.cuts, 1, "the completion was lost once");
    assert_eq!(ran.outcome, JobOutcome::Refused);
    let s = &ran.stats;
    assert_eq!(
        (s.completed, s.stale_refused, s.cancelled),
        (0, 1, 0),
        "{s:?}"
    );
    assert_eq!(done_row(&db), (2, "taker".into(), "taken".into()));
}

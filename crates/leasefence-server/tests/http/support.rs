//! A real server on a loopback port over a fresh database, a small HTTP client, and the stored
//! rows read back through an independent connection (never through the server).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use leasefence::PgOptions;
use leasefence_server::{AsyncOptions, AsyncStore, ServerConfig};
use serde_json::Value;

/// Which backend a case runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Pg,
}

/// One stored row of `jobs`, read directly.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub owner: Option<String>,
    pub until: f64,
    pub fence: i64,
    pub result: Option<String>,
    pub done: bool,
}

/// A fresh database: an initialised SQLite file, or a fresh PostgreSQL schema (dropped at the
/// end).
pub struct Db {
    pub backend: Backend,
    _dir: Option<tempfile::TempDir>,
    /// The SQLite path, or the PostgreSQL connection string.
    pub db: String,
    schema: Option<String>,
    raw: Option<Mutex<leasefence::postgres::Client>>,
}

/// `LEASEFENCE_TEST_PG`, or `None` with the reason printed (a failure in CI).
fn pg_url() -> Option<String> {
    match std::env::var("LEASEFENCE_TEST_PG") {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI is set but LEASEFENCE_TEST_PG is not: the PostgreSQL cases must run in CI")
        }
        _ => {
            eprintln!("skipped: LEASEFENCE_TEST_PG is not set, so the PostgreSQL case did not run");
            None
        }
    }
}

impl Db {
    /// A fresh database, or `None` when PostgreSQL is not configured (outside CI).
    pub fn new(backend: Backend) -> Option<Db> {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("jobs.db");
                leasefence::init_db(&path).unwrap();
                Some(Db {
                    backend,
                    db: path.to_str().unwrap().to_owned(),
                    _dir: Some(dir),
                    schema: None,
                    raw: None,
                })
            }
            Backend::Pg => {
                static NEXT: AtomicU64 = AtomicU64::new(0);
                let url = pg_url()?;
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .subsec_nanos();
                let schema = format!(
                    "lf_http_{}_{}_{nanos}",
                    std::process::id(),
                    NEXT.fetch_add(1, Ordering::Relaxed)
                );
                let raw = leasefence::postgres::Client::connect(&url, leasefence::postgres::NoTls)
                    .unwrap_or_else(|e| panic!("LEASEFENCE_TEST_PG is set but unreachable: {e}"));
                Some(Db {
                    backend,
                    db: url,
                    _dir: None,
                    schema: Some(schema),
                    raw: Some(Mutex::new(raw)),
                })
            }
        }
    }

    /// The PostgreSQL schema of the case, `None` on SQLite.
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// How the server opens this database.
    pub fn options(&self) -> AsyncOptions {
        let mut options = AsyncOptions::new().connections(8);
        if let Some(schema) = &self.schema {
            options = options.postgres(PgOptions::new().schema(schema).database_clock(true));
        }
        options
    }

    /// The stored row of `id`, read through an independent connection.
    pub fn row(&self, id: &str) -> Option<Row> {
        match self.backend {
            Backend::Sqlite => {
                let conn = rusqlite::Connection::open(&self.db).unwrap();
                let mut stmt = conn
                    .prepare("SELECT owner, until, fence, result, done FROM jobs WHERE id = ?1")
                    .unwrap();
                let mut rows = stmt.query([id]).unwrap();
                rows.next().unwrap().map(|r| Row {
                    owner: r.get(0).unwrap(),
                    until: r.get(1).unwrap(),
                    fence: r.get(2).unwrap(),
                    result: r.get(3).unwrap(),
                    done: r.get::<_, i64>(4).unwrap() == 1,
                })
            }
            Backend::Pg => {
                let sql = format!(
                    "SELECT owner, until, fence, result, done FROM {}.jobs WHERE id = $1",
                    self.schema.as_ref().unwrap()
                );
                let mut raw = self.raw.as_ref().unwrap().lock().unwrap();
                raw.query_opt(&sql, &[&id]).unwrap().map(|r| Row {
                    owner: r.get(0),
                    until: r.get(1),
                    fence: r.get(2),
                    result: r.get(3),
                    done: r.get::<_, i32>(4) == 1,
                })
            }
        }
    }

    /// How many jobs are stored, read directly.
    pub fn count(&self) -> i64 {
        match self.backend {
            Backend::Sqlite => rusqlite::Connection::open(&self.db)
                .unwrap()
                .query_row("SELECT count(*) FROM jobs", [], |r| r.get(0))
                .unwrap(),
            Backend::Pg => {
                let sql = format!(
                    "SELECT count(*) FROM {}.jobs",
                    self.schema.as_ref().unwrap()
                );
                let mut raw = self.raw.as_ref().unwrap().lock().unwrap();
                raw.query_one(&sql, &[]).unwrap().get(0)
            }
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let (Some(schema), Some(raw)) = (&self.schema, &self.raw) {
            let mut raw = raw.lock().unwrap_or_else(|e| e.into_inner());
            let _ = raw.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
        }
    }
}

/// A server on a loopback port, on a runtime of its own; stopped on drop.
pub struct Server {
    pub url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Serves `db` with the default settings.
    pub fn start(db: &Db) -> Server {
        Self::with(db, ServerConfig::default())
    }

    /// Serves `db` with `config`.
    pub fn with(db: &Db, config: ServerConfig) -> Server {
        Self::with_options(db, config, db.options())
    }

    /// Serves `db` with `config`, its store opened with `options`.
    pub fn with_options(db: &Db, config: ServerConfig, options: AsyncOptions) -> Server {
        let db_string = db.db.clone();
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let store = AsyncStore::open(&db_string, options).await.unwrap();
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                addr_tx.send(listener.local_addr().unwrap()).unwrap();
                let router = leasefence_server::router(store, &config);
                leasefence_server::serve_with(listener, router, &config, async move {
                    let _ = stop_rx.await;
                })
                .await
                .unwrap();
            });
        });
        let addr = addr_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the server started");
        Server {
            url: format!("http://{addr}"),
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// A client of this server with `token` (or none).
    pub fn client(&self, token: Option<&str>) -> Client {
        Client::new(&self.url, token)
    }

    /// Stops the server and waits until it has.
    pub fn stop(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shut();
    }
}

/// A blocking HTTP client (keep-alive) that returns every status as it is.
#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
    base: String,
    token: Option<String>,
}

impl Client {
    pub fn new(base: &str, token: Option<&str>) -> Client {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        Client {
            agent,
            base: base.to_owned(),
            token: token.map(str::to_owned),
        }
    }

    fn auth<B>(&self, req: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.token {
            Some(t) => req.header("Authorization", &format!("Bearer {t}")),
            None => req,
        }
    }

    fn answer(resp: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> (u16, Value) {
        let mut resp = resp.expect("the request reached the server");
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().unwrap();
        let value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        (status, value)
    }

    /// POST of a JSON body.
    pub fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let req = self.auth(self.agent.post(&format!("{}{path}", self.base)));
        Self::answer(req.send_json(body))
    }

    /// POST of a JSON body, with the answer's headers.
    pub fn post_with_headers(
        &self,
        path: &str,
        body: Value,
    ) -> (u16, Value, ureq::http::HeaderMap) {
        let req = self.auth(self.agent.post(&format!("{}{path}", self.base)));
        let mut resp = req.send_json(body).expect("the request reached the server");
        let headers = resp.headers().clone();
        let status = resp.status().as_u16();
        let value = resp.body_mut().read_json().unwrap_or(Value::Null);
        (status, value, headers)
    }

    /// POST of raw bytes.
    pub fn post_raw(&self, path: &str, body: &[u8]) -> (u16, Value) {
        let req = self.auth(self.agent.post(&format!("{}{path}", self.base)));
        Self::answer(req.content_type("application/json").send(body))
    }

    /// POST without a body.
    pub fn post_empty(&self, path: &str) -> (u16, Value) {
        let req = self.auth(self.agent.post(&format!("{}{path}", self.base)));
        Self::answer(req.send_empty())
    }

    /// GET.
    pub fn get(&self, path: &str) -> (u16, Value) {
        let req = self.auth(self.agent.get(&format!("{}{path}", self.base)));
        Self::answer(req.call())
    }

    /// GET of the body as text, with the response headers.
    pub fn get_text(&self, path: &str) -> (u16, String, ureq::http::HeaderMap) {
        self.get_text_accepting(path, "*/*")
    }

    /// GET of the body as text with an `Accept` header, with the response headers.
    pub fn get_text_accepting(
        &self,
        path: &str,
        accept: &str,
    ) -> (u16, String, ureq::http::HeaderMap) {
        let req = self
            .auth(self.agent.get(&format!("{}{path}", self.base)))
            .header("Accept", accept);
        let mut resp = req.call().unwrap();
        let headers = resp.headers().clone();
        (
            resp.status().as_u16(),
            resp.body_mut().read_to_string().unwrap(),
            headers,
        )
    }

    /// DELETE.
    pub fn delete(&self, path: &str) -> (u16, Value) {
        let req = self.auth(self.agent.delete(&format!("{}{path}", self.base)));
        Self::answer(req.call())
    }

    /// Enqueues `id` and asserts it was inserted.
    pub fn enqueue(&self, id: &str) {
        let (status, body) = self.post("/v1/jobs", serde_json::json!({ "id": id }));
        assert_eq!(status, 201, "{body}");
    }

    /// Claims `id` by id for `owner`; the lease's fence.
    pub fn claim(&self, id: &str, owner: &str, ttl: f64) -> i64 {
        let (status, body) = self.post(
            "/v1/claims",
            serde_json::json!({ "owner": owner, "ttl": ttl, "job_id": id }),
        );
        assert_eq!(status, 200, "{body}");
        body["leases"][0]["fence"].as_i64().unwrap()
    }
}

/// Waits until `cond` holds, polling, for at most 30 s; panics with `what` otherwise.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until the job's lease has run out as the server judges it (status `expired`).
pub fn wait_expired(client: &Client, id: &str) {
    wait_until(&format!("{id}'s lease expired"), || {
        client.get(&format!("/v1/jobs/{id}")).1["status"] == "expired"
    });
}

/// Runs a case on SQLite and on PostgreSQL (ignored, with the reason, when
/// `LEASEFENCE_TEST_PG` is unset).
macro_rules! backends {
    ($(fn $name:ident($db:ident: &Db) $body:block)*) => {$(
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            fn case($db: &$crate::support::Db) $body
            #[test]
            fn sqlite() {
                case(&$crate::support::Db::new($crate::support::Backend::Sqlite).unwrap());
            }
            #[test]
            #[cfg_attr(not(leasefence_pg), ignore = "LEASEFENCE_TEST_PG is unset: a PostgreSQL case")]
            fn pg() {
                if let Some(db) = $crate::support::Db::new($crate::support::Backend::Pg) {
                    case(&db);
                }
            }
        }
    )*};
}
pub(crate) use backends;

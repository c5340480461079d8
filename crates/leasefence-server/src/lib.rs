//! `leasefence serve`: the lease-and-fence contract over HTTP, for workers in any language and
//! workers that may not hold database credentials.
//!
//! The server keeps no lease in memory. Every route is one call of the library's [`Store`]
//! (through [`AsyncStore`], on tokio's blocking pool), so owner, fence and the live lease are
//! checked **in the store**, in the write's own transaction: a restarted server, or a second
//! one on the same database, changes nothing. Leases are judged by the server's clock, or on
//! PostgreSQL by the database's; clients never send `now`.
//!
//! ```text
//! POST /v1/claims                      {"owner","ttl","queues"?,"n"?,"job_id"?} → leases
//! POST /v1/jobs/{id}/renew             {"owner","fence","ttl"}
//! POST /v1/jobs/{id}/complete          {"owner","fence","result"?}
//! POST /v1/jobs/{id}/fail              {"owner","fence","error"?,"retry_in"?}
//! POST /v1/jobs/{id}/release           {"owner","fence"}
//! POST /v1/renewals                   {"ttl","leases":[{"job_id","owner","fence"}]}
//! POST /v1/completions                {"completions":[{"job_id","owner","fence","result"}]}
//! POST /v1/fences/{resource}/admit     {"fence"}
//! POST /v1/jobs                        one job, or {"jobs": [...]}
//! GET  /v1/jobs/{id}   /v1/jobs/{id}/history   /v1/jobs?status=&queue=&after=&limit=
//! GET  /v1/stats   /v1/schedules   POST /v1/schedules   DELETE /v1/schedules/{name}
//! POST /v1/jobs/{id}/cancel|retry   DELETE /v1/jobs/{id}   POST /v1/queues/{name}/pause|resume
//! GET  /v1/clock   /v1/openapi.json   /metrics   /healthz   /readyz
//! ```
//!
//! 200/201: taken effect. **409: refused by the contract**, with a `reason` (`stale_fence`,
//! `other_owner`, `expired`, `not_held`, `done`, `unknown`, …) and nothing changed. 400: bad
//! input, `field` names it. 401/403: token. 413: body too large. 503: busy or unreachable,
//! retry after `Retry-After`. See `docs/http.md`.
//!
//! # Example
//!
//! A server on a free loopback port, and [`HttpStore`] — the `Store` contract as a client of
//! it — telling a stalled worker that its lease was taken over:
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let db = dir.path().join("jobs.db");
//! use leasefence::{AsyncOptions, AsyncStore, JobId, NewJob, Now, Owner, Store, Ttl};
//! use leasefence_server::{HttpStore, ServerConfig};
//!
//! leasefence::init_db(&db)?;
//! let runtime = tokio::runtime::Runtime::new()?;
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
//! let url = format!("http://{}", listener.local_addr()?);
//! let store = runtime.block_on(AsyncStore::open(db.to_str().unwrap(), AsyncOptions::new()))?;
//! let router = leasefence_server::router(store, &ServerConfig::default());
//! let server = runtime.spawn(leasefence_server::serve(listener, router, async {
//!     let _ = stopped.await;
//! }));
//!
//! let http = HttpStore::new(&url, None)?; // no token: a loopback server without tokens
//! let (job, ttl) = (JobId::new("report")?, Ttl::new(0.2)?);
//! http.enqueue_job(NewJob::new("report")?)?;
//! let a = http.claim(job, Owner::new("A")?, Now::system(), ttl)?.expect("ready");
//! std::thread::sleep(std::time::Duration::from_millis(300)); // A stalls past its lease
//! let b = http.claim(job, Owner::new("B")?, Now::system(), Ttl::new(30.0)?)?.expect("expired");
//! assert!(b.fence > a.fence);
//! assert!(!http.complete_lease(&a, Now::system(), "stale")?); // 409: refused
//! assert!(http.complete_lease(&b, Now::system(), "fresh")?);
//! assert_eq!(http.state(job)?.unwrap().result.as_deref(), Some("fresh"));
//!
//! stop.send(()).ok();
//! runtime.block_on(server)??;
//! # Ok(()) }
//! ```
//!
//! [`Store`]: leasefence::Store

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use utoipa::OpenApi as _;

mod auth;
mod body;
mod client;
pub mod dashboard;
mod dto;
mod error;
mod metrics;
mod openapi;
mod outage;
mod routes;
mod serve;

pub use auth::{Token, Tokens};
pub use client::HttpStore;
pub use error::{ApiError, Reason};
/// The store facade the server is built on, from the library (feature `async`).
pub use leasefence::{AsyncOptions, AsyncStore};
pub use metrics::Metrics;
pub use openapi::ApiDoc;

/// What every handler shares: the store, the tokens and the metrics.
#[derive(Clone, Debug)]
pub struct AppState {
    /// The store every route calls.
    pub store: AsyncStore,
    /// The bearer tokens (none: every route is open, loopback only).
    pub tokens: Tokens,
    /// The metrics served at `/metrics`.
    pub metrics: Arc<Metrics>,
    /// The dashboard's sessions and settings.
    pub dashboard: Arc<dashboard::Dashboard>,
    request_timeout: Duration,
    max_body_bytes: usize,
}

/// The server's settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The tokens.
    pub tokens: Tokens,
    /// The largest request body taken, in bytes (default 1 MiB); larger ones get a 413.
    pub max_body_bytes: usize,
    /// How long a request's body may take to arrive (default 30 s); a slower one gets a 503
    /// `timeout` and nothing is done. Under [`serve_with`] it also bounds the headers (a
    /// connection that has not sent them in time is closed) and a shutdown's wait for the
    /// requests in flight. (How long a request may wait for a free store
    /// connection is the store's [`AsyncOptions::acquire_timeout`]; `leasefence serve` sets
    /// both from `--request-timeout`.) A store call, once started, runs to its end, so an
    /// answer never hides a write that went on without the client.
    pub request_timeout: Duration,
    /// The dashboard shows no payload or result, and serves no download of them
    /// (`--hide-payloads`).
    pub hide_payloads: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            tokens: Tokens::default(),
            max_body_bytes: 1 << 20,
            request_timeout: Duration::from_secs(30),
            hide_payloads: false,
        }
    }
}

/// The application: every route, with the limits and the request metrics.
pub fn router(store: AsyncStore, config: &ServerConfig) -> Router {
    use routes::{batch, jobs, leases, ops, schedules};
    let state = AppState {
        store,
        tokens: config.tokens.clone(),
        metrics: Arc::new(Metrics::new()),
        dashboard: Arc::new(dashboard::Dashboard::new(config.hide_payloads)),
        request_timeout: config.request_timeout,
        max_body_bytes: config.max_body_bytes,
    };
    Router::new()
        .merge(dashboard::routes(&state))
        .route("/v1/jobs", post(jobs::enqueue).get(jobs::list_jobs))
        .route("/v1/jobs/{id}", get(jobs::get_job).delete(jobs::delete))
        .route("/v1/jobs/{id}/history", get(jobs::history))
        .route("/v1/jobs/{id}/cancel", post(jobs::cancel))
        .route("/v1/jobs/{id}/retry", post(jobs::retry))
        .route("/v1/claims", post(leases::claim))
        .route("/v1/jobs/{id}/renew", post(leases::renew))
        .route("/v1/jobs/{id}/complete", post(leases::complete))
        .route("/v1/jobs/{id}/fail", post(leases::fail))
        .route("/v1/jobs/{id}/release", post(leases::release))
        .route("/v1/renewals", post(batch::renewals))
        .route("/v1/completions", post(batch::completions))
        .route("/v1/clock", get(batch::clock))
        .route("/v1/fences/{resource}/admit", post(leases::admit))
        .route("/v1/stats", get(ops::stats))
        .route("/v1/schedules", get(schedules::list).post(schedules::add))
        .route(
            "/v1/schedules/{name}",
            axum::routing::delete(schedules::remove),
        )
        .route("/v1/queues/{name}/pause", post(ops::pause))
        .route("/v1/queues/{name}/resume", post(ops::resume))
        .route("/v1/openapi.json", get(openapi_json))
        .route("/metrics", get(ops::metrics))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            open_host,
        ))
        .layer(axum::middleware::from_fn_with_state(state.clone(), measure))
        .layer(DefaultBodyLimit::max(config.max_body_bytes))
        .with_state(state)
}

/// [`serve_with`] under the default [`ServerConfig`]'s limits (a request timeout of 30 s).
///
/// # Errors
/// I/O errors of the listener.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, router, &ServerConfig::default(), shutdown).await
}

/// Serves `router` on `listener` (HTTP/1.1) until `shutdown` resolves, then finishes the
/// requests in flight. A client must send a request's headers within `config`'s request
/// timeout (capped at a year), or its connection is closed — a keep-alive connection left idle
/// that long too; after `shutdown`, idle connections close at once and
/// requests in flight get the request timeout and 5 s more, then the connections still open are
/// ended and this returns.
///
/// # Errors
/// I/O errors of the listener.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    router: Router,
    config: &ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve::run(listener, router, config.request_timeout, shutdown).await
}

async fn openapi_json() -> Response {
    axum::Json(ApiDoc::openapi()).into_response()
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

async fn not_found() -> ApiError {
    ApiError::NotFound("no such route; see /v1/openapi.json".into())
}

/// On a server without tokens (open, loopback only), a request addressed to another name than
/// a loopback one is refused, 403, before any route runs: it is a web page that re-pointed a
/// name of its own at 127.0.0.1 (DNS rebinding), not a client of this machine. A request
/// without `Host` (HTTP/1.0) is no browser's. So is one whose `Origin` is a page of another
/// site: a browser lets any page POST a `text/plain` body to 127.0.0.1 without asking first,
/// and the API reads any content type. Clients that are not browsers send no `Origin`.
async fn open_host(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if let Some(refusal) = open_refusal(&state.tokens, req.headers()) {
        return ApiError::Forbidden(refusal).into_response();
    }
    next.run(req).await
}

/// Why a server without tokens refuses a request with these headers, if it does.
fn open_refusal(tokens: &Tokens, headers: &axum::http::HeaderMap) -> Option<&'static str> {
    if tokens.any() {
        return None;
    }
    let text = |name| headers.get(name).map(|v| v.to_str().unwrap_or(""));
    if text(axum::http::header::HOST).is_some_and(|host| !auth::loopback_host(host)) {
        return Some(
            "a server without tokens answers only requests addressed to a loopback name \
             (localhost, 127.0.0.1, [::1]); to serve other names, set a worker and an admin \
             token",
        );
    }
    let foreign = |origin: &str| {
        !origin
            .split_once("://")
            .is_some_and(|(_, host)| auth::loopback_host(host))
    };
    if text(axum::http::header::ORIGIN).is_some_and(foreign) {
        return Some(
            "a server without tokens takes no request sent by a page of another site (its \
             Origin is not a loopback page); nothing was changed",
        );
    }
    None
}

/// Times every request and counts it by route and status; gives the body extractor its time
/// limit.
async fn measure(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    // The label names a route of the router and one of the methods it serves: a request with
    // a made-up method or path never makes a new series.
    let method = match req.method().as_str() {
        m @ ("GET" | "POST" | "DELETE" | "PUT" | "PATCH" | "HEAD" | "OPTIONS") => m,
        _ => "OTHER",
    };
    let op = match req.extensions().get::<MatchedPath>() {
        Some(path) => format!("{method} {}", path.as_str()),
        None => "unmatched".to_owned(),
    };
    req.extensions_mut().insert(body::BodyLimits {
        timeout: state.request_timeout,
        max_bytes: state.max_body_bytes,
    });
    let start = Instant::now();
    let response = next.run(req).await;
    // An answer only the store gives (a route's success, a refusal, an unknown job) ends an
    // outage of the store, if one was logged.
    if op.contains(" /v1/") && matches!(response.status().as_u16(), 200 | 201 | 404 | 409) {
        outage::answered();
    }
    let labels = metrics::OpLabel { op: op.clone() };
    state
        .metrics
        .latency
        .get_or_create(&labels)
        .observe(start.elapsed().as_secs_f64());
    state
        .metrics
        .requests
        .get_or_create(&metrics::RequestLabels {
            op,
            status: response.status().as_u16(),
        })
        .inc();
    response
}

//! The dashboard of `leasefence serve`, at `/dashboard`: server-rendered pages (askama
//! templates, checked when the server is compiled), one CSS file and one small script, all in
//! the binary. Every page works without JavaScript; with it, the counts and the job table
//! refresh by a light poll.
//!
//! | page | shows |
//! |---|---|
//! | `/dashboard` | counts by status and queue, the leases that end within a minute, expired leases, dead jobs, stale writes refused, the oldest ready job, throughput |
//! | `/dashboard/jobs` | a job search: status, queue, kind, owner, id prefix; newest or oldest first; keyset pages |
//! | `/dashboard/jobs/{id}` | every field, the payload and result, the attempt ledger as a timeline with each fence's refused writes |
//! | `/dashboard/queues` | per-queue counts, pause and resume, retry a queue's dead jobs |
//! | `/dashboard/schedules` | schedules with their next slots and last runs |
//! | `/dashboard/fences` | the fence gate: each resource's highest admitted fence |
//! | `/dashboard/audit` | the operator actions taken here |
//!
//! Actions (cancel, retry, delete, release an expired lease, pause, resume, retry a queue's
//! dead jobs) are POSTs with a CSRF token and a confirmation page, need the admin token, go
//! through the same library call as the CLI's verb, and are recorded in the audit log. See
//! the `access` module for who may see and do what. Every value a user supplied is escaped by the
//! templates; the pages are served with a strict Content-Security-Policy.

use std::sync::Arc;

use askama::Template;
use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};

use crate::AppState;
use crate::error::ApiError;

pub(crate) mod access;
mod actions;
mod chart;
mod job;
mod pages;
mod search;
mod view;

/// What the dashboard keeps beside the store: the sessions, and its settings.
#[derive(Debug)]
pub struct Dashboard {
    pub(crate) access: access::Access,
    /// Payloads and results are not shown or downloadable (`--hide-payloads`).
    pub(crate) hide_payloads: bool,
}

impl Dashboard {
    /// The dashboard's state; `hide_payloads` keeps payloads and results off every page.
    pub fn new(hide_payloads: bool) -> Dashboard {
        Dashboard {
            access: access::Access::new(),
            hide_payloads,
        }
    }
}

/// The stylesheet, vendored: no build step.
const CSS: &str = include_str!("../../assets/dashboard.css");
/// The script: the light poll of counts and tables. The pages work without it.
const JS: &str = include_str!("../../assets/dashboard.js");

/// Only this server's own files, no inline script or style, no framing, forms only to here.
const CSP: &str = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
                   base-uri 'none'";

/// The dashboard's routes, under `/dashboard`.
pub(crate) fn routes(state: &AppState) -> Router<AppState> {
    Router::new()
        .route("/dashboard", get(pages::overview))
        .route("/dashboard/", get(pages::overview))
        .route("/dashboard/live", get(pages::live))
        .route("/dashboard/jobs", get(search::jobs))
        .route("/dashboard/jobs/{id}", get(job::job))
        .route("/dashboard/jobs/{id}/payload", get(job::payload))
        .route("/dashboard/jobs/{id}/result", get(job::result))
        .route("/dashboard/jobs/{id}/{action}", post(actions::job_action))
        .route("/dashboard/queues", get(pages::queues))
        .route(
            "/dashboard/queues/{name}/{action}",
            post(actions::queue_action),
        )
        .route("/dashboard/schedules", get(pages::schedules))
        .route("/dashboard/fences", get(pages::fences))
        .route("/dashboard/audit", get(pages::audit))
        .route(
            "/dashboard/login",
            get(pages::login_form).post(actions::login),
        )
        .route("/dashboard/logout", post(actions::logout))
        .route("/dashboard/assets/dashboard.css", get(css))
        .route("/dashboard/assets/dashboard.js", get(js))
        .route("/dashboard/assets/icon.svg", get(icon))
        .route("/dashboard/{*rest}", axum::routing::any(missing))
        .layer(axum::middleware::from_fn_with_state(state.clone(), secure))
}

/// A dashboard address that is no page: the dashboard's own 404 page (with its way back), not
/// the API's JSON.
async fn missing() -> PageError {
    PageError::new(
        StatusCode::NOT_FOUND,
        "no such page on the dashboard; start again from the overview",
    )
}

/// The security headers of every dashboard response, and its `Server-Timing` (how long the
/// server took, store calls included: what `examples/dashboard_bench.rs` measures).
async fn secure(req: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let mut response = next.run(req).await;
    let took = started.elapsed().as_secs_f64() * 1000.0;
    let h = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&format!("app;dur={took:.3}")) {
        h.insert(HeaderName::from_static("server-timing"), v);
    }
    let set = |h: &mut axum::http::HeaderMap, name: HeaderName, value: &'static str| {
        h.insert(name, HeaderValue::from_static(value));
    };
    set(h, header::CONTENT_SECURITY_POLICY, CSP);
    set(h, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(h, header::X_FRAME_OPTIONS, "DENY");
    // Not `no-referrer`: under it a browser sends `Origin: null` with a form's POST, and the
    // same-origin check of the actions could not tell this server's pages from another's.
    set(h, header::REFERRER_POLICY, "same-origin");
    if !h.contains_key(header::CACHE_CONTROL) {
        set(h, header::CACHE_CONTROL, "no-store");
    }
    response
}

async fn css() -> Response {
    asset(CSS, "text/css; charset=utf-8")
}

async fn js() -> Response {
    asset(JS, "text/javascript; charset=utf-8")
}

/// The tab's icon: a fence.
const ICON: &str = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 16 16\"><path fill=\"#0a3069\" d=\"M2 3l1.5-2L5 3v12H2zm4.5 0L8 1l1.5 2v12h-3zM11 3l1.5-2L14 3v12h-3zM1 6h14v1.5H1zm0 5h14v1.5H1z\"/></svg>";

async fn icon() -> Response {
    asset(ICON, "image/svg+xml")
}

fn asset(body: &'static str, kind: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        body,
    )
        .into_response()
}

/// A rendered page (or an error page when a template fails, which the tests rule out).
pub(crate) fn render(page: &impl Template) -> Response {
    match page.render() {
        Ok(html) => Html(html).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "a dashboard template failed");
            PageError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal error; see the server's log",
            )
            .into_response()
        }
    }
}

/// An error shown as a page.
#[derive(Debug)]
pub(crate) struct PageError {
    status: StatusCode,
    message: String,
}

impl PageError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> PageError {
        PageError {
            status,
            message: message.into(),
        }
    }
}

impl From<leasefence::Error> for PageError {
    fn from(e: leasefence::Error) -> Self {
        let (status, message) = ApiError::from(e).shown();
        PageError { status, message }
    }
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage<'a> {
    status: u16,
    reason: &'a str,
    message: &'a str,
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let page = ErrorPage {
            status: self.status.as_u16(),
            reason: self.status.canonical_reason().unwrap_or("Error"),
            message: &self.message,
        };
        let html = page
            .render()
            .unwrap_or_else(|_| "<!doctype html><title>Error</title>".into());
        let mut response = (self.status, Html(html)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

/// The parts of every page: the title, the section, who is looking, what they may do.
#[derive(Debug, Clone)]
pub(crate) struct Chrome {
    pub(crate) title: String,
    pub(crate) section: &'static str,
    pub(crate) who: String,
    pub(crate) role: &'static str,
    pub(crate) can_act: bool,
    pub(crate) csrf: String,
    pub(crate) signed_in: bool,
    pub(crate) notice: Option<String>,
    pub(crate) hidden: bool,
}

impl Chrome {
    pub(crate) fn new(
        title: impl Into<String>,
        section: &'static str,
        viewer: &access::Viewer,
        dashboard: &Arc<Dashboard>,
    ) -> Chrome {
        Chrome {
            title: title.into(),
            section,
            who: viewer.actor.clone(),
            role: match (viewer.via, viewer.can_act) {
                (access::Via::Open, _) => "open (no tokens set)",
                (_, true) => "admin",
                (_, false) => "read-only",
            },
            can_act: viewer.can_act,
            csrf: viewer.csrf.clone(),
            signed_in: viewer.via == access::Via::Session,
            notice: None,
            hidden: dashboard.hide_payloads,
        }
    }

    /// The navigation, with the current section marked.
    pub(crate) fn nav(&self) -> Vec<(&'static str, &'static str, bool)> {
        [
            ("overview", "Overview", "/dashboard"),
            ("jobs", "Jobs", "/dashboard/jobs"),
            ("queues", "Queues", "/dashboard/queues"),
            ("schedules", "Schedules", "/dashboard/schedules"),
            ("fences", "Fence gate", "/dashboard/fences"),
            ("audit", "Audit log", "/dashboard/audit"),
        ]
        .into_iter()
        .map(|(key, label, href)| (label, href, key == self.section))
        .collect()
    }
}

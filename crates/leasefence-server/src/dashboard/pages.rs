//! The read-only pages: overview, queues, schedules, fence gate, audit log, sign-in.
//! Each reads the store once (the overview, a page of jobs, …) through the library's
//! [`Observe`] and [`Store`] calls. The job search is `search.rs`, a job's page `job.rs`.

use std::sync::Arc;

use askama::Template;
use axum::Json;
use axum::extract::{Query, State};
use axum::response::Response;
use leasefence::{JobId, Now, Observe, Overview, Resource, Status, Store};
use serde::Deserialize;

use super::access::{Viewer, safe_next};
use super::chart::{self, Chart};
use super::view::{count, job_href, query, seg, span, time};
use super::{Chrome, Dashboard, PageError, render};
use crate::AppState;

/// The outcome of an action, as the page it redirected to is told: `?done=ACTION&ok=1&n=3`
/// (and `&why=REASON` for a refusal whose reason is known). Only fixed words reach the page,
/// never text from the request; and not on a navigation the browser says came from anywhere
/// but this dashboard itself (`Sec-Fetch-Site` other than `same-origin`: a link on another
/// site, a typed or bookmarked URL), so such a link cannot make a page claim that something
/// was done. Browsers send the header to https and loopback origins; a page served over plain
/// HTTP on another address gets none, and shows the notice.
#[derive(Debug, Default)]
pub(crate) struct Notice {
    said: Said,
    ours: bool,
}

#[derive(Debug, Default, Deserialize)]
struct Said {
    done: Option<String>,
    ok: Option<u8>,
    n: Option<u64>,
    why: Option<String>,
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Notice {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        let said =
            Query::<Said>::try_from_uri(&parts.uri).map_or_else(|_| Said::default(), |q| q.0);
        let ours = parts
            .headers
            .get("sec-fetch-site")
            .is_none_or(|v| v.as_bytes() == b"same-origin");
        Ok(Notice { said, ours })
    }
}

impl Notice {
    pub(crate) fn message(&self) -> Option<String> {
        if !self.ours {
            return None;
        }
        let said = &self.said;
        let ok = said.ok == Some(1);
        let text = match (said.done.as_deref()?, ok, said.why.as_deref()) {
            (_, false, Some("gone")) => "Nothing done: there is no such job (any more).",
            ("cancel", true, _) => {
                "Cancelled: the job will not be handed out again, and its holder can store nothing."
            }
            ("cancel", false, _) => "Not cancelled: the job had already finished.",
            ("retry", true, _) => {
                "Retried: the job is ready again with a fresh attempts budget; its fence goes on."
            }
            ("retry", false, Some("duplicate")) => {
                "Not retried: another unfinished job of its queue holds its unique key."
            }
            ("retry", false, Some("completed")) => {
                "Not retried: the job completed; only a dead or cancelled job can be retried."
            }
            ("retry", false, _) => "Not retried: only a dead or cancelled job can be retried.",
            ("delete", true, _) => "Deleted: its last fence is kept as the id's floor.",
            ("delete", false, _) => "Not deleted: no such job.",
            ("release", true, _) => {
                "Released: the expired lease was given back (fence kept); the job can be claimed at once."
            }
            ("release", false, _) => {
                "Not released: the lease was no longer the expired one shown (claimed again, or finished)."
            }
            ("pause", true, _) => {
                "Paused: the queue hands out no job; leases already held stay valid."
            }
            ("pause", false, _) => "Already paused.",
            ("resume", true, _) => "Resumed: the queue hands out jobs again.",
            ("resume", false, _) => "It was not paused.",
            ("retry_dead", _, why) => {
                let n = said.n.unwrap_or(0);
                let mut text = format!(
                    "Retried {n} dead job{} of the queue.",
                    if n == 1 { "" } else { "s" }
                );
                if why == Some("duplicate") {
                    text.push_str(
                        " Some stay dead: another unfinished job of the queue holds the unique \
                         key of each.",
                    );
                }
                return Some(text);
            }
            ("login", true, _) => "Signed in.",
            _ => return None,
        };
        Some(text.to_owned())
    }
}

pub(crate) fn chrome(
    title: impl Into<String>,
    section: &'static str,
    viewer: &Viewer,
    dashboard: &Arc<Dashboard>,
    notice: &Notice,
) -> Chrome {
    let mut c = Chrome::new(title, section, viewer, dashboard);
    c.notice = notice.message();
    c
}

/// The clock the store judges leases by (the database's on PostgreSQL).
pub(crate) async fn store_now(state: &AppState) -> Result<Now, PageError> {
    Ok(state.store.now().await?)
}

// ─── Overview ─────────────────────────────────────────────────────────────────────────────

pub(crate) struct Card {
    pub(crate) label: &'static str,
    pub(crate) value: String,
    pub(crate) live: &'static str,
    pub(crate) href: String,
    pub(crate) note: String,
    pub(crate) tone: &'static str,
}

pub(crate) struct Cell {
    pub(crate) value: String,
    pub(crate) href: String,
    pub(crate) status: &'static str,
}

pub(crate) struct QueueView {
    pub(crate) name: String,
    pub(crate) href: String,
    pub(crate) paused: bool,
    pub(crate) cells: Vec<Cell>,
    pub(crate) total: String,
    pub(crate) dead: u64,
    pub(crate) action_base: String,
}

fn queue_views(queues: &[leasefence::QueueInfo]) -> Vec<QueueView> {
    queues
        .iter()
        .map(|q| QueueView {
            name: q.name.clone(),
            href: format!("/dashboard/jobs{}", query(&[("queue", &q.name)])),
            paused: q.paused,
            cells: Status::ALL
                .iter()
                .map(|s| Cell {
                    value: count(q.stats.get(*s)),
                    href: format!(
                        "/dashboard/jobs{}",
                        query(&[("queue", &q.name), ("status", s.as_str())])
                    ),
                    status: s.as_str(),
                })
                .collect(),
            total: count(q.stats.total()),
            dead: q.stats.dead,
            action_base: format!("/dashboard/queues/{}", seg(&q.name)),
        })
        .collect()
}

#[derive(Template)]
#[template(path = "overview.html")]
pub(crate) struct OverviewPage {
    chrome: Chrome,
    now: String,
    cards: Vec<Card>,
    statuses: Vec<&'static str>,
    totals: Vec<Cell>,
    total: String,
    queues: Vec<QueueView>,
    chart: Chart,
    width: u32,
    height: u32,
}

pub(crate) async fn overview(
    viewer: Viewer,
    State(state): State<AppState>,
    notice: Notice,
) -> Result<Response, PageError> {
    let now = store_now(&state).await?;
    let (o, oldest_queue) = overview_at(&state, now).await?;
    let t = &o.totals;
    let jobs = |status: &str| format!("/dashboard/jobs{}", query(&[("status", status)]));
    let cards = vec![
        Card {
            label: "Ready",
            value: count(t.ready),
            live: "totals.ready",
            href: jobs("ready"),
            note: ready_note(&o),
            tone: "ready",
        },
        Card {
            label: "Leased",
            value: count(t.leased),
            live: "totals.leased",
            href: jobs("leased"),
            note: "held under a live lease".into(),
            tone: "leased",
        },
        Card {
            label: "Expiring within a minute",
            value: count(o.expiring_soon),
            live: "expiring_soon",
            href: jobs("leased"),
            note: "live leases that end in the next 60 s".into(),
            tone: "leased",
        },
        Card {
            label: "Expired, unclaimed",
            value: count(t.expired),
            live: "totals.expired",
            href: jobs("expired"),
            note: expired_note(&o),
            tone: "expired",
        },
        Card {
            label: "Dead",
            value: count(t.dead),
            live: "totals.dead",
            href: jobs("dead"),
            note: "out of attempts".into(),
            tone: "dead",
        },
        Card {
            label: "Stale writes refused, last hour",
            value: count(o.refused_last_hour),
            live: "refused_last_hour",
            href: jobs(""),
            note: refused_note(&o),
            tone: "refused",
        },
        Card {
            label: "Oldest ready job waiting",
            value: o.oldest_ready_age().map(span).unwrap_or_else(|| "—".into()),
            live: "oldest_ready_age",
            href: oldest_ready_href(&o),
            note: oldest_ready_note(&o, oldest_queue.as_deref()),
            tone: "ready",
        },
    ];
    let totals = Status::ALL
        .iter()
        .map(|s| Cell {
            value: count(t.get(*s)),
            href: jobs(s.as_str()),
            status: s.as_str(),
        })
        .collect();
    let page = OverviewPage {
        chrome: chrome("Overview", "overview", &viewer, &state.dashboard, &notice),
        now: time(Some(o.now)),
        cards,
        statuses: Status::ALL.iter().map(|s| s.as_str()).collect(),
        totals,
        total: count(t.total()),
        queues: queue_views(&o.queues),
        chart: Chart::of(&o.throughput),
        width: chart::WIDTH,
        height: chart::HEIGHT,
    };
    Ok(render(&page))
}

/// The overview at `now`, and the queue of its oldest ready job, to say when that queue is
/// paused (the job waits for an operator then, not for a worker).
async fn overview_at(state: &AppState, now: Now) -> Result<(Overview, Option<String>), PageError> {
    Ok(state
        .store
        .call(move |s| {
            let o = s.overview(now)?;
            let queue = match &o.oldest_ready {
                Some((id, _)) => s.inspect(JobId::new(id)?, now)?.map(|info| info.queue),
                None => None,
            };
            Ok((o, queue))
        })
        .await?)
}

/// The overview's figures as JSON, for the page's light poll.
pub(crate) async fn live(
    _viewer: Viewer,
    State(state): State<AppState>,
) -> Result<Json<serde_json::Value>, PageError> {
    let now = store_now(&state).await?;
    let (o, oldest_queue) = overview_at(&state, now).await?;
    let totals: serde_json::Map<String, serde_json::Value> = Status::ALL
        .iter()
        .map(|s| (s.as_str().to_owned(), count(o.totals.get(*s)).into()))
        .chain([
            ("total".to_owned(), count(o.totals.total()).into()),
            // The notes of the Ready and Expired cards (`<live>_note`).
            ("ready_note".to_owned(), ready_note(&o).into()),
            ("expired_note".to_owned(), expired_note(&o).into()),
        ])
        .collect();
    let queues: serde_json::Map<String, serde_json::Value> = o
        .queues
        .iter()
        .map(|q| {
            let counts: serde_json::Map<String, serde_json::Value> = Status::ALL
                .iter()
                .map(|s| (s.as_str().to_owned(), count(q.stats.get(*s)).into()))
                .chain([("total".to_owned(), count(q.stats.total()).into())])
                .collect();
            (q.name.clone(), counts.into())
        })
        .collect();
    Ok(Json(serde_json::json!({
        "now": time(Some(o.now)),
        "totals": totals,
        "queues": queues,
        "expiring_soon": count(o.expiring_soon),
        "refused_total": count(o.refused_total),
        "refused_last_hour": count(o.refused_last_hour),
        "oldest_ready_age": o.oldest_ready_age().map(span).unwrap_or_else(|| "—".into()),
        // The cards' notes and links that change with the figures (`<live>_note`, `_href`).
        "oldest_ready_age_note": oldest_ready_note(&o, oldest_queue.as_deref()),
        "oldest_ready_age_href": oldest_ready_href(&o),
        "refused_last_hour_note": refused_note(&o),
    })))
}

/// A card's note, `claimable` and — when paused queues hold some of its jobs (counted by
/// status, but no claim hands them out) — how many.
fn held_back(o: &Overview, of: fn(&leasefence::Stats) -> u64, claimable: &str) -> String {
    let n: u64 = o
        .queues
        .iter()
        .filter(|q| q.paused)
        .map(|q| of(&q.stats))
        .sum();
    match n {
        0 => claimable.to_owned(),
        n => format!("{claimable}, but {} in paused queues", count(n)),
    }
}

/// The Ready card's note.
fn ready_note(o: &Overview) -> String {
    held_back(o, |s| s.ready, "claimable now")
}

/// The Expired card's note.
fn expired_note(o: &Overview) -> String {
    held_back(o, |s| s.expired, "leases that ran out; claimable again")
}

/// The "oldest ready job" card's note: which job it is.
fn oldest_ready_note(o: &leasefence::Overview, queue: Option<&str>) -> String {
    let paused = |q: &str| o.queues.iter().any(|info| info.paused && info.name == q);
    match &o.oldest_ready {
        Some((id, _)) => match queue {
            Some(q) if paused(q) => format!("job {id}, of the paused queue {q}"),
            _ => format!("job {id}"),
        },
        None => "no job is ready".into(),
    }
}

/// The "oldest ready job" card's link: that job, or the ready jobs when there is none.
fn oldest_ready_href(o: &leasefence::Overview) -> String {
    o.oldest_ready
        .as_ref()
        .map(|(id, _)| job_href(id))
        .unwrap_or_else(|| format!("/dashboard/jobs{}", query(&[("status", "ready")])))
}

/// The stale-writes card's note: the refusals of all time.
fn refused_note(o: &leasefence::Overview) -> String {
    format!("{} in all", count(o.refused_total))
}

// ─── Queues, schedules, fences, audit ────────────────────────────────────────────────────

#[derive(Template)]
#[template(path = "queues.html")]
pub(crate) struct QueuesPage {
    chrome: Chrome,
    statuses: Vec<&'static str>,
    queues: Vec<QueueView>,
}

pub(crate) async fn queues(
    viewer: Viewer,
    State(state): State<AppState>,
    notice: Notice,
) -> Result<Response, PageError> {
    let now = store_now(&state).await?;
    let infos = state.store.call(move |s| s.queues(now)).await?;
    let page = QueuesPage {
        chrome: chrome("Queues", "queues", &viewer, &state.dashboard, &notice),
        statuses: Status::ALL.iter().map(|s| s.as_str()).collect(),
        queues: queue_views(&infos),
    };
    Ok(render(&page))
}

pub(crate) struct ScheduleRow {
    name: String,
    cron: String,
    tz: String,
    queue: String,
    added: String,
    last: String,
    last_href: Option<String>,
    next: Vec<String>,
}

#[derive(Template)]
#[template(path = "schedules.html")]
pub(crate) struct SchedulesPage {
    chrome: Chrome,
    rows: Vec<ScheduleRow>,
}

pub(crate) async fn schedules(
    viewer: Viewer,
    State(state): State<AppState>,
) -> Result<Response, PageError> {
    let now = store_now(&state).await?;
    let infos = state.store.call(|s| s.schedules()).await?;
    let rows = infos
        .iter()
        .map(|info| {
            let sched = &info.schedule;
            let mut next = Vec::new();
            // From the slot the next tick enqueues: after missed slots, the latest of them.
            let mut upcoming = info.next_run(now).ok().flatten();
            while let Some(slot) = upcoming
                && next.len() < 3
            {
                next.push(time(Some(slot as f64)));
                upcoming = sched.next_after(slot).ok().flatten();
            }
            let last_run = info.last_run();
            ScheduleRow {
                name: sched.name().to_owned(),
                cron: sched.cron().to_owned(),
                tz: sched.tz().to_owned(),
                queue: sched.queue_name().as_str().to_owned(),
                added: time(Some(info.created_at)),
                last: last_run.map_or_else(|| "not run yet".into(), |slot| time(Some(slot as f64))),
                last_href: last_run
                    .and_then(|slot| leasefence::run_id(sched.name(), slot).ok())
                    .map(|id| job_href(&id)),
                next,
            }
        })
        .collect();
    let page = SchedulesPage {
        chrome: chrome(
            "Schedules",
            "schedules",
            &viewer,
            &state.dashboard,
            &Notice::default(),
        ),
        rows,
    };
    Ok(render(&page))
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct After {
    #[serde(default)]
    after: String,
}

#[derive(Template)]
#[template(path = "fences.html")]
pub(crate) struct FencesPage {
    chrome: Chrome,
    rows: Vec<(String, i64)>,
    next_href: Option<String>,
    first_href: Option<String>,
}

/// A page of the fence gate or the audit log.
const PAGE: usize = 100;

pub(crate) async fn fences(
    viewer: Viewer,
    State(state): State<AppState>,
    Query(after): Query<After>,
) -> Result<Response, PageError> {
    let from = after.after.clone();
    if !from.is_empty() {
        Resource::new(&from).map_err(|e| {
            PageError::new(
                axum::http::StatusCode::BAD_REQUEST,
                format!("invalid `after`: {e}"),
            )
        })?;
    }
    let rows = state
        .store
        .call(move |s| {
            let after = (!from.is_empty())
                .then(|| Resource::new(&from))
                .transpose()?;
            s.fences(after, PAGE + 1)
        })
        .await?;
    let more = rows.len() > PAGE;
    let rows: Vec<(String, i64)> = rows
        .into_iter()
        .take(PAGE)
        .map(|f| (f.resource, f.fence))
        .collect();
    let page = FencesPage {
        chrome: chrome(
            "Fence gate",
            "fences",
            &viewer,
            &state.dashboard,
            &Notice::default(),
        ),
        next_href: more
            .then(|| {
                rows.last()
                    .map(|(r, _)| format!("/dashboard/fences{}", query(&[("after", r)])))
            })
            .flatten(),
        first_href: (!after.after.is_empty()).then(|| "/dashboard/fences".to_owned()),
        rows,
    };
    Ok(render(&page))
}

pub(crate) struct AuditRow {
    at: String,
    actor: String,
    action: String,
    target: String,
    target_href: Option<String>,
    result: String,
}

#[derive(Template)]
#[template(path = "audit.html")]
pub(crate) struct AuditPage {
    chrome: Chrome,
    rows: Vec<AuditRow>,
    next_href: Option<String>,
    first_href: Option<String>,
}

pub(crate) async fn audit(
    viewer: Viewer,
    State(state): State<AppState>,
    Query(after): Query<After>,
) -> Result<Response, PageError> {
    let before = match after.after.as_str() {
        "" => None,
        s => Some(s.parse::<i64>().map_err(|_| {
            PageError::new(
                axum::http::StatusCode::BAD_REQUEST,
                "invalid `after`: not a position in the log",
            )
        })?),
    };
    let entries = state
        .store
        .call(move |s| s.audit_log(before, PAGE + 1))
        .await?;
    let more = entries.len() > PAGE;
    let entries: Vec<_> = entries.into_iter().take(PAGE).collect();
    let next_href = more
        .then(|| {
            entries
                .last()
                .map(|e| format!("/dashboard/audit?after={}", e.seq))
        })
        .flatten();
    let rows = entries
        .into_iter()
        .map(|e| AuditRow {
            at: time(Some(e.at)),
            target_href: audit_target(&e.target).map(|id| job_href(&id)),
            actor: e.actor,
            action: e.action,
            target: e.target,
            result: e.result,
        })
        .collect();
    let page = AuditPage {
        chrome: chrome(
            "Audit log",
            "audit",
            &viewer,
            &state.dashboard,
            &Notice::default(),
        ),
        rows,
        next_href,
        first_href: before.map(|_| "/dashboard/audit".to_owned()),
    };
    Ok(render(&page))
}

/// The job id an audit entry's target names (`job ID`, as `actions::fit` wrote it: `\0` for
/// a NUL, `\\` for a backslash), or `None` when it names none or was cut short to fit.
fn audit_target(target: &str) -> Option<String> {
    let id = target.strip_prefix("job ")?;
    if target.len() + 2 * '…'.len_utf8() > leasefence::MAX_AUDIT_LEN && target.ends_with('…') {
        return None;
    }
    let mut out = String::with_capacity(id.len());
    let mut chars = id.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                '0' => out.push('\0'),
                '\\' => out.push('\\'),
                // Written before backslashes were escaped: not an id to link to.
                _ => return None,
            },
            c => out.push(c),
        }
    }
    Some(out)
}

// ─── Sign-in ─────────────────────────────────────────────────────────────────────────────

#[derive(Template)]
#[template(path = "login.html")]
pub(crate) struct LoginPage {
    pub(crate) next: String,
    pub(crate) error: Option<&'static str>,
    pub(crate) open: bool,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Next {
    #[serde(default)]
    next: String,
}

pub(crate) async fn login_form(
    State(state): State<AppState>,
    Query(next): Query<Next>,
) -> Response {
    render(&LoginPage {
        next: safe_next(&next.next).to_owned(),
        error: None,
        open: !state.tokens.any(),
    })
}

//! The job search page, `/dashboard/jobs`: the form's filters, the keyset pages, the table.

use askama::Template;
use axum::extract::{Query, State};
use axum::response::Response;
use leasefence::{JobCursor, JobOrder, JobPage, JobQuery, Now, Observe, Queue, Status};
use serde::Deserialize;

use super::access::Viewer;
use super::pages::{Notice, chrome, store_now};
use super::view::{count, job_href, query, relative, time};
use super::{Chrome, PageError, render};
use crate::AppState;

// ─── Jobs ────────────────────────────────────────────────────────────────────────────────

/// The job search's form, as the query string carries it.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Search {
    #[serde(default)]
    status: String,
    #[serde(default)]
    queue: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    owner: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    order: String,
    #[serde(default)]
    after: String,
    #[serde(default)]
    limit: String,
}

pub(crate) struct Opt {
    pub(crate) value: &'static str,
    pub(crate) label: &'static str,
    pub(crate) selected: bool,
}

pub(crate) struct JobRow {
    pub(crate) id: String,
    pub(crate) href: String,
    pub(crate) status: &'static str,
    pub(crate) queue: String,
    pub(crate) kind: String,
    pub(crate) owner: String,
    pub(crate) fence: i64,
    pub(crate) attempts: String,
    pub(crate) enqueued: String,
    pub(crate) lease: String,
}

#[derive(Template)]
#[template(path = "jobs.html")]
pub(crate) struct JobsPage {
    chrome: Chrome,
    queue: String,
    kind: String,
    owner: String,
    id: String,
    limit: usize,
    statuses: Vec<Opt>,
    orders: Vec<Opt>,
    rows: Vec<JobRow>,
    next_href: Option<String>,
    first_href: Option<String>,
    /// The other order; none with an id prefix, which lists by id whatever the order.
    sort_href: Option<String>,
    sort_label: &'static str,
    note: String,
}

impl Search {
    /// The library's query, every field checked (a bad one is a 400 naming it).
    fn to_query(&self) -> Result<JobQuery, PageError> {
        let bad = |field: &str, why: String| {
            PageError::new(
                axum::http::StatusCode::BAD_REQUEST,
                format!("invalid `{field}`: {why}; nothing was changed"),
            )
        };
        // The library's reason alone: its own words name its argument (`cursor` for `after`).
        let why = |e: leasefence::Error| match e {
            leasefence::Error::InvalidArgument { reason, .. } => reason,
            other => other.to_string(),
        };
        let opt = |s: &str| (!s.trim().is_empty()).then(|| s.trim().to_owned());
        let status = match opt(&self.status) {
            Some(s) => Some(Status::parse(&s).map_err(|e| bad("status", why(e)))?),
            None => None,
        };
        let queue = match opt(&self.queue) {
            Some(q) => Some(Queue::new(q).map_err(|e| bad("queue", why(e)))?),
            None => None,
        };
        let order = match opt(&self.order) {
            Some(o) => JobOrder::parse(&o).map_err(|e| bad("order", why(e)))?,
            None => JobOrder::Newest,
        };
        let limit = match opt(&self.limit) {
            Some(l) => l
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=500).contains(n))
                .ok_or_else(|| bad("limit", format!("{l:?} is not a number from 1 to 500")))?,
            None => 50,
        };
        let after = match opt(&self.after) {
            Some(a) => Some(JobCursor::decode(&a).map_err(|e| bad("after", why(e)))?),
            None => None,
        };
        // The id prefix is taken as typed (spaces included); only an empty one is none.
        let id_prefix = (!self.id.is_empty()).then(|| self.id.clone());
        let q = JobQuery {
            status,
            queue,
            kind: opt(&self.kind),
            owner: opt(&self.owner),
            id_prefix,
            order,
            after,
            limit,
            window: leasefence::MAX_WINDOW,
        };
        q.check().map_err(|e| match e.argument() {
            Some(field) => bad(field, why(e)),
            None => PageError::from(e),
        })?;
        Ok(q)
    }

    fn href(&self, order: &str, after: &str) -> String {
        format!(
            "/dashboard/jobs{}",
            query(&[
                ("status", self.status.trim()),
                ("queue", self.queue.trim()),
                ("kind", self.kind.trim()),
                ("owner", self.owner.trim()),
                ("id", &self.id),
                ("order", order),
                ("limit", self.limit.trim()),
                ("after", after),
            ])
        )
    }
}

/// How many windows of [`leasefence::MAX_WINDOW`] jobs one page may look through while it has
/// found fewer matches than its limit: a filter that few jobs match (the dead ones among tens
/// of thousands of newer jobs) still fills its first page, and a page stays within the
/// dashboard's 100 ms (a window takes about 8 ms with a million jobs in the store).
const WINDOWS_PER_PAGE: usize = 5;

/// The page `q` asks for: windows looked through one after another, each going on from where
/// the last stopped, until the page is full, the jobs run out, or [`WINDOWS_PER_PAGE`] were
/// read; its cursor goes on from where the last one stopped.
fn fill(s: &leasefence::AnyStore, now: Now, mut q: JobQuery) -> leasefence::Result<JobPage> {
    let limit = q.limit;
    let mut page = s.find_jobs(now, &q)?;
    for _ in 1..WINDOWS_PER_PAGE {
        let Some(next) = page.next.clone() else { break };
        let wanted = limit.saturating_sub(page.jobs.len());
        if wanted == 0 {
            break;
        }
        q.after = Some(next);
        q.limit = wanted;
        let more = s.find_jobs(now, &q)?;
        page.jobs.extend(more.jobs);
        page.next = more.next;
        page.examined += more.examined;
    }
    Ok(page)
}

pub(crate) async fn jobs(
    viewer: Viewer,
    State(state): State<AppState>,
    Query(search): Query<Search>,
    notice: Notice,
) -> Result<Response, PageError> {
    let q = search.to_query()?;
    let now = store_now(&state).await?;
    let query_copy = q.clone();
    let page = state.store.call(move |s| fill(s, now, query_copy)).await?;
    let at = now.seconds();
    let rows = page
        .jobs
        .iter()
        .map(|j| JobRow {
            id: j.state.id.clone(),
            href: job_href(&j.state.id),
            status: j.status.as_str(),
            queue: j.queue.clone(),
            kind: j.kind.clone().unwrap_or_default(),
            owner: j.state.owner.clone().unwrap_or_default(),
            fence: j.state.fence,
            attempts: if j.max_attempts == 0 {
                format!("{}", j.attempts)
            } else {
                format!("{} / {}", j.attempts, j.max_attempts)
            },
            enqueued: time(j.enqueued_at),
            lease: match j.status {
                Status::Leased => format!("ends {}", relative(j.state.until, at)),
                Status::Expired => format!("ended {}", relative(j.state.until, at)),
                Status::Scheduled => format!("due {}", relative(j.not_before, at)),
                _ => match j.finished_at {
                    Some(f) => format!("finished {}", relative(f, at)),
                    None => String::new(),
                },
            },
        })
        .collect();
    let order = if q.id_prefix.is_some() {
        ""
    } else {
        q.order.as_str()
    };
    let next_href = page
        .next
        .as_ref()
        .map(|c| search.href(&search.order, &c.encode()));
    let first_href = q.after.as_ref().map(|_| search.href(&search.order, ""));
    let note = match (&page.next, page.jobs.len() < q.limit) {
        (Some(_), true) => format!(
            "Looked at {} jobs for this page and found {} that match; the next page goes on \
             from there.",
            count(page.examined as u64),
            page.jobs.len()
        ),
        (None, _) if page.jobs.is_empty() && q.after.is_none() => "No job matches.".into(),
        (None, _) => "No more jobs.".into(),
        _ => String::new(),
    };
    let (sort_href, sort_label) = match q.order {
        JobOrder::Newest => (search.href("oldest", ""), "newest first"),
        JobOrder::Oldest => (search.href("newest", ""), "oldest first"),
    };
    let statuses = std::iter::once(("", "any status"))
        .chain(Status::ALL.iter().map(|s| (s.as_str(), s.as_str())))
        .map(|(value, label)| Opt {
            value,
            label,
            selected: value == q.status.map(Status::as_str).unwrap_or(""),
        })
        .collect();
    // An id prefix lists by id whatever the order asked: the select says so, not "newest".
    let by_id = q
        .id_prefix
        .is_some()
        .then_some(("", "by id (an id prefix)"));
    let orders = by_id
        .into_iter()
        .chain([("newest", "newest first"), ("oldest", "oldest first")])
        .map(|(value, label)| Opt {
            value,
            label,
            selected: value == order,
        })
        .collect();
    let page = JobsPage {
        chrome: chrome("Jobs", "jobs", &viewer, &state.dashboard, &notice),
        queue: search.queue.trim().to_owned(),
        kind: search.kind.trim().to_owned(),
        owner: search.owner.trim().to_owned(),
        id: search.id.clone(),
        limit: q.limit,
        statuses,
        orders,
        rows,
        next_href,
        first_href,
        sort_href: q.id_prefix.is_none().then_some(sort_href),
        sort_label: if q.id_prefix.is_some() {
            "by id (an id prefix)"
        } else {
            sort_label
        },
        note,
    };
    Ok(render(&page))
}

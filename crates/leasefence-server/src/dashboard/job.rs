//! One job's page — every field, the payload and result, and the attempt ledger as a
//! timeline: each fence, who held it, when it was claimed and ended, how, and the stale
//! writes refused under it — and the downloads of its payload and result.

use askama::Template;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use leasefence::{History, JobId, JobInfo, Status, Store};

use super::access::Viewer;
use super::pages::store_now;
use super::view::{Shown, relative, seg, time, unseg};
use super::{Chrome, PageError, render};
use crate::AppState;

pub(crate) struct Field {
    label: &'static str,
    value: String,
}

pub(crate) struct Refused {
    op: String,
    count: u64,
    last: String,
}

pub(crate) struct Step {
    fence: i64,
    owner: String,
    claimed: String,
    ended: String,
    outcome: String,
    tone: &'static str,
    error: String,
    refused: Vec<Refused>,
    current: bool,
}

/// A write refused under a fence no attempt of the job had.
pub(crate) struct Unattempted {
    fence: i64,
    op: String,
    count: u64,
    last: String,
}

pub(crate) struct Action {
    label: &'static str,
    url: String,
    danger: bool,
    note: &'static str,
    /// The fence of the lease the page shows, sent with the action (release acts only on it).
    fence: Option<i64>,
}

#[derive(Template)]
#[template(path = "job.html")]
pub(crate) struct JobPage {
    chrome: Chrome,
    id: String,
    status: &'static str,
    fields: Vec<Field>,
    payload: Option<Shown>,
    payload_href: String,
    result: Option<Shown>,
    result_href: String,
    error: Option<String>,
    steps: Vec<Step>,
    unattempted: Vec<Unattempted>,
    actions: Vec<Action>,
    lease: String,
}

/// The job `id` as the page shows it, or a 404 page.
async fn read(state: &AppState, id: &str) -> Result<(JobInfo, History, f64), PageError> {
    let now = store_now(state).await?;
    let key = id.to_owned();
    let found = state
        .store
        .call(move |s| {
            let job = JobId::new(&key)?;
            let info = s.inspect(job, now)?;
            let history = s.history(job)?;
            Ok(info.zip(history))
        })
        .await
        .map_err(|e| match e.argument() {
            Some(_) => PageError::new(StatusCode::NOT_FOUND, "no such job"),
            None => PageError::from(e),
        })?;
    match found {
        Some((info, history)) => Ok((info, history, now.seconds())),
        None => Err(PageError::new(StatusCode::NOT_FOUND, "no such job")),
    }
}

fn outcome_tone(outcome: &str) -> &'static str {
    match outcome {
        "completed" => "done",
        "failed" | "timed out" => "dead",
        "lost" => "expired",
        "released" | "cancelled" => "cancelled",
        _ => "leased",
    }
}

pub(crate) async fn job(
    viewer: Viewer,
    State(state): State<AppState>,
    Path(id): Path<String>,
    notice: super::pages::Notice,
) -> Result<Response, PageError> {
    let id = unseg(id);
    let (info, history, now) = read(&state, &id).await?;
    let hide = state.dashboard.hide_payloads;
    let shown = |data: &[u8]| {
        if hide {
            Shown::hidden(data.len())
        } else {
            Shown::of(data)
        }
    };
    let base = format!("/dashboard/jobs/{}", seg(&id));
    let st = &info.state;
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "—".into());
    let fields = vec![
        Field {
            label: "Status",
            value: info.status.as_str().into(),
        },
        Field {
            label: "Queue",
            value: info.queue.clone(),
        },
        Field {
            label: "Kind",
            value: opt(&info.kind),
        },
        Field {
            label: "Owner",
            value: opt(&st.owner),
        },
        Field {
            label: "Fence",
            value: st.fence.to_string(),
        },
        Field {
            label: "Lease until",
            value: match (st.until > 0.0, st.done) {
                (false, _) => "—".into(),
                (true, false) => format!("{} ({})", time(Some(st.until)), relative(st.until, now)),
                (true, true) => format!(
                    "{} (the last lease's end, kept as a record)",
                    time(Some(st.until))
                ),
            },
        },
        Field {
            label: "Attempts",
            value: if info.max_attempts == 0 {
                format!("{} (no limit)", info.attempts)
            } else {
                format!("{} of {}", info.attempts, info.max_attempts)
            },
        },
        Field {
            label: "Priority",
            value: info.priority.to_string(),
        },
        Field {
            label: "Not before",
            value: if info.not_before > 0.0 {
                time(Some(info.not_before))
            } else {
                "—".into()
            },
        },
        Field {
            label: "Unique key",
            value: opt(&info.unique_key),
        },
        Field {
            label: "Enqueued",
            value: time(info.enqueued_at),
        },
        Field {
            label: "Finished",
            value: time(info.finished_at),
        },
        Field {
            label: "Outcome",
            value: opt(&info.outcome),
        },
        Field {
            label: "Done",
            value: if st.done { "yes".into() } else { "no".into() },
        },
    ];
    let steps = history
        .attempts
        .iter()
        .map(|a| {
            let outcome = a.outcome.map(|o| o.as_str().to_owned());
            let refused = history
                .refusals
                .iter()
                .filter(|r| r.fence == a.fence)
                .map(|r| Refused {
                    op: r.op.as_str().to_owned(),
                    count: r.count,
                    last: time(Some(r.last_at)),
                })
                .collect();
            Step {
                fence: a.fence,
                owner: a.owner.clone(),
                claimed: a
                    .claimed_at
                    .map(|t| time(Some(t)))
                    .unwrap_or_else(|| "unknown".into()),
                ended: time(a.ended_at),
                tone: outcome.as_deref().map(outcome_tone).unwrap_or("leased"),
                outcome: outcome.unwrap_or_else(|| "open".into()),
                error: a.error.clone().unwrap_or_default(),
                refused,
                // The attempt whose lease the job holds now (open: neither ended nor lost yet).
                current: a.fence == st.fence && !st.done && a.outcome.is_none(),
            }
        })
        .collect();
    // Writes refused under a fence that no attempt of this job had (never handed out, or not
    // this job's): shown apart, as `leasefence history` does.
    let unattempted = history
        .refusals
        .iter()
        .filter(|r| history.attempts.iter().all(|a| a.fence != r.fence))
        .map(|r| Unattempted {
            fence: r.fence,
            op: r.op.as_str().to_owned(),
            count: r.count,
            last: time(Some(r.last_at)),
        })
        .collect();
    let mut actions = Vec::new();
    let mut add = |label, action: &str, danger, note| {
        actions.push(Action {
            label,
            url: format!("{base}/{action}"),
            danger,
            note,
            fence: (action == "release").then_some(st.fence),
        })
    };
    // The scheduler role's job is only deleted here (that resets the role): the actions
    // refuse the rest, so they are not offered.
    let role = id == leasefence::SCHEDULER_JOB;
    if !st.done && !role {
        add(
            "Cancel",
            "cancel",
            true,
            "Finish it as cancelled: never handed out again, its holder can store nothing.",
        );
    }
    if matches!(info.status, Status::Dead | Status::Cancelled) && !role {
        add(
            "Retry",
            "retry",
            false,
            "Make it ready again with a fresh attempts budget; the fence goes on.",
        );
    }
    if info.status == Status::Expired && !role {
        add(
            "Release the expired lease",
            "release",
            false,
            "Give the lease back under its own owner and fence, as its holder would.",
        );
    }
    add(
        "Delete",
        "delete",
        true,
        "Remove the job; its last fence is kept as the id's floor.",
    );
    let lease = match info.status {
        Status::Leased => format!(
            "Held by {} under fence {}; the lease ends {}.",
            opt(&st.owner),
            st.fence,
            relative(st.until, now)
        ),
        Status::Expired => format!(
            "The lease of {} (fence {}) ended {}; nobody has claimed it since.",
            opt(&st.owner),
            st.fence,
            relative(st.until, now)
        ),
        _ => String::new(),
    };
    let mut chrome = Chrome::new(format!("Job {id}"), "jobs", &viewer, &state.dashboard);
    chrome.notice = notice.message();
    let page = JobPage {
        chrome,
        status: info.status.as_str(),
        fields,
        payload: info.payload.as_deref().map(shown),
        payload_href: format!("{base}/payload"),
        result: st.result.as_deref().map(|r| shown(r.as_bytes())),
        result_href: format!("{base}/result"),
        error: info.error.clone(),
        steps,
        unattempted,
        actions,
        lease,
        id,
    };
    Ok(render(&page))
}

/// A file name that is safe in a header: the id's letters, digits, `-`, `_` and `.`.
fn file_name(id: &str, what: &str) -> String {
    let stem: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect();
    format!("{}.{what}", stem.trim_start_matches('.'))
}

fn download(state: &AppState, id: &str, what: &str, data: Option<Vec<u8>>) -> Response {
    if state.dashboard.hide_payloads {
        return PageError::new(
            StatusCode::FORBIDDEN,
            "payloads and results are hidden on this server (--hide-payloads)",
        )
        .into_response();
    }
    let Some(data) = data else {
        return PageError::new(StatusCode::NOT_FOUND, format!("the job has no {what}"))
            .into_response();
    };
    (
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{}\"", file_name(id, what)),
            ),
        ],
        data,
    )
        .into_response()
}

pub(crate) async fn payload(
    _viewer: Viewer,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let id = unseg(id);
    let (info, _, _) = read(&state, &id).await?;
    Ok(download(&state, &id, "payload", info.payload))
}

pub(crate) async fn result(
    _viewer: Viewer,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let id = unseg(id);
    let (info, _, _) = read(&state, &id).await?;
    Ok(download(
        &state,
        &id,
        "result",
        info.state.result.map(String::into_bytes),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_download_name_holds_no_quote_or_path() {
        assert_eq!(file_name("a\"b/../c", "payload"), "a_b_.._c.payload");
        assert_eq!(file_name("..secret", "result"), "secret.result");
    }
}

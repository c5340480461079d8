//! The dashboard's actions, each a POST: cancel, retry, delete, release an expired lease,
//! pause and resume a queue, retry a queue's dead jobs; and signing in and out.
//!
//! An action needs the admin token (or a server without tokens), a form from this server
//! (same origin, the visitor's CSRF token) and a confirmation: the first POST answers with a
//! page that says what will happen, whose button POSTs again with `confirmed=yes`. It then
//! makes the same library call as the CLI's verb — the operator verbs are not fenced, exactly
//! as there; releasing an expired lease is the fenced `release` under the lease's own owner
//! and fence, so it can only give back the lease the page showed — records what it did in
//! the audit log, and redirects to the page it came from with the outcome.

use askama::Template;
use axum::Form;
use axum::extract::{FromRequest, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use leasefence::{AuditRecord, JobId, Now, Observe, Queue, Queues, Status, Store};
use serde::Deserialize;

use super::access::{
    COOKIE, SESSION_LIFE, Via, Viewer, clean_name, safe_next, same_origin, session_cookie,
};
use super::pages::{LoginPage, store_now};
use super::view::{job_href, seg, unseg};
use super::{Chrome, PageError, render};
use crate::AppState;
use crate::routes::jobs::RetryRefused;

/// A form body, read within the request timeout as the API's JSON bodies are: one that does not
/// arrive in time is a 503 and its connection is closed (the sign-in form needs no token, so
/// any client could otherwise hold connections open for as long as it likes).
#[derive(Debug)]
pub(crate) struct TimedForm<T>(pub(crate) T);

impl<S, T> FromRequest<S> for TimedForm<T>
where
    S: Send + Sync,
    T: serde::de::DeserializeOwned,
{
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let timeout = req
            .extensions()
            .get::<crate::body::BodyLimits>()
            .map_or(std::time::Duration::from_secs(30), |l| l.timeout);
        match tokio::time::timeout(timeout, Form::<T>::from_request(req, state)).await {
            Ok(Ok(Form(form))) => Ok(TimedForm(form)),
            // The dashboard's own page, not the framework's plain text: a field that does not
            // parse (`fence=abc`) is bad input (400); a body that is no form keeps its status.
            Ok(Err(rejection)) => {
                let status = match rejection.status() {
                    StatusCode::UNPROCESSABLE_ENTITY => StatusCode::BAD_REQUEST,
                    other => other,
                };
                Err(PageError::new(
                    status,
                    format!(
                        "the form could not be read ({}); nothing was done — reload the page \
                         and try again",
                        rejection.body_text()
                    ),
                )
                .into_response())
            }
            Err(_) => {
                let mut response = PageError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the form did not arrive within the server's time limit; nothing was done",
                )
                .into_response();
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
                Err(response)
            }
        }
    }
}

/// An action's form.
#[derive(Debug, Deserialize)]
pub(crate) struct ActionForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    confirmed: String,
    /// The fence of the lease the page showed: a release acts on that lease only.
    #[serde(default)]
    fence: Option<i64>,
}

#[derive(Template)]
#[template(path = "confirm.html")]
struct ConfirmPage {
    chrome: Chrome,
    question: String,
    detail: &'static str,
    url: String,
    back: String,
    danger: bool,
    /// Carried on to the confirmed post (a release's lease).
    fence: Option<i64>,
}

/// Checks who may do it, where the form came from and its CSRF token.
fn allowed(viewer: &Viewer, headers: &HeaderMap, form: &ActionForm) -> Result<(), PageError> {
    if !viewer.can_act {
        return Err(PageError::new(
            StatusCode::FORBIDDEN,
            "this action needs the admin token: sign in with it (you are signed in read-only)",
        ));
    }
    if !same_origin(headers) {
        return Err(PageError::new(
            StatusCode::FORBIDDEN,
            "refused: the form was not sent from a page of this server; nothing was changed",
        ));
    }
    if !viewer.csrf_ok(&form.csrf) {
        return Err(PageError::new(
            StatusCode::FORBIDDEN,
            "refused: the form's security token is missing or out of date (was the server \
             restarted?); reload the page and try again; nothing was changed",
        ));
    }
    Ok(())
}

async fn audit(
    state: &AppState,
    actor: String,
    action: &'static str,
    target: String,
    result: String,
) -> Result<(), PageError> {
    tracing::info!(action, %target, %result, "dashboard action");
    // The action is done already: what records it must fit the log's fields, or the visitor
    // would be told "nothing was changed" about a job that was, and the log would miss it.
    let target = fit(&target.replace('\\', "\\\\"));
    let (actor, result) = (fit(&actor), fit(&result));
    let at = Now::system();
    let record = (actor.clone(), target.clone(), result.clone());
    let recorded = state
        .store
        .call(move |s| {
            let (actor, target, result) = record;
            s.record_audit(
                &AuditRecord {
                    actor: &actor,
                    action,
                    target: &target,
                    result: &result,
                },
                at,
            )
        })
        .await;
    if let Err(e) = recorded {
        // The action committed on its own: the visitor is told it was done (not "nothing was
        // written, retry"), and the server's log keeps the record the audit log could not.
        tracing::error!(
            %actor, action, %target, %result, error = %leasefence::error_chain(&e),
            "a dashboard action was done but not recorded in the audit log"
        );
        return Err(PageError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "{action} of {target} ran: {result}. It was not recorded in the audit log (the \
                 server's log has the record and the reason); do not repeat it"
            ),
        ));
    }
    Ok(())
}

/// `text` as a field of an audit record: a NUL (an SQLite id may hold one) written `\0`, and
/// text over [`MAX_AUDIT_LEN`](leasefence::MAX_AUDIT_LEN) bytes (an id or an owner may be
/// longer) cut at a character boundary, ending in `…`.
fn fit(text: &str) -> String {
    // A NUL cannot be stored: written `\0` (a target's backslashes are doubled first, so the
    // audit page reads its job id back exactly: `pages::audit_target`).
    let text = text.replace('\0', "\\0");
    if text.len() <= leasefence::MAX_AUDIT_LEN {
        return text;
    }
    let mut end = leasefence::MAX_AUDIT_LEN - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// What each job action says before it is confirmed.
fn job_question(action: &str, id: &str) -> Option<(String, &'static str, bool)> {
    Some(match action {
        "cancel" => (
            format!("Cancel job {id}?"),
            "It finishes as cancelled and is never handed out again; its current holder's renew, complete and fail are refused from now on. An operator verb: not fenced.",
            true,
        ),
        "retry" => (
            format!("Retry job {id}?"),
            "A dead or cancelled job becomes ready again with a fresh attempts budget. The fence goes on above every one handed out, so an old lease stays worthless.",
            false,
        ),
        "delete" => (
            format!("Delete job {id}?"),
            "The job and its ledger are removed. Its last fence is kept as the id's floor: the same id enqueued again continues above it.",
            true,
        ),
        "release" => (
            format!("Release the expired lease of job {id}?"),
            "Gives the lease back under its own owner and fence, as its holder would: the job is claimable at once, the fence is kept and the attempt refunded. Only the lease the page showed (its fence is named above): if the job was claimed again meanwhile, nothing happens.",
            false,
        ),
        _ => return None,
    })
}

pub(crate) async fn job_action(
    viewer: Viewer,
    State(state): State<AppState>,
    Path((id, action)): Path<(String, String)>,
    headers: HeaderMap,
    TimedForm(form): TimedForm<ActionForm>,
) -> Result<Response, PageError> {
    let id = unseg(id);
    let (question, detail, danger) = job_question(&action, &id)
        .ok_or_else(|| PageError::new(StatusCode::NOT_FOUND, "no such action"))?;
    allowed(&viewer, &headers, &form)?;
    JobId::new(&id).map_err(|e| PageError::new(StatusCode::NOT_FOUND, e.to_string()))?;
    if id == leasefence::SCHEDULER_JOB && action != "delete" {
        // As the API refuses it: cancelling the role's job stops every scheduler, retrying or
        // releasing it hands it to ordinary workers. Deleting it resets the role.
        return Err(PageError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "{} is the scheduler role's job, not a job to {action}; delete it to reset the \
                 role",
                leasefence::SCHEDULER_JOB
            ),
        ));
    }
    let base = format!("/dashboard/jobs/{}", seg(&id));
    let shown = form.fence.filter(|_| action == "release");
    if action == "release" && shown.is_none() {
        return Err(PageError::new(
            StatusCode::BAD_REQUEST,
            "a release names the lease it gives back (its fence); reload the job's page",
        ));
    }
    if form.confirmed != "yes" {
        let question = match shown {
            Some(fence) => {
                format!(
                    "{} (the lease under fence {fence})",
                    question.trim_end_matches('?')
                ) + "?"
            }
            None => question,
        };
        return Ok(render(&ConfirmPage {
            chrome: Chrome::new("Confirm", "jobs", &viewer, &state.dashboard),
            question,
            detail,
            url: format!("{base}/{action}"),
            back: base,
            danger,
            fence: shown,
        }));
    }
    let now = store_now(&state).await?;
    let key = id.clone();
    let verb = action.clone();
    // (done, what the audit log records, why a refusal was refused, as a fixed word the page
    // turns into its notice: `gone` sends it to the job list, the job having no page)
    let (ok, result, why) = state
        .store
        .call(move |s| {
            let job = JobId::new(&key)?;
            // Why a refused job action was refused, read after it: the job's status, or `None`
            // when it is gone. Best-effort: the refusal stands whatever the read finds, and a
            // read that fails (`Err`) leaves the reason unsaid.
            let after = |s: &leasefence::AnyStore| -> Result<Option<Status>, ()> {
                s.inspect(job, now)
                    .map(|info| info.map(|info| info.status))
                    .map_err(drop)
            };
            Ok(match verb.as_str() {
                "cancel" => match s.cancel(job, now)? {
                    true => (true, "cancelled".to_owned(), None),
                    false => match after(s) {
                        Ok(None) => (false, "refused: no such job".to_owned(), Some("gone")),
                        _ => (
                            false,
                            "refused: unknown or already finished".to_owned(),
                            None,
                        ),
                    },
                },
                "retry" => match s.retry(&[job], now)?.first() {
                    Some(true) => (true, "retried".to_owned(), None),
                    _ => match after(s).map(RetryRefused::of) {
                        Ok(RetryRefused::Gone) => {
                            (false, "refused: no such job".to_owned(), Some("gone"))
                        }
                        Ok(RetryRefused::Duplicate) => (
                            false,
                            "refused: another unfinished job of its queue holds its unique key"
                                .to_owned(),
                            Some("duplicate"),
                        ),
                        Ok(RetryRefused::Done) => {
                            (false, "refused: completed".to_owned(), Some("completed"))
                        }
                        _ => (false, "refused: not dead or cancelled".to_owned(), None),
                    },
                },
                "delete" => match s.delete(&[job])?.first() {
                    Some(true) => (true, "deleted".to_owned(), None),
                    _ => (false, "refused: no such job".to_owned(), Some("gone")),
                },
                _ => {
                    // release: only the expired lease the page showed, under its own owner
                    // and fence.
                    let info = s.inspect(job, now)?;
                    match info {
                        Some(info) if Some(info.state.fence) != shown => (
                            false,
                            format!(
                                "refused: the lease changed since the page was shown (fence {} \
                                 now, {} shown)",
                                info.state.fence,
                                shown.unwrap_or_default()
                            ),
                            None,
                        ),
                        Some(info) if info.status == Status::Expired => {
                            let owner = info.state.owner.clone().unwrap_or_default();
                            let holder = leasefence::Owner::new(&owner)?;
                            match s.release(job, holder, info.state.fence)? {
                                true => (
                                    true,
                                    format!(
                                        "released the lease of {owner} under fence {}",
                                        info.state.fence
                                    ),
                                    None,
                                ),
                                false => (
                                    false,
                                    "refused: the lease changed meanwhile".to_owned(),
                                    None,
                                ),
                            }
                        }
                        Some(info) if info.status == Status::Leased => (
                            false,
                            "refused: the lease is live; only an expired lease is released here"
                                .to_owned(),
                            None,
                        ),
                        Some(_) => (
                            false,
                            "refused: the job holds no expired lease".to_owned(),
                            None,
                        ),
                        None => (false, "refused: no such job".to_owned(), Some("gone")),
                    }
                }
            })
        })
        .await?;
    let action_name: &'static str = match action.as_str() {
        "cancel" => "cancel",
        "retry" => "retry",
        "delete" => "delete",
        _ => "release",
    };
    audit(
        &state,
        viewer.actor.clone(),
        action_name,
        format!("job {id}"),
        result,
    )
    .await?;
    // A job deleted, or found gone, has no page to go back to: the job list.
    let back = if (action_name == "delete" && ok) || why == Some("gone") {
        "/dashboard/jobs".to_owned()
    } else {
        job_href(&id)
    };
    let why = why.map(|w| format!("&why={w}")).unwrap_or_default();
    Ok(Redirect::to(&format!(
        "{back}?done={action_name}&ok={}{why}",
        u8::from(ok)
    ))
    .into_response())
}

pub(crate) async fn queue_action(
    viewer: Viewer,
    State(state): State<AppState>,
    Path((name, action)): Path<(String, String)>,
    headers: HeaderMap,
    TimedForm(form): TimedForm<ActionForm>,
) -> Result<Response, PageError> {
    let name = unseg(name);
    let (question, detail, danger): (String, &'static str, bool) = match action.as_str() {
        "pause" => (
            format!("Pause queue {name}?"),
            "Claims hand out none of its jobs until it is resumed. Leases already held in it stay valid: their renew, complete, fail and release go on.",
            false,
        ),
        "resume" => (
            format!("Resume queue {name}?"),
            "Claims hand out its jobs again.",
            false,
        ),
        "retry-dead" => (
            format!("Retry every dead job of queue {name}?"),
            "Each becomes ready again with a fresh attempts budget, in one transaction; fences go on above every one handed out.",
            false,
        ),
        _ => return Err(PageError::new(StatusCode::NOT_FOUND, "no such action")),
    };
    allowed(&viewer, &headers, &form)?;
    let queue = Queue::new(name.clone())
        .map_err(|e| PageError::new(StatusCode::NOT_FOUND, e.to_string()))?;
    if form.confirmed != "yes" {
        return Ok(render(&ConfirmPage {
            chrome: Chrome::new("Confirm", "queues", &viewer, &state.dashboard),
            question,
            detail,
            url: format!("/dashboard/queues/{}/{action}", seg(&name)),
            back: "/dashboard/queues".into(),
            danger,
            fence: None,
        }));
    }
    let now = store_now(&state).await?;
    let verb = action.clone();
    let (ok, n, result, action_name, left) = state
        .store
        .call(move |s| {
            Ok(match verb.as_str() {
                "pause" => {
                    let changed = s.pause(&queue)?;
                    (
                        changed,
                        0,
                        if changed { "paused" } else { "already paused" }.to_owned(),
                        "pause",
                        0,
                    )
                }
                "resume" => {
                    let changed = s.resume(&queue)?;
                    (
                        changed,
                        0,
                        if changed { "resumed" } else { "was not paused" }.to_owned(),
                        "resume",
                        0,
                    )
                }
                _ => {
                    let n = s.retry_dead_in(&Queues::Only(vec![queue.clone()]), now)?;
                    // The dead ones left: each one's unique key is held by an unfinished job
                    // of the queue (retrying it would make two), or it died meanwhile.
                    let left = s
                        .queues(now)?
                        .into_iter()
                        .find(|q| q.name == queue.as_str())
                        .map_or(0, |q| q.stats.dead);
                    let result = match left {
                        0 => format!("retried {n} dead"),
                        _ => format!(
                            "retried {n} dead; {left} left dead: another unfinished job of the \
                             queue holds the unique key of each"
                        ),
                    };
                    (true, n, result, "retry_dead", left)
                }
            })
        })
        .await?;
    audit(
        &state,
        viewer.actor.clone(),
        action_name,
        format!("queue {name}"),
        result,
    )
    .await?;
    let why = if left > 0 { "&why=duplicate" } else { "" };
    Ok(Redirect::to(&format!(
        "/dashboard/queues?done={action_name}&ok={}&n={n}{why}",
        u8::from(ok)
    ))
    .into_response())
}

// ─── Sign-in ─────────────────────────────────────────────────────────────────────────────

#[derive(Debug, Deserialize)]
pub(crate) struct LoginForm {
    #[serde(default)]
    user: String,
    #[serde(default)]
    token: String,
    #[serde(default)]
    next: String,
}

pub(crate) async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    TimedForm(form): TimedForm<LoginForm>,
) -> Response {
    let next = safe_next(&form.next).to_owned();
    let page = |error| {
        render(&LoginPage {
            next: next.clone(),
            error: Some(error),
            open: !state.tokens.any(),
        })
    };
    if !same_origin(&headers) {
        let mut r = page("The form was not sent from a page of this server.");
        *r.status_mut() = StatusCode::FORBIDDEN;
        return r;
    }
    if !state.tokens.any() {
        return Redirect::to(&next).into_response();
    }
    let Some(role) = state.tokens.role_of(form.token.trim().as_bytes()) else {
        tracing::warn!("dashboard sign-in refused: not a known token");
        let mut r = page("That is neither the worker token nor the admin token of this server.");
        *r.status_mut() = StatusCode::UNAUTHORIZED;
        return r;
    };
    let id = state.dashboard.access.start(role, &clean_name(&form.user));
    let secure = headers
        .get("x-forwarded-proto")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"https"));
    let cookie = format!(
        "{COOKIE}={id}; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age={}{}",
        SESSION_LIFE.as_secs(),
        if secure { "; Secure" } else { "" }
    );
    let mut response = Redirect::to(&next).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

#[derive(Debug, Deserialize)]
pub(crate) struct LogoutForm {
    #[serde(default)]
    csrf: String,
}

pub(crate) async fn logout(
    viewer: Viewer,
    State(state): State<AppState>,
    headers: HeaderMap,
    TimedForm(form): TimedForm<LogoutForm>,
) -> Result<Response, PageError> {
    if viewer.via != Via::Session || !same_origin(&headers) || !viewer.csrf_ok(&form.csrf) {
        return Err(PageError::new(
            StatusCode::FORBIDDEN,
            "refused: not a sign-out from this server's page",
        ));
    }
    if let Some(id) = session_cookie(&headers) {
        state.dashboard.access.end(&id);
    }
    let mut response = Redirect::to("/dashboard/login").into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "lf_session=; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=0",
        ),
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::fit;

    #[test]
    fn an_audit_field_fits_the_log() {
        assert_eq!(fit("job a\0b"), "job a\\0b");
        let long = fit(&"é".repeat(leasefence::MAX_AUDIT_LEN));
        assert!(long.len() <= leasefence::MAX_AUDIT_LEN && long.ends_with('…'));
        assert_eq!(fit("cancelled"), "cancelled");
    }
}

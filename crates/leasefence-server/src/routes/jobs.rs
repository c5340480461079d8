//! Jobs: enqueue and read (worker token), and the operator verbs cancel, retry and delete
//! (admin token). The operator verbs are not fenced — exactly as the library's and the CLI's —
//! and are documented as such: a cancelled job's holder can store nothing afterwards.

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use leasefence::{Enqueued, JobId, Now, SCHEDULER_JOB, Status, Store};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::auth::{Admin, Worker};
use crate::body::{JsonBody, Segment, from_value};
use crate::dto::{Done, EnqueueBody, EnqueuedBody, EnqueuedMany, JobBody, JobPage};
use crate::error::{ApiError, ErrorBody, Reason};

/// The most jobs one enqueue may carry (the body limit may stop it earlier).
pub const MAX_ENQUEUE: usize = 10_000;
/// The most jobs one page of `GET /v1/jobs` holds.
pub const MAX_PAGE: usize = 1000;
/// With a queue filter, the most rows one request reads before it answers a short page whose
/// `next` goes on from there (a rare queue never holds a store connection for long).
pub const SCAN_ROWS: usize = 10_000;

/// `{"jobs": [...]}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManyBody {
    jobs: Vec<crate::dto::NewJobBody>,
}

fn outcome(job_id: String, e: Enqueued) -> EnqueuedBody {
    let (outcome, of) = match e {
        Enqueued::Inserted => ("inserted", None),
        Enqueued::Known => ("known", None),
        Enqueued::Duplicate { of } => ("duplicate", Some(of)),
        // A kind of outcome this server does not know yet: reported, not guessed.
        _ => ("unknown", None),
    };
    EnqueuedBody {
        job_id,
        outcome,
        of,
    }
}

/// Enqueue one job (`201`, or `409` `known` / `duplicate`), or `{"jobs": [...]}` in one
/// transaction (`200` with each job's outcome in order).
#[utoipa::path(post, path = "/v1/jobs", tag = "jobs",
    request_body = EnqueueBody,
    responses(
        (status = 201, description = "One job, inserted", body = EnqueuedBody),
        (status = 200, description = "Many jobs: each one's outcome, in order", body = EnqueuedMany),
        (status = 400, description = "Bad input; `field` names it (`jobs[3].queue`); nothing inserted", body = ErrorBody),
        (status = 409, description = "One job, not inserted: `known` or `duplicate` (`of` names the holder of the key)", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
    ),
    security(("worker" = [])))]
pub async fn enqueue(
    _: Worker,
    State(state): State<AppState>,
    JsonBody(body): JsonBody<serde_json::Value>,
) -> Result<Response, ApiError> {
    // `{"jobs": [...]}` is many; anything else is one job (the schema is `EnqueueBody`).
    let body = if body.get("jobs").is_some() {
        let many: ManyBody = from_value(body)?;
        EnqueueBody::Many { jobs: many.jobs }
    } else {
        EnqueueBody::One(from_value(body)?)
    };
    // A `delay` counts from the clock that judges leases (on PostgreSQL, the database's).
    let delayed = match &body {
        EnqueueBody::One(job) => job.delay.is_some(),
        EnqueueBody::Many { jobs } => jobs.iter().any(|j| j.delay.is_some()),
    };
    let now = match delayed {
        true => state.store.now().await?.seconds(),
        false => Now::system().seconds(),
    };
    let (jobs, many) = match body {
        EnqueueBody::One(job) => (vec![job.into_job(now, None)?], false),
        EnqueueBody::Many { jobs } => {
            if jobs.len() > MAX_ENQUEUE {
                return Err(ApiError::bad(
                    "jobs",
                    format!("at most {MAX_ENQUEUE} jobs per request, got {}", jobs.len()),
                ));
            }
            let jobs = jobs
                .into_iter()
                .enumerate()
                .map(|(i, j)| j.into_job(now, Some(i)))
                .collect::<Result<Vec<_>, _>>()?;
            (jobs, true)
        }
    };
    for (i, job) in jobs.iter().enumerate() {
        let field = || match many {
            true => format!("jobs[{i}].id"),
            false => "id".to_owned(),
        };
        super::batch::storable(&state, field, job.id(), true)?;
    }
    let ids: Vec<String> = jobs.iter().map(|j| j.id().to_owned()).collect();
    let outcomes = state.store.call(move |s| s.enqueue_jobs(&jobs)).await?;
    let mut results: Vec<EnqueuedBody> = ids
        .into_iter()
        .zip(outcomes)
        .map(|(id, e)| outcome(id, e))
        .collect();
    if many {
        return Ok(Json(EnqueuedMany { results }).into_response());
    }
    let one = results.remove(0);
    match one.outcome {
        "inserted" => Ok((StatusCode::CREATED, Json(one)).into_response()),
        "known" => Err(ApiError::refused(
            Reason::Known,
            &format!("enqueue of {}", one.job_id),
        )),
        _ => Err(ApiError::Refused {
            reason: Reason::Duplicate,
            message: format!(
                "refused: enqueue of {}: {} ({}); nothing was inserted",
                one.job_id,
                Reason::Duplicate.explain(),
                one.of.as_deref().unwrap_or("?")
            ),
            of: one.of,
        }),
    }
}

/// One job, as stored, with its status now.
#[utoipa::path(get, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "The job id")),
    responses(
        (status = 200, description = "The job", body = JobBody),
        (status = 404, description = "No such job", body = ErrorBody),
    ),
    security(("worker" = [])))]
pub async fn get_job(
    _: Worker,
    State(state): State<AppState>,
    Segment(id): Segment,
) -> Result<Json<JobBody>, ApiError> {
    JobId::new(&id)?;
    let job = id.clone();
    let info = state
        .store
        .call(move |s| s.inspect(JobId::new(&job)?, Now::system()))
        .await?;
    info.map(|i| Json(i.into()))
        .ok_or_else(|| ApiError::NotFound(format!("no job {id}")))
}

/// The query of `GET /v1/jobs` (its OpenAPI parameters; read through [`RawListQuery`], so
/// that a bad parameter is named as itself).
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only jobs in this status (`ready`, `scheduled`, `leased`, `expired`, `retrying`,
    /// `done`, `dead`, `cancelled`).
    pub status: Option<String>,
    /// Only jobs of this queue.
    pub queue: Option<String>,
    /// Jobs after this id (the `next` of the previous page).
    pub after: Option<String>,
    /// At most this many (default 100, at most 1000).
    pub limit: Option<usize>,
}

/// [`ListQuery`] as text: every value parsed here, so that a bad one is named in `field`
/// (`limit`), not as the whole query; a parameter it does not know is named too.
#[derive(Debug, Deserialize)]
pub struct RawListQuery {
    status: Option<String>,
    queue: Option<String>,
    after: Option<String>,
    limit: Option<String>,
    #[serde(flatten)]
    unknown: std::collections::BTreeMap<String, String>,
}

impl RawListQuery {
    fn parse(self) -> Result<ListQuery, ApiError> {
        if let Some(name) = self.unknown.keys().next() {
            return Err(ApiError::bad(
                "query",
                format!("unknown query parameter `{name}`; known: status, queue, after, limit"),
            ));
        }
        let limit = self
            .limit
            .map(|text| {
                text.parse::<usize>().map_err(|_| {
                    ApiError::bad(
                        "limit",
                        format!("must be a whole number from 1 to {MAX_PAGE}, got {text:?}"),
                    )
                })
            })
            .transpose()?;
        Ok(ListQuery {
            status: self.status,
            queue: self.queue,
            after: self.after,
            limit,
        })
    }
}

/// Jobs in the order they were enqueued, a page at a time (keyset paging: pass `next` as
/// `after`). With a queue filter a page may hold fewer than `limit` jobs and still have a
/// `next`: go on until there is none.
#[utoipa::path(get, path = "/v1/jobs", tag = "jobs",
    params(ListQuery),
    responses(
        (status = 200, description = "A page of jobs", body = JobPage),
        (status = 400, description = "Bad input", body = ErrorBody),
    ),
    security(("worker" = [])))]
pub async fn list_jobs(
    _: Worker,
    State(state): State<AppState>,
    query: Result<Query<RawListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<JobPage>, ApiError> {
    // All text: what fails here is the query's form itself (a parameter given twice).
    let Query(raw) = query.map_err(|e| ApiError::bad("query", e.body_text()))?;
    let q = raw.parse()?;
    let status = q.status.as_deref().map(Status::parse).transpose()?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::bad(
            "limit",
            format!("must be 1 to {MAX_PAGE}, got {limit}"),
        ));
    }
    // `after=` with nothing: from the start.
    let after = q.after.filter(|a| !a.is_empty());
    let queue = q.queue.map(leasefence::Queue::new).transpose()?;
    let page = state
        .store
        .call(move |s| {
            let now = Now::system();
            let mut cursor = after;
            let mut jobs = Vec::new();
            let mut scanned = 0;
            // One more than `limit` tells whether there is a next page. Without a queue
            // filter one read is the page; with one, pages are read in order until enough
            // jobs of the queue are found, the store ends, or SCAN_ROWS rows were read — then
            // the page is short and `next` goes on from the last row read.
            loop {
                let batch = s.list(
                    now,
                    status,
                    cursor.as_deref().map(JobId::new).transpose()?,
                    limit + 1,
                )?;
                let end = batch.len() <= limit;
                scanned += batch.len();
                cursor = batch.last().map(|j| j.id().to_owned());
                for job in batch {
                    if queue.as_ref().is_none_or(|q| q.as_str() == job.queue) {
                        jobs.push(job);
                        if jobs.len() > limit {
                            break;
                        }
                    }
                }
                if jobs.len() > limit {
                    jobs.truncate(limit);
                    let next = jobs.last().map(|j| j.id().to_owned());
                    return Ok((jobs, next));
                }
                if end {
                    return Ok((jobs, None));
                }
                if scanned >= SCAN_ROWS {
                    return Ok((jobs, cursor));
                }
            }
        })
        .await?;
    let (jobs, next) = page;
    Ok(Json(JobPage {
        jobs: jobs.into_iter().map(JobBody::from).collect(),
        next,
    }))
}

/// One attempt of a job's ledger.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttemptBody {
    /// The fence the claim handed out.
    pub fence: i64,
    /// Who held it.
    pub owner: String,
    /// When it was claimed (absent when unknown).
    pub claimed_at: Option<f64>,
    /// When it ended.
    pub ended_at: Option<f64>,
    /// `completed`, `failed`, `timed_out`, `released`, `lost`, `cancelled`; absent while open.
    pub outcome: Option<String>,
    /// A failure's error.
    pub error: Option<String>,
}

/// Refused writes under one fence.
#[derive(Debug, Serialize, ToSchema)]
pub struct RefusalBody {
    /// The fence that tried.
    pub fence: i64,
    /// `renew`, `complete`, `fail`, `release` or `schedule`.
    pub op: String,
    /// How many were refused.
    pub count: u64,
    /// When the last one was.
    pub last_at: f64,
}

/// A job's attempt ledger.
#[derive(Debug, Serialize, ToSchema)]
pub struct HistoryBody {
    /// The job.
    pub job_id: String,
    /// Every claim, by fence.
    pub attempts: Vec<AttemptBody>,
    /// The writes refused, by fence and operation.
    pub refusals: Vec<RefusalBody>,
}

/// The attempt ledger: who held which fence, how each attempt ended, and every stale write
/// refused under it.
#[utoipa::path(get, path = "/v1/jobs/{id}/history", tag = "jobs",
    params(("id" = String, Path, description = "The job id")),
    responses(
        (status = 200, description = "The ledger", body = HistoryBody),
        (status = 404, description = "No such job", body = ErrorBody),
    ),
    security(("worker" = [])))]
pub async fn history(
    _: Worker,
    State(state): State<AppState>,
    Segment(id): Segment,
) -> Result<Json<HistoryBody>, ApiError> {
    JobId::new(&id)?;
    let job = id.clone();
    let history = state
        .store
        .call(move |s| s.history(JobId::new(&job)?))
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no job {id}")))?;
    Ok(Json(HistoryBody {
        job_id: id,
        attempts: history
            .attempts
            .into_iter()
            .map(|a| AttemptBody {
                fence: a.fence,
                owner: a.owner,
                claimed_at: a.claimed_at,
                ended_at: a.ended_at,
                outcome: a.outcome.map(|o| o.as_str().to_owned()),
                error: a.error,
            })
            .collect(),
        refusals: history
            .refusals
            .into_iter()
            .map(|r| RefusalBody {
                fence: r.fence,
                op: r.op.as_str().to_owned(),
                count: r.count,
                last_at: r.last_at,
            })
            .collect(),
    }))
}

/// The scheduler's role job is not an ordinary job: cancelling, completing or failing it
/// stops every scheduler, retrying it hands it to ordinary workers (as the CLI refuses).
pub(crate) fn not_the_scheduler_job(verb: &str, id: &str) -> Result<(), ApiError> {
    scheduler_job_refused(verb, id, "job_id")
}

/// [`not_the_scheduler_job`] for the job id in `field`.
pub(crate) fn scheduler_job_refused(verb: &str, id: &str, field: &str) -> Result<(), ApiError> {
    if id == SCHEDULER_JOB {
        return Err(ApiError::bad(
            field,
            format!(
                "{SCHEDULER_JOB} is the scheduler role's job, not a job to {verb}; delete it to \
                 reset the role"
            ),
        ));
    }
    Ok(())
}

/// Operator verb (not fenced): cancel an unfinished job. Its holder can store nothing
/// afterwards.
#[utoipa::path(post, path = "/v1/jobs/{id}/cancel", tag = "admin",
    params(("id" = String, Path, description = "The job id")),
    responses(
        (status = 200, description = "Cancelled", body = Done),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 409, description = "Refused: `done` (already finished)", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub async fn cancel(
    _: Admin,
    State(state): State<AppState>,
    Segment(id): Segment,
) -> Result<Json<Done>, ApiError> {
    JobId::new(&id)?;
    not_the_scheduler_job("cancel", &id)?;
    let job = id.clone();
    let outcome = state
        .store
        .call(move |s| {
            let j = JobId::new(&job)?;
            if s.cancel(j, Now::system())? {
                Ok(None)
            } else {
                // Best-effort, after the refusal: a failed read tells nothing more.
                Ok(Some(s.state(j).map(|row| row.is_some())))
            }
        })
        .await?;
    match outcome {
        None => Ok(Json(Done::job(id))),
        Some(Ok(true)) => Err(ApiError::refused(Reason::Done, &format!("cancel of {id}"))),
        Some(Ok(false)) => Err(ApiError::NotFound(format!("no job {id}"))),
        Some(Err(_)) => Err(ApiError::refused(
            Reason::Unexplained,
            &format!("cancel of {id}"),
        )),
    }
}

/// Operator verb (not fenced): make a dead or cancelled job ready again with a fresh attempts
/// budget. The fence is kept, so the next claim continues above every fence handed out.
#[utoipa::path(post, path = "/v1/jobs/{id}/retry", tag = "admin",
    params(("id" = String, Path, description = "The job id")),
    responses(
        (status = 200, description = "Ready again", body = Done),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 409, description = "Refused: the job is not dead or cancelled (`done` for a completed one, `not_dead` for one waiting or running), or another unfinished job of its queue holds its unique key (`duplicate`)", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub async fn retry(
    _: Admin,
    State(state): State<AppState>,
    Segment(id): Segment,
) -> Result<Json<Done>, ApiError> {
    JobId::new(&id)?;
    not_the_scheduler_job("retry", &id)?;
    let job = id.clone();
    let outcome = state
        .store
        .call(move |s| {
            let j = JobId::new(&job)?;
            let now = Now::system();
            if s.retry(&[j], now)?.first() == Some(&true) {
                Ok(None)
            } else {
                // Best-effort, after the refusal: a failed read tells nothing more.
                Ok(Some(s.inspect(j, now).map(|job| job.map(|job| job.status))))
            }
        })
        .await?;
    let refused = |reason| Err(ApiError::refused(reason, &format!("retry of {id}")));
    match outcome {
        None => Ok(Json(Done::job(id))),
        Some(Ok(status)) => match RetryRefused::of(status) {
            RetryRefused::Gone => Err(ApiError::NotFound(format!("no job {id}"))),
            RetryRefused::Done => refused(Reason::Done),
            RetryRefused::Duplicate => refused(Reason::Duplicate),
            RetryRefused::NotDead => refused(Reason::NotDead),
        },
        Some(Err(_)) => Err(ApiError::refused(
            Reason::Unexplained,
            &format!("retry of {id}"),
        )),
    }
}

/// Why a retry was refused, told by the job's status read right after the refusal (the API's
/// answer and the dashboard's notice).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RetryRefused {
    /// No such job.
    Gone,
    /// It completed: only a dead or cancelled job is retried.
    Done,
    /// Dead or cancelled, yet kept: another unfinished job of its queue holds its unique key,
    /// which it would hold twice.
    Duplicate,
    /// Waiting or running.
    NotDead,
}

impl RetryRefused {
    /// The reason for a job of `status` (`None`: not found).
    pub(crate) fn of(status: Option<Status>) -> RetryRefused {
        match status {
            None => RetryRefused::Gone,
            Some(Status::Done) => RetryRefused::Done,
            Some(Status::Dead | Status::Cancelled) => RetryRefused::Duplicate,
            Some(_) => RetryRefused::NotDead,
        }
    }
}

/// Operator verb (not fenced): remove a job and its ledger, whatever its state. Its last
/// fence is kept as the id's floor, so a holder of the deleted job's lease can store nothing
/// and the same id enqueued again continues above every fence it had.
#[utoipa::path(delete, path = "/v1/jobs/{id}", tag = "admin",
    params(("id" = String, Path, description = "The job id")),
    responses(
        (status = 200, description = "Deleted", body = Done),
        (status = 404, description = "No such job", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub async fn delete(
    _: Admin,
    State(state): State<AppState>,
    Segment(id): Segment,
) -> Result<Json<Done>, ApiError> {
    JobId::new(&id)?;
    let job = id.clone();
    let deleted = state
        .store
        .call(move |s| s.delete(&[JobId::new(&job)?]))
        .await?;
    if deleted.first() == Some(&true) {
        Ok(Json(Done::job(id)))
    } else {
        Err(ApiError::NotFound(format!("no job {id}")))
    }
}

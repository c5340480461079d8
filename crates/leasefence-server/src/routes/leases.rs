//! The fenced routes: claim, renew, complete, fail, release, and the fence gate's admit. Each
//! write is one call of the library's fenced operation, whose owner, fence and live-lease check
//! runs in the database in the write's own transaction; a refusal is a 409 whose `reason` is
//! read back after the refusal (the refusal itself never depends on that read).

use axum::Json;
use axum::extract::State;
use leasefence::{
    AnyStore, BatchSize, Fence, JobId, Lease, Now, Owner, Queues, Resource, Status, Store, Ttl,
};

use crate::AppState;
use crate::auth::Worker;
use crate::body::{JsonBody, Segment};
use crate::dto::{
    AdmitBody, ClaimBody, CompleteBody, Done, FailBody, LeaseBody, Leases, ReleaseBody, RenewBody,
};
use crate::error::{ApiError, ErrorBody, Reason};

/// The most jobs one claim may take.
pub const MAX_CLAIM: usize = 1000;

/// The most queues one claim may name: their names are checked and de-duplicated on the
/// server before the claim is made, so the count is bounded as `n` is.
pub const MAX_CLAIM_QUEUES: usize = 1000;

/// Why a fenced write of `owner` under `fence` on `job` was refused, read after the refusal.
/// The read is best-effort: the refusal stands whatever it finds, and a read that fails is
/// told as `unexplained`, never as an error (the write's answer is already decided).
pub(crate) fn diagnose(s: &AnyStore, job: JobId<'_>, owner: &str, fence: Fence) -> Reason {
    match s.state(job) {
        Err(_) => Reason::Unexplained,
        Ok(None) => Reason::Unknown,
        Ok(Some(row)) if row.done => Reason::Done,
        // Not the current fence, or the 0 of a job never claimed: never handed out.
        Ok(Some(row)) if row.fence != fence || fence == 0 => Reason::StaleFence,
        Ok(Some(row)) => match row.owner.as_deref() {
            None => Reason::NotHeld,
            Some(o) if o != owner => Reason::OtherOwner,
            // Owner and fence match: the lease ran out (or ran out as the write arrived).
            Some(_) => Reason::Expired,
        },
    }
}

/// A refusal of `op` on `job` with its reason.
fn refused(state: &AppState, op: &str, job: &str, reason: Reason) -> ApiError {
    state.metrics.refused(op);
    if op == "renew" && reason != Reason::Unknown {
        state.metrics.leases_lost.inc();
    }
    ApiError::refused(reason, &format!("{op} of {job}"))
}

/// Claim jobs: the best ready ones (of `queues`, up to `n`), or one job by id.
#[utoipa::path(post, path = "/v1/claims", tag = "leases",
    request_body = ClaimBody,
    responses(
        (status = 200, description = "The leases granted, best first (empty when nothing was ready)", body = Leases),
        (status = 400, description = "Bad input; `field` names it", body = ErrorBody),
        (status = 409, description = "Claim by id refused: `unknown`, `done`, `leased` or `attempts_spent`", body = ErrorBody),
        (status = 503, description = "Busy; retry", body = ErrorBody),
    ),
    security(("worker" = [])))]
pub async fn claim(
    _: Worker,
    State(state): State<AppState>,
    JsonBody(body): JsonBody<ClaimBody>,
) -> Result<Json<Leases>, ApiError> {
    Owner::new(&body.owner)?;
    Ttl::new(body.ttl)?;
    let n = body.n.unwrap_or(1);
    if n > MAX_CLAIM {
        return Err(ApiError::bad(
            "n",
            format!("at most {MAX_CLAIM} jobs per claim, got {n}"),
        ));
    }
    let n = BatchSize::new(n).map_err(|_| ApiError::bad("n", "must be at least 1"))?;
    let queues = match &body.queues {
        Some(names) if names.len() > MAX_CLAIM_QUEUES => {
            return Err(ApiError::bad(
                "queues",
                format!(
                    "at most {MAX_CLAIM_QUEUES} queues per claim, got {}",
                    names.len()
                ),
            ));
        }
        Some(names) => Queues::only(names.iter().map(String::as_str)).map_err(|e| match e {
            leasefence::Error::InvalidArgument { reason, .. } => ApiError::bad("queues", reason),
            other => other.into(),
        })?,
        None => Queues::All,
    };
    if let Some(id) = &body.job_id {
        JobId::new(id)?;
        // The scheduler role is not offered over HTTP: a worker holding it would stop every
        // scheduler for as long as its lease (any ttl) lasts.
        super::jobs::not_the_scheduler_job("claim", id)?;
        if body.n.is_some() || body.queues.is_some() {
            return Err(ApiError::bad(
                "job_id",
                "a claim by id takes neither `n` nor `queues`",
            ));
        }
    }
    let job_id = body.job_id.clone();
    let (owner, ttl) = (body.owner, body.ttl);
    let outcome = state
        .store
        .call(move |s| {
            let (o, t, now) = (Owner::new(&owner)?, Ttl::new(ttl)?, Now::system());
            match &job_id {
                Some(id) => {
                    let job = JobId::new(id)?;
                    match s.claim(job, o, now, t)? {
                        Some(lease) => Ok(Ok(vec![lease])),
                        None => {
                            // Best-effort, after the refusal.
                            let reason = match s.inspect(job, now) {
                                Err(_) => Reason::Unexplained,
                                Ok(None) => Reason::Unknown,
                                Ok(Some(info)) if info.state.done => Reason::Done,
                                // Unfinished yet dead by status: its last attempt's lease ended.
                                Ok(Some(info)) if info.status == Status::Dead => {
                                    Reason::AttemptsSpent
                                }
                                Ok(Some(_)) => Reason::Leased,
                            };
                            Ok(Err(reason))
                        }
                    }
                }
                None => Ok(Ok(s.claim_batch_in(&queues, o, now, t, n)?)),
            }
        })
        .await?;
    match outcome {
        Ok(leases) => {
            state.metrics.claims.inc_by(leases.len() as u64);
            Ok(Json(Leases {
                leases: leases.into_iter().map(LeaseBody::from).collect(),
            }))
        }
        Err(reason) => Err(ApiError::refused(
            reason,
            &format!("claim of {}", body.job_id.unwrap_or_default()),
        )),
    }
}

/// Extend a live lease: only its owner, under its fence, while it is live.
#[utoipa::path(post, path = "/v1/jobs/{id}/renew", tag = "leases",
    params(("id" = String, Path, description = "The job id")),
    request_body = RenewBody,
    responses(
        (status = 200, description = "Renewed; `until` is the new end", body = Done),
        (status = 400, description = "Bad input", body = ErrorBody),
        (status = 409, description = "Refused: `unknown`, `done`, `stale_fence`, `other_owner`, `not_held` or `expired`", body = ErrorBody),
    ),
    security(("worker" = [])))]
pub async fn renew(
    _: Worker,
    State(state): State<AppState>,
    Segment(id): Segment,
    JsonBody(body): JsonBody<RenewBody>,
) -> Result<Json<Done>, ApiError> {
    JobId::new(&id)?;
    Owner::new(&body.owner)?;
    Ttl::new(body.ttl)?;
    let job = id.clone();
    let outcome = state
        .store
        .call(move |s| {
            let (j, o, t, now) = (
                JobId::new(&job)?,
                Owner::new(&body.owner)?,
                Ttl::new(body.ttl)?,
                Now::system(),
            );
            // The lease end before the renew, for the headroom metric (not part of the check).
            let before = s.state(j).ok().flatten().map(|row| row.until);
            let at = s.database_now()?.unwrap_or(now);
            if s.renew(j, o, body.fence, now, t)? {
                // The end as stored (on PostgreSQL set by the database's clock).
                // Best-effort: the renew has committed, whatever this read finds.
                let until = match s.state(j).ok().flatten() {
                    Some(row) => row.until,
                    None => t.until(at)?,
                };
                Ok(Ok((until, before.map(|u| u - at.seconds()))))
            } else {
                Ok(Err(diagnose(s, j, &body.owner, body.fence)))
            }
        })
        .await?;
    match outcome {
        Ok((until, headroom)) => {
            if let Some(h) = headroom {
                state.metrics.heartbeat_headroom.observe(h.max(0.0));
            }
            Ok(Json(Done {
                until: Some(until),
                ..Done::job(id)
            }))
        }
        Err(reason) => Err(refused(&state, "renew", &id, reason)),
    }
}

/// Store the result and finish the job: only the owner, under the current fence, while the
/// lease is live.
#[utoipa::path(post, path = "/v1/jobs/{id}/complete", tag = "leases",
    params(("id" = String, Path, description = "The job id")),
    request_body = CompleteBody,
    responses(
        (status = 200, description = "The result is stored and the job done", body = Done),
        (status = 400, description = "Bad input", body = ErrorBody),
        (status = 409, description = "Refused; the stored result is unchanged", body = ErrorBody),
    ),
    security(("worker" = [])))]
pub async fn complete(
    _: Worker,
    State(state): State<AppState>,
    Segment(id): Segment,
    JsonBody(body): JsonBody<CompleteBody>,
) -> Result<Json<Done>, ApiError> {
    super::jobs::not_the_scheduler_job("complete", &id)?;
    let result = body.result;
    let done = fenced(
        &state,
        "complete",
        id,
        body.owner,
        body.fence,
        move |s, j, o, f| s.complete(j, o, f, Now::system(), &result),
    )
    .await?;
    state.metrics.completions.inc();
    Ok(done)
}

/// One fenced write of `op` by `owner` under `fence` on the job `id`: `Done`, or a 409 with
/// the refusal's reason (read after the refusal) and its counts.
async fn fenced(
    state: &AppState,
    op: &'static str,
    id: String,
    owner: String,
    fence: Fence,
    write: impl FnOnce(&AnyStore, JobId<'_>, Owner<'_>, Fence) -> leasefence::Result<bool>
    + Send
    + 'static,
) -> Result<Json<Done>, ApiError> {
    JobId::new(&id)?;
    Owner::new(&owner)?;
    let job = id.clone();
    let refusal = state
        .store
        .call(move |s| {
            let (j, o) = (JobId::new(&job)?, Owner::new(&owner)?);
            match write(s, j, o, fence)? {
                true => Ok(None),
                false => Ok(Some(diagnose(s, j, &owner, fence))),
            }
        })
        .await?;
    match refusal {
        None => Ok(Json(Done::job(id))),
        Some(reason) => Err(refused(state, op, &id, reason)),
    }
}

/// Record a failed attempt under the current lease: the job is retried later (after the
/// default backoff, or `retry_in` seconds) or, after its last attempt, dead.
#[utoipa::path(post, path = "/v1/jobs/{id}/fail", tag = "leases",
    params(("id" = String, Path, description = "The job id")),
    request_body = FailBody,
    responses(
        (status = 200, description = "Taken: `outcome` is `retrying` (with `retry_at`) or `dead`", body = Done),
        (status = 400, description = "Bad input", body = ErrorBody),
        (status = 409, description = "Refused; nothing changed", body = ErrorBody),
    ),
    security(("worker" = [])))]
pub async fn fail(
    _: Worker,
    State(state): State<AppState>,
    Segment(id): Segment,
    JsonBody(body): JsonBody<FailBody>,
) -> Result<Json<Done>, ApiError> {
    JobId::new(&id)?;
    super::jobs::not_the_scheduler_job("fail", &id)?;
    Owner::new(&body.owner)?;
    if let Some(r) = body
        .retry_in
        .filter(|r| !(r.is_finite() && *r >= 0.0 && *r <= crate::dto::MAX_DELAY))
    {
        return Err(ApiError::bad(
            "retry_in",
            format!(
                "must be seconds from 0 to {}, got {}",
                crate::dto::MAX_DELAY,
                leasefence::Seconds(r)
            ),
        ));
    }
    let job = id.clone();
    let outcome = state
        .store
        .call(move |s| {
            let (j, now) = (JobId::new(&job)?, Now::system());
            // The lease as the store knows it: its attempt count picks the default backoff.
            // The fenced `fail` below checks owner, fence and the live lease itself.
            let Some(info) = s.inspect(j, now)? else {
                return Ok(Err(Reason::Unknown));
            };
            let at = s.database_now()?.unwrap_or(now);
            let lease = Lease {
                job_id: job.clone(),
                queue: info.queue,
                kind: info.kind,
                owner: body.owner.clone(),
                fence: body.fence,
                until: info.state.until,
                payload: None,
                priority: info.priority,
                max_attempts: info.max_attempts,
                last_error: None,
                attempt: info.attempts,
            };
            let retry_at = body
                .retry_in
                .map(|r| Now::new(at.seconds() + r))
                .transpose()?;
            match s.fail(&lease, now, &body.error, retry_at)? {
                Some(failed) => Ok(Ok(failed)),
                None => Ok(Err(diagnose(s, j, &body.owner, body.fence))),
            }
        })
        .await?;
    match outcome {
        Ok(failed) => {
            state.metrics.failures.inc();
            let (outcome, retry_at) = match failed {
                leasefence::Failed::Retrying { at } => {
                    state.metrics.retries.inc();
                    ("retrying", Some(at))
                }
                leasefence::Failed::Dead => {
                    state.metrics.dead.inc();
                    ("dead", None)
                }
            };
            Ok(Json(Done {
                outcome: Some(outcome),
                retry_at,
                ..Done::job(id)
            }))
        }
        Err(reason) => Err(refused(&state, "fail", &id, reason)),
    }
}

/// Give a lease back early: the fence is kept, so the next claim gets a higher one.
#[utoipa::path(post, path = "/v1/jobs/{id}/release", tag = "leases",
    params(("id" = String, Path, description = "The job id")),
    request_body = ReleaseBody,
    responses(
        (status = 200, description = "Released", body = Done),
        (status = 400, description = "Bad input", body = ErrorBody),
        (status = 409, description = "Refused; nothing changed", body = ErrorBody),
    ),
    security(("worker" = [])))]
pub async fn release(
    _: Worker,
    State(state): State<AppState>,
    Segment(id): Segment,
    JsonBody(body): JsonBody<ReleaseBody>,
) -> Result<Json<Done>, ApiError> {
    fenced(
        &state,
        "release",
        id,
        body.owner,
        body.fence,
        |s, j, o, f| s.release(j, o, f),
    )
    .await
}

/// The fence gate: admit a write to an external resource under `fence` only if it is at least
/// the highest fence admitted for it before (the same fence again is admitted: one lease may
/// write several times); records it.
#[utoipa::path(post, path = "/v1/fences/{resource}/admit", tag = "leases",
    params(("resource" = String, Path, description = "The resource's name")),
    request_body = AdmitBody,
    responses(
        (status = 200, description = "Admitted and recorded", body = Done),
        (status = 400, description = "Bad input", body = ErrorBody),
        (status = 409, description = "Refused: `lower_fence`", body = ErrorBody),
    ),
    security(("worker" = [])))]
pub async fn admit(
    _: Worker,
    State(state): State<AppState>,
    Segment(resource): Segment,
    JsonBody(body): JsonBody<AdmitBody>,
) -> Result<Json<Done>, ApiError> {
    Resource::new(&resource)?;
    let name = resource.clone();
    let admitted = state
        .store
        .call(move |s| s.admit(Resource::new(&name)?, body.fence))
        .await?;
    if admitted {
        Ok(Json(Done::resource(resource)))
    } else {
        Err(ApiError::refused(
            Reason::LowerFence,
            &format!("admit of fence {} to {resource}", body.fence),
        ))
    }
}

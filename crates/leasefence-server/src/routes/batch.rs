//! The batched fenced writes — the library's `renew_batch` and `complete_batch` — and the clock
//! that judges leases. A batch is one store call (one transaction on both backends); each item
//! is checked on its own (owner, fence, live lease), so a refused one never fails its
//! neighbours: its `reason` says why.

use axum::Json;
use axum::extract::State;
use leasefence::{JobId, Lease, Now, Owner, Store, Ttl};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::auth::Worker;
use crate::body::JsonBody;
use crate::error::{ApiError, ErrorBody, Reason};
use crate::routes::leases::{MAX_CLAIM, diagnose};

/// One lease named by its job, owner and fence.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseRef {
    /// The job.
    pub job_id: String,
    /// The lease's owner.
    pub owner: String,
    /// The lease's fence.
    pub fence: i64,
}

/// `POST /v1/renewals`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenewalsBody {
    /// The new lease length from now, in seconds (> 0, at most 1e12), for every lease.
    pub ttl: f64,
    /// The leases to renew (at most 1000).
    pub leases: Vec<LeaseRef>,
}

/// One completion of `POST /v1/completions`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Completion {
    /// The job.
    pub job_id: String,
    /// The lease's owner.
    pub owner: String,
    /// The lease's fence.
    pub fence: i64,
    /// The result to store.
    #[serde(default)]
    pub result: String,
}

/// `POST /v1/completions`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompletionsBody {
    /// The completions (at most 1000).
    pub completions: Vec<Completion>,
}

/// What happened to one item of a batch.
#[derive(Debug, Serialize, ToSchema)]
pub struct ItemResult {
    /// The job.
    pub job_id: String,
    /// Whether the write was taken.
    pub ok: bool,
    /// A renew taken: the lease's new end (on PostgreSQL, from the database's clock read just
    /// before the batch: at most the call's duration before the stored end).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<f64>,
    /// A refusal: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
}

/// The answer to a batch: one result per item, in order.
#[derive(Debug, Serialize, ToSchema)]
pub struct BatchResults {
    /// In input order.
    pub results: Vec<ItemResult>,
}

/// `GET /v1/clock`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Clock {
    /// Seconds since the Unix epoch, on the clock that judges leases.
    pub now: f64,
}

/// What PostgreSQL cannot store — a NUL byte in any text, a key (a job id) over
/// [`PgStore::MAX_KEY_BYTES`](leasefence::PgStore::MAX_KEY_BYTES) — checked per item of a
/// batch before the store call, so that the 400 names the item (`completions[1].result`): the
/// store refuses the same values for the whole batch, naming the bare argument (`result`).
/// SQLite stores any text: nothing to check there.
pub(crate) fn storable(
    state: &AppState,
    field: impl FnOnce() -> String,
    value: &str,
    key: bool,
) -> Result<(), ApiError> {
    if state.store.backend() != "postgres" {
        return Ok(());
    }
    if value.contains('\0') {
        return Err(ApiError::bad(
            field(),
            "contains a NUL byte, which PostgreSQL text cannot store",
        ));
    }
    let max = leasefence::PgStore::MAX_KEY_BYTES;
    if key && value.len() > max {
        return Err(ApiError::bad(
            field(),
            format!(
                "is {} bytes long; the PostgreSQL backend takes at most {max}",
                value.len()
            ),
        ));
    }
    Ok(())
}

/// The checked leases of a batch, with field names that point at the bad item.
fn leases(state: &AppState, items: &[LeaseRef], field: &str) -> Result<Vec<Lease>, ApiError> {
    if items.len() > MAX_CLAIM {
        return Err(ApiError::bad(
            field,
            format!("at most {MAX_CLAIM} per request, got {}", items.len()),
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            JobId::new(&item.job_id)
                .map_err(|e| ApiError::bad(format!("{field}[{i}].job_id"), reason(e)))?;
            Owner::new(&item.owner)
                .map_err(|e| ApiError::bad(format!("{field}[{i}].owner"), reason(e)))?;
            storable(state, || format!("{field}[{i}].job_id"), &item.job_id, true)?;
            storable(state, || format!("{field}[{i}].owner"), &item.owner, false)?;
            Ok(lease_of(&item.job_id, &item.owner, item.fence))
        })
        .collect()
}

/// Why the library refused an item's argument, without its own `invalid argument …:` prefix:
/// the error names the item's field instead.
fn reason(e: leasefence::Error) -> String {
    match e {
        leasefence::Error::InvalidArgument { reason, .. } => reason,
        other => other.to_string(),
    }
}

/// A lease as the batched writes read it: job, owner and fence (the other fields are not
/// looked at).
fn lease_of(job_id: &str, owner: &str, fence: i64) -> Lease {
    Lease {
        job_id: job_id.to_owned(),
        queue: String::new(),
        kind: None,
        owner: owner.to_owned(),
        fence,
        until: 0.0,
        payload: None,
        priority: 0,
        max_attempts: 0,
        last_error: None,
        attempt: 0,
    }
}

/// Renew many leases in one transaction (the library's `renew_batch`), each checked on its own.
#[utoipa::path(post, path = "/v1/renewals", tag = "leases",
    request_body = RenewalsBody,
    responses(
        (status = 200, description = "Each lease's outcome, in order; a refused one has its `reason`", body = BatchResults),
        (status = 400, description = "Bad input; nothing changed", body = ErrorBody),
    ),
    security(("worker" = [])))]
pub async fn renewals(
    _: Worker,
    State(state): State<AppState>,
    JsonBody(body): JsonBody<RenewalsBody>,
) -> Result<Json<BatchResults>, ApiError> {
    Ttl::new(body.ttl)?;
    let leases = leases(&state, &body.leases, "leases")?;
    let ttl = body.ttl;
    let results = state
        .store
        .call(move |s| {
            let refs: Vec<&Lease> = leases.iter().collect();
            let (now, ttl) = (Now::system(), Ttl::new(ttl)?);
            // One clock reading for the whole batch instead of a read of each renewed row: on
            // SQLite the store judges by `now`, so the end is exact; on PostgreSQL the
            // database's clock read just before the batch, so the stored end is at most the
            // call's duration later (a client renewing by it renews early, never late).
            let clock = s.database_now()?.unwrap_or(now);
            // The lease ends before the renew, for the headroom metric (not part of the
            // check), as the single-job route reads them: workers heartbeat through here. One
            // read per lease (on PostgreSQL a round trip each), once per heartbeat.
            let before: Vec<Option<f64>> = leases
                .iter()
                .map(|lease| {
                    let job = JobId::new(&lease.job_id)?;
                    Ok(s.state(job).ok().flatten().map(|row| row.until))
                })
                .collect::<leasefence::Result<_>>()?;
            let taken = s.renew_batch(&refs, now, ttl)?;
            let until = ttl.until(clock)?;
            let results = leases
                .iter()
                .zip(taken)
                .map(|(lease, ok)| {
                    let job = JobId::new(&lease.job_id)?;
                    Ok(if ok {
                        let until = Some(until);
                        ItemResult {
                            job_id: lease.job_id.clone(),
                            ok,
                            until,
                            reason: None,
                        }
                    } else {
                        let reason = diagnose(s, job, &lease.owner, lease.fence);
                        ItemResult {
                            job_id: lease.job_id.clone(),
                            ok,
                            until: None,
                            reason: Some(reason),
                        }
                    })
                })
                .collect::<leasefence::Result<Vec<_>>>()?;
            let headroom: Vec<f64> = results
                .iter()
                .zip(before)
                .filter(|(r, _)| r.ok)
                .filter_map(|(_, until)| until.map(|u| u - clock.seconds()))
                .collect();
            Ok((results, headroom))
        })
        .await?;
    let (results, headroom) = results;
    for h in headroom {
        state.metrics.heartbeat_headroom.observe(h.max(0.0));
    }
    for r in results.iter().filter(|r| !r.ok) {
        state.metrics.refused("renew");
        if r.reason != Some(Reason::Unknown) {
            state.metrics.leases_lost.inc();
        }
    }
    Ok(Json(BatchResults { results }))
}

/// Complete many jobs in one transaction (the library's `complete_batch`), each checked on its
/// own: a refused one never fails its neighbours.
#[utoipa::path(post, path = "/v1/completions", tag = "leases",
    request_body = CompletionsBody,
    responses(
        (status = 200, description = "Each completion's outcome, in order; a refused one has its `reason` and changed nothing", body = BatchResults),
        (status = 400, description = "Bad input; nothing changed", body = ErrorBody),
    ),
    security(("worker" = [])))]
pub async fn completions(
    _: Worker,
    State(state): State<AppState>,
    JsonBody(body): JsonBody<CompletionsBody>,
) -> Result<Json<BatchResults>, ApiError> {
    let refs: Vec<LeaseRef> = body
        .completions
        .iter()
        .map(|c| LeaseRef {
            job_id: c.job_id.clone(),
            owner: c.owner.clone(),
            fence: c.fence,
        })
        .collect();
    let leases = leases(&state, &refs, "completions")?;
    for (i, c) in body.completions.iter().enumerate() {
        storable(
            &state,
            || format!("completions[{i}].result"),
            &c.result,
            false,
        )?;
    }
    for (i, lease) in leases.iter().enumerate() {
        super::jobs::scheduler_job_refused(
            "complete",
            &lease.job_id,
            &format!("completions[{i}].job_id"),
        )?;
    }
    let results_text: Vec<String> = body.completions.into_iter().map(|c| c.result).collect();
    let results = state
        .store
        .call(move |s| {
            let pairs: Vec<(&Lease, &str)> = leases
                .iter()
                .zip(results_text.iter().map(String::as_str))
                .collect();
            let taken = s.complete_batch(&pairs, Now::system())?;
            leases
                .iter()
                .zip(taken)
                .map(|(lease, ok)| {
                    let reason = match ok {
                        true => None,
                        false => Some(diagnose(
                            s,
                            JobId::new(&lease.job_id)?,
                            &lease.owner,
                            lease.fence,
                        )),
                    };
                    Ok(ItemResult {
                        job_id: lease.job_id.clone(),
                        ok,
                        until: None,
                        reason,
                    })
                })
                .collect::<leasefence::Result<Vec<_>>>()
        })
        .await?;
    let done = results.iter().filter(|r| r.ok).count() as u64;
    state.metrics.completions.inc_by(done);
    for _ in results.iter().filter(|r| !r.ok) {
        state.metrics.refused("complete");
    }
    Ok(Json(BatchResults { results }))
}

/// The clock that judges leases: the server's, or on PostgreSQL the database's. Workers that
/// keep their own deadlines anchor to it.
#[utoipa::path(get, path = "/v1/clock", tag = "leases",
    responses((status = 200, description = "The clock reading", body = Clock)),
    security(("worker" = [])))]
pub async fn clock(_: Worker, State(state): State<AppState>) -> Result<Json<Clock>, ApiError> {
    let now = state.store.now().await?;
    Ok(Json(Clock { now: now.seconds() }))
}

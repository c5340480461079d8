//! Periodic jobs over HTTP: list the schedules (worker token), add and remove them (admin
//! token). Adding and removing are **operator verbs**, as in the library and the CLI: they
//! touch no job. The runs themselves are enqueued by whoever holds the scheduler role (a
//! worker with `--scheduler`, or `leasefence schedule tick`), under its own lease and fence.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use leasefence::{Now, Schedule, ScheduleName, Store};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::auth::{Admin, Worker};
use crate::body::{JsonBody, Segment};
use crate::dto::{Done, payload_fields};
use crate::error::{ApiError, ErrorBody, Reason};

/// `POST /v1/schedules`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleBody {
    /// The schedule's name; each run is the job `NAME@<slot in UTC>`.
    pub name: String,
    /// A cron expression: five fields, six with seconds first, seven with seconds first and a
    /// year last, or `@hourly`, `@daily`, …
    pub cron: String,
    /// The IANA time zone the expression is read in (default `UTC`).
    pub tz: Option<String>,
    /// The runs' queue (default `default`).
    pub queue: Option<String>,
    /// The runs' kind.
    pub kind: Option<String>,
    /// The runs' payload as text. At most one of `payload` and `payload_base64`.
    pub payload: Option<String>,
    /// The runs' payload as base64.
    pub payload_base64: Option<String>,
    /// The runs' priority.
    pub priority: Option<i64>,
    /// The runs' attempts budget (0: no limit).
    pub max_attempts: Option<u32>,
}

/// A stored schedule.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleOut {
    /// The name.
    pub name: String,
    /// The cron expression.
    pub cron: String,
    /// The time zone.
    pub tz: String,
    /// The runs' queue.
    pub queue: String,
    /// The runs' kind.
    pub kind: Option<String>,
    /// The runs' payload as text, when it is UTF-8.
    pub payload: Option<String>,
    /// The runs' payload as base64.
    pub payload_base64: Option<String>,
    /// The runs' priority.
    pub priority: i64,
    /// The runs' attempts budget.
    pub max_attempts: u32,
    /// When it was added.
    pub created_at: f64,
    /// The last slot enqueued (or, before the first run, the second it was added: slots up to
    /// then are never run).
    pub last_slot: i64,
    /// The last slot a scheduler enqueued; `null` until the first run.
    pub last_run: Option<i64>,
    /// The slot the scheduler's next tick enqueues (seconds since the epoch), if the
    /// expression has one: after missed slots, the latest of them (missed slots run once on
    /// catch-up).
    pub next_slot: Option<i64>,
}

/// `GET /v1/schedules`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Schedules {
    /// By name.
    pub schedules: Vec<ScheduleOut>,
}

/// Every schedule with its next slot.
#[utoipa::path(get, path = "/v1/schedules", tag = "queues",
    responses((status = 200, description = "The schedules", body = Schedules)),
    security(("worker" = [])))]
pub async fn list(_: Worker, State(state): State<AppState>) -> Result<Json<Schedules>, ApiError> {
    let (infos, now) = state
        .store
        .call(|s| {
            Ok((
                s.schedules()?,
                s.database_now()?.unwrap_or_else(Now::system),
            ))
        })
        .await?;
    let schedules = infos
        .into_iter()
        .map(|info| {
            let next_slot = info.next_run(now)?;
            let sch = &info.schedule;
            let (payload, payload_base64) = payload_fields(sch.payload_bytes());
            Ok(ScheduleOut {
                name: sch.name().to_owned(),
                cron: sch.cron().to_owned(),
                tz: sch.tz().to_owned(),
                queue: sch.queue_name().as_str().to_owned(),
                kind: sch.kind_name().map(str::to_owned),
                payload,
                payload_base64,
                priority: sch.priority_value(),
                max_attempts: sch.max_attempts_value(),
                created_at: info.created_at,
                last_slot: info.last_slot,
                last_run: info.last_run(),
                next_slot,
            })
        })
        .collect::<leasefence::Result<Vec<_>>>()?;
    Ok(Json(Schedules { schedules }))
}

/// Operator verb: add a schedule (201), or 409 `known` when the name exists (left as stored;
/// the message says whether the stored definition is identical to the one given).
#[utoipa::path(post, path = "/v1/schedules", tag = "admin",
    request_body = ScheduleBody,
    responses(
        (status = 201, description = "Added", body = Done),
        (status = 400, description = "Bad input: `name`, `cron`, `tz`, `queue`, …", body = ErrorBody),
        (status = 409, description = "Refused: `known` (the stored schedule is left as it was; the message says whether it is identical)", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub async fn add(
    _: Admin,
    State(state): State<AppState>,
    JsonBody(body): JsonBody<ScheduleBody>,
) -> Result<Response, ApiError> {
    let mut schedule = Schedule::new(&body.name, &body.cron)?;
    if let Some(tz) = &body.tz {
        schedule = schedule.time_zone(tz)?;
    }
    if let Some(queue) = body.queue {
        schedule = schedule.queue(queue)?;
    }
    if let Some(kind) = body.kind {
        schedule = schedule.kind(kind)?;
    }
    match (body.payload, body.payload_base64) {
        (Some(_), Some(_)) => {
            return Err(ApiError::bad(
                "payload_base64",
                "give `payload` or `payload_base64`, not both",
            ));
        }
        (Some(text), None) => schedule = schedule.payload(text.into_bytes()),
        (None, Some(b64)) => {
            let bytes = B64
                .decode(b64.as_bytes())
                .map_err(|e| ApiError::bad("payload_base64", format!("not base64: {e}")))?;
            schedule = schedule.payload(bytes);
        }
        (None, None) => {}
    }
    if let Some(priority) = body.priority {
        schedule = schedule.priority(priority);
    }
    if let Some(max) = body.max_attempts {
        schedule = schedule.max_attempts(max);
    }
    let name = body.name;
    let (added, identical) = state
        .store
        .call(move |s| {
            let now = s.database_now()?.unwrap_or_else(Now::system);
            if s.add_schedule(&schedule, now)? {
                return Ok((true, false));
            }
            // The name is taken: provisioning the same definition again is not a conflict
            // (as on the CLI), a different one is.
            let identical = s.schedules()?.iter().any(|info| info.schedule == schedule);
            Ok((false, identical))
        })
        .await?;
    if added {
        return Ok((StatusCode::CREATED, Json(Done::schedule(name))).into_response());
    }
    // Said apart, so that provisioning that adds the same definition again can tell it has
    // nothing to do (the CLI takes that as done), while a different one must be removed first.
    let how = match identical {
        true => "identical to this one",
        false => "a different definition; remove it first to change it",
    };
    Err(ApiError::Refused {
        reason: Reason::Known,
        message: format!(
            "refused: add of schedule {name}: a schedule of that name exists ({how}); it is \
             left as stored; nothing was changed"
        ),
        of: None,
    })
}

/// Operator verb: remove a schedule (its runs already enqueued stay).
#[utoipa::path(delete, path = "/v1/schedules/{name}", tag = "admin",
    params(("name" = String, Path, description = "The schedule")),
    responses(
        (status = 200, description = "Removed", body = Done),
        (status = 404, description = "No such schedule", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub async fn remove(
    _: Admin,
    State(state): State<AppState>,
    Segment(name): Segment,
) -> Result<Json<Done>, ApiError> {
    ScheduleName::new(&name)?;
    let n = name.clone();
    let removed = state
        .store
        .call(move |s| s.remove_schedule(ScheduleName::new(&n)?))
        .await?;
    if removed {
        Ok(Json(Done::schedule(name)))
    } else {
        Err(ApiError::NotFound(format!("no schedule {name}")))
    }
}

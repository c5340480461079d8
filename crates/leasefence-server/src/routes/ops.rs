//! Counts, queues, health and metrics.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use leasefence::{JobId, Queue, Store};
use serde::Serialize;
use utoipa::ToSchema;

use crate::AppState;
use crate::auth::{Admin, Worker};
use crate::body::Segment;
use crate::dto::{Counts, Done, QueueBody, StatsBody};
use crate::error::{ApiError, ErrorBody};

/// Jobs by status, overall and per queue, at the clock reading that judges leases.
#[utoipa::path(get, path = "/v1/stats", tag = "queues",
    responses((status = 200, description = "The counts", body = StatsBody)),
    security(("worker" = [])))]
pub async fn stats(_: Worker, State(state): State<AppState>) -> Result<Json<StatsBody>, ApiError> {
    let (now, stats, queues) = state
        .store
        .call(|s| {
            let now = s.database_now()?.unwrap_or_else(leasefence::Now::system);
            Ok((now.seconds(), s.stats(now)?, s.queues(now)?))
        })
        .await?;
    Ok(Json(StatsBody {
        now,
        counts: Counts::from(&stats),
        queues: queues
            .iter()
            .map(|q| QueueBody {
                name: q.name.clone(),
                paused: q.paused,
                counts: Counts::from(&q.stats),
            })
            .collect(),
    }))
}

/// Pause a queue: it hands out nothing until resumed. Leases already held run on.
#[utoipa::path(post, path = "/v1/queues/{name}/pause", tag = "admin",
    params(("name" = String, Path, description = "The queue")),
    responses(
        (status = 200, description = "Paused; `changed` is false when it already was", body = Done),
        (status = 400, description = "Bad queue name", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub async fn pause(
    _: Admin,
    State(state): State<AppState>,
    Segment(name): Segment,
) -> Result<Json<Done>, ApiError> {
    let queue = Queue::new(name.clone())?;
    let changed = state.store.call(move |s| s.pause(&queue)).await?;
    Ok(Json(Done {
        changed: Some(changed),
        ..Done::queue(name)
    }))
}

/// Resume a paused queue.
#[utoipa::path(post, path = "/v1/queues/{name}/resume", tag = "admin",
    params(("name" = String, Path, description = "The queue")),
    responses(
        (status = 200, description = "Resumed; `changed` is false when it was not paused", body = Done),
        (status = 400, description = "Bad queue name", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub async fn resume(
    _: Admin,
    State(state): State<AppState>,
    Segment(name): Segment,
) -> Result<Json<Done>, ApiError> {
    let queue = Queue::new(name.clone())?;
    let changed = state.store.call(move |s| s.resume(&queue)).await?;
    Ok(Json(Done {
        changed: Some(changed),
        ..Done::queue(name)
    }))
}

/// `GET /healthz` and `/readyz`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok`, or `unavailable`.
    pub status: &'static str,
    /// `/readyz`: the backend, `sqlite` or `postgres`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<&'static str>,
}

/// The process is up (no store call).
#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "Up", body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok",
        backend: None,
    })
}

/// How long `/readyz` waits for the store.
const READY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The store answers within 2 s: one indexed read through a pooled connection.
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses(
        (status = 200, description = "The store answers", body = Health),
        (status = 503, description = "It does not", body = Health),
    ))]
pub async fn readyz(State(state): State<AppState>) -> Response {
    // A probe answers within `READY_WAIT`: a store that takes longer (a connection being
    // tried against a server that is down) is not ready, and a load balancer's probe with a
    // short timeout sees a 503, not a timeout of its own.
    let probe = tokio::time::timeout(
        READY_WAIT,
        state
            .store
            .call(|s| s.state(JobId::new("leasefence.readyz")?).map(|_| ())),
    )
    .await
    .unwrap_or_else(|_| {
        Err(leasefence::Error::Unavailable {
            target: "the store".into(),
            reason: format!("no answer within {} s", READY_WAIT.as_secs_f64()),
        })
    });
    if probe.is_ok() {
        crate::outage::answered();
    }
    match probe {
        Ok(()) => Json(Health {
            status: "ok",
            backend: Some(state.store.backend()),
        })
        .into_response(),
        Err(e) => {
            // Logged as an outage (once, then a reminder every 30 s), not once per probe.
            crate::outage::unreachable(&e);
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(Health {
                    status: "unavailable",
                    backend: Some(state.store.backend()),
                }),
            )
                .into_response()
        }
    }
}

/// Prometheus metrics: OpenMetrics 1.0 when the scraper asks for it (`Accept:
/// application/openmetrics-text`), else the classic text format 0.0.4.
#[utoipa::path(get, path = "/metrics", tag = "health",
    responses((status = 200, description = "The metrics (OpenMetrics when asked for); while the store cannot be read, without the job counts and with leasefence_store_up 0", content_type = "text/plain")))]
pub async fn metrics(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    let queues = match state.metrics.fresh_counts() {
        Some(queues) => Some(queues),
        None => {
            let read = state
                .store
                .call(|s| {
                    let now = s.database_now()?.unwrap_or_else(leasefence::Now::system);
                    s.queues(now)
                })
                .await;
            match read {
                Ok(queues) => {
                    crate::outage::answered();
                    state.metrics.keep_counts(&queues);
                    Some(queues)
                }
                // The server's own counters are worth most while the store is down: served
                // without the job counts, `leasefence_store_up` 0 (the error logged as any).
                Err(e) => {
                    let _ = ApiError::from(e);
                    None
                }
            }
        }
    };
    let text = state.metrics.render(queues.as_deref());
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    Ok(if openmetrics {
        (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            crate::metrics::classic(&text),
        )
            .into_response()
    })
}

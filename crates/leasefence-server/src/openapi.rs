//! `GET /v1/openapi.json`: the OpenAPI 3.1 document, generated from the handlers' annotations
//! and the request and response types, so it cannot drift from the code.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::routes::{batch, jobs, leases, ops, schedules};

/// The API's document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "leasefence",
        description = "Time-limited job leases with fencing tokens over HTTP. Every renew, \
                       complete, fail and release is checked against the owner, the fence and \
                       the live lease in the store, in the write's own transaction; a refusal \
                       is a 409 that says why."
    ),
    paths(
        batch::renewals, batch::completions, batch::clock,
        jobs::enqueue, jobs::get_job, jobs::list_jobs, jobs::history,
        jobs::cancel, jobs::retry, jobs::delete,
        leases::claim, leases::renew, leases::complete, leases::fail, leases::release,
        leases::admit,
        schedules::list, schedules::add, schedules::remove,
        ops::stats, ops::pause, ops::resume, ops::healthz, ops::readyz, ops::metrics,
    ),
    modifiers(&Tokens),
    tags(
        (name = "leases", description = "Claim and the fenced writes (worker token)"),
        (name = "jobs", description = "Enqueue and read jobs (worker token)"),
        (name = "admin", description = "Operator verbs, not fenced (admin token)"),
        (name = "queues", description = "Counts (worker token)"),
        (name = "health", description = "Liveness, readiness and metrics (no token)"),
    )
)]
pub struct ApiDoc;

/// The two bearer tokens as security schemes.
struct Tokens;

impl Modify for Tokens {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        let components = api.components.get_or_insert_with(Default::default);
        for (name, what) in [
            (
                "worker",
                "The worker token (the admin token is accepted too)",
            ),
            ("admin", "The admin token"),
        ] {
            components.add_security_scheme(
                name,
                SecurityScheme::Http(
                    HttpBuilder::new()
                        .scheme(HttpAuthScheme::Bearer)
                        .description(Some(what))
                        .build(),
                ),
            );
        }
    }
}

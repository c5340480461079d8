//! `GET /metrics`: Prometheus text format (OpenMetrics), from `prometheus-client`.
//!
//! | metric | type | what |
//! |---|---|---|
//! | `leasefence_jobs{queue,status}` | gauge | jobs by queue and status, read from the store at scrape time (absent while it cannot be read) |
//! | `leasefence_store_up` | gauge | 1 when the scrape read the job counts from the store (or within the last 5 s), 0 when it could not |
//! | `leasefence_claims_total` | counter | leases granted |
//! | `leasefence_completions_total` | counter | results stored |
//! | `leasefence_failures_total` | counter | fenced `fail` calls taken |
//! | `leasefence_retries_total` | counter | failures that will be retried |
//! | `leasefence_dead_total` | counter | failures that were the last attempt |
//! | `leasefence_stale_writes_refused_total{op}` | counter | renew/complete/fail/release refused by the owner, fence and lease check (writes naming an unknown job included) |
//! | `leasefence_leases_lost_total` | counter | renews refused: the worker no longer holds the lease |
//! | `leasefence_heartbeat_headroom_seconds` | histogram | lease time left when a renew arrived (near 0: heartbeats lag) |
//! | `leasefence_operation_duration_seconds{op}` | histogram | time of each API operation, store call included |
//! | `leasefence_requests_total{op,status}` | counter | requests by operation and HTTP status |
//!
//! Served as OpenMetrics 1.0 to a scraper that asks for it (`Accept:
//! application/openmetrics-text`, as Prometheus does), else in the classic Prometheus text
//! format 0.0.4 (counters' `# TYPE` lines name the `_total` series, no `# EOF`), which every
//! Prometheus text parser reads.
//!
//! The counters are this process's since it started; the store's own ledger keeps the
//! refusals of every process (`GET /v1/jobs/{id}/history`).

use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels naming an API operation.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OpLabel {
    /// The operation: `claim`, `complete`, …
    pub op: String,
}

/// Labels of a request count.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The operation.
    pub op: String,
    /// The HTTP status code.
    pub status: u16,
}

/// Labels of the jobs gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobLabels {
    /// The queue.
    pub queue: String,
    /// The status.
    pub status: String,
}

/// Every metric of the server.
pub struct Metrics {
    registry: Registry,
    /// Leases granted.
    pub claims: Counter,
    /// Results stored.
    pub completions: Counter,
    /// Fenced failures taken.
    pub failures: Counter,
    /// Failures to be retried.
    pub retries: Counter,
    /// Failures that buried the job.
    pub dead: Counter,
    /// Fenced writes refused, by operation.
    pub stale_refused: Family<OpLabel, Counter>,
    /// Renews refused.
    pub leases_lost: Counter,
    /// Lease time left at renew.
    pub heartbeat_headroom: Histogram,
    /// Operation latency.
    pub latency: Family<OpLabel, Histogram>,
    /// Requests by operation and status.
    pub requests: Family<RequestLabels, Counter>,
    /// Jobs by queue and status (set at scrape time).
    jobs: Family<JobLabels, Gauge>,
    /// Whether the scrape could read the store.
    store_up: Gauge,
    /// One scrape at a time rewrites `jobs`.
    scrape: Mutex<()>,
    /// The last queue counts read and when: a scrape within [`COUNTS_MAX_AGE`] of it reuses
    /// them, so scrapes (which need no token) cannot keep a store connection busy.
    counts: Mutex<Option<(std::time::Instant, Vec<leasefence::QueueInfo>)>>,
}

/// How long the job counts of `/metrics` are reused (Prometheus scrapes every 15 s or more).
pub const COUNTS_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(5);

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("leasefence");
        let claims = Counter::default();
        let completions = Counter::default();
        let failures = Counter::default();
        let retries = Counter::default();
        let dead = Counter::default();
        let stale_refused = Family::<OpLabel, Counter>::default();
        let leases_lost = Counter::default();
        // 1 ms … ~16 min: from a heartbeat at the wire to one a ttl early.
        let heartbeat_headroom = Histogram::new(exponential_buckets(0.001, 4.0, 11));
        let latency = Family::<OpLabel, Histogram>::new_with_constructor(|| {
            // 50 µs … ~6.5 s.
            Histogram::new(exponential_buckets(0.000_05, 2.0, 18))
        });
        let requests = Family::<RequestLabels, Counter>::default();
        let jobs = Family::<JobLabels, Gauge>::default();
        let store_up = Gauge::default();
        registry.register("claims", "Leases granted", claims.clone());
        registry.register("completions", "Results stored", completions.clone());
        registry.register("failures", "Fenced failures taken", failures.clone());
        registry.register("retries", "Failures that will be retried", retries.clone());
        registry.register(
            "dead",
            "Failures that were the job's last attempt",
            dead.clone(),
        );
        registry.register(
            "stale_writes_refused",
            "Renew, complete, fail and release refused by the owner, fence and lease check",
            stale_refused.clone(),
        );
        registry.register(
            "leases_lost",
            "Renews refused: the caller no longer holds the lease",
            leases_lost.clone(),
        );
        registry.register(
            "heartbeat_headroom_seconds",
            "Lease time left when a renew arrived (near 0: heartbeats lag)",
            heartbeat_headroom.clone(),
        );
        registry.register(
            "operation_duration_seconds",
            "Time of each API operation, the store call included",
            latency.clone(),
        );
        registry.register(
            "requests",
            "API requests by operation and HTTP status",
            requests.clone(),
        );
        registry.register("jobs", "Jobs by queue and status", jobs.clone());
        registry.register(
            "store_up",
            "1 when the scrape could read the job counts from the store, 0 when it could not",
            store_up.clone(),
        );
        Metrics {
            registry,
            claims,
            completions,
            failures,
            retries,
            dead,
            stale_refused,
            leases_lost,
            heartbeat_headroom,
            latency,
            requests,
            jobs,
            store_up,
            scrape: Mutex::new(()),
            counts: Mutex::new(None),
        }
    }

    /// The queue counts read within the last five seconds, if any.
    pub fn fresh_counts(&self) -> Option<Vec<leasefence::QueueInfo>> {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        counts
            .as_ref()
            .filter(|(at, _)| at.elapsed() < COUNTS_MAX_AGE)
            .map(|(_, queues)| queues.clone())
    }

    /// Keeps `queues` as the latest counts.
    pub fn keep_counts(&self, queues: &[leasefence::QueueInfo]) {
        *self.counts.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((std::time::Instant::now(), queues.to_vec()));
    }

    /// A fenced write of `op` refused.
    pub fn refused(&self, op: &str) {
        self.stale_refused
            .get_or_create(&OpLabel { op: op.to_owned() })
            .inc();
    }

    /// The text of a scrape in OpenMetrics 1.0, with the job counts of `queues` — or, when the
    /// store could not be read (`None`), without any, and `leasefence_store_up` 0: the server's
    /// own counters are served all the same.
    pub fn render(&self, queues: Option<&[leasefence::QueueInfo]>) -> String {
        let _one = self.scrape.lock().unwrap_or_else(|e| e.into_inner());
        self.jobs.clear();
        self.store_up.set(i64::from(queues.is_some()));
        for q in queues.unwrap_or_default() {
            for status in leasefence::Status::ALL {
                self.jobs
                    .get_or_create(&JobLabels {
                        queue: q.name.clone(),
                        status: status.as_str().to_owned(),
                    })
                    .set(i64::try_from(q.stats.get(status)).unwrap_or(i64::MAX));
            }
        }
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// OpenMetrics text as the classic Prometheus text format 0.0.4: a counter's `# HELP` and
/// `# TYPE` name its `_total` series, and `# UNIT` and `# EOF` are dropped.
pub fn classic(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help: Option<&str> = None;
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            if let Some(previous) = help.replace(rest) {
                out.push_str("# HELP ");
                out.push_str(previous);
                out.push('\n');
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let name = if kind == "counter" {
                format!("{name}_total")
            } else {
                name.to_owned()
            };
            if let Some(h) = help.take() {
                let text = h.split_once(' ').map_or("", |(_, text)| text);
                out.push_str(&format!("# HELP {name} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name} {kind}\n"));
            continue;
        }
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        if let Some(h) = help.take() {
            out.push_str("# HELP ");
            out.push_str(h);
            out.push('\n');
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_text_names_the_counter_series() {
        let om = "# HELP lf_claims Leases granted.\n# TYPE lf_claims counter\n\
                  lf_claims_total 2\n# HELP lf_jobs Jobs.\n# TYPE lf_jobs gauge\n\
                  lf_jobs{queue=\"a\"} 1\n# EOF\n";
        assert_eq!(
            classic(om),
            "# HELP lf_claims_total Leases granted.\n# TYPE lf_claims_total counter\n\
             lf_claims_total 2\n# HELP lf_jobs Jobs.\n# TYPE lf_jobs gauge\n\
             lf_jobs{queue=\"a\"} 1\n"
        );
    }
}

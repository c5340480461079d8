//! The verdict of a stress run: every job read back through a store the workers never used and
//! compared with what they were told, then rendered as a table (or one JSON object).

use std::time::Duration;

use anyhow::Context as _;
use leasefence::{AnyStore, JobId, JobState, Store as _};
use serde_json::json;

use super::workload::{Ack, Config, Counts};
use crate::output::Out;

/// How many offending jobs the report names when an invariant broke.
const EXAMPLES: usize = 5;

/// The counts and the verdict of a run.
#[derive(Debug, Default)]
pub struct Report {
    pub enqueue_time: Duration,
    pub elapsed: Duration,
    jobs: usize,
    /// Jobs with exactly one acknowledged complete that are stored as done.
    done_once: usize,
    /// Jobs whose stored (owner, fence, result) differs from an acknowledged one.
    overwritten: usize,
    /// Examples of jobs that were not done exactly once or were overwritten.
    problems: Vec<String>,
    pub counts: Counts,
}

/// One line of the table: an invariant (`ok` is whether it held) or a measurement (`ok` is
/// `None`).
struct Row {
    name: &'static str,
    value: String,
    ok: Option<bool>,
    note: String,
}

/// An invariant that holds when `n` is zero.
fn none(name: &'static str, n: u64) -> Row {
    Row {
        name,
        value: n.to_string(),
        ok: Some(n == 0),
        note: String::new(),
    }
}

/// A measurement, with a note.
fn measured(name: &'static str, value: impl ToString, note: impl Into<String>) -> Row {
    Row {
        name,
        value: value.to_string(),
        ok: None,
        note: note.into(),
    }
}

impl Report {
    /// Reads every job of `ids` back through `reader` and compares it with the completes
    /// acknowledged for it (`acks`, by job).
    ///
    /// # Errors
    /// Database errors reading a job.
    pub fn judge(reader: &AnyStore, ids: &[String], acks: &[Vec<Ack>]) -> anyhow::Result<Report> {
        let mut report = Report {
            jobs: ids.len(),
            ..Report::default()
        };
        for (id, acks) in ids.iter().zip(acks) {
            let row = reader
                .state(JobId::new(id)?)
                .with_context(|| format!("verdict: state {id}"))?;
            let mut problems = Vec::new();
            match (&row, acks.len()) {
                (None, _) => problems.push("missing from the store".to_owned()),
                (Some(row), 1) if row.done => report.done_once += 1,
                (Some(_), 0) => problems.push("no complete was acknowledged".to_owned()),
                (Some(_), 1) => problems.push("acknowledged, but not stored as done".to_owned()),
                (Some(_), n) => problems.push(format!("{n} completes acknowledged")),
            }
            let overwritten = row
                .as_ref()
                .and_then(|row| Some((row, acks.iter().find(|a| !still_stored(row, a))?)));
            if let Some((row, ack)) = overwritten {
                report.overwritten += 1;
                problems.push(format!(
                    "acknowledged {:?} under fence {} by {}, stored {:?} under fence {} by {}",
                    ack.result,
                    ack.fence,
                    ack.owner,
                    row.result.as_deref().unwrap_or(""),
                    row.fence,
                    row.owner.as_deref().unwrap_or("none"),
                ));
            }
            let room = EXAMPLES.saturating_sub(report.problems.len());
            report.problems.extend(
                problems
                    .into_iter()
                    .take(room)
                    .map(|p| format!("{id}: {p}")),
            );
        }
        Ok(report)
    }

    /// The table: the invariants, each with whether it held, and the measurements.
    fn rows(&self, config: &Config) -> Vec<Row> {
        let c = &self.counts;
        vec![
            Row {
                name: "jobs done exactly once",
                value: format!("{} / {}", self.done_once, self.jobs),
                ok: Some(self.done_once == self.jobs),
                note: String::new(),
            },
            measured(
                "stale writes refused",
                c.stale_refused,
                format!(
                    "{} stalled workers woke: renew + complete, old fence",
                    c.stalls
                ),
            ),
            none("stale writes accepted", c.stale_accepted),
            none("results overwritten", self.overwritten as u64),
            measured(
                "claims refused, lease live",
                c.leased_refused,
                "tried early on a stalled worker's job",
            ),
            none("claims granted, lease live", c.live_claimed),
            none("claims refused, claimable", c.claimable_refused),
            none("completes refused, live", c.live_refused),
            measured(
                "completes refused, late",
                c.late_refused,
                "lease ran out while waiting for the write lock",
            ),
            measured("busy retries", c.busy_retries, ""),
            measured(
                "slowest claim..complete",
                format!("{:.3} s", c.slowest.as_secs_f64()),
                format!(
                    "ttl {} s; durable commits ({})",
                    config.ttl.seconds(),
                    config.durability
                ),
            ),
            measured(
                "enqueue",
                format!("{:.2} s", self.enqueue_time.as_secs_f64()),
                config.setup_note,
            ),
            measured(
                "elapsed",
                format!("{:.2} s", self.elapsed.as_secs_f64()),
                "",
            ),
            measured(
                "throughput",
                format!("{:.0} jobs/s", self.throughput()),
                "stalled workers' sleep included",
            ),
        ]
    }

    fn throughput(&self) -> f64 {
        self.jobs as f64 / self.elapsed.as_secs_f64()
    }

    /// The names of the invariants that broke; empty when all held.
    pub fn broken(&self, config: &Config) -> Vec<&'static str> {
        self.rows(config)
            .into_iter()
            .filter(|row| row.ok == Some(false))
            .map(|row| row.name)
            .collect()
    }

    /// Prints the summary table (or one JSON object).
    pub fn print(&self, config: &Config, out: Out) {
        let c = &self.counts;
        out.line(
            format_args!(
                "Stress run: {} jobs, {} workers, ttl {} s, stall rate {}, real clock:",
                self.jobs,
                config.workers,
                config.ttl.seconds(),
                config.stall_rate
            ),
            json!({
                "op": "demo", "phase": "stress", "ok": self.broken(config).is_empty(),
                "jobs": self.jobs, "workers": config.workers, "ttl": config.ttl.seconds(),
                "stall_rate": config.stall_rate,
                "done_exactly_once": self.done_once,
                "stale_writes_refused": c.stale_refused,
                "stale_writes_accepted": c.stale_accepted,
                "results_overwritten": self.overwritten,
                "stalls": c.stalls,
                "claims_refused_lease_live": c.leased_refused,
                "claims_granted_lease_live": c.live_claimed,
                "claims_refused_claimable": c.claimable_refused,
                "completes_refused_live": c.live_refused,
                "completes_refused_late": c.late_refused,
                "busy_retries": c.busy_retries,
                "slowest_claim_to_complete_seconds": c.slowest.as_secs_f64(),
                "enqueue_seconds": self.enqueue_time.as_secs_f64(),
                "elapsed_seconds": self.elapsed.as_secs_f64(),
                "throughput_jobs_per_s": self.throughput(),
                "problems": self.problems,
            }),
        );
        for Row {
            name,
            value,
            ok,
            note,
        } in self.rows(config)
        {
            let mark = match ok {
                Some(true) => "ok",
                Some(false) => "BROKEN",
                None => "",
            };
            let line = format!("  {name:<27} {value:>13}  {mark:<6} {note}");
            out.text(line.trim_end());
        }
        for problem in &self.problems {
            out.text(format_args!("  BROKEN {problem}"));
        }
    }
}

/// Whether `row` still holds what `ack` stored (complete keeps owner and fence).
fn still_stored(row: &JobState, ack: &Ack) -> bool {
    row.result.as_deref() == Some(ack.result.as_str())
        && row.owner.as_deref() == Some(ack.owner.as_str())
        && row.fence == ack.fence
}

#[cfg(test)]
mod tests {
    use leasefence::{AnyStore, JobId, Now, Owner, SqliteStore, Store as _, Ttl};

    use super::*;

    fn config() -> Config {
        Config {
            jobs: 1,
            workers: 1,
            ttl: Ttl::new(1.0).unwrap(),
            stall_rate: 0.0,
            durability: "synchronous = FULL",
            setup_note: "setup",
        }
    }

    /// A store holding job `j`, completed by `owner` under fence 1 with `result`.
    fn completed(dir: &tempfile::TempDir, owner: &str, result: &str) -> AnyStore {
        let store = AnyStore::from(SqliteStore::open(dir.path().join("jobs.db")).unwrap());
        let (job, who) = (JobId::new("j").unwrap(), Owner::new(owner).unwrap());
        store.enqueue(job).unwrap();
        let now = Now::new(0.0).unwrap();
        let ttl = Ttl::new(10.0).unwrap();
        let (fence, _) = crate::cmd::claim(&store, job, who, now, ttl)
            .unwrap()
            .unwrap();
        assert!(store.complete(job, who, fence, now, result).unwrap());
        store
    }

    fn ack(owner: &str, result: &str) -> Ack {
        Ack {
            owner: owner.to_owned(),
            fence: 1,
            result: result.to_owned(),
        }
    }

    #[test]
    fn a_job_stored_as_acknowledged_is_done_exactly_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = completed(&dir, "a", "r");
        let report = Report::judge(&store, &["j".to_owned()], &[vec![ack("a", "r")]]).unwrap();
        assert_eq!((report.done_once, report.overwritten), (1, 0));
        assert!(report.broken(&config()).is_empty());
    }

    #[test]
    fn a_stored_result_that_differs_from_the_acknowledged_one_is_broken() {
        let dir = tempfile::tempdir().unwrap();
        let store = completed(&dir, "b", "b's");
        let acks = [vec![ack("a", "a's")]];
        let report = Report::judge(&store, &["j".to_owned()], &acks).unwrap();
        assert_eq!(report.overwritten, 1);
        assert_eq!(report.broken(&config()), ["results overwritten"]);
        assert!(
            report.problems[0].starts_with("j: acknowledged \"a's\""),
            "{report:?}"
        );

        let twice = [vec![ack("b", "b's"), ack("b", "b's")]];
        let report = Report::judge(&store, &["j".to_owned()], &twice).unwrap();
        assert_eq!(report.broken(&config()), ["jobs done exactly once"]);
        assert_eq!(report.problems, ["j: 2 completes acknowledged"]);
    }
}

//! What the operator's views read and write ([`Observe`](crate::Observe)): the overview of a
//! store, a search over its jobs, the fence gate's resources and the audit log.

use crate::error::{Error, Result};
use crate::types::{JobInfo, Queue, QueueInfo, Stats, Status};

/// How far ahead [`Overview::expiring_soon`] looks: leases that end within a minute.
pub const EXPIRING_WITHIN: f64 = 60.0;

/// How many minutes [`Overview::throughput`] covers, the current one included.
pub const THROUGHPUT_MINUTES: usize = 15;

/// A store at a glance, at one clock reading: what [`Observe::overview`](crate::Observe)
/// returns. Every figure is read from an index or a count the store keeps, never by walking
/// every job, so it costs the same with a million jobs as with ten.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overview {
    /// The clock reading the statuses are judged at (Unix seconds).
    pub now: f64,
    /// Every job by status ([`Store::stats`](crate::Store::stats)).
    pub totals: Stats,
    /// Every queue with its counts ([`Store::queues`](crate::Store::queues)).
    pub queues: Vec<QueueInfo>,
    /// Live leases that end within [`EXPIRING_WITHIN`] seconds of `now`: a worker that stops
    /// renewing loses them then.
    pub expiring_soon: u64,
    /// The ready job that was enqueued first, and when (Unix seconds, the enqueuing host's
    /// clock): `now` minus that is how long the queue's oldest ready work has waited.
    pub oldest_ready: Option<(String, f64)>,
    /// Stale writes refused: every renew, complete, fail, release and scheduler enqueue the
    /// store turned down because the writer's lease was not current, over the ledger's life.
    pub refused_total: u64,
    /// Of those, the ones under a fence whose latest refusal came in the hour before `now`.
    pub refused_last_hour: u64,
    /// Attempts that ended in each of the last [`THROUGHPUT_MINUTES`] minutes, oldest first,
    /// by the ledger's clock (the writing host's or the database's).
    pub throughput: Vec<Minute>,
}

impl Overview {
    /// Dead jobs: finished as dead, or out of attempts with their last lease expired.
    pub fn dead(&self) -> u64 {
        self.totals.dead
    }

    /// Leases that ran out without complete, fail or release, not yet claimed again.
    pub fn expired_unclaimed(&self) -> u64 {
        self.totals.expired
    }

    /// How long the oldest ready job has waited at `now`, in seconds (never negative).
    pub fn oldest_ready_age(&self) -> Option<f64> {
        self.oldest_ready
            .as_ref()
            .map(|(_, at)| (self.now - at).max(0.0))
    }
}

/// One minute of [`Overview::throughput`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Minute {
    /// Its start (Unix seconds, a multiple of 60).
    pub start: i64,
    /// Attempts that completed.
    pub completed: u64,
    /// Attempts that failed or timed out.
    pub failed: u64,
    /// Attempts that ended otherwise: released, lost (expired) or cancelled.
    pub other: u64,
}

/// The throughput minutes ending with the one that holds `now`, filled from `(minute start,
/// outcome, count)` rows of the attempts that ended since the first of them.
pub(crate) fn minutes(now: f64, rows: Vec<(i64, Option<String>, i64)>) -> Vec<Minute> {
    let last = (now / 60.0).floor() as i64 * 60;
    let first = last - 60 * (THROUGHPUT_MINUTES as i64 - 1);
    let mut out: Vec<Minute> = (0..THROUGHPUT_MINUTES as i64)
        .map(|i| Minute {
            start: first + 60 * i,
            ..Minute::default()
        })
        .collect();
    for (start, outcome, count) in rows {
        let Some(m) = out.iter_mut().find(|m| m.start == start) else {
            continue; // ended after now (another host's clock ahead): not in the window
        };
        let count = count.max(0) as u64;
        match outcome.as_deref() {
            Some("completed") => m.completed += count,
            Some("failed" | "timed out") => m.failed += count,
            _ => m.other += count,
        }
    }
    out
}

/// The first minute [`Overview::throughput`] covers at `now` (Unix seconds).
pub(crate) fn throughput_since(now: f64) -> f64 {
    ((now / 60.0).floor() - (THROUGHPUT_MINUTES as f64 - 1.0)) * 60.0
}

/// The most jobs one [`JobQuery`] page may look at: a page with sparse filters comes back
/// short, with a cursor to go on from, rather than walking the whole table.
pub const MAX_WINDOW: usize = 10_000;

/// The order of a [`JobQuery`]'s pages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum JobOrder {
    /// The most recently enqueued first (the default).
    #[default]
    Newest,
    /// The first enqueued first.
    Oldest,
}

impl JobOrder {
    /// `newest` or `oldest`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobOrder::Newest => "newest",
            JobOrder::Oldest => "oldest",
        }
    }

    /// The order named `name` (`newest` or `oldest`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `order` for any other name.
    pub fn parse(name: &str) -> Result<JobOrder> {
        match name {
            "newest" => Ok(JobOrder::Newest),
            "oldest" => Ok(JobOrder::Oldest),
            other => Err(Error::invalid(
                "order",
                format!("{other:?} is not an order (newest or oldest)"),
            )),
        }
    }
}

/// Where a [`JobQuery`] goes on from: the [`JobPage::next`] of the page before.
///
/// On SQLite the enqueue position is the row's rowid, which SQLite hands out again once the
/// newest job is deleted or purged: a job enqueued after that takes the deleted one's
/// position, and a cursor handed out at that position (oldest first) pages past it. A query
/// started afresh shows it; PostgreSQL's `seq` is never reused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobCursor {
    /// After this enqueue position (SQLite's rowid, PostgreSQL's `seq`), in the query's order.
    Seq(i64),
    /// After this id, in id order (a query with an id prefix).
    Id(String),
}

impl JobCursor {
    /// The cursor as text for a URL: `s<seq>` or `i<id>`.
    pub fn encode(&self) -> String {
        match self {
            JobCursor::Seq(seq) => format!("s{seq}"),
            JobCursor::Id(id) => format!("i{id}"),
        }
    }

    /// The cursor [`JobCursor::encode`] wrote.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `cursor` for text it did not write.
    pub fn decode(text: &str) -> Result<JobCursor> {
        let bad = || Error::invalid("cursor", format!("{text:?} is not a page cursor"));
        match text.split_at_checked(1) {
            Some(("s", seq)) => seq.parse().map(JobCursor::Seq).map_err(|_| bad()),
            Some(("i", id)) if !id.is_empty() => Ok(JobCursor::Id(id.to_owned())),
            _ => Err(bad()),
        }
    }
}

/// A search over the jobs: every filter given must match, pages in [`JobOrder`] (or in id
/// order with an id prefix), keyset-paged by [`JobCursor`].
#[derive(Debug, Clone, PartialEq)]
pub struct JobQuery {
    /// Only jobs with this status at the query's clock reading.
    pub status: Option<Status>,
    /// Only jobs of this queue.
    pub queue: Option<Queue>,
    /// Only jobs of this kind.
    pub kind: Option<String>,
    /// Only jobs whose current (or last) owner is this one.
    pub owner: Option<String>,
    /// Only jobs whose id starts with this; the pages then go in id order.
    pub id_prefix: Option<String>,
    /// The order of the pages (ignored with an id prefix).
    pub order: JobOrder,
    /// Where to go on from; `None` for the first page.
    pub after: Option<JobCursor>,
    /// The most jobs a page returns (1 to [`MAX_WINDOW`]).
    pub limit: usize,
    /// The most jobs a page looks at (from `limit` to [`MAX_WINDOW`]).
    pub window: usize,
}

impl Default for JobQuery {
    fn default() -> Self {
        JobQuery {
            status: None,
            queue: None,
            kind: None,
            owner: None,
            id_prefix: None,
            order: JobOrder::Newest,
            after: None,
            limit: 50,
            window: MAX_WINDOW,
        }
    }
}

impl JobQuery {
    /// Checks the query; a backend runs only checked queries.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `limit`, `window`, `kind`, `owner`, `id_prefix` or
    /// `cursor` (a cursor of the other kind than the query's order).
    pub fn check(&self) -> Result<()> {
        if self.limit == 0 || self.limit > MAX_WINDOW {
            return Err(Error::invalid(
                "limit",
                format!("{} is not between 1 and {MAX_WINDOW}", self.limit),
            ));
        }
        if self.window < self.limit || self.window > MAX_WINDOW {
            return Err(Error::invalid(
                "window",
                format!(
                    "{} is not between the limit ({}) and {MAX_WINDOW}",
                    self.window, self.limit
                ),
            ));
        }
        for (name, value) in [
            ("kind", &self.kind),
            ("owner", &self.owner),
            ("id_prefix", &self.id_prefix),
        ] {
            if let Some(v) = value
                && (v.is_empty() || v.len() > crate::types::MAX_KEY_LEN || v.contains('\0'))
            {
                return Err(Error::invalid(
                    name,
                    format!(
                        "must be 1 to {} bytes without NUL (got {} bytes)",
                        crate::types::MAX_KEY_LEN,
                        v.len()
                    ),
                ));
            }
        }
        match (&self.id_prefix, &self.after) {
            (Some(_), Some(JobCursor::Seq(_))) | (None, Some(JobCursor::Id(_))) => Err(
                Error::invalid("cursor", "belongs to a query of another order"),
            ),
            _ => Ok(()),
        }
    }

    /// The id range of the prefix: every id that starts with it is at least the prefix and
    /// below the returned bound (`None`: no bound, a prefix made only of U+10FFFF). Strings
    /// compare as their UTF-8 bytes (SQLite's BINARY collation, PostgreSQL's `"C"`), which is
    /// code point order.
    pub(crate) fn prefix_end(prefix: &str) -> Option<String> {
        let mut chars: Vec<char> = prefix.chars().collect();
        while let Some(last) = chars.pop() {
            let next = (last as u32 + 1..=char::MAX as u32).find_map(char::from_u32);
            if let Some(next) = next {
                chars.push(next);
                return Some(chars.into_iter().collect());
            }
        }
        None
    }
}

/// One page of a [`JobQuery`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobPage {
    /// The jobs, in the query's order.
    pub jobs: Vec<JobInfo>,
    /// Where the next page starts; `None` when no job is left to look at.
    pub next: Option<JobCursor>,
    /// How many jobs the page looked at to find these (at most the query's window).
    pub examined: usize,
}

/// One resource of the fence gate ([`Store::admit`](crate::Store::admit)) with the highest
/// fence admitted for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FenceRecord {
    /// The resource.
    pub resource: String,
    /// The highest fence admitted.
    pub fence: i64,
}

/// One operator action in the audit log.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    /// Its position in the log (it only grows).
    pub seq: i64,
    /// When (Unix seconds, the clock of the host that recorded it).
    pub at: f64,
    /// Who: the name the operator gave, and from where.
    pub actor: String,
    /// What: `cancel`, `retry`, `delete`, `release`, `pause`, `resume`, `retry_dead`, …
    pub action: String,
    /// To which job or queue.
    pub target: String,
    /// What came of it (`cancelled`, `refused: …`, `3 retried`, …).
    pub result: String,
}

/// The longest field of an [`AuditRecord`], in bytes: room for a target or a result that
/// quotes a job id or an owner of [`MAX_KEY_LEN`](crate::MAX_KEY_LEN) bytes with words around
/// it (`job <id>`, `released the lease of <owner> under fence 7`).
pub const MAX_AUDIT_LEN: usize = 2048;

/// An action to record with [`Observe::record_audit`](crate::Observe::record_audit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord<'a> {
    /// Who.
    pub actor: &'a str,
    /// What.
    pub action: &'a str,
    /// To which job or queue.
    pub target: &'a str,
    /// What came of it.
    pub result: &'a str,
}

impl AuditRecord<'_> {
    /// Checks the record: every field 1 to [`MAX_AUDIT_LEN`] bytes without NUL.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the field.
    pub fn check(&self) -> Result<()> {
        for (name, value) in [
            ("actor", self.actor),
            ("action", self.action),
            ("target", self.target),
            ("result", self.result),
        ] {
            if value.is_empty() || value.len() > MAX_AUDIT_LEN || value.contains('\0') {
                return Err(Error::invalid(
                    name,
                    format!("must be 1 to {MAX_AUDIT_LEN} bytes without NUL"),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_ends_at_its_next_code_point() {
        assert_eq!(JobQuery::prefix_end("ab").as_deref(), Some("ac"));
        assert_eq!(
            JobQuery::prefix_end("a\u{D7FF}").as_deref(),
            Some("a\u{E000}")
        );
        assert_eq!(JobQuery::prefix_end("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(JobQuery::prefix_end("\u{10FFFF}"), None);
    }

    #[test]
    fn cursors_round_trip_and_reject_other_text() {
        for c in [JobCursor::Seq(42), JobCursor::Id("a b/é".into())] {
            assert_eq!(JobCursor::decode(&c.encode()).unwrap(), c);
        }
        for bad in ["", "s", "sx", "i", "x1"] {
            assert_eq!(
                JobCursor::decode(bad).unwrap_err().argument(),
                Some("cursor")
            );
        }
    }

    #[test]
    fn the_throughput_window_ends_with_the_current_minute() {
        let now = 1_000_030.0; // 10 s into minute 16,667, which starts at 1,000,020
        let first = throughput_since(now) as i64;
        assert_eq!(first, (16_667 - 14) * 60);
        let rows = vec![
            (first, Some("completed".to_owned()), 3),
            (first, Some("failed".to_owned()), 1),
            (first + 14 * 60, Some("timed out".to_owned()), 2),
            (first + 14 * 60, Some("released".to_owned()), 5),
            (first + 15 * 60, Some("completed".to_owned()), 9), // after now: left out
        ];
        let m = minutes(now, rows);
        assert_eq!(m.len(), THROUGHPUT_MINUTES);
        assert_eq!((m[0].start, m[0].completed, m[0].failed), (first, 3, 1));
        assert_eq!((m[14].failed, m[14].other, m[14].completed), (2, 5, 0));
        assert_eq!(m.iter().map(|m| m.completed).sum::<u64>(), 3);
    }

    #[test]
    fn a_query_is_checked_before_it_runs() {
        let arg = |q: JobQuery| q.check().unwrap_err().argument();
        assert!(JobQuery::default().check().is_ok());
        assert_eq!(
            arg(JobQuery {
                limit: 0,
                ..JobQuery::default()
            }),
            Some("limit")
        );
        assert_eq!(
            arg(JobQuery {
                limit: 10,
                window: 5,
                ..JobQuery::default()
            }),
            Some("window")
        );
        assert_eq!(
            arg(JobQuery {
                kind: Some(String::new()),
                ..JobQuery::default()
            }),
            Some("kind")
        );
        assert_eq!(
            arg(JobQuery {
                after: Some(JobCursor::Id("x".into())),
                ..JobQuery::default()
            }),
            Some("cursor")
        );
        assert_eq!(
            arg(JobQuery {
                id_prefix: Some("a".into()),
                after: Some(JobCursor::Seq(3)),
                ..JobQuery::default()
            }),
            Some("cursor")
        );
    }
}

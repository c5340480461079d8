//! Named queues: the validated name of one ([`Queue`]), the set a claim takes from ([`Queues`]),
//! and what `queues` reports of each ([`QueueInfo`]).

use super::job::Stats;
use crate::error::{Error, Result};

/// The queue of a job enqueued without one.
pub const DEFAULT_QUEUE: &str = "default";

/// The longest queue name, in bytes.
pub const MAX_QUEUE_NAME: usize = 128;

/// A queue name: 1 to 128 ASCII letters, digits, `_`, `-`, `.` or `:`.
///
/// The character set keeps names safe in a command line (`--queue emails=4`), a URL path and
/// a metric label without quoting.
///
/// ```
/// # use leasefence::Queue;
/// assert_eq!(Queue::new("emails.high").unwrap().as_str(), "emails.high");
/// assert_eq!(Queue::new("").unwrap_err().argument(), Some("queue"));
/// assert_eq!(Queue::new("a b").unwrap_err().argument(), Some("queue"));
/// assert_eq!(Queue::default().as_str(), "default");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Queue(String);

impl Queue {
    /// Validates a queue name.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `queue` when `name` is empty, longer than 128 bytes or
    /// has a character other than ASCII letters, digits, `_`, `-`, `.` and `:`.
    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        if name.is_empty() {
            return Err(Error::invalid("queue", "must not be empty"));
        }
        if name.len() > MAX_QUEUE_NAME {
            return Err(Error::invalid(
                "queue",
                format!("must be at most {MAX_QUEUE_NAME} bytes, got {}", name.len()),
            ));
        }
        if let Some(c) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')))
        {
            return Err(Error::invalid(
                "queue",
                format!(
                    "{name:?} has the character {c:?}; use ASCII letters, digits, '_', '-', '.' \
                     or ':'"
                ),
            ));
        }
        Ok(Queue(name))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Queue {
    /// The queue `default`.
    fn default() -> Self {
        Queue(DEFAULT_QUEUE.to_owned())
    }
}

impl std::fmt::Display for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The queues a claim takes jobs from: every queue, or the ones named. Paused queues hand out
/// nothing either way.
///
/// ```
/// # fn main() -> Result<(), leasefence::Error> {
/// use leasefence::Queues;
/// let some = Queues::only(["emails", "reports"])?;
/// assert_eq!(some.names().unwrap().len(), 2);
/// assert!(Queues::All.names().is_none());
/// assert_eq!(Queues::only(Vec::<String>::new()).unwrap_err().argument(), Some("queues"));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Queues {
    /// Every queue (what [`Store::claim_next`](crate::Store::claim_next) takes from).
    #[default]
    All,
    /// Only these queues; never empty, no name twice.
    Only(Vec<Queue>),
}

impl Queues {
    /// The named queues (duplicates dropped).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `queue` for an invalid name, or `queues` when no name
    /// is given.
    pub fn only<I, N>(names: I) -> Result<Self>
    where
        I: IntoIterator<Item = N>,
        N: Into<String>,
    {
        let mut queues = Vec::new();
        for name in names {
            let queue = Queue::new(name)?;
            if !queues.contains(&queue) {
                queues.push(queue);
            }
        }
        if queues.is_empty() {
            return Err(Error::invalid("queues", "name at least one queue"));
        }
        Ok(Queues::Only(queues))
    }

    /// One queue.
    pub fn one(queue: Queue) -> Self {
        Queues::Only(vec![queue])
    }

    /// The named queues, or `None` for every queue.
    pub fn names(&self) -> Option<&[Queue]> {
        match self {
            Queues::All => None,
            Queues::Only(queues) => Some(queues),
        }
    }

    /// Whether a job of `queue` is among these.
    pub fn contains(&self, queue: &str) -> bool {
        match self {
            Queues::All => true,
            Queues::Only(queues) => queues.iter().any(|q| q.as_str() == queue),
        }
    }

    /// The names as a JSON array of strings (no escaping needed: see [`Queue::new`]), or
    /// `None` for every queue: how SQLite's `json_each` receives them.
    pub(crate) fn json(&self) -> Option<String> {
        self.names().map(|queues| {
            let quoted: Vec<String> = queues.iter().map(|q| format!("\"{}\"", q.0)).collect();
            format!("[{}]", quoted.join(","))
        })
    }

    /// The names as a list, each once (`Queues::Only` may be built with repeats), or `None`
    /// for every queue: how PostgreSQL receives them. A name given twice would otherwise be
    /// joined twice, and its jobs fill a claim's `LIMIT` twice over.
    #[cfg(feature = "postgres")]
    pub(crate) fn list(&self) -> Option<Vec<&str>> {
        self.names().map(|queues| {
            let mut names: Vec<&str> = queues.iter().map(Queue::as_str).collect();
            names.sort_unstable();
            names.dedup();
            names
        })
    }
}

/// One queue as [`Store::queues`](crate::Store::queues) reports it: its name, whether it is
/// paused, and its jobs' counts by status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueInfo {
    /// The queue's name.
    pub name: String,
    /// A paused queue hands out no job; leases already held stay valid.
    pub paused: bool,
    /// Its jobs by status.
    pub stats: Stats,
}

//! Group commit: the writes that threads of one process make at the same time, through their
//! own stores on one file, share one `BEGIN IMMEDIATE` transaction and one commit (one fsync
//! at `synchronous = FULL`).
//!
//! Every store of the same file and the same connection settings shares one [`CommitQueue`].
//! A write call joins the queue; if no store is leading a group, its own store becomes the
//! leader: it takes every call waiting, runs them in one transaction on the file's
//! [`Writer`](super::writer::Writer),
//! commits, hands each caller its own answer, and passes the lead to the first call that
//! arrived meanwhile. A caller that is not leading sleeps until its answer (or the lead) comes.
//! One writer alone is always its own leader, with a group of one.
//!
//! Each call runs exactly the statements it runs alone, so the fence checks stay per call: a
//! refused write answers `false` to its caller (its refusal counted) and changes nothing else.
//! A call that fails gets its error and changes nothing: the transaction is rolled back, and
//! the calls that had run in it run again in a new one (errors are rare, so a group pays for
//! this only when one happens; no caller is answered before its write is committed). An error
//! of the transaction itself (beginning it, committing it) reaches every call of the group that
//! has no error of its own: none of them is stored — except a commit that fails for what the
//! group wrote rather than for the file's lock (a disk too full for it all): the calls then
//! run again one transaction each, as without group commit.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use super::SqliteStore;
use super::connection::copy_error;
use super::watch::{FileKey, Registry, shared};
use crate::deadline::Deadline;
use crate::error::{Error, Result};

/// What the group commit of a file has done so far, for the stores of this process that share
/// it ([`SqliteStore::group_commit_stats`], [`SqliteOptions::group_commit`](super::SqliteOptions::group_commit)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupCommitStats {
    /// Groups run so far: each one transaction, or more when a call of the group failed (it
    /// keeps its error; the group's other calls ran again in a new transaction).
    pub groups: u64,
    /// Calls those groups carried: `calls / groups` is the mean group size.
    pub calls: u64,
    /// Whether a store is leading a group now.
    pub leading: bool,
    /// Calls waiting now for the next group.
    pub waiting: usize,
}

/// The queue of write calls of the stores of one file (with one set of connection settings) in
/// this process.
#[derive(Default)]
pub(super) struct CommitQueue {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Whether a store is leading a group: taking the waiting calls, or running them.
    leading: bool,
    /// The calls waiting for the next group, in order of arrival, each with its number.
    waiting: Vec<(u64, Box<dyn Call>)>,
    /// The number of the next call to join.
    joined: u64,
    groups: u64,
    calls: u64,
}

/// What a store's connection must share with a leader to let it commit its writes: the file,
/// and the settings a transaction runs under (durability, size limit, busy timeout).
pub(super) type Settings = (FileKey, &'static str, Option<u64>, Duration);

/// The queue of the stores of one file with `settings` (durability, size limit, busy timeout).
pub(super) fn queue(settings: Settings) -> Arc<CommitQueue> {
    static QUEUES: Registry<Settings, CommitQueue> = OnceLock::new();
    shared(&QUEUES, settings)
}

impl CommitQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn stats(&self) -> GroupCommitStats {
        let state = self.lock();
        GroupCommitStats {
            groups: state.groups,
            calls: state.calls,
            leading: state.leading,
            waiting: state.waiting.len(),
        }
    }

    /// Adds `call`; returns its number, and whether its caller is to lead (no store was
    /// leading).
    fn join(&self, call: Box<dyn Call>) -> (u64, bool) {
        let mut state = self.lock();
        let number = state.joined;
        state.joined += 1;
        state.waiting.push((number, call));
        (number, !std::mem::replace(&mut state.leading, true))
    }

    /// The leader takes every waiting call (a group when there is one).
    fn take(&self) -> Vec<Box<dyn Call>> {
        let mut state = self.lock();
        if state.waiting.is_empty() {
            return Vec::new();
        }
        state.groups += 1;
        state.calls += state.waiting.len() as u64;
        std::mem::take(&mut state.waiting)
            .into_iter()
            .map(|(_, call)| call)
            .collect()
    }

    /// Takes the call `number` out of the queue if no leader has taken it yet (nothing of it
    /// ran, then); returns whether it did.
    fn withdraw(&self, number: u64) -> bool {
        let mut state = self.lock();
        let before = state.waiting.len();
        state.waiting.retain(|(n, _)| *n != number);
        state.waiting.len() < before
    }

    /// The leader is done: the first call that arrived meanwhile leads the next group.
    fn pass_lead(&self) {
        let mut state = self.lock();
        match state.waiting.first() {
            Some((_, next)) => next.lead(),
            None => state.leading = false,
        }
    }
}

/// What the queue tells a waiting caller.
enum Message<T> {
    /// Its answer.
    Done(Result<T>),
    /// Lead the next group (its own call is in it).
    Lead,
}

/// One caller's operation and its answer, as the leader sees it.
trait Call: Send {
    /// Whether it still has to run (no answer, or one a lost transaction took back).
    fn unanswered(&self) -> bool;
    /// Runs it in the leader's open transaction and keeps its answer; returns whether it
    /// succeeded.
    fn run(&mut self, store: &SqliteStore) -> bool;
    /// Takes back a successful answer: its transaction was rolled back, so it runs again.
    fn take_back(&mut self);
    /// Replaces a successful answer (or none) by `error`: its transaction failed.
    fn fail(&mut self, error: Error);
    /// Sends the answer to the caller.
    fn answer(self: Box<Self>);
    /// Tells the caller to lead the next group.
    fn lead(&self);
}

struct Pending<T, F> {
    operation: F,
    answer: Option<Result<T>>,
    reply: Sender<Message<T>>,
}

impl<T, F> Call for Pending<T, F>
where
    T: Send,
    F: FnMut(&SqliteStore) -> Result<T> + Send,
{
    fn unanswered(&self) -> bool {
        self.answer.is_none()
    }

    fn run(&mut self, store: &SqliteStore) -> bool {
        let answer = (self.operation)(store);
        let ok = answer.is_ok();
        self.answer = Some(answer);
        ok
    }

    fn take_back(&mut self) {
        if let Some(Ok(_)) = self.answer {
            self.answer = None;
        }
    }

    fn fail(&mut self, error: Error) {
        if !matches!(self.answer, Some(Err(_))) {
            self.answer = Some(Err(error));
        }
    }

    fn answer(self: Box<Self>) {
        let answer = self.answer.unwrap_or_else(|| Err(unanswered()));
        // A caller that is gone no longer needs its answer.
        let _ = self.reply.send(Message::Done(answer));
    }

    fn lead(&self) {
        let _ = self.reply.send(Message::Lead);
    }
}

/// Whether `e` is contention for the file's lock (the same for every call of a group).
fn busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// The answer of a call whose leader stopped before giving one (it panicked).
fn unanswered() -> Error {
    Error::Backend(crate::error::BackendError::new(std::io::Error::other(
        "group commit: the store leading the group stopped before answering",
    )))
}

/// Passes the lead on when the leader is done, even when it unwinds.
struct PassLead<'q>(&'q CommitQueue);

impl Drop for PassLead<'_> {
    fn drop(&mut self) {
        self.0.pass_lead();
    }
}

impl SqliteStore {
    /// Runs `operation` (the statements of one write, without their transaction) in a group's
    /// transaction, and returns its own answer once that transaction has committed; in a
    /// transaction of its own when the store does not group its commits.
    ///
    /// `operation` may run more than once: again in a new transaction when SQLite rolled back
    /// the one it ran in (so it must only read and write through the store it is given).
    ///
    /// Waiting for a leader counts against the busy timeout: a call that no leader has taken
    /// by then leaves the queue, unrun, and its caller gets [`Error::Busy`]. A call a leader
    /// has taken is answered once its group has committed (the leader's own wait for the
    /// file is bounded by its busy timeout).
    pub(super) fn grouped<T, F>(&self, operation: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&SqliteStore) -> Result<T> + Send + 'static,
    {
        let Some(group) = &self.group else {
            return self.transaction(operation);
        };
        let (reply, answers) = mpsc::channel();
        let call = Box::new(Pending {
            operation,
            answer: None,
            reply,
        });
        // Never, for a timeout too long to add to now (`Duration::MAX`: wait on).
        let deadline = Deadline::after(self.busy_timeout);
        let (number, mut lead) = group.join(call);
        let mut taken = false;
        loop {
            if lead {
                self.lead_group(group);
                lead = false;
            }
            let message = if taken {
                answers.recv().map_err(|_| RecvTimeoutError::Disconnected)
            } else {
                answers.recv_timeout(deadline.left())
            };
            match message {
                Ok(Message::Done(answer)) => return answer.map_err(|e| self.own(e)),
                Ok(Message::Lead) => lead = true,
                Err(RecvTimeoutError::Disconnected) => return Err(unanswered()),
                Err(RecvTimeoutError::Timeout) if group.withdraw(number) => {
                    // Out of the queue before any leader took it: nothing of it ran. A lead
                    // passed to it meanwhile is taken up, so the others are not left unled.
                    while let Ok(message) = answers.try_recv() {
                        if let Message::Lead = message {
                            self.lead_group(group);
                        }
                    }
                    return Err(Error::Busy);
                }
                // A leader has it: its answer comes once the group has committed.
                Err(RecvTimeoutError::Timeout) => taken = true,
            }
        }
    }

    /// Runs `operation` in a `BEGIN IMMEDIATE` transaction of its own (on this process's
    /// [`Writer`](super::writer::Writer) of the file): a store without group commit, and the
    /// writes that never group (`renew_batch`, `enqueue_many`, the operator verbs,
    /// `complete_with`).
    ///
    /// `operation`'s error (any type a crate [`Error`](crate::Error) converts into) rolls the
    /// transaction back and is returned as it is.
    pub(super) fn transaction<T, E: From<crate::Error>>(
        &self,
        operation: impl FnOnce(&SqliteStore) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        if let Some(writer) = &self.writer {
            let writing = writer.enter(self.busy_timeout).map_err(|e| self.err(e))?;
            return writing.named(&self.path).transaction(operation);
        }
        let tx = self.begin().map_err(|e| self.err(e))?;
        let value = operation(self)?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(value)
    }

    /// `e`, of a call run by a group's leader, naming the file as this store was opened (the
    /// leader's store or the writer may have opened it under another name).
    fn own(&self, e: Error) -> Error {
        let database = || self.path.display().to_string();
        match e {
            Error::StorageFull { .. } => Error::StorageFull {
                database: database(),
            },
            Error::ReadOnly { source, .. } => Error::ReadOnly {
                database: database(),
                source,
            },
            Error::Corrupt { source, .. } => Error::Corrupt {
                database: database(),
                source,
            },
            Error::NotADatabase { .. } => Error::NotADatabase {
                path: self.path.clone(),
            },
            Error::CannotOpen { source, .. } => Error::CannotOpen {
                path: self.path.clone(),
                source,
            },
            e => e,
        }
    }

    /// Takes the waiting calls, runs them (on the file's writer), answers them, and passes the
    /// lead on.
    fn lead_group(&self, group: &CommitQueue) {
        let pass = PassLead(group);
        let mut calls = group.take();
        // A lead passed to a call that has withdrawn meanwhile may find nothing to run: no
        // transaction, no wait for the file.
        if calls.is_empty() {
            return;
        }
        match &self.writer {
            Some(writer) => match writer.enter(self.busy_timeout) {
                Ok(writing) => writing.run_group(&mut calls),
                Err(e) => self.fail_all(&mut calls, &e),
            },
            None => self.run_group(&mut calls),
        }
        drop(pass);
        for call in calls {
            call.answer();
        }
    }

    /// Runs `calls` in one transaction until each has an answer that stands: its own error, or
    /// a success that was committed (or the commit's error).
    ///
    /// Each transaction either commits or leaves one more call with its own error, so there
    /// are at most as many as calls, and one more to commit. When that commit fails for
    /// anything but the file's lock, each call runs once more in a transaction of its own.
    fn run_group(&self, calls: &mut [Box<dyn Call>]) {
        'transaction: for _ in 0..=calls.len() {
            if !calls.iter().any(|c| c.unanswered()) {
                return;
            }
            let tx = match self.begin() {
                Ok(tx) => tx,
                Err(e) => return self.fail_all(calls, &e),
            };
            for call in calls.iter_mut().filter(|c| c.unanswered()) {
                if !call.run(self) {
                    // It keeps its error; whatever it wrote goes with the transaction, and the
                    // calls that ran before it run again in a new one.
                    drop(tx);
                    calls.iter_mut().for_each(|c| c.take_back());
                    continue 'transaction;
                }
            }
            if let Err(e) = tx.commit() {
                calls.iter_mut().for_each(|c| c.take_back());
                let stored = calls.iter().filter(|c| c.unanswered()).count();
                if stored > 1 && !busy(&e) {
                    // The commit failed for what the group wrote (a disk too full for all of
                    // it, say), not for the file's lock: each call runs again in a transaction
                    // of its own, as without group commit, so the error reaches only the calls
                    // that bring it.
                    for call in calls.iter_mut().filter(|c| c.unanswered()) {
                        self.run_alone(call.as_mut());
                    }
                } else {
                    self.fail_all(calls, &e);
                }
            }
            return;
        }
    }

    /// Runs `call` in a transaction of its own (after its group's commit failed).
    fn run_alone(&self, call: &mut dyn Call) {
        let tx = match self.begin() {
            Ok(tx) => tx,
            Err(e) => return call.fail(self.err(e)),
        };
        if call.run(self)
            && let Err(e) = tx.commit()
        {
            call.fail(self.err(e));
        }
    }

    /// Gives `e` (of the group's transaction) to every call without an error of its own.
    fn fail_all(&self, calls: &mut [Box<dyn Call>], e: &rusqlite::Error) {
        for call in calls {
            call.fail(self.err(copy_error(e)));
        }
    }
}

#[cfg(test)]
mod tests;

//! Which tests screen the mutants of each part of the library (see [`super::staged`]).

/// The library's source, the only code cargo-mutants examines (see `.cargo/mutants.toml`).
pub const EXAMINED: &str = "crates/leasefence/src";

/// Tests too slow for the screen (tens of seconds each): the PostgreSQL model tests, the
/// 30,000-job batch, and the multi-process binaries. The whole suite still runs them.
pub const SLOW: &str = "test(/^model::(pg_store|any_store_on_postgres)/) | test(/thirty_thousand/) \
                    | binary(crash) | binary(pause) | binary(hosts) | binary(linearizability)";

/// The screen's model cases per store (the whole suite runs the tests' own counts).
pub const SCREEN_MODEL_CASES: &str = "100";

/// The tests that judge the mutants of one part of the library in the screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Group {
    /// `asynchronous/`: the async worker's cases.
    Async,
    /// The schedules, in every layer.
    Schedule,
    /// `worker/`: the worker's cases, signals, the story.
    Worker,
    /// `postgres/`: the PostgreSQL cases.
    Postgres,
    /// `sqlite/`: every case but PostgreSQL's.
    Sqlite,
    /// `open.rs`, `open/`: the `AnyStore` cases.
    Open,
    /// The operator's views (`types/observe.rs`, `store/observe.rs`): their unit tests and the
    /// cases of the views.
    Observe,
    /// `policy.rs`: the decisions above the seam (batch order, retry time, counts, pages) —
    /// the cases of the operations and views that use them.
    Policy,
    /// `error.rs`: the error kinds — the cases of bad input, contention and server faults.
    Errors,
    /// `lib.rs`: the free functions of the seed's API — the cases of its operations.
    Facade,
    /// Everything else (the types, the seam, the free functions): every case.
    All,
}

impl Group {
    /// The group of a file of the library (a path relative to the workspace root).
    pub fn of(file: &str) -> Group {
        let rel = file.strip_prefix("crates/leasefence/src/").unwrap_or(file);
        if rel.starts_with("asynchronous/") {
            Group::Async
        } else if rel.ends_with("schedule.rs") || rel == "worker/scheduler.rs" {
            Group::Schedule
        } else if rel.starts_with("worker/") {
            Group::Worker
        } else if rel.starts_with("postgres/") {
            Group::Postgres
        } else if rel.starts_with("sqlite/") {
            Group::Sqlite
        } else if rel == "open.rs" || rel.starts_with("open/") {
            Group::Open
        } else if rel == "types/observe.rs" || rel == "store/observe.rs" {
            Group::Observe
        } else if rel == "policy.rs" {
            Group::Policy
        } else if rel == "error.rs" {
            Group::Errors
        } else if rel == "lib.rs" {
            Group::Facade
        } else {
            Group::All
        }
    }

    /// Its name in the output.
    pub fn name(self) -> &'static str {
        match self {
            Group::Async => "async",
            Group::Schedule => "schedule",
            Group::Worker => "worker",
            Group::Postgres => "postgres",
            Group::Sqlite => "sqlite",
            Group::Open => "open",
            Group::Observe => "observe",
            Group::Policy => "policy",
            Group::Errors => "errors",
            Group::Facade => "facade",
            Group::All => "all",
        }
    }

    /// The cargo-nextest filter expression of its screen.
    pub fn filter(self) -> String {
        let tests = match self {
            Group::Async => "test(/^async_worker::/) | binary(leasefence)",
            Group::Schedule => "test(/schedule/)",
            // With the lost-connection cases of `reconnect`: the worker's read-back of a write
            // whose answer was lost is theirs to check.
            Group::Worker => {
                "test(/^(worker|signals|story|watch|reconnect)::/) | test(/^model::seed/) \
                 | binary(leasefence)"
            }
            // Every PostgreSQL case by its name (`pg`/`any_pg` contract cases, `on_postgresql_…`,
            // `pg_…`, `…_pg`) or module, and the lost-connection cases of `reconnect`.
            Group::Postgres => {
                "test(/postgres|::pg_|_pg$|::(pg|any_pg)$/) \
                 | test(/^(database_clock|pg|reconnect)::/)"
            }
            Group::Sqlite => "not (test(/::(pg|any_pg)$/) | test(/^postgres::/))",
            Group::Open => "test(/::any_(sqlite|pg)$/) | test(/^any_store::/) | binary(leasefence)",
            Group::Observe => {
                "binary(leasefence) \
                 | test(/^(audit|fences|find_jobs|inspect|ledger|list|overview|queues|stats|status)::/)"
            }
            Group::Policy => {
                "binary(leasefence) \
                 | test(/^(audit|fences|find_jobs|inspect|ledger|list|overview|queues|stats|status)::/) \
                 | test(/^(claim_many|claim_batch|claim_next|fail|retry)::/)"
            }
            Group::Errors => {
                "binary(leasefence) | test(/^(bad_input|busy|errors|faults|reconnect|postgres|seam)::/)"
            }
            Group::Facade => {
                "binary(leasefence) | test(/^model::seed/) \
                 | test(/^(init_db|enqueue|state|claim|renew|complete|release|claim_many|fail|bad_input|seam)::/)"
            }
            Group::All => "all()",
        };
        format!("({tests}) and not ({SLOW})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn every_file_has_one_group() {
        assert_eq!(
            Group::of("crates/leasefence/src/asynchronous/worker.rs"),
            Group::Async
        );
        assert_eq!(
            Group::of("crates/leasefence/src/worker/scheduler.rs"),
            Group::Schedule
        );
        assert_eq!(
            Group::of("crates/leasefence/src/sqlite/schedule.rs"),
            Group::Schedule
        );
        assert_eq!(
            Group::of("crates/leasefence/src/types/schedule.rs"),
            Group::Schedule
        );
        assert_eq!(
            Group::of("crates/leasefence/src/worker/batch.rs"),
            Group::Worker
        );
        assert_eq!(
            Group::of("crates/leasefence/src/postgres/store.rs"),
            Group::Postgres
        );
        assert_eq!(
            Group::of("crates/leasefence/src/sqlite/mod.rs"),
            Group::Sqlite
        );
        assert_eq!(
            Group::of("crates/leasefence/src/open/target.rs"),
            Group::Open
        );
        assert_eq!(Group::of("crates/leasefence/src/open.rs"), Group::Open);
        assert_eq!(
            Group::of("crates/leasefence/src/types/observe.rs"),
            Group::Observe
        );
        assert_eq!(Group::of("crates/leasefence/src/policy.rs"), Group::Policy);
        assert_eq!(Group::of("crates/leasefence/src/error.rs"), Group::Errors);
        assert_eq!(Group::of("crates/leasefence/src/lib.rs"), Group::Facade);
        assert_eq!(Group::of("crates/leasefence/src/types/args.rs"), Group::All);
    }

    #[test]
    fn every_screen_leaves_out_the_slow_tests() {
        for g in [
            Group::Async,
            Group::Schedule,
            Group::Worker,
            Group::Postgres,
            Group::Sqlite,
            Group::Open,
            Group::Observe,
            Group::Policy,
            Group::Errors,
            Group::Facade,
            Group::All,
        ] {
            assert!(g.filter().ends_with(&format!("and not ({SLOW})")), "{g:?}");
        }
    }
}

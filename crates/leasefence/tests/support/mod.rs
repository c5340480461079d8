//! What the process-level reliability tests share: where the child processes work (an SQLite
//! file or a PostgreSQL schema), and when the PostgreSQL variants run.

use leasefence::{PgOptions, SqliteStore, Store};

/// Where the children work: an SQLite file, or a PostgreSQL schema.
#[derive(Clone, Debug)]
pub enum Backend {
    Sqlite(String),
    Pg { url: String, schema: String },
}

impl Backend {
    /// The backend's name, for reports.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite(_) => "SQLite",
            Backend::Pg { .. } => "PostgreSQL",
        }
    }

    /// A one-line-per-field description handed to a child process through the environment.
    pub fn spec(&self) -> String {
        match self {
            Backend::Sqlite(path) => format!("sqlite\n{path}"),
            Backend::Pg { url, schema } => format!("pg\n{url}\n{schema}"),
        }
    }

    /// The inverse of `spec`.
    pub fn parse(spec: &str) -> Backend {
        let parts: Vec<&str> = spec.split('\n').collect();
        match parts[..] {
            ["sqlite", path] => Backend::Sqlite(path.into()),
            ["pg", url, schema] => Backend::Pg {
                url: url.into(),
                schema: schema.into(),
            },
            _ => panic!("bad spec {spec:?}"),
        }
    }

    /// A store on it; on PostgreSQL judging leases by the database's clock, as hosts would.
    #[allow(dead_code)]
    pub fn store(&self) -> Box<dyn Store> {
        self.open(true)
    }

    /// A store that judges leases by the `now` each call is given, on both backends.
    #[allow(dead_code)]
    pub fn store_on_callers_clock(&self) -> Box<dyn Store> {
        self.open(false)
    }

    fn open(&self, database_clock: bool) -> Box<dyn Store> {
        match self {
            Backend::Sqlite(path) => Box::new(SqliteStore::open(path).unwrap()),
            Backend::Pg { url, schema } => Box::new(
                PgOptions::new()
                    .schema(schema)
                    .pool_size(2)
                    .database_clock(database_clock)
                    .open(url)
                    .unwrap(),
            ),
        }
    }
}

/// A fresh PostgreSQL schema, dropped when this goes out of scope.
pub struct PgSchema {
    pub url: String,
    pub schema: String,
}

impl PgSchema {
    /// `None` (with the reason printed) when `LEASEFENCE_TEST_PG` is unset; a failure in CI.
    pub fn new(prefix: &str) -> Option<PgSchema> {
        let url = match std::env::var("LEASEFENCE_TEST_PG") {
            Ok(url) if !url.trim().is_empty() => url,
            _ if std::env::var_os("CI").is_some() => {
                panic!("CI is set but LEASEFENCE_TEST_PG is not: the PostgreSQL case must run")
            }
            _ => {
                eprintln!(
                    "skipped: LEASEFENCE_TEST_PG is not set, so the PostgreSQL case did not run"
                );
                return None;
            }
        };
        let schema = format!("lf_{prefix}_{}", std::process::id());
        let mut raw = leasefence::postgres::Client::connect(&url, leasefence::postgres::NoTls)
            .unwrap_or_else(|e| panic!("LEASEFENCE_TEST_PG={url:?} is set but unreachable: {e}"));
        raw.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
            .unwrap();
        Some(PgSchema { url, schema })
    }

    pub fn backend(&self) -> Backend {
        Backend::Pg {
            url: self.url.clone(),
            schema: self.schema.clone(),
        }
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        if let Ok(mut raw) =
            leasefence::postgres::Client::connect(&self.url, leasefence::postgres::NoTls)
        {
            let _ = raw.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema));
        }
    }
}

/// A small deterministic generator (xorshift64*), so that a failing schedule can be replayed
/// from its printed seed. The seed must not be 0.
pub struct Rng(pub u64);

impl Rng {
    /// A number in `0..n`.
    #[allow(dead_code)]
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) % n
    }
}

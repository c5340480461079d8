//! `leasefence demo`: the stalled-worker story step by step, then a multi-threaded stress run
//! with stalling workers, judged by reading every job back through a fresh connection.
//!
//! Exit status 0 when every expectation of the story and every invariant of the stress run
//! held, 1 when one broke, 2 on bad arguments or a database error.

mod story;
mod stress;

use std::path::PathBuf;

use anyhow::{Context as _, ensure};
use leasefence::{AnyStore, PgOptions, SqliteOptions, Synchronous, Target};
use serde_json::json;

use self::stress::Purpose;

use crate::Ctx;
use crate::output::Outcome;

/// Arguments of `demo`. The database is a fresh temporary file unless `--db` (or
/// `LEASEFENCE_DB`) is given; then this run's job ids get a unique prefix so that existing jobs
/// are not disturbed. On PostgreSQL (`--db postgres://…`) the demo runs in a fresh schema that
/// it drops at the end, unless `--pg-schema` is given: then it uses that schema, with prefixed
/// job ids, and leaves its jobs there. It never touches another schema.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Number of jobs in the stress run.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..))]
    jobs: u32,
    /// Number of worker threads, each with its own connection.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    workers: u32,
    /// Lease duration of the stress run in (real) seconds.
    ///
    /// The default leaves normal jobs well inside their lease while 8 workers queue for
    /// SQLite's write lock with durable (fsynced) commits.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    ttl: f64,
    /// Fraction of first claims after which the worker stalls past its lease, then tries to
    /// renew and complete with its old fence (both must be refused).
    #[arg(long, default_value_t = 0.02, allow_negative_numbers = true)]
    stall_rate: f64,
}

/// Runs the story, then the stress run, and prints the verdict.
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    let out = ctx.out;
    let ttl = leasefence::Ttl::new(args.ttl).context("--ttl")?;
    ensure!(
        (0.0..=1.0).contains(&args.stall_rate),
        "--stall-rate must be between 0 and 1, got {}",
        args.stall_rate
    );

    let place = Place::new(ctx)?;
    let prefix = place.prefix.clone();
    let story_broken = match &place.backend {
        Backend::Sqlite { path, .. } => {
            leasefence::init_db(path).with_context(|| format!("init {}", path.display()))?;
            let where_ = if place.temporary {
                "a fresh temporary file, removed when the demo ends".to_owned()
            } else {
                format!("given; this run's job ids start with {prefix}")
            };
            out.line(
                format!("database: {} ({where_})", path.display()),
                json!({ "op": "demo", "phase": "setup", "db": path.display().to_string(),
                        "temporary": place.temporary, "job_prefix": prefix }),
            );
            story::run(&story::Db::File(path), &format!("{prefix}seed-job"), out)?
        }
        Backend::Postgres { url, schema, .. } => {
            let store = place.open(Purpose::Worker).with_context(|| {
                format!(
                    "opening {} (schema {schema})",
                    Target::Postgres(url.clone())
                )
            })?;
            let where_ = if place.temporary {
                "a fresh schema, dropped when the demo ends".to_owned()
            } else {
                format!("given; this run's job ids start with {prefix}")
            };
            let shown = Target::Postgres(url.clone()).to_string();
            out.line(
                format!("database: {shown}, schema {schema} ({where_})"),
                json!({ "op": "demo", "phase": "setup", "db": shown, "schema": schema,
                        "temporary": place.temporary, "job_prefix": prefix }),
            );
            story::run(&story::Db::Store(&store), &format!("{prefix}seed-job"), out)?
        }
    };

    let config = stress::Config {
        jobs: args.jobs as usize,
        workers: args.workers as usize,
        ttl,
        stall_rate: args.stall_rate,
        backend: place.backend.name(),
    };
    let report = stress::run(&|purpose| place.open(purpose), &prefix, &config)?;
    report.print(&config, out);

    let mut broken: Vec<String> = report
        .broken(&config)
        .into_iter()
        .map(str::to_owned)
        .collect();
    if story_broken > 0 {
        broken.insert(0, format!("{story_broken} step(s) of the story"));
    }
    let ok = broken.is_empty();
    let verdict = if ok {
        "OK: every job done exactly once, every stale write refused, no result overwritten"
            .to_owned()
    } else {
        format!("BROKEN: {}", broken.join("; "))
    };
    out.line(
        format!("verdict: {verdict}"),
        json!({ "op": "demo", "phase": "verdict", "ok": ok, "broken": broken }),
    );
    drop(place);
    Ok(if ok { Outcome::Done } else { Outcome::Refused })
}

/// Where the demo runs, and whether it cleans up after itself.
struct Place {
    backend: Backend,
    /// A database (file or schema) of the demo's own, removed at the end.
    temporary: bool,
    /// Prepended to every job id; empty in a temporary database.
    prefix: String,
}

enum Backend {
    /// An SQLite file; the temporary directory (when the demo made one) lives as long as this.
    Sqlite {
        path: PathBuf,
        _tmp: Option<tempfile::TempDir>,
    },
    /// A schema of a PostgreSQL database, on the caller's clock: the story gives its own times,
    /// and the stress run judges its invariants on its own clock.
    Postgres {
        url: String,
        schema: String,
        options: PgOptions,
    },
}

impl Backend {
    fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite { .. } => "sqlite",
            Backend::Postgres { .. } => "postgres",
        }
    }
}

impl Place {
    /// A fresh temporary file or schema, unless the user named the database (for PostgreSQL:
    /// the schema); then this run's job ids get a unique prefix so that existing jobs are not
    /// disturbed.
    fn new(ctx: &Ctx) -> anyhow::Result<Place> {
        let unique = || format!("{}/", run_id());
        Ok(match ctx.target().context("demo")? {
            Target::Postgres(url) => {
                let (schema, temporary, prefix) = match ctx.pg_schema_given() {
                    Some(schema) => (schema.to_owned(), false, unique()),
                    None => (
                        format!("leasefence_{}", run_id().replace('-', "_")),
                        true,
                        String::new(),
                    ),
                };
                let options = PgOptions::new().schema(&schema).pool_size(1);
                Place {
                    backend: Backend::Postgres {
                        url,
                        schema,
                        options,
                    },
                    temporary,
                    prefix,
                }
            }
            Target::Sqlite(path) => match ctx.db_given() {
                Some(_) => Place {
                    backend: Backend::Sqlite { path, _tmp: None },
                    temporary: false,
                    prefix: unique(),
                },
                None => {
                    let tmp = tempfile::Builder::new()
                        .prefix("leasefence-demo-")
                        .tempdir()
                        .context("creating a temporary directory for the demo database")?;
                    Place {
                        backend: Backend::Sqlite {
                            path: tmp.path().join("demo.db"),
                            _tmp: Some(tmp),
                        },
                        temporary: true,
                        prefix: String::new(),
                    }
                }
            },
        })
    }

    /// A fresh store for `purpose`, taking `now` from the caller.
    fn open(&self, purpose: Purpose) -> leasefence::Result<AnyStore> {
        match &self.backend {
            Backend::Sqlite { path, .. } => {
                let options = SqliteOptions::new().init(false);
                let options = if purpose == Purpose::Setup {
                    options.synchronous(Synchronous::Normal)
                } else {
                    options
                };
                options.open(path).map(AnyStore::from)
            }
            Backend::Postgres { url, options, .. } => options.open(url).map(AnyStore::from),
        }
    }
}

/// Drops the demo's own schema, also when the demo failed half-way; a temporary file goes with
/// its directory.
impl Drop for Place {
    fn drop(&mut self) {
        let (true, Backend::Postgres { url, schema, .. }) = (self.temporary, &self.backend) else {
            return;
        };
        let dropped = leasefence::postgres::Client::connect(url, leasefence::postgres::NoTls)
            .and_then(|mut client| {
                client.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
            });
        if let Err(e) = dropped {
            eprintln!("leasefence: warning: could not drop the demo's schema {schema}: {e}");
        }
    }
}

/// A run id unique enough to keep two demo runs on one database apart.
fn run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("demo-{nanos:x}-{:x}", std::process::id())
}

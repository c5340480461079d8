//! `leasefence serve [--bind ADDR] [--worker-token-file F] [--admin-token-file F]`: the
//! contract over HTTP (`docs/http.md`). Runs until SIGTERM or SIGINT, then finishes the
//! requests in flight and exits 0.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use leasefence::{SqliteOptions, Synchronous};
use leasefence_server::{AsyncOptions, AsyncStore, ServerConfig, Tokens};

use crate::cmd::shared;
use crate::ctx::Ctx;
use crate::output::Outcome;

/// Arguments of `serve`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Tokens: a worker token (claim, renew, complete, fail, release, enqueue, reads) and an admin \
token (everything, and cancel, retry, delete, queue pause/resume, schedule add/remove). Give \
each in a file (--worker-token-file, --admin-token-file) or in the environment \
(LEASEFENCE_WORKER_TOKEN, LEASEFENCE_ADMIN_TOKEN); never on the command line, where other \
users can read it. At least 16 printable characters, e.g. `head -c 32 /dev/urandom | base64`. \
Without any token every route is open, and only a loopback address may be bound.

/metrics, /healthz and /readyz need no token. See docs/http.md.

The dashboard is at /dashboard: sign in with the worker token to look (read-only) or with the \
admin token to act (cancel, retry, delete, release an expired lease, pause, resume); every \
action is recorded in its audit log. Without tokens it is open, as every route. See \
docs/dashboard.md.")]
pub struct Args {
    /// The address to listen on, IP:PORT (port 0: any free port, printed at start).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7878", value_parser = address)]
    bind: SocketAddr,

    /// A file holding the worker token [env: LEASEFENCE_WORKER_TOKEN holds the token itself].
    #[arg(long, value_name = "FILE")]
    worker_token_file: Option<PathBuf>,

    /// A file holding the admin token [env: LEASEFENCE_ADMIN_TOKEN holds the token itself].
    #[arg(long, value_name = "FILE")]
    admin_token_file: Option<PathBuf>,

    /// Store connections serving requests at once (at least 1).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 4,
        allow_negative_numbers = true
    )]
    connections: u32,

    /// The largest request body taken, in bytes; larger ones get 413.
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = 1 << 20,
        allow_negative_numbers = true
    )]
    max_body_bytes: usize,

    /// How long a request may take to send its headers and body and to get a free store
    /// connection, in seconds; past it, 503 and nothing is done, or the connection is closed
    /// when the headers never came (a keep-alive connection idle this long is closed too; a
    /// store call, once started, runs to its end). A shutdown waits this long and 5 s more for
    /// the requests in flight.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 30.0,
        allow_negative_numbers = true
    )]
    request_timeout: f64,

    /// SQLite only: `full` (default; every acknowledged write survives power loss) or
    /// `normal` (faster; the last commits may be lost on power loss, never on a crash).
    /// Refused with a PostgreSQL `--db`, whose durability is the server's `synchronous_commit`.
    #[arg(long, value_name = "MODE")]
    synchronous: Option<String>,

    /// The dashboard shows no job payload or result, and serves no download of them (for
    /// sensitive data); sizes, errors and every other field are still shown.
    #[arg(long)]
    hide_payloads: bool,
}

/// `--bind`: an IP address and a port; a host name is not resolved, which the error says (a
/// bare "invalid socket address syntax" leaves `localhost:7878` a puzzle).
fn address(text: &str) -> Result<SocketAddr, String> {
    text.trim().parse().map_err(|_| {
        format!(
            "must be an IP address and a port, such as 127.0.0.1:7878 or [::1]:7878 (a host \
             name such as localhost is not resolved), got {text:?}"
        )
    })
}

/// Serves until SIGTERM or SIGINT (exit 0).
pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<Outcome> {
    let tokens = Tokens {
        worker: shared::token(
            (args.worker_token_file.as_deref(), "--worker-token-file"),
            "LEASEFENCE_WORKER_TOKEN",
            "worker token",
        )?,
        admin: shared::token(
            (args.admin_token_file.as_deref(), "--admin-token-file"),
            "LEASEFENCE_ADMIN_TOKEN",
            "admin token",
        )?,
    };
    tokens.check_bind(args.bind)?;
    let synchronous = match args.synchronous.as_deref().unwrap_or("full") {
        "full" => Synchronous::Full,
        "normal" => Synchronous::Normal,
        other => {
            return Err(leasefence::Error::InvalidArgument {
                argument: "synchronous",
                reason: format!("`full` or `normal`, got `{other}`"),
            }
            .into());
        }
    };
    // Finite, above 0, and short enough to be a duration at all (1e30 s is not).
    if !(args.request_timeout.is_finite() && args.request_timeout > 0.0)
        || Duration::try_from_secs_f64(args.request_timeout).is_err()
    {
        return Err(leasefence::Error::InvalidArgument {
            argument: "request-timeout",
            reason: format!(
                "must be seconds > 0 (and below about 1.8e19), got {}",
                args.request_timeout
            ),
        }
        .into());
    }
    if args.max_body_bytes == 0 {
        return Err(leasefence::Error::InvalidArgument {
            argument: "max-body-bytes",
            reason: "must be at least 1 (a limit of 0 would refuse every request with a body)"
                .into(),
        }
        .into());
    }
    if args.connections == 0 {
        return Err(leasefence::Error::InvalidArgument {
            argument: "connections",
            reason: "must be at least 1".into(),
        }
        .into());
    }
    let (target, pg) = ctx.server_target()?;
    if args.synchronous.is_some() && target.is_postgres() {
        return Err(leasefence::Error::InvalidArgument {
            argument: "synchronous",
            reason: "applies to an SQLite file only; on PostgreSQL a commit is as durable as \
                     the server's synchronous_commit makes it (on, by default)"
                .into(),
        }
        .into());
    }
    if let (Some(w), Some(a)) = (&tokens.worker, &tokens.admin)
        && w.same_as(a)
    {
        return Err(leasefence::Error::InvalidArgument {
            argument: "admin token",
            reason: "is the worker token: every worker could cancel, retry and delete jobs; give \
                     the admin a token of its own"
                .into(),
        }
        .into());
    }
    let options = AsyncOptions::new()
        .connections(args.connections)
        // A request waits this long at most for a free store connection (then 503, nothing
        // done); a call that has its connection runs to its end.
        .acquire_timeout(Duration::from_secs_f64(args.request_timeout))
        // A missing SQLite file is created with its tables, as `init` would (never resetting
        // a row); a PostgreSQL schema is created if absent, as every verb that writes does.
        .sqlite(SqliteOptions::new().init(true).synchronous(synchronous))
        .postgres(pg);
    let config = ServerConfig {
        tokens,
        max_body_bytes: args.max_body_bytes,
        request_timeout: Duration::from_secs_f64(args.request_timeout),
        hide_payloads: args.hide_payloads,
    };
    init_logging();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let out = ctx.out;
    runtime.block_on(async move {
        let store = AsyncStore::open_target(target, options)
            .await
            .context("serve")?;
        let listener = tokio::net::TcpListener::bind(args.bind)
            .await
            .with_context(|| format!("binding {}", args.bind))?;
        let addr = listener.local_addr()?;
        // The signal handlers are installed before the address is printed: a SIGTERM sent by
        // whoever read that line (a supervisor, a test) finds them in place and stops the
        // server gracefully, rather than ending the process as the default action would.
        let stop = stop_signal();
        // The first line on stdout is the address, for scripts that bind port 0 (with --json
        // an object, as every command's lines are).
        out.line(
            format!("listening on http://{addr}"),
            serde_json::json!({ "op": "serve", "ok": true, "url": format!("http://{addr}"),
                                "dashboard": format!("http://{addr}/dashboard") }),
        );
        eprintln!("leasefence: the dashboard is at http://{addr}/dashboard");
        eprintln!(
            "leasefence: serving {} ({}) on http://{addr}; {}",
            store.shown(),
            store.backend(),
            if config.tokens.any() {
                match (&config.tokens.worker, &config.tokens.admin) {
                    (Some(_), Some(_)) => "worker and admin tokens required",
                    (Some(_), None) => {
                        "worker token required; admin routes refused (no admin token)"
                    }
                    _ => "admin token required",
                }
            } else {
                "no tokens: every route is open to anyone who can reach this loopback address"
            }
        );
        let router = leasefence_server::router(store, &config);
        leasefence_server::serve_with(listener, router, &config, stop)
            .await
            .context("serving")?;
        eprintln!("leasefence: stopped");
        Ok(Outcome::Done)
    })
}

/// Installs the SIGTERM and SIGINT handlers now (inside the runtime), and returns a future
/// that resolves at the first of those signals.
fn stop_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let handlers = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        );
        async move {
            let (Ok(mut term), Ok(mut int)) = handlers else {
                // Without handlers the process dies of the signal, as any process would.
                std::future::pending::<()>().await;
                return;
            };
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
    }
    #[cfg(not(unix))]
    {
        // `ctrl_c` installs its handler when first polled.
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Warnings and errors (a store call that failed, an unreachable database) to stderr.
fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::WARN)
        .with_target(false)
        .try_init();
}

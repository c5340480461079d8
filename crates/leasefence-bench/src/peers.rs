//! Peer job queues from crates.io, each built in its own Cargo workspace under `bench/peers/`
//! (their SQLite versions conflict with ours) and run as a child process per measurement.
//!
//! Protocol (see `bench/peers/README.md`): `peer-<name> sqlite --db PATH --jobs N --workers W
//! --sync full|normal` or `peer-<name> postgres --url URL --jobs N --workers W`, printing one
//! JSON line with `jobs_per_sec`, `ok` and the durability the peer actually ran at.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use serde::Deserialize;

use crate::Case;
use crate::subjects::Durability;

/// A peer binary and the modes it supports.
#[derive(Debug, Clone)]
pub(crate) struct Peer {
    /// Display name, e.g. `effectum` or `apalis-sqlite`.
    pub(crate) name: String,
    binary: PathBuf,
    /// First argument: `sqlite` or `postgres`.
    mode: &'static str,
    /// Arguments after the protocol's own: the peer's configuration.
    extra: &'static [&'static str],
}

/// The peers found built, and what was not.
#[derive(Debug, Default)]
pub(crate) struct Peers {
    pub(crate) found: Vec<Peer>,
    pub(crate) missing: Vec<String>,
    /// What each peer reported it ran at (its `sync` field), by name.
    pub(crate) sync: std::sync::Mutex<std::collections::BTreeMap<String, String>>,
    /// Versions reported by the peers, by name.
    pub(crate) versions: std::sync::Mutex<std::collections::BTreeMap<String, String>>,
}

/// A known peer: (display name, workspace folder, binary, mode, configuration arguments).
type Known = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
);

/// Every peer runs in its best documented configuration for the case; where that is not what
/// it does out of the box, the out-of-the-box run is measured too, under a name of its own.
const KNOWN: [Known; 5] = [
    // effectum out of the box: its WAL pragma is misspelt, so a rollback journal.
    ("effectum", "effectum", "peer-effectum", "sqlite", &[]),
    // effectum as designed (its best configuration): the same binary on a WAL file.
    (
        "effectum-wal",
        "effectum",
        "peer-effectum",
        "sqlite",
        &["--journal", "wal"],
    ),
    ("apalis-sqlite", "apalis", "peer-apalis", "sqlite", &[]),
    ("apalis-postgres", "apalis", "peer-apalis", "postgres", &[]),
    ("underway", "apalis", "peer-underway", "postgres", &[]),
];

pub(crate) fn discover(dir: &Path) -> Peers {
    let mut peers = Peers::default();
    for (name, folder, binary, mode, extra) in KNOWN {
        let path = dir.join(folder).join("target/release").join(binary);
        if path.is_file() {
            peers.found.push(Peer {
                name: name.into(),
                binary: path,
                mode,
                extra,
            });
        } else {
            peers.missing.push(format!(
                "peer {name}: {} is not built (cargo build --release --manifest-path {}/Cargo.toml)",
                path.display(),
                dir.join(folder).display()
            ));
        }
    }
    peers
}

#[derive(Debug, Deserialize)]
struct Report {
    #[serde(default)]
    version: String,
    sync: String,
    jobs: usize,
    jobs_per_sec: f64,
    #[serde(default)]
    duplicates: u64,
    ok: bool,
}

impl Peers {
    pub(crate) fn names(&self) -> Vec<String> {
        self.found.iter().map(|p| p.name.clone()).collect()
    }

    /// The peers that run at `durability`.
    pub(crate) fn for_durability(&self, durability: Durability) -> Vec<String> {
        let mode = if durability == Durability::Pg {
            "postgres"
        } else {
            "sqlite"
        };
        self.found
            .iter()
            .filter(|p| p.mode == mode)
            .map(|p| p.name.clone())
            .collect()
    }

    /// Runs `name` on `case` and returns its jobs/s.
    pub(crate) fn run(&self, name: &str, case: &Case, db: &Path, pg: Option<&str>) -> Result<f64> {
        let peer = self
            .found
            .iter()
            .find(|p| p.name == name)
            .context("unknown peer")?;
        let mut command = Command::new(&peer.binary);
        command.arg(peer.mode);
        match case.durability {
            Durability::Pg => {
                command.args(["--url", pg.context("no PostgreSQL URL")?]);
            }
            d => {
                command.arg("--db").arg(db);
                command.args([
                    "--sync",
                    if d == Durability::Full {
                        "full"
                    } else {
                        "normal"
                    },
                ]);
            }
        }
        command.args(["--jobs", &case.jobs.to_string()]);
        command.args(["--workers", &case.workers.to_string()]);
        command.args(peer.extra);
        let output = command
            .output()
            .with_context(|| format!("running {}", peer.binary.display()))?;
        anyhow::ensure!(
            output.status.success(),
            "{name} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
        let line = String::from_utf8_lossy(&output.stdout);
        let report: Report = serde_json::from_str(line.trim())
            .with_context(|| format!("{name} printed {line:?}"))?;
        anyhow::ensure!(
            report.ok && report.jobs == case.jobs,
            "{name} reported {line}"
        );
        if report.duplicates > 0 {
            eprintln!("note: {name} ran {} jobs twice", report.duplicates);
        }
        self.sync
            .lock()
            .expect("not poisoned")
            .insert(format!("{name} {}", case.durability.label()), report.sync);
        self.versions
            .lock()
            .expect("not poisoned")
            .insert(name.to_owned(), report.version);
        Ok(report.jobs_per_sec)
    }
}

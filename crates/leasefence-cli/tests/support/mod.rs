//! What the CLI test binaries share: the outcome of one run of `leasefence` and the checks on it.
#![allow(dead_code)]

#[cfg(unix)]
pub mod serving;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

/// The outcome of one run of the binary.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Runs the binary in `dir` with exactly `args`, `stdin` and `env`: no `LEASEFENCE_DB` or
    /// `LEASEFENCE_PG_SCHEMA` is inherited.
    pub fn of(dir: &Path, args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Run {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_leasefence"));
        cmd.args(args)
            .current_dir(dir)
            .env_remove("LEASEFENCE_DB")
            .env_remove("LEASEFENCE_PG_SCHEMA")
            .envs(env.iter().copied())
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        if let Some(text) = stdin {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
        }
        let out = child.wait_with_output().unwrap();
        Run {
            code: out.status.code().expect("exited normally"),
            stdout: String::from_utf8(out.stdout).unwrap(),
            stderr: String::from_utf8(out.stderr).unwrap(),
        }
    }

    #[track_caller]
    pub fn status(&self, code: i32) -> &Self {
        assert_eq!(self.code, code, "exit status; {self:#?}");
        self
    }

    #[track_caller]
    pub fn ok(&self) -> &Self {
        self.status(0)
    }

    /// Refused by the contract: status 1, `refused: …` on stderr.
    #[track_caller]
    pub fn refused(&self) -> &Self {
        self.status(1);
        assert!(self.stderr.starts_with("refused: "), "{self:#?}");
        self
    }

    /// Bad input or database error: status 2, `leasefence: error: …` mentioning `needle`.
    #[track_caller]
    pub fn error(&self, needle: &str) -> &Self {
        self.failed(2, needle)
    }

    /// Busy database or unavailable server: status 3 (retryable: run it again),
    /// `leasefence: error: …` mentioning `needle`.
    #[track_caller]
    pub fn busy(&self, needle: &str) -> &Self {
        self.failed(3, needle)
    }

    /// Exit status `code` with `leasefence: error: …` on stderr mentioning `needle`.
    #[track_caller]
    fn failed(&self, code: i32, needle: &str) -> &Self {
        self.status(code);
        assert!(
            self.stderr.contains("leasefence: error: ") && self.stderr.contains(needle),
            "stderr should mention {needle:?}; {self:#?}"
        );
        self
    }

    /// Bad input or database error: status 2, stderr mentioning `needle` (clap's usage errors
    /// included).
    #[track_caller]
    pub fn bad(&self, needle: &str) -> &Self {
        self.status(2);
        assert!(
            self.stderr.contains("error") && self.stderr.contains(needle),
            "stderr should mention {needle:?}; {self:#?}"
        );
        self
    }

    #[track_caller]
    pub fn says(&self, needle: &str) -> &Self {
        assert!(
            self.stdout.contains(needle),
            "stdout should contain {needle:?}; {self:#?}"
        );
        self
    }

    #[track_caller]
    pub fn warns(&self, needle: &str) -> &Self {
        assert!(
            self.stderr.contains(needle),
            "stderr should contain {needle:?}; {self:#?}"
        );
        self
    }

    /// The single JSON object on stdout.
    #[track_caller]
    pub fn json(&self) -> Value {
        let lines = self.jsons();
        assert_eq!(lines.len(), 1, "one JSON line; {self:#?}");
        lines.into_iter().next().unwrap()
    }

    /// Every stdout line, parsed as JSON.
    #[track_caller]
    pub fn jsons(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
            .collect()
    }

    /// The table row (whitespace-separated cells) whose first cell is `id`.
    #[track_caller]
    pub fn table_row(&self, id: &str) -> Vec<&str> {
        self.stdout
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|cells| cells.first() == Some(&id))
            .unwrap_or_else(|| panic!("no row {id:?}; {self:#?}"))
    }
}

/// A temporary working directory with an initialised SQLite database, `jobs.db`, for the
/// test files that need nothing more.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

impl Sandbox {
    /// A fresh directory and `leasefence init` in it.
    pub fn new() -> Self {
        let s = Sandbox {
            dir: tempfile::tempdir().unwrap(),
        };
        s.lf(&["init"]).ok();
        s
    }

    pub fn db(&self) -> std::path::PathBuf {
        self.dir.path().join("jobs.db")
    }

    /// `leasefence --db <sandbox db> ARGS`.
    pub fn lf(&self, args: &[&str]) -> Run {
        let db = self.db();
        let mut all = vec!["--db", db.to_str().unwrap()];
        all.extend_from_slice(args);
        Run::of(self.dir.path(), &all, None, &[])
    }

    /// A read-only connection of the test's own, independent of the binary's.
    pub fn conn(&self) -> rusqlite::Connection {
        rusqlite::Connection::open_with_flags(self.db(), rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap()
    }
}

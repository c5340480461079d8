//! A `leasefence serve` process for the CLI tests, and requests to it.

use std::io::{BufRead as _, BufReader, Read as _};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use super::Sandbox;

/// A running `leasefence serve` and its address.
pub struct Serving {
    pub child: Child,
    pub url: String,
}

impl Serving {
    /// `leasefence --db DB serve --bind 127.0.0.1:0 ARGS…` in `sb`, with `env` (and no token
    /// from this process's environment).
    pub fn start(sb: &Sandbox, args: &[&str], env: &[(&str, &str)]) -> Serving {
        Self::start_on(sb, "127.0.0.1:0", args, env)
    }

    /// The same on `bind` (e.g. the address of a server stopped before).
    #[allow(dead_code)]
    pub fn start_on(sb: &Sandbox, bind: &str, args: &[&str], env: &[(&str, &str)]) -> Serving {
        let db = sb.db();
        let mut child = Command::new(env!("CARGO_BIN_EXE_leasefence"))
            .args(["--db", db.to_str().unwrap(), "serve", "--bind", bind])
            .args(args)
            .current_dir(sb.dir.path())
            .env_remove("LEASEFENCE_DB")
            .env_remove("LEASEFENCE_WORKER_TOKEN")
            .env_remove("LEASEFENCE_ADMIN_TOKEN")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("the first line names the address: {line:?}"))
            .to_owned();
        Serving { child, url }
    }

    fn agent() -> ureq::Agent {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into()
    }

    /// POST of a JSON body; the status and the JSON answer.
    pub fn post(&self, path: &str, token: Option<&str>, body: Value) -> (u16, Value) {
        let mut req = Self::agent().post(&format!("{}{path}", self.url));
        if let Some(t) = token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        let mut resp = req.send_json(body).unwrap();
        let status = resp.status().as_u16();
        (status, resp.body_mut().read_json().unwrap())
    }

    /// GET; the status and the JSON answer.
    pub fn get(&self, path: &str, token: Option<&str>) -> (u16, Value) {
        let mut req = Self::agent().get(&format!("{}{path}", self.url));
        if let Some(t) = token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        let mut resp = req.call().unwrap();
        let status = resp.status().as_u16();
        (status, resp.body_mut().read_json().unwrap())
    }

    /// SIGTERM; the exit status and everything it wrote to stderr.
    pub fn stop(mut self) -> (i32, String) {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let status = self.child.wait().unwrap();
        let mut stderr = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        (status.code().expect("exited, not killed"), stderr)
    }
}

impl Drop for Serving {
    /// A server the case did not [`stop`](Serving::stop) (it ended early, or panicked) is
    /// killed, not left running after the tests.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `leasefence work --server URL ARGS…` in `sb` with the worker token `token` and no database;
/// stdin closed, stdout and stderr for the caller to set.
#[allow(dead_code)]
pub fn work_command(sb: &Sandbox, url: &str, token: &str, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_leasefence"));
    command
        .args(["work", "--server", url])
        .args(args)
        .current_dir(sb.dir.path())
        .env_remove("LEASEFENCE_DB")
        .env("LEASEFENCE_WORKER_TOKEN", token)
        .stdin(Stdio::null());
    command
}

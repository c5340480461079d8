//! A private PostgreSQL cluster for the fault tests: `initdb` into a temporary folder, its own
//! port, started with `pg_ctl` (as the `postgres` user when the test runs as root), so that
//! restarting or cutting it off never touches the server other tests use.

// Each test binary that includes this module uses a part of it.
#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use leasefence::postgres::{Client, NoTls};

/// The role the workers log in as (faults that `ALTER ROLE` apply to it alone).
pub const APP: &str = "app";
/// The cluster's connection limit (out of which 3 are reserved for superusers).
pub const MAX_CONNECTIONS: usize = 30;

/// A private PostgreSQL cluster, stopped (immediately) and removed on drop.
pub struct Cluster {
    bin: PathBuf,
    data: PathBuf,
    /// Holds the data folder, the socket folder and the log.
    _root: tempfile::TempDir,
    sockets: PathBuf,
    pub port: u16,
    /// Run the server's programs through `runuser -u postgres` (the test runs as root).
    as_postgres: bool,
}

impl Cluster {
    /// Makes and starts a cluster listening on 127.0.0.1; see [`Cluster::start_with`].
    pub fn start() -> Result<Cluster, String> {
        Self::start_with(&[], &[])
    }

    /// [`Cluster::start`] for a test: `None` (after printing why) where no cluster can be made
    /// here, except with `CI` set, where that fails the test instead.
    pub fn start_or_skip() -> Option<Cluster> {
        match Self::start() {
            Ok(cluster) => Some(cluster),
            Err(why) if !ci() => {
                eprintln!("skipped: a private PostgreSQL cluster cannot be made here: {why}");
                None
            }
            Err(why) => {
                panic!("CI is set, and a private PostgreSQL cluster cannot be made: {why}")
            }
        }
    }

    /// Makes and starts the cluster, also listening on `addresses` and trusting the clients
    /// of `networks` (CIDR), with the role [`APP`]; or says why it cannot be made here.
    pub fn start_with(addresses: &[&str], networks: &[&str]) -> Result<Cluster, String> {
        let bin = server_bin().ok_or("no PostgreSQL server binaries (initdb, pg_ctl) found")?;
        let as_postgres = is_root();
        let root = tempfile::Builder::new()
            .prefix("leasefence-pg-faults-")
            .tempdir()
            .map_err(|e| format!("no temporary folder: {e}"))?;
        if as_postgres {
            // The server refuses to run as root; its folders belong to `postgres`.
            let status = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(root.path())
                .status()
                .map_err(|e| format!("chown: {e}"))?;
            if !status.success() {
                return Err("cannot give the cluster's folder to the postgres user".into());
            }
        }
        let data = root.path().join("data");
        let sockets = root.path().to_path_buf();
        let port = free_port()?;
        let cluster = Cluster {
            bin,
            data,
            _root: root,
            sockets,
            port,
            as_postgres,
        };
        let init = cluster
            .run(
                "initdb",
                &["-A", "trust", "-U", "postgres", "-N", "-D"],
                true,
            )
            .map_err(|e| format!("initdb failed: {e}"))?;
        drop(init);
        let conf = format!(
            "\nlisten_addresses = '{}'\nport = {port}\nunix_socket_directories = '{}'\n\
             max_connections = {MAX_CONNECTIONS}\nfsync = on\nsynchronous_commit = on\n\
             shared_buffers = 16MB\nlog_min_messages = warning\n",
            std::iter::once("127.0.0.1")
                .chain(addresses.iter().copied())
                .collect::<Vec<_>>()
                .join(","),
            cluster.sockets.display()
        );
        let hba: String = networks
            .iter()
            .map(|n| format!("host all all {n} trust\n"))
            .collect();
        std::fs::OpenOptions::new()
            .append(true)
            .open(cluster.data.join("pg_hba.conf"))
            .and_then(|mut f| f.write_all(hba.as_bytes()))
            .map_err(|e| format!("cannot write pg_hba.conf: {e}"))?;
        std::fs::OpenOptions::new()
            .append(true)
            .open(cluster.data.join("postgresql.conf"))
            .and_then(|mut f| f.write_all(conf.as_bytes()))
            .map_err(|e| format!("cannot write postgresql.conf: {e}"))?;
        cluster.pg_ctl(&["start", "-w", "-t", "60"])?;
        cluster
            .admin()
            .batch_execute(&format!(
                "CREATE ROLE {APP} LOGIN; GRANT ALL ON DATABASE postgres TO {APP}; \
                 GRANT CREATE ON SCHEMA public TO {APP}"
            ))
            .map_err(|e| format!("cannot create the role {APP}: {e}"))?;
        Ok(cluster)
    }

    /// Runs one of the server's programs with `args` (then the data folder when `data`).
    fn run(&self, program: &str, args: &[&str], data: bool) -> Result<String, String> {
        let exe = self.bin.join(program);
        let mut command = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        command.args(args);
        if data {
            command.arg(&self.data);
        }
        let out = command
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{program}: {e}"))?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.success() {
            Ok(text)
        } else {
            Err(format!("{program} {args:?}: {}\n{text}", out.status))
        }
    }

    pub fn pg_ctl(&self, args: &[&str]) -> Result<String, String> {
        let log = self._root.path().join("server.log");
        let mut all = vec!["-D"];
        let data = self.data.to_string_lossy().into_owned();
        let log = log.to_string_lossy().into_owned();
        all.push(&data);
        all.extend(["-l", &log]);
        all.extend(args);
        self.run("pg_ctl", &all, false)
    }

    /// A libpq-style connection string for `user` over TCP on the cluster's port.
    pub fn url(&self, user: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user={user} dbname=postgres",
            self.port
        )
    }

    /// A fresh superuser connection.
    pub fn admin(&self) -> Client {
        Client::connect(&self.url("postgres"), NoTls).expect("the test's own connection")
    }

    /// The backend pids of the workers' sessions.
    pub fn app_pids(&self) -> Vec<i32> {
        self.admin()
            .query(
                "SELECT pid FROM pg_stat_activity WHERE usename = $1 AND pid <> pg_backend_pid()",
                &[&APP],
            )
            .expect("pg_stat_activity")
            .iter()
            .map(|r| r.get(0))
            .collect()
    }

    /// Ends every worker session (`pg_terminate_backend`); returns how many there were.
    pub fn terminate_app_sessions(&self) -> usize {
        let rows = self
            .admin()
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE usename = $1 AND pid <> pg_backend_pid()",
                &[&APP],
            )
            .expect("pg_terminate_backend");
        rows.len()
    }

    /// The server's log so far (for a failure's message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self._root.path().join("server.log")).unwrap_or_default()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.pg_ctl(&["stop", "-m", "immediate", "-w"]);
    }
}

/// The newest installed PostgreSQL's server binaries.
fn server_bin() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let version: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            (bin.join("initdb").exists() && bin.join("pg_ctl").exists()).then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

/// Whether `CI` is set (and not empty).
pub fn ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A TCP port on 127.0.0.1 that nothing listens on right now.
fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

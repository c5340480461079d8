//! Worker "hosts" for the partition tests: each a network namespace the test makes, joined to
//! the machine by a veth pair whose addresses the test chooses (`SUBNET.1` on the machine's
//! end, `SUBNET.2` inside). Cutting a host sets the machine's end down; healing sets it up.
//! Shared by `crates/leasefence/tests/partition.rs` (PostgreSQL) and the server's
//! `tests/http/partition.rs` (`serve`). Needs root; [`Host::make`] says why when it cannot.

use std::process::{Command, Stdio};

/// Runs a command to its end: `Err` with its output when it fails.
pub fn run(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// One host: a network namespace and the veth pair that joins it to the machine.
pub struct Host {
    pub namespace: String,
    /// The machine's end of the pair (the one cut).
    pub outer: String,
    /// The machine's address on the pair: where the host reaches the server.
    pub server: String,
}

impl Host {
    pub fn make(tag: &str, subnet: &str) -> Result<Host, String> {
        let id = std::process::id() % 100_000;
        let host = Host {
            namespace: format!("lfpart-{tag}-{id}"),
            outer: format!("lfp{tag}{id}"),
            server: format!("{subnet}.1"),
        };
        let inner = format!("lfq{tag}{id}");
        run(&["ip", "netns", "add", &host.namespace])?;
        run(&[
            "ip",
            "link",
            "add",
            &host.outer,
            "type",
            "veth",
            "peer",
            "name",
            &inner,
        ])?;
        run(&["ip", "link", "set", &inner, "netns", &host.namespace])?;
        run(&[
            "ip",
            "addr",
            "add",
            &format!("{subnet}.1/24"),
            "dev",
            &host.outer,
        ])?;
        run(&["ip", "link", "set", &host.outer, "up"])?;
        let ns = |args: &[&str]| {
            let mut all = vec!["ip", "-n", &host.namespace];
            all.extend(args);
            run(&all)
        };
        ns(&["addr", "add", &format!("{subnet}.2/24"), "dev", &inner])?;
        ns(&["link", "set", &inner, "up"])?;
        ns(&["link", "set", "lo", "up"])?;
        Ok(host)
    }

    pub fn cut(&self) {
        run(&["ip", "link", "set", &self.outer, "down"]).unwrap();
    }

    pub fn heal(&self) {
        run(&["ip", "link", "set", &self.outer, "up"]).unwrap();
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // Deleting the namespace deletes the pair with it.
        let _ = run(&["ip", "netns", "del", &self.namespace]);
        let _ = run(&["ip", "link", "del", &self.outer]);
    }
}

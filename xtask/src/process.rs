//! Running a child process with a timeout, captured output and Ctrl-C handling.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Set by the Ctrl-C handler; every wait loop checks it.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Installs the Ctrl-C handler. The children run in process groups of their own (so a terminal's
/// Ctrl-C reaches only this process); the wait loop kills the running child's group and the
/// caller unwinds normally, so every scratch directory is removed by its destructor.
pub fn install_interrupt_handler() {
    let result = ctrlc::set_handler(|| {
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            // A second Ctrl-C: the user insists.
            std::process::exit(130);
        }
        eprintln!("\ninterrupted: stopping the running child and cleaning up …");
    });
    if let Err(e) = result {
        eprintln!("warning: cannot install the Ctrl-C handler: {e}");
    }
}

/// Whether Ctrl-C was pressed.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// How a child process ended.
#[derive(Debug)]
pub struct Finished {
    /// Its exit status; `None` when it was killed for a timeout or an interrupt.
    pub status: Option<ExitStatus>,
    /// Everything it wrote to stdout.
    pub stdout: String,
    /// Everything it wrote to stderr.
    pub stderr: String,
    /// Killed because it ran past the timeout.
    pub timed_out: bool,
    /// How long it ran.
    pub elapsed: Duration,
}

impl Finished {
    /// Exited with status 0.
    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }
}

/// Runs `cmd` in a process group of its own, capturing stdout and stderr, and kills the whole
/// group when `timeout` passes or Ctrl-C is pressed.
///
/// # Errors
/// When the command cannot be started, or when Ctrl-C was pressed (`"interrupted"`).
pub fn run(cmd: &mut Command, timeout: Duration) -> Result<Finished, String> {
    if interrupted() {
        return Err("interrupted".into());
    }
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let pid = child.id();
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) => {}
            Err(e) => return Err(format!("waiting for {cmd:?}: {e}")),
        }
        if interrupted() || started.elapsed() > timeout {
            timed_out = !interrupted();
            kill_group(pid);
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // The group may still hold grandchildren (a test's helper processes) that keep the pipes
    // open; make sure they are gone before reading to the end.
    kill_group(pid);
    let finished = Finished {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
        timed_out,
        elapsed: started.elapsed(),
    };
    if interrupted() {
        return Err("interrupted".into());
    }
    Ok(finished)
}

/// Sends SIGKILL to the process group `pgid` (a child started with `process_group(0)`).
fn kill_group(pgid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

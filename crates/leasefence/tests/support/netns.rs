//! Worker "hosts" for the partition tests: each a network namespace the test makes, joined to
//! the machine by a veth pair whose addresses the test chooses (`SUBNET.1` on the machine's
//! end, `SUBNET.2` inside). Cutting a host sets the machine's end down; healing sets it up.
//! Shared by `crates/leasefence/tests/partition.rs` (PostgreSQL) and the server's
//! `tests/http/partition.rs` (`serve`). Needs root; [`Host::make`] says why when it cannot.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Starts the ignored test `test` of this test binary as the worker `name` inside `host`'s
/// namespace, with `env`, its output going to `folder/NAME.out` and `.err`.
pub fn spawn_in(host: &Host, test: &str, env: &[(&str, &str)], name: &str, folder: &Path) -> Child {
    let exe = std::env::current_exe().unwrap();
    let out = std::fs::File::create(folder.join(format!("{name}.out"))).unwrap();
    let err = std::fs::File::create(folder.join(format!("{name}.err"))).unwrap();
    Command::new("ip")
        .args(["netns", "exec", &host.namespace])
        .arg(exe)
        .args([
            test,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("spawn a worker in its namespace")
}

/// Whether `CI` is set (and not empty): a partition test that cannot run then fails.
pub fn ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}

/// Says why a partition test cannot run here and skips it — or, with `CI` set, fails it.
#[track_caller]
pub fn skip(why: &str) {
    assert!(
        !ci(),
        "CI is set, and the partition test cannot run here: {why}"
    );
    eprintln!("skipped: {why}");
}

/// The hosts `hostA` and `hostB` on the subnets `10.X.A.0/24` and `10.X.B.0/24` (X from the
/// process id), named with `tags`; `Err` with why when namespaces cannot be made here.
pub fn host_pair(tags: (&str, &str), nets: (u8, u8)) -> Result<(Host, Host), String> {
    let x = 100 + std::process::id() % 100;
    let a = Host::make(tags.0, &format!("10.{x}.{}", nets.0))?;
    let b = Host::make(tags.1, &format!("10.{x}.{}", nets.1))?;
    Ok((a, b))
}

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

    /// The pair's subnet, `SUBNET.0/24`.
    pub fn network(&self) -> String {
        let subnet = self.server.rsplit_once('.').map_or("", |(net, _)| net);
        format!("{subnet}.0/24")
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

/// The lines the child `name` (a host's worker, its stdout in `folder/NAME.out`) printed that
/// contain `tag`, from `tag` on.
pub fn printed(folder: &Path, name: &str, tag: &str) -> Vec<String> {
    std::fs::read_to_string(folder.join(format!("{name}.out")))
        .unwrap_or_default()
        .lines()
        // libtest prints `test NAME ... ` before the child's first line.
        .filter_map(|l| l.find(tag).map(|at| l[at..].to_owned()))
        .collect()
}

/// Everything the children `hostA` and `hostB` wrote, for a failure's message.
pub fn outputs(folder: &Path) -> String {
    ["hostA", "hostB"]
        .iter()
        .flat_map(|name| ["out", "err"].map(|ext| (name, ext)))
        .map(|(name, ext)| {
            let text = std::fs::read_to_string(folder.join(format!("{name}.{ext}")));
            format!("--- {name}.{ext}\n{}", text.unwrap_or_default())
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Waits (polling every 20 ms) until `cond` holds, failing with the children's output after
/// `patience`; how long it took.
#[track_caller]
pub fn wait_for(
    folder: &Path,
    patience: Duration,
    what: &str,
    mut cond: impl FnMut() -> bool,
) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < patience,
            "timed out waiting for {what}\n{}",
            outputs(folder)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    start.elapsed()
}

/// The body of a host's worker process: runs `builder`'s worker (ttl `ttl`, owner prefix
/// `name`) until the file `folder/NAME.stop` appears. Its handler prints `LFRUN job fence`;
/// on `hostA` it then holds the job until its token fires (printing `LFTOLD job fence`) and
/// the file `folder/healed` appears. Every handler then writes `admit` to the resource
/// `downstream` under its fence — retried while the network does not deliver it (just after a
/// heal), as any handler's downstream write should be — printing `LFADMIT job fence
/// true|false`, and returns `job@fence`, which the worker tries to store (`LFOUT job fence
/// outcome`). Ends by printing `LFSTATS …`.
pub fn run_host_worker<S: leasefence::Store + Send + 'static>(
    builder: leasefence::WorkerBuilder<S>,
    name: &str,
    folder: &Path,
    (ttl, patience): (f64, Duration),
) {
    use leasefence::{JobOutcome, Resource};
    let stop = folder.join(format!("{name}.stop"));
    let healed = folder.join("healed");
    // Host A holds its job until told; host B completes at once.
    let hold = name == "hostA";
    let worker = builder
        .ttl(ttl)
        .owner_prefix(name)
        .poll_interval(Duration::from_millis(50))
        .on_outcome(|lease, outcome| {
            let outcome = match outcome {
                JobOutcome::Completed => "completed".to_string(),
                JobOutcome::Refused => "refused".to_string(),
                other => format!("{other:?}").replace(' ', "_"),
            };
            println!("LFOUT {} {} {outcome}", lease.job_id, lease.fence);
        })
        .build(move |ctx| {
            let lease = ctx.lease().clone();
            println!("LFRUN {} {}", lease.job_id, lease.fence);
            if hold {
                if ctx.token().wait_timeout(patience) {
                    println!("LFTOLD {} {}", lease.job_id, lease.fence);
                }
                let start = Instant::now();
                while !healed.exists() && start.elapsed() < patience {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            // Just after the heal the host's neighbour entry may still be failed ("no route to
            // host"): a call the network did not deliver is retried; only an answer counts.
            let resource = Resource::new("downstream")?;
            let start = Instant::now();
            let admitted = loop {
                match ctx.store().admit(resource, lease.fence) {
                    Err(e) if e.is_retryable() && start.elapsed() < patience => {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    answer => break answer,
                }
            };
            match &admitted {
                Ok(admitted) => println!("LFADMIT {} {} {admitted}", lease.job_id, lease.fence),
                Err(e) => println!("LFADMIT {} {} error: {e}", lease.job_id, lease.fence),
            }
            admitted?;
            Ok(format!("{}@{}", lease.job_id, lease.fence))
        })
        .expect("build the worker");
    let handle = worker.shutdown_handle();
    std::thread::spawn(move || {
        while !stop.exists() {
            std::thread::sleep(Duration::from_millis(20));
        }
        handle.shutdown();
    });
    let stats = worker.run().expect("the worker stopped on an error");
    println!(
        "LFSTATS claimed={} completed={} refused={} lost={}",
        stats.claimed, stats.completed, stats.stale_refused, stats.lost
    );
}

/// How long each step of [`play_partition`] took.
pub struct Played {
    /// From the cut to host A's handler told.
    pub told_after: Duration,
    /// From the cut to host B's completion under fence 2.
    pub taken_after: Duration,
    /// From the heal to host A's late completion answered.
    pub late_after: Duration,
}

/// The partition story, with `spawn(name)` starting the worker of `hostA` or `hostB` (running
/// [`run_host_worker`]) on the one job `late`: A runs it, A is cut off, B is started, A's
/// handler must be told and B must complete under fence 2 while A writes nothing; then the
/// partition heals and A's late writes must be answered — its completion refused, its
/// downstream `admit` refused — and each fence must have run one handler. Both workers are
/// stopped and must exit 0.
pub fn play_partition(
    dir: &Path,
    a: &Host,
    patience: Duration,
    spawn: impl Fn(&str) -> Child,
) -> Played {
    let mut worker_a = spawn("hostA");
    wait_for(dir, patience, "host A running the job", || {
        !printed(dir, "hostA", "LFRUN late 1").is_empty()
    });
    a.cut();
    let mut worker_b = spawn("hostB");
    let told_after = wait_for(dir, patience, "host A's handler told while cut off", || {
        !printed(dir, "hostA", "LFTOLD late 1").is_empty()
    });
    let taken_after = told_after
        + wait_for(
            dir,
            patience,
            "host B completing the job under fence 2",
            || !printed(dir, "hostB", "LFOUT late 2 completed").is_empty(),
        );
    assert!(
        printed(dir, "hostA", "LFADMIT").is_empty(),
        "host A wrote nothing while cut off\n{}",
        outputs(dir)
    );
    a.heal();
    std::fs::write(dir.join("healed"), "").unwrap();
    let late_after = wait_for(dir, patience, "host A's late completion answered", || {
        !printed(dir, "hostA", "LFOUT late 1").is_empty()
    });
    for name in ["hostA", "hostB"] {
        std::fs::write(dir.join(format!("{name}.stop")), "").unwrap();
    }
    let (status_a, status_b) = (worker_a.wait().unwrap(), worker_b.wait().unwrap());
    assert!(status_a.success() && status_b.success(), "{}", outputs(dir));
    // Host A's late writes: the completion refused, the downstream write refused.
    assert_eq!(
        printed(dir, "hostA", "LFOUT late 1"),
        ["LFOUT late 1 refused"],
        "{}",
        outputs(dir)
    );
    assert_eq!(
        printed(dir, "hostA", "LFADMIT"),
        ["LFADMIT late 1 false"],
        "{}",
        outputs(dir)
    );
    assert_eq!(printed(dir, "hostB", "LFADMIT"), ["LFADMIT late 2 true"]);
    let runs = [
        printed(dir, "hostA", "LFRUN"),
        printed(dir, "hostB", "LFRUN"),
    ]
    .concat();
    assert_eq!(
        runs,
        ["LFRUN late 1", "LFRUN late 2"],
        "no fence handed out twice"
    );
    Played {
        told_after,
        taken_after,
        late_after,
    }
}

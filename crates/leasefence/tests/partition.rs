//! A partitioned host (issue 18, deliverable 3): two worker "hosts", each a network namespace
//! this test makes, joined to the machine by a veth pair whose far ends carry addresses the
//! test chooses; a private PostgreSQL cluster listens on those ends. Host A claims the one job
//! and its handler runs on; the test cuts A off (`ip link set … down` on the machine's end of
//! A's pair). A's lease runs out, host B claims the job under a higher fence and completes it;
//! then the partition heals. Checked:
//! - A's handler is told (its token cancelled) — while it is still cut off, by its own clock;
//! - A's late writes are all refused: its completion (`Refused`) and its fenced write to a
//!   downstream resource (`admit` with fence 1 after B's fence 2), read back in the ledger;
//! - the job is stored done with B's fence and result, and its fence was never handed out twice.
//!
//! Needs root (network namespaces, veth) and PostgreSQL's server binaries. Where either is
//! missing it prints why and skips — except with `CI` set, where it fails instead. Only the
//! addresses below (10.X.1.0/24 and 10.X.2.0/24, X from the process id) are used.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use leasefence::{JobOutcome, NewJob, PgOptions, Resource, Store, Worker};

#[path = "support/cluster.rs"]
mod cluster;
use cluster::{APP, Cluster, ci};
#[path = "support/netns.rs"]
mod netns;
use netns::Host;

/// The child's environment variable: `url\nschema\nname\nfolder`.
const CHILD_ENV: &str = "LEASEFENCE_PARTITION_CHILD";
const SCHEMA: &str = "partition";
/// The workers' lease.
const TTL: f64 = 3.0;
/// How long a call may go unanswered by the network (`PgOptions::network_timeout`).
const NETWORK_TIMEOUT: Duration = Duration::from_secs(2);
const PATIENCE: Duration = Duration::from_secs(20);

/// A worker process started inside `host`'s namespace, its output going to a file.
fn spawn_worker(host: &Host, port: u16, name: &str, folder: &Path) -> Child {
    let exe = std::env::current_exe().unwrap();
    let url = format!(
        "host={} port={port} user={APP} dbname=postgres",
        host.server
    );
    let out = std::fs::File::create(folder.join(format!("{name}.out"))).unwrap();
    let err = std::fs::File::create(folder.join(format!("{name}.err"))).unwrap();
    Command::new("ip")
        .args(["netns", "exec", &host.namespace])
        .arg(exe)
        .args(["partition_child_worker", "--exact", "--ignored"])
        .args(["--nocapture", "--test-threads", "1"])
        .env(
            CHILD_ENV,
            format!("{url}\n{SCHEMA}\n{name}\n{}", folder.display()),
        )
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("spawn a worker in its namespace")
}

/// The lines a child printed that start with `tag`.
fn printed(folder: &Path, name: &str, tag: &str) -> Vec<String> {
    std::fs::read_to_string(folder.join(format!("{name}.out")))
        .unwrap_or_default()
        .lines()
        // libtest prints `test NAME ... ` before the child's first line.
        .filter_map(|l| l.find(tag).map(|at| l[at..].to_owned()))
        .collect()
}

/// Everything a child wrote, for a failure's message.
fn outputs(folder: &Path) -> String {
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

#[track_caller]
fn wait_for(folder: &Path, what: &str, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < PATIENCE,
            "timed out waiting for {what}\n{}",
            outputs(folder)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    start.elapsed()
}

/// The child: one `Worker::postgres` thread. Its handler prints `LFRUN job fence`, then waits
/// for its token (printing `LFTOLD` when it fires) and for the file `healed` in the folder, then
/// writes `admit` to the resource `downstream` under its fence (`LFADMIT true|false`) and
/// returns a result, which the worker then tries to store (`LFOUT outcome`).
#[test]
#[ignore = "a worker process of a_partitioned_host_is_told_and_its_late_writes_are_refused"]
fn partition_child_worker() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        eprintln!("partition_child_worker only runs inside the partition test");
        return;
    };
    let parts: Vec<&str> = spec.split('\n').collect();
    let [url, schema, name, folder] = parts[..] else {
        panic!("bad spec {spec:?}")
    };
    let folder = PathBuf::from(folder);
    let options = PgOptions::new()
        .schema(schema)
        .connect_timeout(NETWORK_TIMEOUT)
        .network_timeout(NETWORK_TIMEOUT);
    let stop = folder.join(format!("{name}.stop"));
    let healed = folder.join("healed");
    // Host A holds its job until told; host B completes at once.
    let hold = name == "hostA";
    let worker = Worker::postgres_with(url, options)
        .ttl(TTL)
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
                // Host A's job: hold it until told, then wait for the partition to heal.
                if ctx.token().wait_timeout(PATIENCE) {
                    println!("LFTOLD {} {}", lease.job_id, lease.fence);
                }
                let start = Instant::now();
                while !healed.exists() && start.elapsed() < PATIENCE {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            let resource = Resource::new("downstream")?;
            let admitted = ctx.store().admit(resource, lease.fence)?;
            println!("LFADMIT {} {} {admitted}", lease.job_id, lease.fence);
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

#[test]
fn a_partitioned_host_is_told_and_its_late_writes_are_refused() {
    let skip = |why: String| {
        if ci() {
            panic!("CI is set, and the partition test cannot run here: {why}");
        }
        eprintln!("skipped: {why}");
    };
    let x = 100 + std::process::id() % 100;
    let (subnet_a, subnet_b) = (format!("10.{x}.1"), format!("10.{x}.2"));
    let hosts = Host::make("a", &subnet_a).and_then(|a| Ok((a, Host::make("b", &subnet_b)?)));
    let (a, b) = match hosts {
        Ok(hosts) => hosts,
        Err(why) => return skip(format!("network namespaces cannot be made here: {why}")),
    };
    let cluster = match Cluster::start_with(
        &[&a.server, &b.server],
        &[&format!("{subnet_a}.0/24"), &format!("{subnet_b}.0/24")],
    ) {
        Ok(cluster) => cluster,
        Err(why) => {
            return skip(format!(
                "a private PostgreSQL cluster cannot be made: {why}"
            ));
        }
    };
    let local = cluster.url(APP);
    let store = PgOptions::new().schema(SCHEMA).open(&local).unwrap();
    store.enqueue_many(&[NewJob::new("late").unwrap()]).unwrap();
    let folder = tempfile::tempdir().unwrap();
    let dir = folder.path();

    let mut worker_a = spawn_worker(&a, cluster.port, "hostA", dir);
    wait_for(dir, "host A running the job", || {
        !printed(dir, "hostA", "LFRUN late 1").is_empty()
    });
    a.cut();
    let cut_at = Instant::now();
    let mut worker_b = spawn_worker(&b, cluster.port, "hostB", dir);
    let told_after = wait_for(dir, "host A's handler told", || {
        !printed(dir, "hostA", "LFTOLD late 1").is_empty()
    });
    let taken_after = wait_for(dir, "host B completing the job under fence 2", || {
        !printed(dir, "hostB", "LFOUT late 2 completed").is_empty()
    });
    assert!(
        printed(dir, "hostA", "LFADMIT").is_empty(),
        "host A wrote nothing while cut off"
    );
    a.heal();
    std::fs::write(dir.join("healed"), "").unwrap();
    let late_after = wait_for(dir, "host A's late completion answered", || {
        !printed(dir, "hostA", "LFOUT late 1").is_empty()
    });
    for name in ["hostA", "hostB"] {
        std::fs::write(dir.join(format!("{name}.stop")), "").unwrap();
    }
    let (status_a, status_b) = (worker_a.wait().unwrap(), worker_b.wait().unwrap());
    let report = |name: &str| {
        format!(
            "{name}:\n{}\n{}",
            std::fs::read_to_string(dir.join(format!("{name}.out"))).unwrap_or_default(),
            std::fs::read_to_string(dir.join(format!("{name}.err"))).unwrap_or_default()
        )
    };
    assert!(
        status_a.success() && status_b.success(),
        "{}\n{}",
        report("hostA"),
        report("hostB")
    );
    eprintln!(
        "partition: host A cut off mid-lease (ttl {TTL} s); its handler told {told_after:?} \
         after the cut, host B completed under fence 2 {:?} after it, host A's late writes \
         answered {late_after:?} after the heal",
        taken_after + told_after
    );
    let _ = cut_at;

    // Host A's late writes: the completion refused, the downstream write refused.
    assert_eq!(
        printed(dir, "hostA", "LFOUT late 1"),
        ["LFOUT late 1 refused"],
        "{}",
        report("hostA")
    );
    assert_eq!(
        printed(dir, "hostA", "LFADMIT"),
        ["LFADMIT late 1 false"],
        "{}",
        report("hostA")
    );
    assert_eq!(printed(dir, "hostB", "LFADMIT"), ["LFADMIT late 2 true"]);
    // Read back through the test's own connection.
    let mut admin = cluster.admin();
    let row = admin
        .query_one(
            &format!("SELECT fence, result, done, owner FROM {SCHEMA}.jobs WHERE id = 'late'"),
            &[],
        )
        .unwrap();
    let (fence, result, done): (i64, Option<String>, i32) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(
        (fence, result.as_deref(), done),
        (2, Some("late@2"), 1),
        "B's result under B's fence"
    );
    let runs: Vec<String> = [
        printed(dir, "hostA", "LFRUN"),
        printed(dir, "hostB", "LFRUN"),
    ]
    .concat();
    assert_eq!(
        runs,
        ["LFRUN late 1", "LFRUN late 2"],
        "no fence handed out twice"
    );
    let gate: i64 = admin
        .query_one(
            &format!("SELECT fence FROM {SCHEMA}.fence_gate WHERE resource = 'downstream'"),
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(gate, 2, "the downstream resource kept B's fence");
}

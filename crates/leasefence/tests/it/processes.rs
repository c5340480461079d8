//! Separate OS processes racing on one file: exactly one claim per job wins.
//!
//! The test binary re-executes itself: `child_claimer` is an ignored test that only does work
//! when the parent hands it a job list through the environment.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use leasefence::{JobId, Now, Owner, SqliteStore, Ttl};

const CHILD_ENV: &str = "LEASEFENCE_IT_CHILD";
const PROCESSES: usize = 8;
const JOBS: usize = 40;

fn wait_for(path: &Path, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn eight_processes_race_and_exactly_one_wins_every_job() {
    let db = Db::new();
    for job in 0..JOBS {
        leasefence::enqueue(&db.path, &format!("job-{job}")).unwrap();
    }
    let dir = db.path.parent().unwrap().to_path_buf();
    let go = dir.join("go");
    let exe = std::env::current_exe().unwrap();
    let mut children: Vec<_> = (0..PROCESSES)
        .map(|p| {
            let spec = format!(
                "{}\n{}\nproc-{p}\n{}",
                db.path.display(),
                dir.display(),
                JOBS
            );
            Command::new(&exe)
                .args([
                    "processes::child_claimer",
                    "--exact",
                    "--ignored",
                    "--nocapture",
                ])
                .args(["--test-threads", "1"])
                .env(CHILD_ENV, spec)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn child process")
        })
        .collect();
    // Start them all at once: every child has opened its store before the gate opens.
    for p in 0..PROCESSES {
        let ready = dir.join(format!("ready-proc-{p}"));
        let deadline = Instant::now() + Duration::from_secs(60);
        while !ready.exists() {
            // A child that died before getting ready fails the test now, with its output.
            for child in &mut children {
                if let Some(status) = child.try_wait().unwrap() {
                    let mut stderr = String::new();
                    if let Some(mut pipe) = child.stderr.take() {
                        std::io::Read::read_to_string(&mut pipe, &mut stderr).unwrap();
                    }
                    panic!("a child exited ({status}) before opening the database:\n{stderr}");
                }
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for children to open the database"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    std::fs::write(&go, b"go").unwrap();

    let mut wins: BTreeMap<String, Vec<(String, i64)>> = BTreeMap::new();
    let mut pids = std::collections::BTreeSet::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "child failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut lines = 0;
        for line in stdout
            .lines()
            .filter_map(|l| l.split_once("LFCLAIM ").map(|(_, rest)| rest))
        {
            let parts: Vec<&str> = line.split(' ').collect();
            let [pid, owner, job, fence] = parts[..] else {
                panic!("bad line {line}")
            };
            pids.insert(pid.to_string());
            lines += 1;
            if fence != "none" {
                wins.entry(job.to_string())
                    .or_default()
                    .push((owner.to_string(), fence.parse().unwrap()));
            }
        }
        // (the harness may print its own "test … ..." prefix on the first line)
        assert_eq!(lines, JOBS, "every child reports every job:\n{stdout}");
    }
    assert_eq!(
        pids.len(),
        PROCESSES,
        "the claims ran in {PROCESSES} distinct processes"
    );
    assert_eq!(wins.len(), JOBS, "every job was won: {wins:?}");
    for (job, winners) in &wins {
        assert_eq!(
            winners.len(),
            1,
            "{job} had {} winners: {winners:?}",
            winners.len()
        );
        let (owner, fence) = &winners[0];
        assert_eq!(*fence, 1);
        let row = db.row(job).unwrap();
        assert_eq!(row.owner.as_deref(), Some(owner.as_str()), "{job}");
        assert_eq!(row.fence, 1, "{job}");
    }
    let spread: std::collections::BTreeSet<&String> = wins.values().map(|w| &w[0].0).collect();
    eprintln!("{} jobs won by {} distinct processes", JOBS, spread.len());
}

#[test]
#[ignore = "helper process of eight_processes_race_and_exactly_one_wins_every_job"]
fn child_claimer() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        eprintln!("child_claimer only runs inside the multi-process test");
        return;
    };
    let parts: Vec<&str> = spec.split('\n').collect();
    let [path, dir, owner, jobs] = parts[..] else {
        panic!("bad spec {spec:?}")
    };
    let (path, dir) = (PathBuf::from(path), PathBuf::from(dir));
    let jobs: usize = jobs.parse().unwrap();
    let store = SqliteStore::open(&path).unwrap();
    std::fs::write(dir.join(format!("ready-{owner}")), b"").unwrap();
    wait_for(&dir.join("go"), "the start signal");
    let pid = std::process::id();
    for job in 0..jobs {
        let id = format!("job-{job}");
        let fence = store
            .claim_fence(
                JobId::new(&id).unwrap(),
                Owner::new(owner).unwrap(),
                Now::new(0.0).unwrap(),
                Ttl::new(3600.0).unwrap(),
            )
            .unwrap();
        let fence = fence.map_or_else(|| "none".to_string(), |f| f.to_string());
        println!("LFCLAIM {pid} {owner} {id} {fence}");
    }
}

//! Named queues, kinds and unique keys from the shell: `enqueue --queue/--kind/--unique-key`,
//! `queue pause|resume|list`, `claim --next --queue`, `claim-batch --queue` and
//! `work --queue Q[=N]`, with exit statuses, output and the stored rows read back through an
//! independent rusqlite connection.

use rusqlite::OptionalExtension;

mod support;
use support::Sandbox;

/// `(queue, kind, unique_key, fence, done, result)` of a stored job.
type Stored = (
    String,
    Option<String>,
    Option<String>,
    i64,
    i64,
    Option<String>,
);

/// The stored rows, read through the sandbox's own read-only connection.
trait Read {
    fn job(&self, id: &str) -> Option<Stored>;
    fn paused(&self, queue: &str) -> Option<bool>;
}

impl Read for Sandbox {
    fn job(&self, id: &str) -> Option<Stored> {
        self.conn()
            .query_row(
                "SELECT queue, kind, unique_key, fence, done, result FROM jobs WHERE id = ?1",
                [id],
                |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                    ))
                },
            )
            .optional()
            .unwrap()
    }

    fn paused(&self, queue: &str) -> Option<bool> {
        self.conn()
            .query_row(
                "SELECT paused <> 0 FROM queues WHERE name = ?1",
                [queue],
                |r| r.get(0),
            )
            .optional()
            .unwrap()
    }
}

fn stored(queue: &str, kind: Option<&str>, key: Option<&str>, fence: i64) -> Option<Stored> {
    Some((
        queue.to_owned(),
        kind.map(str::to_owned),
        key.map(str::to_owned),
        fence,
        0,
        None,
    ))
}

#[test]
fn enqueue_puts_a_job_in_its_queue_with_its_kind_and_unique_key() {
    let s = Sandbox::new();
    s.lf(&[
        "enqueue",
        "m1",
        "--queue",
        "emails",
        "--kind",
        "welcome",
        "--unique-key",
        "ada",
    ])
    .ok()
    .says("enqueued m1 (queue emails, kind welcome, unique key ada)");
    assert_eq!(
        s.job("m1"),
        stored("emails", Some("welcome"), Some("ada"), 0)
    );
    s.lf(&["enqueue", "plain"]).ok();
    assert_eq!(s.job("plain"), stored("default", None, None, 0));

    // The key is held by the unfinished m1: refused, exit 1, naming m1; nothing stored.
    let run = s.lf(&[
        "--json",
        "enqueue",
        "m2",
        "--queue",
        "emails",
        "--unique-key",
        "ada",
    ]);
    run.refused();
    assert!(
        run.stderr
            .contains("the unfinished job m1 holds the unique key \"ada\""),
        "{run:#?}"
    );
    let v = run.json();
    assert_eq!(
        (&v["ok"], &v["duplicate_of"], &v["queue"]),
        (&false.into(), &"m1".into(), &"emails".into())
    );
    assert_eq!(s.job("m2"), None);
    // The same key in another queue is another key.
    s.lf(&["enqueue", "s1", "--queue", "sms", "--unique-key", "ada"])
        .ok();
    // Once m1 is done the key is free again.
    s.lf(&["claim", "m1", "--owner", "w", "--ttl", "30", "--now", "0"])
        .ok();
    s.lf(&[
        "complete", "m1", "--owner", "w", "--fence", "1", "--result", "ok", "--now", "1",
    ])
    .ok();
    s.lf(&["enqueue", "m2", "--queue", "emails", "--unique-key", "ada"])
        .ok();
    // A window holds the key after the job finished.
    s.lf(&[
        "enqueue",
        "r1",
        "--queue",
        "reports",
        "--unique-key",
        "daily",
        "--unique-for",
        "3600",
    ])
    .ok();
    s.lf(&["cancel", "r1"]).ok();
    let run = s.lf(&[
        "enqueue",
        "r2",
        "--queue",
        "reports",
        "--unique-key",
        "daily",
        "--unique-for",
        "3600",
    ]);
    run.refused();
    assert!(
        run.stderr.contains("enqueued less than 3600 s ago"),
        "{run:#?}"
    );
    assert_eq!(s.job("r2"), None);
}

#[test]
fn enqueue_refuses_bad_queue_kind_and_unique_flags_naming_them() {
    let s = Sandbox::new();
    s.lf(&["enqueue", "a", "--queue", "no spaces"])
        .bad("--queue");
    s.lf(&["enqueue", "a", "--queue", ""]).bad("--queue");
    s.lf(&["enqueue", "a", "--kind", ""]).error("kind");
    s.lf(&["enqueue", "a", "--unique-for", "60"])
        .bad("--unique-key");
    s.lf(&["enqueue", "a", "--unique-key", "k", "--unique-for", "0"])
        .bad("--unique-for");
    s.lf(&["enqueue", "a", "--unique-key", "k", "--unique-for", "-5"])
        .bad("--unique-for");
    assert_eq!(s.job("a"), None);
}

#[test]
fn a_paused_queue_hands_out_nothing_until_resumed_and_its_leases_stay_valid() {
    let s = Sandbox::new();
    s.lf(&["enqueue", "a1", "--queue", "a", "--priority", "9"])
        .ok();
    s.lf(&["enqueue", "a2", "--queue", "a", "--priority", "9"])
        .ok();
    s.lf(&["enqueue", "b1", "--queue", "b"]).ok();
    s.lf(&["claim", "a1", "--owner", "w", "--ttl", "30", "--now", "0"])
        .ok();

    s.lf(&["queue", "pause", "a"])
        .ok()
        .says("paused the queue a");
    assert_eq!(s.paused("a"), Some(true));
    s.lf(&["queue", "pause", "a"])
        .ok()
        .says("was already paused");
    // a2 outranks b1 but its queue is paused; then nothing is left.
    s.lf(&[
        "claim", "--next", "--owner", "w", "--ttl", "30", "--now", "1",
    ])
    .ok()
    .says("claimed b1 as w: fence 1, lease until 31, attempt 1, queue b, no payload");
    let run = s.lf(&[
        "claim", "--next", "--owner", "w", "--ttl", "30", "--now", "1", "--queue", "a",
    ]);
    run.refused();
    assert!(run.stderr.contains("paused queue"), "{run:#?}");
    s.lf(&[
        "claim-batch",
        "--owner",
        "w",
        "--ttl",
        "30",
        "--n",
        "5",
        "--now",
        "1",
        "--queue",
        "a",
    ])
    .refused();
    assert_eq!(s.job("a2"), stored("a", None, None, 0));
    // The lease held in the paused queue is renewed and completed as before.
    s.lf(&[
        "renew", "a1", "--owner", "w", "--fence", "1", "--ttl", "30", "--now", "2",
    ])
    .ok();
    s.lf(&[
        "complete", "a1", "--owner", "w", "--fence", "1", "--result", "r", "--now", "3",
    ])
    .ok();
    assert_eq!(s.job("a1").unwrap().5.as_deref(), Some("r"));

    let list = s.lf(&["queue", "list", "--now", "4"]);
    list.ok();
    let lines: Vec<Vec<&str>> = list
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0][..4], ["QUEUE", "PAUSED", "READY", "SCHEDULED"]);
    assert_eq!(
        lines[1],
        ["a", "yes", "1", "0", "0", "0", "0", "1", "0", "0"]
    );
    assert_eq!(
        lines[2],
        ["b", "no", "0", "0", "1", "0", "0", "0", "0", "0"]
    );
    let json = s
        .lf(&["--json", "queue", "list", "--now", "4"])
        .ok()
        .jsons();
    assert_eq!(
        (&json[0]["queue"], &json[0]["paused"], &json[0]["done"]),
        (&"a".into(), &true.into(), &1.into())
    );

    s.lf(&["queue", "resume", "a"])
        .ok()
        .says("resumed the queue a");
    s.lf(&["queue", "resume", "a"]).ok().says("was not paused");
    assert_eq!(s.paused("a"), Some(false));
    s.lf(&[
        "--json", "claim", "--next", "--owner", "w", "--ttl", "30", "--now", "5", "--queue", "a",
    ])
    .ok();
    assert_eq!(s.job("a2").unwrap().3, 1);
    s.lf(&["queue", "pause", "bad name"]).bad("bad name");
}

#[test]
fn work_serves_only_the_named_queues_with_their_own_concurrency() {
    let s = Sandbox::new();
    for (id, queue) in [
        ("e1", "emails"),
        ("e2", "emails"),
        ("r1", "reports"),
        ("v1", "video"),
    ] {
        let kind = format!("k-{id}");
        s.lf(&["enqueue", id, "--queue", queue, "--kind", &kind])
            .ok();
    }
    let run = s.lf(&[
        "work",
        "--exec",
        "printf '%s/%s' \"$LEASEFENCE_QUEUE\" \"$LEASEFENCE_KIND\"",
        "--queue",
        "emails=2",
        "--queue",
        "reports",
        "--drain",
        "--poll",
        "0.01",
    ]);
    run.ok();
    assert_eq!(s.job("e1").unwrap().5.as_deref(), Some("emails/k-e1"));
    assert_eq!(s.job("r1").unwrap().5.as_deref(), Some("reports/k-r1"));
    assert_eq!(s.job("v1"), stored("video", Some("k-v1"), None, 0));
    s.lf(&[
        "work", "--exec", "true", "--queue", "emails", "--queue", "emails", "--drain",
    ])
    .bad("--queue");
    s.lf(&["work", "--exec", "true", "--queue", "emails=0", "--drain"])
        .bad("--queue");
}

//! `schedule add|list|remove|tick`: periodic jobs from the command line, with exit statuses,
//! output, and the schedules and runs read back through an independent rusqlite connection —
//! eight `schedule tick` processes racing over the same slots among them.

mod support;
use support::Sandbox;

/// 2026-12-01T00:00:00Z.
const T0: i64 = 1_796_083_200;

fn t(offset: i64) -> String {
    (T0 + offset).to_string()
}

/// The ids of the stored runs of `name`, in id order.
fn runs(s: &Sandbox, name: &str) -> Vec<String> {
    let conn = s.conn();
    let mut stmt = conn
        .prepare("SELECT id FROM jobs WHERE id LIKE ?1 || '@%' ORDER BY id")
        .unwrap();
    stmt.query_map([name], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

fn last_slot(s: &Sandbox, name: &str) -> Option<i64> {
    s.conn()
        .query_row(
            "SELECT last_slot FROM schedules WHERE name = ?1",
            [name],
            |r| r.get(0),
        )
        .ok()
}

#[test]
fn add_list_and_remove_a_schedule() {
    let s = Sandbox::new();
    s.lf(&[
        "schedule",
        "add",
        "sync",
        "--cron",
        "*/5 * * * *",
        "--queue",
        "sync",
        "--kind",
        "sync",
        "--payload",
        "all",
        "--priority",
        "2",
        "--max-attempts",
        "3",
        "--now",
        &t(0),
    ])
    .ok()
    .says("added the schedule sync: `*/5 * * * *` in UTC")
    .says("first run 2026-12-01 00:05:00Z (in 5 min)");
    let stored: (
        String,
        String,
        String,
        Option<String>,
        Vec<u8>,
        i64,
        i64,
        i64,
    ) = s
        .conn()
        .query_row(
            "SELECT cron, tz, queue, kind, payload, priority, max_attempts, last_slot \
             FROM schedules WHERE name = 'sync'",
            [],
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                ))
            },
        )
        .unwrap();
    assert_eq!(
        stored,
        (
            "*/5 * * * *".into(),
            "UTC".into(),
            "sync".into(),
            Some("sync".into()),
            b"all".to_vec(),
            2,
            3,
            T0
        )
    );
    // A known name is refused and left as it was.
    s.lf(&[
        "schedule",
        "add",
        "sync",
        "--cron",
        "@daily",
        "--now",
        &t(1),
    ])
    .refused();
    assert_eq!(last_slot(&s, "sync"), Some(T0));
    s.lf(&[
        "schedule",
        "add",
        "nightly",
        "--cron",
        "0 3 * * *",
        "--tz",
        "Europe/Berlin",
        "--now",
        &t(0),
    ])
    .ok()
    .says("first run 2026-12-01 02:00:00Z");

    let list = s.lf(&["schedule", "list", "--now", &t(60)]);
    list.ok();
    assert_eq!(
        list.table_row("nightly"),
        [
            "nightly",
            "0",
            "3",
            "*",
            "*",
            "*",
            "Europe/Berlin",
            "default",
            "-",
            "2026-12-01",
            "02:00:00Z",
            "(in",
            "1",
            "h)",
            "-"
        ]
    );
    let json = s
        .lf(&["--json", "schedule", "list", "--now", &t(60)])
        .jsons();
    assert_eq!(json.len(), 2);
    assert_eq!(json[1]["name"], "sync");
    assert_eq!(json[1]["next_slot"], T0 + 300);
    assert_eq!(json[1]["payload_bytes"], 3);
    // Nothing ran yet: last_run is null (last_slot is the second each was added).
    assert!(json[1]["last_run"].is_null(), "{}", json[1]);

    s.lf(&["schedule", "remove", "sync"])
        .ok()
        .says("removed the schedule sync");
    s.lf(&["schedule", "remove", "sync"]).refused();
    assert_eq!(last_slot(&s, "sync"), None);
}

#[test]
fn bad_schedules_are_errors_naming_the_flag_and_change_nothing() {
    let s = Sandbox::new();
    s.lf(&["schedule", "add", "x", "--cron", "61 * * * *"])
        .error("`cron`");
    s.lf(&[
        "schedule",
        "add",
        "x",
        "--cron",
        "@daily",
        "--tz",
        "Mars/Olympus",
    ])
    .error("`tz`");
    s.lf(&["schedule", "add", "a@b", "--cron", "@daily"])
        .error("`name`");
    s.lf(&["schedule", "add", "x", "--cron", "@daily", "--queue", "a b"])
        .bad("queue");
    s.lf(&[
        "schedule",
        "add",
        "x",
        "--cron",
        "@daily",
        "--max-attempts",
        "-1",
    ])
    .bad("max-attempts");
    s.lf(&["schedule", "tick", "--ttl", "0"]).bad("ttl");
    s.lf(&["schedule", "remove", "a b"]).error("`name`");
    let count: i64 = s
        .conn()
        .query_row("SELECT count(*) FROM schedules", [], |r| r.get(0))
        .unwrap();
    assert_eq!(count, 0);
}

#[test]
fn tick_enqueues_each_due_slot_once_and_catches_up_once() {
    let s = Sandbox::new();
    s.lf(&[
        "schedule",
        "add",
        "sync",
        "--cron",
        "*/5 * * * *",
        "--now",
        &t(0),
    ])
    .ok();
    s.lf(&["schedule", "tick", "--now", &t(299)])
        .ok()
        .says("nothing due");
    assert!(runs(&s, "sync").is_empty());
    s.lf(&["schedule", "tick", "--now", &t(300)])
        .ok()
        .says("enqueued sync@2026-12-01T00:05:00Z");
    s.lf(&["schedule", "tick", "--now", &t(301)])
        .ok()
        .says("nothing due");
    // Down for half an hour: one run, of the latest slot.
    let late = s
        .lf(&["--json", "schedule", "tick", "--now", &t(2000)])
        .json();
    assert_eq!(
        late["enqueued"],
        serde_json::json!(["sync@2026-12-01T00:30:00Z"])
    );
    assert_eq!(late["skipped"], 4);
    assert_eq!(
        runs(&s, "sync"),
        ["sync@2026-12-01T00:05:00Z", "sync@2026-12-01T00:30:00Z"]
    );
    assert_eq!(last_slot(&s, "sync"), Some(T0 + 1800));
    let listed = s
        .lf(&["--json", "schedule", "list", "--now", &t(2001)])
        .json();
    assert_eq!(listed["last_run"], T0 + 1800, "{listed}");
    // Every tick held the role under a fence of its own and gave it back.
    s.lf(&["history", "leasefence.scheduler"])
        .ok()
        .says("4 attempts (4 released), no write refused");
}

#[test]
fn tick_is_refused_while_another_scheduler_holds_the_role() {
    let s = Sandbox::new();
    s.lf(&[
        "schedule",
        "add",
        "sync",
        "--cron",
        "*/5 * * * *",
        "--now",
        &t(0),
    ])
    .ok();
    s.lf(&["schedule", "tick", "--now", &t(1)]).ok(); // creates the role's job
    s.lf(&[
        "claim",
        "leasefence.scheduler",
        "--owner",
        "other",
        "--ttl",
        "600",
        "--now",
        &t(2),
    ])
    .ok();
    s.lf(&["schedule", "tick", "--now", &t(300)]).refused();
    assert!(runs(&s, "sync").is_empty());
    assert!(
        s.lf(&["schedule", "tick", "--now", &t(300)])
            .stderr
            .contains("held by other (fence 2)")
    );
    // Its lease expired: the next tick takes the role and enqueues.
    s.lf(&["schedule", "tick", "--now", &t(602)])
        .ok()
        .says("enqueued sync@2026-12-01T00:10:00Z");
}

#[test]
fn eight_racing_tick_processes_enqueue_every_slot_exactly_once() {
    let s = Sandbox::new();
    s.lf(&[
        "schedule",
        "add",
        "beat",
        "--cron",
        "* * * * *",
        "--now",
        &t(0),
    ])
    .ok();
    let slots = 12;
    for k in 1..=slots {
        let now = t(60 * k);
        std::thread::scope(|scope| {
            let ticks: Vec<_> = (0..8)
                .map(|i| {
                    let (s, now) = (&s, now.clone());
                    scope.spawn(move || {
                        s.lf(&[
                            "--json",
                            "schedule",
                            "tick",
                            "--owner",
                            &format!("t{i}"),
                            "--now",
                            &now,
                        ])
                    })
                })
                .collect();
            let mut enqueued = Vec::new();
            for run in ticks {
                let run = run.join().unwrap();
                assert!(matches!(run.code, 0 | 1), "{run:#?}");
                for line in run.jsons() {
                    if let Some(ids) = line["enqueued"].as_array() {
                        enqueued.extend(ids.iter().map(|v| v.as_str().unwrap().to_owned()));
                    }
                }
            }
            // Exactly one process enqueued this slot's run; the others found it done or
            // stood by.
            assert_eq!(enqueued, [format!("beat@{}", slot(60 * k))], "slot {k}");
        });
    }
    let expected: Vec<String> = (1..=slots)
        .map(|k| format!("beat@{}", slot(60 * k)))
        .collect();
    assert_eq!(runs(&s, "beat"), expected);
}

/// `schedule add sync --cron @hourly` at `T0 + offset`.
fn add_hourly(s: &Sandbox, offset: i64) -> support::Run {
    s.lf(&[
        "schedule",
        "add",
        "sync",
        "--cron",
        "@hourly",
        "--now",
        &t(offset),
    ])
}

/// `claim leasefence.scheduler` as `w-1` for 60 s at `T0 + offset`.
fn claim_role(s: &Sandbox, offset: i64) -> support::Run {
    let now = t(offset);
    s.lf(&[
        "claim",
        "leasefence.scheduler",
        "--owner",
        "w-1",
        "--ttl",
        "60",
        "--now",
        &now,
    ])
}

/// `(done, fence, not_before)` of the role's job, read through the sandbox's own connection.
fn role_row(s: &Sandbox) -> (i64, i64, f64) {
    s.conn()
        .query_row(
            "SELECT done, fence, not_before FROM jobs WHERE id = 'leasefence.scheduler'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap()
}

/// The UTC time of `T0 + offset` as a run id writes it.
fn slot(offset: i64) -> String {
    let minutes = offset / 60;
    format!("2026-12-01T{:02}:{:02}:00Z", minutes / 60, minutes % 60)
}

#[test]
fn adding_the_same_definition_again_is_not_an_error_and_list_says_who_schedules() {
    let s = Sandbox::new();
    add_hourly(&s, 0).ok();
    add_hourly(&s, 5).ok().says("already there, identical");
    assert_eq!(last_slot(&s, "sync"), Some(T0), "left as it was");
    s.lf(&["schedule", "list", "--now", &t(10)])
        .ok()
        .says("scheduler: none holds the role now");
    claim_role(&s, 10).refused(); // the role's job does not exist until a scheduler first runs
    s.lf(&["schedule", "tick", "--now", &t(11)]).ok();
    claim_role(&s, 12).ok();
    s.lf(&["schedule", "list", "--now", &t(20)])
        .ok()
        .says("scheduler: held by w-1 (fence 2) until 2026-12-01 00:01:12Z (in 52 s)");
}

#[test]
fn cancel_and_retry_refuse_the_scheduler_roles_job_and_change_nothing() {
    let s = Sandbox::new();
    add_hourly(&s, 0).ok();
    s.lf(&["schedule", "tick", "--now", &t(1)]).ok();
    let before = role_row(&s);
    s.lf(&["cancel", "leasefence.scheduler", "--now", &t(2)])
        .error("`job_id`");
    s.lf(&["retry", "leasefence.scheduler", "--now", &t(2)])
        .error("`job_id`");
    // Nor may its holder finish it: completed or failed, no scheduler could take the role.
    let fence = before.1.to_string();
    for verb in [
        &["complete", "--result", "x"][..],
        &["fail", "--error", "e"],
    ] {
        let mut args = vec![verb[0], "leasefence.scheduler", "--owner", "w-1", "--fence"];
        args.extend([fence.as_str(), "--now", "2"]);
        args.extend_from_slice(&verb[1..]);
        s.lf(&args).error("`job_id`");
    }
    let after = role_row(&s);
    assert_eq!(before, after);
    assert_eq!(before.0, 0);
    // delete resets the role: the next tick creates the job again, above the old fence.
    s.lf(&["delete", "leasefence.scheduler"]).ok();
    s.lf(&["--json", "schedule", "tick", "--now", &t(3700)])
        .ok()
        .says("\"fence\":2");
}

#[test]
fn schedule_add_of_a_known_name_exits_as_its_help_says() {
    // `schedule add --help`: a known NAME is left as it was — the same definition again changes
    // nothing (exit 0, `added` false), a different one is refused (exit 1).
    let s = Sandbox::new();
    let add = ["schedule", "add", "n", "--cron", "0 3 * * *", "--now", "0"];
    s.lf(&add).ok();
    s.lf(&["schedule", "add", "--help"])
        .ok()
        .says("the same definition again changes")
        .says("a different one is refused (exit 1)");
    let mut json = vec!["--json"];
    json.extend_from_slice(&add);
    let again = s.lf(&json);
    assert_eq!(
        (again.code, again.json()["added"].clone()),
        (0, serde_json::Value::Bool(false)),
        "{again:#?}"
    );
    let other = s.lf(&["schedule", "add", "n", "--cron", "0 4 * * *", "--now", "0"]);
    assert_eq!(other.code, 1, "{other:#?}");
    let listed = s.lf(&["--json", "schedule", "list"]);
    assert!(
        listed.ok().stdout.contains("0 3 * * *"),
        "left as it was: {listed:#?}"
    );
}

#[test]
fn enqueue_refuses_the_scheduler_roles_id_as_the_http_api_does() {
    // The role's job is the scheduler's to make (queue `leasefence`, never ready). Enqueued
    // by hand — say after `delete leasefence.scheduler`, which resets the role — it would be
    // an ordinary ready job: `claim --next` or `work` would take and complete it, and no
    // scheduler could take the role again.
    let s = Sandbox::new();
    let ids = tempfile::tempdir().unwrap();
    let list = ids.path().join("ids.txt");
    std::fs::write(&list, "a-1\nleasefence.scheduler\n").unwrap();
    for args in [
        &["enqueue", "leasefence.scheduler"][..],
        &["enqueue", "leasefence.scheduler", "--priority", "1"],
        &["enqueue", "--ids-from", list.to_str().unwrap()],
    ] {
        s.lf(args).error("`job_id`");
    }
    let stored: i64 = s
        .conn()
        .query_row("SELECT count(*) FROM jobs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        stored, 0,
        "nothing enqueued, a-1 of the refused file neither"
    );
    s.lf(&[
        "claim", "--next", "--owner", "w", "--ttl", "10", "--now", "1",
    ])
    .refused();
    // The scheduler still makes the role's job itself.
    add_hourly(&s, 0).ok();
    s.lf(&["schedule", "tick", "--now", &t(1)]).ok();
    assert_eq!(role_row(&s).2, 253_402_300_799.0, "never ready");
}

#[test]
fn tick_says_which_due_runs_it_did_not_enqueue() {
    // A due slot whose job id is already taken (here by a hand-made job) is passed: the
    // schedule moves on, nothing is enqueued for it. `schedule tick` must say so, not
    // "nothing due".
    let s = Sandbox::new();
    add_hourly(&s, 0).ok();
    let run = format!("sync@{}", slot(3600));
    s.lf(&["enqueue", &run, "--payload", "mine"]).ok();
    let out = s.lf(&["schedule", "tick", "--now", &t(3600)]);
    out.ok();
    assert!(!out.stdout.contains("nothing due"), "{out:#?}");
    out.says(&format!(
        "not enqueued {run}: a job with its id exists (left as it is)"
    ));
    assert_eq!(
        last_slot(&s, "sync"),
        Some(T0 + 3600),
        "the slot was used up"
    );
    let payload: Vec<u8> = s
        .conn()
        .query_row("SELECT payload FROM jobs WHERE id = ?1", [&run], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(payload, b"mine", "the known job is left untouched");
}

#[test]
fn list_shows_the_slot_the_next_tick_enqueues_after_missed_slots() {
    // A nightly schedule nobody ticked for two and a half days: the next tick enqueues the
    // latest missed slot (missed slots run once on catch-up), so that is the next run to show —
    // not the first missed slot, which will never run.
    let s = Sandbox::new();
    s.lf(&[
        "schedule",
        "add",
        "nightly",
        "--cron",
        "0 3 * * *",
        "--now",
        &t(0),
    ])
    .ok();
    let at = t(2 * 86_400 + 4 * 3_600); // 2026-12-03T04:00:00Z
    s.lf(&["schedule", "list", "--now", &at])
        .ok()
        .says("2026-12-03 03:00:00Z (1 h ago)");
    let listed = s.lf(&["--json", "schedule", "list", "--now", &at]).json();
    assert_eq!(listed["next_slot"], T0 + 2 * 86_400 + 3 * 3_600);
    let ticked = s.lf(&["--json", "schedule", "tick", "--now", &at]).json();
    assert_eq!(
        ticked["enqueued"],
        serde_json::json!(["nightly@2026-12-03T03:00:00Z"])
    );
    // Nothing missed any more: the next run is the next night's.
    s.lf(&["schedule", "list", "--now", &at])
        .ok()
        .says("2026-12-04 03:00:00Z (in 23 h)");
}

#[test]
fn serve_help_says_only_the_admin_token_adds_and_removes_schedules() {
    // POST and DELETE /v1/schedules answer 403 to the worker token (docs/http.md).
    let s = Sandbox::new();
    s.lf(&["serve", "--help"])
        .ok()
        .says("queue pause/resume, schedule add/remove)");
}

#[test]
fn tick_says_at_least_when_the_missed_slots_were_counted_up_to_the_limit() {
    // Every second, nobody ticked for three days: 259,199 slots were missed, but a tick counts
    // at most 100,000 per schedule, so it must not claim exactly 100,000 were missed.
    let s = Sandbox::new();
    s.lf(&[
        "schedule",
        "add",
        "beat",
        "--cron",
        "* * * * * *",
        "--now",
        &t(0),
    ])
    .ok();
    s.lf(&["schedule", "tick", "--now", &t(3 * 86_400)])
        .ok()
        .says("enqueued beat@2026-12-04T00:00:00Z")
        .says("; at least 100000 missed slots not run");
}

//! Enqueue, read, page, and the operator verbs, each read back from the store.

use serde_json::json;

use crate::support::{Server, backends};

backends! {
    fn enqueue_one_or_many_reports_each_outcome(db: &Db) {
        let server = Server::start(db);
        let c = server.client(None);
        let (status, body) = c.post("/v1/jobs", json!({
            "id": "mail-1", "queue": "emails", "kind": "welcome", "payload": "{\"to\":\"ada\"}",
            "priority": 5, "max_attempts": 3, "unique_key": "welcome:ada"}));
        assert_eq!((status, body["outcome"].as_str()), (201, Some("inserted")), "{body}");
        let (status, body) = c.post("/v1/jobs", json!({"id": "mail-1"}));
        assert_eq!((status, body["reason"].as_str()), (409, Some("known")), "{body}");
        let (status, body) = c.post("/v1/jobs", json!({"id": "mail-2", "queue": "emails", "unique_key": "welcome:ada"}));
        assert_eq!((status, body["reason"].as_str(), body["of"].as_str()), (409, Some("duplicate"), Some("mail-1")), "{body}");
        let (status, body) = c.post("/v1/jobs", json!({"jobs": [
            {"id": "b-1", "payload_base64": "AAEC/w=="}, {"id": "mail-1"}, {"id": "b-2", "delay": 3600}]}));
        assert_eq!(status, 200, "{body}");
        let outcomes: Vec<_> = body["results"].as_array().unwrap().iter()
            .map(|r| (r["job_id"].as_str().unwrap(), r["outcome"].as_str().unwrap())).collect();
        assert_eq!(outcomes, [("b-1", "inserted"), ("mail-1", "known"), ("b-2", "inserted")]);
        assert_eq!(db.count(), 3);

        let (status, job) = c.get("/v1/jobs/mail-1");
        assert_eq!(status, 200);
        assert_eq!((job["queue"].as_str(), job["kind"].as_str(), job["priority"].as_i64(), job["max_attempts"].as_u64()),
                   (Some("emails"), Some("welcome"), Some(5), Some(3)));
        assert_eq!(job["payload"], "{\"to\":\"ada\"}");
        let (_, bin) = c.get("/v1/jobs/b-1");
        assert_eq!((bin["payload"].is_null(), bin["payload_base64"].as_str()), (true, Some("AAEC/w==")));
        let (_, later) = c.get("/v1/jobs/b-2");
        assert_eq!(later["status"], "scheduled");
        assert_eq!(c.get("/v1/jobs/nope").0, 404);

        // The lease carries the payload and the queue's settings.
        let (_, claimed) = c.post("/v1/claims", json!({"owner": "w", "ttl": 30, "queues": ["emails"]}));
        let lease = &claimed["leases"][0];
        assert_eq!((lease["job_id"].as_str(), lease["fence"].as_i64(), lease["attempt"].as_u64()), (Some("mail-1"), Some(1), Some(1)));
        assert_eq!(lease["payload"], "{\"to\":\"ada\"}");
    }

    fn jobs_page_by_id_with_filters(db: &Db) {
        let server = Server::start(db);
        let c = server.client(None);
        let jobs: Vec<_> = (0..250).map(|i| json!({"id": format!("job-{i:03}"),
            "queue": if i % 5 == 0 { "rare" } else { "default" }})).collect();
        assert_eq!(c.post("/v1/jobs", json!({"jobs": jobs})).0, 200);
        let mut seen = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let path = match &after {
                Some(a) => format!("/v1/jobs?limit=100&after={a}"),
                None => "/v1/jobs?limit=100".to_owned(),
            };
            let (status, page) = c.get(&path);
            assert_eq!(status, 200, "{page}");
            seen.extend(page["jobs"].as_array().unwrap().iter().map(|j| j["id"].as_str().unwrap().to_owned()));
            match page["next"].as_str() {
                Some(next) => after = Some(next.to_owned()),
                None => break,
            }
        }
        let expected: Vec<_> = (0..250).map(|i| format!("job-{i:03}")).collect();
        assert_eq!(seen, expected);

        // A queue filter pages too: 50 rare jobs, 20 at a time.
        let (mut rare, mut after) = (Vec::new(), String::new());
        loop {
            let (status, page) = c.get(&format!("/v1/jobs?queue=rare&limit=20&after={after}"));
            assert_eq!(status, 200, "{page}");
            rare.extend(page["jobs"].as_array().unwrap().iter().map(|j| j["id"].as_str().unwrap().to_owned()));
            match page["next"].as_str() { Some(n) => after = n.to_owned(), None => break }
        }
        let expected: Vec<_> = (0..250).step_by(5).map(|i| format!("job-{i:03}")).collect();
        assert_eq!(rare, expected);

        c.claim("job-007", "w", 60.0);
        let (_, leased) = c.get("/v1/jobs?status=leased");
        let ids: Vec<_> = leased["jobs"].as_array().unwrap().iter().map(|j| j["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["job-007"]);
        assert!(leased.get("next").is_none());
    }

    // A retry refused says why: `done` for a completed job, `duplicate` for a cancelled one
    // another unfinished job of its queue holds the unique key of (it would be held twice),
    // and the job is left as it was.
    fn a_retry_refused_says_why(db: &Db) {
        let server = Server::start(db);
        let c = server.client(None);
        let (status, body) = c.post("/v1/jobs", json!({"id": "u1", "queue": "q", "unique_key": "K"}));
        assert_eq!(status, 201, "{body}");
        assert_eq!(c.post_empty("/v1/jobs/u1/cancel").0, 200);
        let (status, body) = c.post("/v1/jobs", json!({"id": "u2", "queue": "q", "unique_key": "K"}));
        assert_eq!(status, 201, "the cancelled job no longer holds the key: {body}");
        let (status, body) = c.post_empty("/v1/jobs/u1/retry");
        assert_eq!((status, body["reason"].as_str()), (409, Some("duplicate")), "{body}");
        let (_, u1) = c.get("/v1/jobs/u1");
        assert_eq!(u1["status"], "cancelled", "{u1}");
        assert!(db.row("u1").unwrap().done);

        c.enqueue("c");
        c.claim("c", "w", 60.0);
        let (status, body) = c.post("/v1/jobs/c/complete", json!({"owner": "w", "fence": 1, "result": "r"}));
        assert_eq!(status, 200, "{body}");
        let (status, body) = c.post_empty("/v1/jobs/c/retry");
        assert_eq!((status, body["reason"].as_str()), (409, Some("done")), "{body}");
    }

    fn operator_verbs_and_queues(db: &Db) {
        let server = Server::start(db);
        let c = server.client(None);
        for id in ["a", "b"] { c.enqueue(id); }
        assert_eq!(c.post("/v1/jobs", json!({"id": "m", "queue": "mail"})).0, 201);
        // Pause: the queue hands out nothing until resumed.
        assert_eq!(c.post_empty("/v1/queues/mail/pause").0, 200);
        let (_, got) = c.post("/v1/claims", json!({"owner": "w", "ttl": 30, "queues": ["mail"]}));
        assert_eq!(got["leases"].as_array().unwrap().len(), 0);
        let (_, stats) = c.get("/v1/stats");
        let mail = stats["queues"].as_array().unwrap().iter().find(|q| q["name"] == "mail").unwrap().clone();
        assert_eq!((mail["paused"].as_bool(), mail["counts"]["ready"].as_u64()), (Some(true), Some(1)));
        assert_eq!(stats["counts"]["total"], 3);
        assert_eq!(c.post_empty("/v1/queues/mail/resume").0, 200);
        let (_, got) = c.post("/v1/claims", json!({"owner": "w", "ttl": 30, "queues": ["mail"]}));
        assert_eq!(got["leases"][0]["job_id"], "m");

        // Cancel, then retry; a finished job cannot be cancelled again; unknown ids are 404.
        assert_eq!(c.post_empty("/v1/jobs/a/cancel").0, 200);
        assert!(db.row("a").unwrap().done);
        let (status, body) = c.post_empty("/v1/jobs/a/cancel");
        assert_eq!((status, body["reason"].as_str()), (409, Some("done")), "{body}");
        let (status, body) = c.post_empty("/v1/jobs/b/retry");
        assert_eq!((status, body["reason"].as_str()), (409, Some("not_dead")), "{body}");
        assert_eq!(c.post_empty("/v1/jobs/a/retry").0, 200);
        assert!(!db.row("a").unwrap().done);
        assert_eq!(c.post_empty("/v1/jobs/zz/cancel").0, 404);
        assert_eq!(c.post_empty("/v1/jobs/zz/retry").0, 404);
        assert_eq!(c.delete("/v1/jobs/zz").0, 404);
        assert_eq!(c.delete("/v1/jobs/b").0, 200);
        assert!(db.row("b").is_none());
        let (status, body) = c.post_empty("/v1/jobs/leasefence.scheduler/cancel");
        assert_eq!((status, body["field"].as_str()), (400, Some("job_id")), "{body}");
        // Nor may a worker finish the role's job: completed or failed, no scheduler could
        // take the role again.
        for (verb, lease) in [
            ("complete", serde_json::json!({"owner": "w", "fence": 1, "result": "x"})),
            ("fail", serde_json::json!({"owner": "w", "fence": 1, "error": "e"})),
        ] {
            let (status, body) = c.post(&format!("/v1/jobs/leasefence.scheduler/{verb}"), lease);
            assert_eq!((status, body["field"].as_str()), (400, Some("job_id")), "{verb}: {body}");
        }
        let batch = serde_json::json!({"completions": [
            {"job_id": "a", "owner": "w", "fence": 1, "result": "x"},
            {"job_id": "leasefence.scheduler", "owner": "w", "fence": 1, "result": "x"},
        ]});
        let (status, body) = c.post("/v1/completions", batch);
        assert_eq!((status, body["field"].as_str()), (400, Some("completions[1].job_id")), "{body}");
    }
}

backends! {
    fn schedules_are_added_listed_and_removed_by_the_admin(db: &Db) {
        use leasefence_server::{ServerConfig, Token, Tokens};
        let config = ServerConfig {
            tokens: Tokens {
                worker: Some(Token::new("sched-worker-token-1", "w").unwrap()),
                admin: Some(Token::new("sched-admin-token-22", "a").unwrap()),
            },
            ..ServerConfig::default()
        };
        let server = Server::with(db, config);
        let (worker, admin) = (server.client(Some("sched-worker-token-1")), server.client(Some("sched-admin-token-22")));
        let body = serde_json::json!({"name": "nightly", "cron": "0 2 * * *", "tz": "Europe/Berlin", "queue": "reports", "payload": "p"});
        assert_eq!(worker.post("/v1/schedules", body.clone()).0, 403);
        let (status, answer) = admin.post("/v1/schedules", body.clone());
        assert_eq!(status, 201, "{answer}");
        // The same definition again: refused, and told apart from a different one (here only
        // the payload differs), so that provisioning can take it as nothing to do.
        let (status, answer) = admin.post("/v1/schedules", body.clone());
        assert_eq!((status, answer["reason"].as_str()), (409, Some("known")), "{answer}");
        assert!(answer["message"].as_str().unwrap().contains("(identical to this one)"), "{answer}");
        let mut other = body.clone();
        other["payload"] = serde_json::json!("q");
        let (status, answer) = admin.post("/v1/schedules", other);
        assert_eq!((status, answer["reason"].as_str()), (409, Some("known")), "{answer}");
        assert!(answer["message"].as_str().unwrap().contains("a different definition"), "{answer}");
        let (status, answer) = admin.post("/v1/schedules", serde_json::json!({"name": "nightly", "cron": "* * * * *"}));
        assert_eq!((status, answer["reason"].as_str()), (409, Some("known")), "{answer}");
        for (bad, field) in [
            (serde_json::json!({"name": "x", "cron": "not cron"}), "cron"),
            (serde_json::json!({"name": "x", "cron": "* * * * *", "tz": "Mars/Olympus"}), "tz"),
            (serde_json::json!({"name": "", "cron": "* * * * *"}), "name"),
        ] {
            let (status, answer) = admin.post("/v1/schedules", bad);
            assert_eq!((status, answer["field"].as_str()), (400, Some(field)), "{answer}");
        }
        let (status, list) = worker.get("/v1/schedules");
        assert_eq!(status, 200);
        let all = list["schedules"].as_array().unwrap();
        assert_eq!(all.len(), 1, "{list}");
        let nightly = &all[0];
        assert_eq!((nightly["cron"].as_str(), nightly["tz"].as_str(), nightly["queue"].as_str(), nightly["payload"].as_str()),
                   (Some("0 2 * * *"), Some("Europe/Berlin"), Some("reports"), Some("p")));
        assert!(nightly["next_slot"].as_i64().unwrap() > nightly["last_slot"].as_i64().unwrap());
        // Never run yet: last_slot is the second it was added, and last_run says there was none.
        assert_eq!(nightly["last_slot"].as_f64().unwrap(), nightly["created_at"].as_f64().unwrap().floor(), "{nightly}");
        assert!(nightly["last_run"].is_null(), "{nightly}");
        assert_eq!(worker.delete("/v1/schedules/nightly").0, 403);
        assert_eq!(admin.delete("/v1/schedules/nightly").0, 200);
        assert_eq!(admin.delete("/v1/schedules/nightly").0, 404);
        assert_eq!(worker.get("/v1/schedules").1["schedules"].as_array().unwrap().len(), 0);
    }
}

#[test]
fn a_rare_queue_is_paged_without_reading_the_whole_store_at_once() {
    let db = crate::support::Db::new(crate::support::Backend::Sqlite).unwrap();
    let server = Server::start(&db);
    let c = server.client(None);
    // 12,000 jobs; the 3 of the queue `rare` are the last ones.
    for part in 0..2 {
        let jobs: Vec<_> = (0..6000)
            .map(|i| {
                let n = part * 6000 + i;
                let queue = if n >= 11_997 { "rare" } else { "default" };
                serde_json::json!({"id": format!("job-{n:05}"), "queue": queue})
            })
            .collect();
        assert_eq!(c.post("/v1/jobs", serde_json::json!({"jobs": jobs})).0, 200);
    }
    let (status, first) = c.get("/v1/jobs?queue=rare&limit=5");
    assert_eq!(status, 200);
    // One request reads at most 10,000 rows: a short (here empty) page, and where to go on.
    assert_eq!(first["jobs"].as_array().unwrap().len(), 0, "{first}");
    let next = first["next"].as_str().expect("a next cursor").to_owned();
    let (_, second) = c.get(&format!("/v1/jobs?queue=rare&limit=5&after={next}"));
    let ids: Vec<_> = second["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, ["job-11997", "job-11998", "job-11999"]);
    assert!(second.get("next").is_none(), "{second}");
}

/// The scheduler role's job is not a worker's to take: a claim of it by id (with any ttl)
/// would keep every scheduler from the role for as long as that lease lasts, and the role is
/// not offered over HTTP. Nor may a worker enqueue a job under its id. Both are a 400 naming
/// the field, and the role stays free for a scheduler.
#[test]
fn a_worker_can_neither_claim_nor_enqueue_the_scheduler_roles_job() {
    use leasefence::{JobId, NewJob, Now, Owner, SCHEDULER_JOB, SCHEDULER_QUEUE, Store, Ttl};
    let db = crate::support::Db::new(crate::support::Backend::Sqlite).unwrap();
    let server = Server::start(&db);
    let c = server.client(None);
    let (status, body) = c.post("/v1/jobs", json!({"id": SCHEDULER_JOB}));
    assert_eq!(
        (status, body["field"].as_str()),
        (400, Some("id")),
        "{body}"
    );
    let (status, body) = c.post(
        "/v1/jobs",
        json!({"jobs": [{"id": "fine"}, {"id": SCHEDULER_JOB}]}),
    );
    assert_eq!(
        (status, body["field"].as_str()),
        (400, Some("jobs[1].id")),
        "{body}"
    );
    assert_eq!(db.count(), 0, "nothing enqueued");
    // The role's job, as `Scheduler` enqueues it.
    let store = leasefence::AnyStore::open(&db.db).unwrap();
    store
        .enqueue_jobs(&[NewJob::new(SCHEDULER_JOB)
            .unwrap()
            .queue(SCHEDULER_QUEUE)
            .unwrap()
            .not_before(253_402_300_799.0)
            .unwrap()])
        .unwrap();
    let (status, body) = c.post(
        "/v1/claims",
        json!({"owner": "worker-1", "ttl": 30.0, "job_id": SCHEDULER_JOB}),
    );
    assert_eq!(
        (status, body["field"].as_str()),
        (400, Some("job_id")),
        "{body}"
    );
    let scheduler = store
        .claim(
            JobId::new(SCHEDULER_JOB).unwrap(),
            Owner::new("scheduler-1").unwrap(),
            Now::system(),
            Ttl::new(30.0).unwrap(),
        )
        .unwrap();
    assert_eq!(
        scheduler.map(|l| l.fence),
        Some(1),
        "the role is still free"
    );
}

#[test]
fn schedules_next_slot_is_the_slot_the_next_tick_enqueues_after_missed_slots() {
    // No scheduler ran for an hour (last_slot set back, as a down scheduler leaves it): the next
    // tick enqueues the latest missed minute, so that is the `next_slot` to show — not the
    // first missed one, an hour ago, which will never run.
    let db = crate::support::Db::new(crate::support::Backend::Sqlite).unwrap();
    let server = Server::start(&db);
    let c = server.client(None);
    let (status, answer) = c.post(
        "/v1/schedules",
        serde_json::json!({"name": "minutely", "cron": "* * * * *"}),
    );
    assert_eq!(status, 201, "{answer}");
    rusqlite::Connection::open(&db.db)
        .unwrap()
        .execute("UPDATE schedules SET last_slot = last_slot - 3600", [])
        .unwrap();
    let (status, list) = c.get("/v1/schedules");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert_eq!(status, 200);
    let next = list["schedules"][0]["next_slot"].as_i64().unwrap();
    let last = list["schedules"][0]["last_slot"].as_i64().unwrap();
    assert_eq!(
        list["schedules"][0]["last_run"].as_i64(),
        Some(last),
        "{list}"
    );
    assert!(
        next <= now && next > now - 120 && next % 60 == 0,
        "next_slot {next} should be the latest minute at or before {now}: {list}"
    );
}

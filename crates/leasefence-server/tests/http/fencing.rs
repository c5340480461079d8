//! The contract over HTTP: a stalled worker's writes are refused with 409 and its reason, and
//! the stored result is the current holder's.

use std::sync::{Arc, Barrier};

use serde_json::json;

use crate::support::{Client, Db, Server, backends, wait_expired};

backends! {
    fn a_stale_write_after_a_takeover_is_409_and_changes_nothing(db: &Db) {
        let server = Server::start(db);
        let c = server.client(None);
        c.enqueue("report");
        let a = c.claim("report", "A", 0.3);
        assert_eq!(a, 1);
        wait_expired(&c, "report");
        let b = c.claim("report", "B", 60.0);
        assert_eq!(b, 2);

        // A wakes up: every write under fence 1 is refused, and says why.
        for (op, body) in [
            ("complete", json!({"owner": "A", "fence": a, "result": "stale"})),
            ("renew", json!({"owner": "A", "fence": a, "ttl": 30})),
            ("fail", json!({"owner": "A", "fence": a, "error": "late"})),
            ("release", json!({"owner": "A", "fence": a})),
        ] {
            let (status, body) = c.post(&format!("/v1/jobs/report/{op}"), body);
            assert_eq!(status, 409, "{op}: {body}");
            assert_eq!(body["error"], "refused", "{op}");
            assert_eq!(body["reason"], "stale_fence", "{op}: {body}");
        }
        let row = db.row("report").unwrap();
        assert_eq!((row.owner.as_deref(), row.fence, row.result, row.done), (Some("B"), 2, None, false));

        // B's write is taken; A's late complete afterwards still is not.
        let (status, body) = c.post("/v1/jobs/report/complete", json!({"owner": "B", "fence": b, "result": "fresh"}));
        assert_eq!((status, &body["ok"]), (200, &json!(true)), "{body}");
        let (status, body) = c.post("/v1/jobs/report/complete", json!({"owner": "A", "fence": a, "result": "stale"}));
        assert_eq!((status, body["reason"].as_str()), (409, Some("done")), "{body}");
        let row = db.row("report").unwrap();
        assert_eq!((row.result.as_deref(), row.done, row.fence), (Some("fresh"), true, 2));

        // The ledger counts A's refused writes under fence 1.
        let (status, history) = c.get("/v1/jobs/report/history");
        assert_eq!(status, 200);
        let refused: u64 = history["refusals"].as_array().unwrap().iter()
            .filter(|r| r["fence"] == 1).map(|r| r["count"].as_u64().unwrap()).sum();
        assert_eq!(refused, 5, "{history}");
        assert_eq!(history["attempts"][0]["outcome"], "lost");
        assert_eq!(history["attempts"][1]["outcome"], "completed");
    }

    fn each_refusal_names_its_reason(db: &Db) {
        let server = Server::start(db);
        let c = server.client(None);
        c.enqueue("j");
        let (status, body) = c.post("/v1/jobs/nope/complete", json!({"owner": "A", "fence": 1}));
        assert_eq!((status, body["reason"].as_str()), (409, Some("unknown")), "{body}");
        // A job never claimed: its fence 0 was never handed out, no lease given back.
        let (status, body) = c.post("/v1/jobs/j/complete", json!({"owner": "A", "fence": 0}));
        assert_eq!((status, body["reason"].as_str()), (409, Some("stale_fence")), "{body}");
        let f = c.claim("j", "A", 60.0);
        let (status, body) = c.post("/v1/jobs/j/complete", json!({"owner": "B", "fence": f}));
        assert_eq!((status, body["reason"].as_str()), (409, Some("other_owner")), "{body}");
        let (status, body) = c.post("/v1/jobs/j/renew", json!({"owner": "A", "fence": f + 1, "ttl": 5}));
        assert_eq!((status, body["reason"].as_str()), (409, Some("stale_fence")), "{body}");
        // A claim by id of a leased job.
        let (status, body) = c.post("/v1/claims", json!({"owner": "B", "ttl": 5, "job_id": "j"}));
        assert_eq!((status, body["reason"].as_str()), (409, Some("leased")), "{body}");
        // Given back: the fence no longer holds a lease.
        let (status, _) = c.post("/v1/jobs/j/release", json!({"owner": "A", "fence": f}));
        assert_eq!(status, 200);
        let (status, body) = c.post("/v1/jobs/j/complete", json!({"owner": "A", "fence": f}));
        assert_eq!((status, body["reason"].as_str()), (409, Some("not_held")), "{body}");
        // Expired: the holder itself may no longer write.
        let f = c.claim("j", "A", 0.3);
        wait_expired(&c, "j");
        let (status, body) = c.post("/v1/jobs/j/complete", json!({"owner": "A", "fence": f, "result": "late"}));
        assert_eq!((status, body["reason"].as_str()), (409, Some("expired")), "{body}");
        let (status, body) = c.post("/v1/jobs/j/renew", json!({"owner": "A", "fence": f, "ttl": 60}));
        assert_eq!((status, body["reason"].as_str()), (409, Some("expired")), "{body}");
        let row = db.row("j").unwrap();
        assert_eq!((row.result, row.done, row.fence), (None, false, 2));
        // Renewed while live: the new end is the stored one.
        let f = c.claim("j", "C", 60.0);
        let (status, body) = c.post("/v1/jobs/j/renew", json!({"owner": "C", "fence": f, "ttl": 120}));
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["until"].as_f64().unwrap(), db.row("j").unwrap().until);
    }

    fn sixty_four_clients_racing_for_one_job_get_exactly_one_lease(db: &Db) {
        let server = Server::start(db);
        for round in 0..3 {
            let id = format!("race-{round}");
            server.client(None).enqueue(&id);
            let start = Arc::new(Barrier::new(64));
            let threads: Vec<_> = (0..64)
                .map(|i| {
                    let (c, start, id) = (server.client(None), Arc::clone(&start), id.clone());
                    std::thread::spawn(move || {
                        start.wait();
                        // Half claim by id, half take the best ready job.
                        let body = if i % 2 == 0 {
                            json!({"owner": format!("w{i}"), "ttl": 60, "job_id": id})
                        } else {
                            json!({"owner": format!("w{i}"), "ttl": 60})
                        };
                        loop {
                            let (status, body) = c.post("/v1/claims", body.clone());
                            match status {
                                200 => return body["leases"].as_array().unwrap().len(),
                                409 => return 0,
                                503 => continue, // busy: retryable, as documented
                                other => panic!("{other}: {body}"),
                            }
                        }
                    })
                })
                .collect();
            let won: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
            assert_eq!(won, 1, "round {round}");
            let row = db.row(&id).unwrap();
            assert_eq!(row.fence, 1, "round {round}: one fence handed out");
            // Complete it so the next round's job is the only ready one.
            let owner = row.owner.unwrap();
            let (status, _) = server.client(None).post(
                &format!("/v1/jobs/{id}/complete"), json!({"owner": owner, "fence": 1}));
            assert_eq!(status, 200);
        }
    }

    fn a_restarted_server_keeps_the_lease_and_its_fence(db: &Db) {
        let server = Server::start(db);
        let c = server.client(None);
        c.enqueue("long");
        let f = c.claim("long", "A", 120.0);
        server.stop();

        // A second server process on the same database: nothing was kept in the first.
        let server = Server::start(db);
        let c = server.client(None);
        let (status, body) = c.post("/v1/claims", json!({"owner": "B", "ttl": 60, "job_id": "long"}));
        assert_eq!((status, body["reason"].as_str()), (409, Some("leased")), "{body}");
        let (status, body) = c.post("/v1/claims", json!({"owner": "B", "ttl": 60}));
        assert_eq!((status, body["leases"].as_array().unwrap().len()), (200, 0), "{body}");
        let (status, body) = c.post("/v1/jobs/long/renew", json!({"owner": "A", "fence": f, "ttl": 60}));
        assert_eq!(status, 200, "{body}");
        let (status, _) = c.post("/v1/jobs/long/complete", json!({"owner": "A", "fence": f, "result": "kept"}));
        assert_eq!(status, 200);
        let row = db.row("long").unwrap();
        assert_eq!((row.owner.as_deref(), row.fence, row.result.as_deref(), row.done), (Some("A"), 1, Some("kept"), true));
    }

    fn fail_retries_then_buries_under_the_fence(db: &Db) {
        let server = Server::start(db);
        let c = server.client(None);
        let (status, _) = c.post("/v1/jobs", json!({"id": "flaky", "max_attempts": 2}));
        assert_eq!(status, 201);
        let f = c.claim("flaky", "A", 60.0);
        let (status, body) = c.post("/v1/jobs/flaky/fail", json!({"owner": "A", "fence": f, "error": "boom", "retry_in": 0}));
        assert_eq!((status, body["outcome"].as_str()), (200, Some("retrying")), "{body}");
        let (_, job) = c.get("/v1/jobs/flaky");
        // Failed and due again at once: `retrying` until claimed.
        assert_eq!((job["status"].as_str(), job["error"].as_str()), (Some("retrying"), Some("boom")), "{job}");
        let f = c.claim("flaky", "B", 60.0);
        let (status, body) = c.post("/v1/jobs/flaky/fail", json!({"owner": "B", "fence": f, "error": "boom again"}));
        assert_eq!((status, body["outcome"].as_str()), (200, Some("dead")), "{body}");
        let row = db.row("flaky").unwrap();
        assert!(row.done);
        let (_, job) = c.get("/v1/jobs/flaky");
        assert_eq!(job["status"], "dead");
        // Counted: two failures taken, one to be retried, one burying the job.
        let (_, metrics, _) = c.get_text("/metrics");
        for line in ["leasefence_failures_total 2", "leasefence_retries_total 1", "leasefence_dead_total 1"] {
            assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
        }
        // The admin's retry brings it back, above every fence handed out.
        let (status, _) = c.post_empty("/v1/jobs/flaky/retry");
        assert_eq!(status, 200);
        assert_eq!(c.claim("flaky", "C", 60.0), 3);
    }

    fn batched_writes_refuse_only_the_stale_items(db: &Db) {
        let server = Server::start(db);
        let c = server.client(None);
        for id in ["a", "b", "c"] { c.enqueue(id); }
        let (fa, fb) = (c.claim("a", "A", 60.0), c.claim("b", "A", 60.0));
        let fc = c.claim("c", "A", 0.3);
        wait_expired(&c, "c");
        let before = db.row("a").unwrap().until;
        let (status, body) = c.post("/v1/renewals", json!({"ttl": 120, "leases": [
            {"job_id": "a", "owner": "A", "fence": fa},
            {"job_id": "b", "owner": "B", "fence": fb},
            {"job_id": "c", "owner": "A", "fence": fc},
            {"job_id": "zz", "owner": "A", "fence": 1}]}));
        assert_eq!(status, 200, "{body}");
        let r = &body["results"];
        assert_eq!(r[0]["ok"].as_bool(), Some(true));
        // Exact on SQLite; on PostgreSQL at most the call's duration before the stored end.
        let (told, stored) = (r[0]["until"].as_f64().unwrap(), db.row("a").unwrap().until);
        match db.backend {
            crate::support::Backend::Sqlite => assert_eq!(told, stored),
            crate::support::Backend::Pg => assert!(told <= stored && stored - told < 5.0, "{told} {stored}"),
        }
        assert!(db.row("a").unwrap().until > before + 50.0);
        assert_eq!((r[1]["ok"].as_bool(), r[1]["reason"].as_str()), (Some(false), Some("other_owner")));
        assert_eq!((r[2]["ok"].as_bool(), r[2]["reason"].as_str()), (Some(false), Some("expired")));
        assert_eq!((r[3]["ok"].as_bool(), r[3]["reason"].as_str()), (Some(false), Some("unknown")));

        let (status, body) = c.post("/v1/completions", json!({"completions": [
            {"job_id": "a", "owner": "A", "fence": fa, "result": "ra"},
            {"job_id": "b", "owner": "A", "fence": fb + 1, "result": "stale"},
            {"job_id": "c", "owner": "A", "fence": fc, "result": "late"}]}));
        assert_eq!(status, 200, "{body}");
        let r = &body["results"];
        assert_eq!(r[0]["ok"], true);
        assert_eq!((r[1]["ok"].as_bool(), r[1]["reason"].as_str()), (Some(false), Some("stale_fence")));
        assert_eq!((r[2]["ok"].as_bool(), r[2]["reason"].as_str()), (Some(false), Some("expired")));
        assert_eq!(db.row("a").unwrap().result.as_deref(), Some("ra"));
        assert_eq!((db.row("b").unwrap().result, db.row("b").unwrap().done), (None, false));
        assert_eq!((db.row("c").unwrap().result, db.row("c").unwrap().done), (None, false));
        // Bad input in one item changes nothing at all.
        let (status, body) = c.post("/v1/completions", json!({"completions": [
            {"job_id": "b", "owner": "A", "fence": fb, "result": "x"},
            {"job_id": "c", "owner": "", "fence": fc}]}));
        assert_eq!((status, body["field"].as_str()), (400, Some("completions[1].owner")), "{body}");
        assert!(!db.row("b").unwrap().done);
    }

    fn the_clock_is_the_one_that_judges_leases(db: &Db) {
        let server = Server::start(db);
        let c = server.client(None);
        c.enqueue("j");
        let (_, before) = c.get("/v1/clock");
        let (_, claimed) = c.post("/v1/claims", json!({"owner": "A", "ttl": 10}));
        let (_, after) = c.get("/v1/clock");
        let until = claimed["leases"][0]["until"].as_f64().unwrap();
        let (b, a) = (before["now"].as_f64().unwrap(), after["now"].as_f64().unwrap());
        assert!(b + 10.0 <= until && until <= a + 10.0, "{b} {until} {a}");
    }

    fn the_fence_gate_admits_only_rising_fences(db: &Db) {
        let server = Server::start(db);
        let c = server.client(None);
        assert_eq!(c.post("/v1/fences/bucket%2Freport.csv/admit", json!({"fence": 3})).0, 200);
        let (status, body) = c.post("/v1/fences/bucket%2Freport.csv/admit", json!({"fence": 2}));
        assert_eq!((status, body["reason"].as_str()), (409, Some("lower_fence")), "{body}");
        // An equal fence is admitted, so the refusal speaks of a higher one.
        assert!(body["message"].as_str().unwrap().contains("a higher fence was already admitted"), "{body}");
        assert_eq!(c.post("/v1/fences/bucket%2Freport.csv/admit", json!({"fence": 4})).0, 200);
        // A fence no claim hands out is bad input naming `fence`, not a stale one.
        for fence in [0, -7] {
            for resource in ["bucket%2Freport.csv", "fresh"] {
                let path = format!("/v1/fences/{resource}/admit");
                let (status, body) = c.post(&path, json!({ "fence": fence }));
                assert_eq!((status, body["field"].as_str()), (400, Some("fence")), "{body}");
            }
        }
        assert_eq!(c.post("/v1/fences/fresh/admit", json!({"fence": 1})).0, 200);
        let (status, body) = c.post("/v1/fences/bucket%2Freport.csv/admit", json!({"fence": 3}));
        assert_eq!((status, body["reason"].as_str()), (409, Some("lower_fence")), "{body}");
    }
}

#[test]
fn a_client_without_a_keep_alive_still_gets_its_answer() {
    // The whole story once through a fresh client per request.
    let db = Db::new(crate::support::Backend::Sqlite).unwrap();
    let server = Server::start(&db);
    Client::new(&server.url, None).enqueue("x");
    let f = Client::new(&server.url, None).claim("x", "A", 30.0);
    let (status, _) = Client::new(&server.url, None).post(
        "/v1/jobs/x/complete",
        json!({"owner": "A", "fence": f, "result": "r"}),
    );
    assert_eq!(status, 200);
    assert_eq!(db.row("x").unwrap().result.as_deref(), Some("r"));
}

// A claim by id of a job whose attempts budget is spent is refused as `attempts_spent` (not
// `leased`: its lease has expired), and the next claim buries it as dead.
backends! {
    fn a_claim_by_id_of_a_spent_job_says_so(db: &Db) {
        let server = Server::start(db);
        let c = server.client(None);
        assert_eq!(c.post("/v1/jobs", json!({"id": "h", "max_attempts": 1})).0, 201);
        let (status, got) = c.post("/v1/claims", json!({"owner": "A", "ttl": 0.05, "job_id": "h"}));
        assert_eq!((status, got["leases"][0]["fence"].as_i64()), (200, Some(1)), "{got}");
        // Its one attempt's lease ends: the job is dead by status, not yet buried.
        crate::support::wait_until("h's last lease expired", || {
            c.get("/v1/jobs/h").1["status"] == "dead"
        });
        let (status, refused) = c.post("/v1/claims", json!({"owner": "B", "ttl": 5, "job_id": "h"}));
        assert_eq!((status, refused["reason"].as_str()), (409, Some("attempts_spent")), "{refused}");
        assert_eq!(db.row("h").unwrap().fence, 1, "nothing changed");
        let (_, none) = c.post("/v1/claims", json!({"owner": "B", "ttl": 5}));
        assert_eq!(none["leases"].as_array().unwrap().len(), 0);
        assert!(db.row("h").unwrap().done, "buried by the claim");
    }
}

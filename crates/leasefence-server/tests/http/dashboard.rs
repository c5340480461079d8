//! The dashboard over HTTP, as a browser meets it: sign-in, read-only and admin access, CSRF,
//! every action's effect read back from the store through an independent connection, the
//! audit log, escaping of everything a user supplied, the security headers, and the job
//! search's pages. (The same pages in a real browser: `browser.rs`.)

use std::time::Duration;

use base64::Engine as _;
use leasefence::{AnyStore, JobId, NewJob, Now, Observe, Owner, Queue, Store, Ttl};
use leasefence_server::{ServerConfig, Token, Tokens};

use crate::support::{Backend, Db, Server, backends, wait_until};

pub const ADMIN: &str = "admin-token-0123456789abcdef";
pub const WORKER: &str = "worker-token-0123456789abcd";

pub fn tokens() -> Tokens {
    Tokens {
        worker: Some(Token::new(WORKER, "worker token").unwrap()),
        admin: Some(Token::new(ADMIN, "admin token").unwrap()),
    }
}

/// A store on the same database as the server, opened by the test: how it arranges a history
/// and reads effects back, never through the server.
pub fn direct(db: &Db) -> AnyStore {
    let mut options = leasefence::AnyOptions::new();
    if let Some(schema) = db.schema() {
        options = options.postgres(leasefence::PgOptions::new().schema(schema));
    }
    options.open(&db.db).unwrap()
}

/// `text` percent-encoded as one path segment, as the dashboard's links are.
pub fn enc(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The known history the dashboard tests (and the browser test) look at.
pub struct History {
    pub takeover: &'static str,
    pub xss_id: &'static str,
}

pub const XSS_ID: &str = "<script>alert('id')</script>";
pub const XSS_PAYLOAD: &str = "<img src=x onerror=alert('payload')>";
pub const XSS_ERROR: &str = "javascript:alert('error')";

fn job(id: &str) -> NewJob {
    NewJob::new(id).unwrap()
}

/// Arranges: a takeover whose stale write was refused (`report-1`), an expired lease
/// (`stuck`), a live one (`live`), a dead job in the paused queue `mail`, XSS payloads in an
/// id, a payload, a kind and an error, a binary payload, `ready` more ready jobs, and a fence
/// gate entry.
pub fn arrange(s: &AnyStore, ready: usize) -> History {
    let w = |o: &str| Owner::new(o).unwrap().as_str().to_owned();
    let t = || Now::system();
    let short = Ttl::new(0.3).unwrap();
    let long = Ttl::new(600.0).unwrap();
    s.enqueue_many(&[
        job("report-1").payload(b"make the monthly report".to_vec()),
        job("stuck"),
        job("live").kind("email").unwrap(),
        job("dead-1").queue("mail").unwrap().max_attempts(1),
        job(XSS_ID)
            .payload(XSS_PAYLOAD.as_bytes().to_vec())
            .kind("<b>k</b>")
            .unwrap()
            .max_attempts(1),
        job("binary").payload(vec![0, 1, 2, 0xff, b'A', b'B']),
    ])
    .unwrap();
    fn id(i: &str) -> JobId<'_> {
        JobId::new(i).unwrap()
    }
    // The takeover: a stalls past its lease, b takes over, a's late complete is refused.
    let a = s
        .claim(
            id("report-1"),
            Owner::new(&w("worker-a")).unwrap(),
            t(),
            short,
        )
        .unwrap()
        .unwrap();
    let stuck = s
        .claim(id("stuck"), Owner::new("worker-c").unwrap(), t(), short)
        .unwrap()
        .unwrap();
    wait_until("the short leases expired", || {
        s.inspect(id("stuck"), t()).unwrap().unwrap().status == leasefence::Status::Expired
    });
    let b = s
        .claim(id("report-1"), Owner::new("worker-b").unwrap(), t(), long)
        .unwrap()
        .unwrap();
    assert!(!s.complete_lease(&a, t(), "stale result from a").unwrap());
    assert!(s.complete_lease(&b, t(), "report by b").unwrap());
    assert_eq!(stuck.fence, 1);
    s.claim(id("live"), Owner::new("worker-d").unwrap(), t(), long)
        .unwrap()
        .unwrap();
    for dead in ["dead-1", XSS_ID] {
        let l = s
            .claim(id(dead), Owner::new("worker-e").unwrap(), t(), long)
            .unwrap()
            .unwrap();
        let error = if dead == XSS_ID {
            XSS_ERROR
        } else {
            "upstream 502"
        };
        s.fail(&l, t(), error, None).unwrap().unwrap();
    }
    s.pause(&Queue::new("mail").unwrap()).unwrap();
    let more: Vec<NewJob> = (0..ready).map(|i| job(&format!("ready-{i:04}"))).collect();
    for chunk in more.chunks(500) {
        s.enqueue_many(chunk).unwrap();
    }
    assert!(
        s.admit(leasefence::Resource::new("s3://bucket/report").unwrap(), 2)
            .unwrap()
    );
    History {
        takeover: "report-1",
        xss_id: XSS_ID,
    }
}

/// A browser-like client of the dashboard: no redirects followed, HTTP basic auth or a
/// session cookie, and an `Origin` on every POST.
pub struct Browser {
    agent: ureq::Agent,
    base: String,
    auth: Option<String>,
    cookie: Option<String>,
}

pub struct Answer {
    pub status: u16,
    pub body: String,
    pub headers: ureq::http::HeaderMap,
}

impl Answer {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// The CSRF token of the page (its `<meta name="csrf-token">`, on every page of a
    /// visitor who may act or sign out).
    pub fn csrf(&self) -> String {
        let tag = "<meta name=\"csrf-token\" content=\"";
        let at = self.body.find(tag).expect("a CSRF token");
        let rest = &self.body[at + tag.len()..];
        rest[..rest.find('"').unwrap()].to_owned()
    }
}

impl Browser {
    pub fn new(server: &Server, basic: Option<&str>) -> Browser {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        Browser {
            agent,
            base: server.url.clone(),
            auth: basic.map(|t| {
                format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(format!("tester:{t}"))
                )
            }),
            cookie: None,
        }
    }

    fn send(&mut self, resp: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Answer {
        let mut resp = resp.expect("the request reached the server");
        let headers = resp.headers().clone();
        if let Some(set) = headers.get("set-cookie").and_then(|v| v.to_str().ok()) {
            let pair = set.split(';').next().unwrap_or("").to_owned();
            self.cookie = (!pair.ends_with('=')).then_some(pair);
        }
        Answer {
            status: resp.status().as_u16(),
            body: resp.body_mut().read_to_string().unwrap_or_default(),
            headers,
        }
    }

    pub fn get(&mut self, path: &str) -> Answer {
        self.get_with(path, None)
    }

    /// A GET as a browser tells where the navigation came from (`Sec-Fetch-Site`):
    /// `same-origin` after one of the dashboard's own forms, `cross-site` for a link on
    /// another site.
    pub fn get_from(&mut self, path: &str, site: &str) -> Answer {
        self.get_with(path, Some(site))
    }

    fn get_with(&mut self, path: &str, site: Option<&str>) -> Answer {
        let mut req = self.agent.get(&format!("{}{path}", self.base));
        if let Some(site) = site {
            req = req.header("Sec-Fetch-Site", site);
        }
        if let Some(a) = &self.auth {
            req = req.header("Authorization", a);
        }
        if let Some(c) = &self.cookie {
            req = req.header("Cookie", c);
        }
        let resp = req.call();
        self.send(resp)
    }

    pub fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Answer {
        self.post_from(path, form, &self.base.clone())
    }

    pub fn post_from(&mut self, path: &str, form: &[(&str, &str)], origin: &str) -> Answer {
        let mut req = self
            .agent
            .post(&format!("{}{path}", self.base))
            .header("Origin", origin);
        if let Some(a) = &self.auth {
            req = req.header("Authorization", a);
        }
        if let Some(c) = &self.cookie {
            req = req.header("Cookie", c);
        }
        let resp = req.send_form(form.iter().copied());
        self.send(resp)
    }

    /// An action confirmed: the first POST's confirmation page, then its form sent.
    pub fn act(&mut self, path: &str) -> Answer {
        self.act_with(path, &[])
    }

    /// [`act`](Self::act) with more fields in both posts (a release's `fence`), which the
    /// confirmation page must carry on.
    pub fn act_with(&mut self, path: &str, more: &[(&str, &str)]) -> Answer {
        let csrf = self.get("/dashboard").csrf();
        let mut form = vec![("csrf", csrf.as_str())];
        form.extend_from_slice(more);
        let confirm = self.post(path, &form);
        assert_eq!(confirm.status, 200, "{}", confirm.body);
        assert!(
            confirm.body.contains("name=\"confirmed\" value=\"yes\""),
            "{}",
            confirm.body
        );
        for (name, value) in more {
            assert!(
                confirm
                    .body
                    .contains(&format!("name=\"{name}\" value=\"{value}\"")),
                "the confirmation page drops {name}: {}",
                confirm.body
            );
        }
        form.push(("confirmed", "yes"));
        self.post(path, &form)
    }
}

/// The CSRF token of the visitor's pages.
pub fn csrf_of(b: &mut Browser) -> String {
    b.get("/dashboard").csrf()
}

/// The page's "Next page" link, unescaped.
pub fn next_link(body: &str) -> Option<String> {
    let end = body.find("\" rel=\"next\"")?;
    let start = body[..end].rfind("href=\"")? + 6;
    Some(body[start..end].replace("&#38;", "&"))
}

fn server(db: &Db) -> Server {
    Server::with(
        db,
        ServerConfig {
            tokens: tokens(),
            ..ServerConfig::default()
        },
    )
}

backends! {
    fn pages_need_a_token_and_the_worker_token_only_reads(db: &Db) {
        let s = direct(db);
        arrange(&s, 5);
        let srv = server(db);
        let mut anon = Browser::new(&srv, None);
        let r = anon.get("/dashboard/jobs?status=dead");
        assert_eq!(r.status, 303);
        assert_eq!(r.header("location"), "/dashboard/login?next=%2Fdashboard%2Fjobs%3Fstatus%3Ddead");
        let login = anon.get("/dashboard/login");
        assert_eq!(login.status, 200);
        assert!(login.body.contains("type=\"password\""));
        assert_eq!(anon.post("/dashboard/jobs/live/cancel", &[("csrf", "x")]).status, 401);
        // A wrong token is refused, and never shown.
        let mut wrong = Browser::new(&srv, Some("not-a-token-of-this-server"));
        assert_eq!(wrong.get("/dashboard").status, 303);
        // The worker token reads every page...
        let mut worker = Browser::new(&srv, Some(WORKER));
        for page in ["/dashboard", "/dashboard/jobs", "/dashboard/jobs/live", "/dashboard/queues",
                     "/dashboard/schedules", "/dashboard/fences", "/dashboard/audit"] {
            let r = worker.get(page);
            assert_eq!(r.status, 200, "{page}: {}", r.body);
            assert!(r.body.contains("read-only"), "{page}");
            assert!(!r.body.contains(WORKER) && !r.body.contains(ADMIN), "{page} shows a token");
        }
        // ... shows no action, and every action is refused with nothing changed.
        let job = worker.get("/dashboard/jobs/live");
        assert!(!job.body.contains("/dashboard/jobs/live/cancel"));
        for action in ["cancel", "retry", "delete", "release"] {
            let r = worker.post(&format!("/dashboard/jobs/live/{action}"), &[("csrf", "x"), ("confirmed", "yes")]);
            assert_eq!(r.status, 403, "{action}");
            assert!(r.body.contains("needs the admin token"), "{}", r.body);
        }
        let r = worker.post("/dashboard/queues/mail/resume", &[("confirmed", "yes")]);
        assert_eq!(r.status, 403);
        let live = db.row("live").unwrap();
        assert_eq!((live.owner.as_deref(), live.done), (Some("worker-d"), false));
        assert!(s.queues(Now::system()).unwrap().iter().any(|q| q.name == "mail" && q.paused));
        assert!(s.audit_log(None, 10).unwrap().is_empty());
    }

    fn a_session_from_the_login_form_acts_and_ends(db: &Db) {
        let s = direct(db);
        arrange(&s, 0);
        let srv = server(db);
        let mut b = Browser::new(&srv, None);
        let bad = b.post("/dashboard/login", &[("user", "ann"), ("token", "wrong-wrong-wrong-wrong"), ("next", "/dashboard/queues")]);
        assert_eq!(bad.status, 401);
        assert!(b.cookie.is_none());
        let ok = b.post("/dashboard/login", &[("user", "ann"), ("token", ADMIN), ("next", "/dashboard/queues")]);
        assert_eq!((ok.status, ok.header("location")), (303, "/dashboard/queues"));
        let cookie = ok.header("set-cookie").to_owned();
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
        assert!(!cookie.contains(ADMIN));
        let queues = b.get("/dashboard/queues");
        assert_eq!(queues.status, 200);
        assert!(queues.body.contains("ann from 127.0.0.1") && queues.body.contains(">admin<"));
        let r = b.act("/dashboard/queues/mail/resume");
        assert_eq!((r.status, r.header("location")), (303, "/dashboard/queues?done=resume&ok=1&n=0"));
        assert!(!s.queues(Now::system()).unwrap().iter().any(|q| q.paused));
        let log = s.audit_log(None, 10).unwrap();
        assert_eq!((log[0].actor.as_str(), log[0].action.as_str(), log[0].target.as_str()),
                   ("ann from 127.0.0.1", "resume", "queue mail"));
        // A next that leaves the dashboard is not followed.
        let mut c = Browser::new(&srv, None);
        let away = c.post("/dashboard/login", &[("token", ADMIN), ("next", "https://evil.example/")]);
        assert_eq!(away.header("location"), "/dashboard");
        // Sign out: the session is gone.
        let csrf = b.get("/dashboard").csrf();
        assert_eq!(b.post("/dashboard/logout", &[("csrf", &csrf)]).status, 303);
        assert_eq!(b.get("/dashboard").status, 303);
    }

    fn every_action_goes_through_the_library_and_is_audited(db: &Db) {
        let s = direct(db);
        arrange(&s, 0);
        let srv = server(db);
        let mut b = Browser::new(&srv, Some(ADMIN));
        let id = JobId::new;
        // release: only the expired lease, under its own owner and fence
        let r = b.act_with("/dashboard/jobs/stuck/release", &[("fence", "1")]);
        assert_eq!(r.header("location"), "/dashboard/jobs/stuck?done=release&ok=1");
        let stuck = db.row("stuck").unwrap();
        assert_eq!((stuck.owner, stuck.fence, stuck.until), (None, 1, 0.0));
        let r = b.act_with("/dashboard/jobs/live/release", &[("fence", "1")]);
        assert_eq!(r.header("location"), "/dashboard/jobs/live?done=release&ok=0");
        assert_eq!(db.row("live").unwrap().owner.as_deref(), Some("worker-d"), "a live lease is kept");
        // cancel: the holder's complete is refused afterwards
        assert_eq!(b.act("/dashboard/jobs/live/cancel").header("location"), "/dashboard/jobs/live?done=cancel&ok=1");
        let live = db.row("live").unwrap();
        assert!(live.done);
        let lease = s.inspect(id("live").unwrap(), Now::system()).unwrap().unwrap();
        assert!(!s.complete(id("live").unwrap(), Owner::new("worker-d").unwrap(), lease.state.fence, Now::system(), "late").unwrap());
        // retry the cancelled job: ready again, the fence goes on
        assert_eq!(b.act("/dashboard/jobs/live/retry").header("location"), "/dashboard/jobs/live?done=retry&ok=1");
        assert!(!db.row("live").unwrap().done);
        let again = s.claim(id("live").unwrap(), Owner::new("w2").unwrap(), Now::system(), Ttl::new(5.0).unwrap()).unwrap().unwrap();
        assert_eq!(again.fence, 2);
        // retry every dead job of a queue
        let r = b.act("/dashboard/queues/mail/retry-dead");
        assert_eq!(r.header("location"), "/dashboard/queues?done=retry_dead&ok=1&n=1");
        assert!(!db.row("dead-1").unwrap().done);
        assert!(db.row(XSS_ID).unwrap().done, "another queue's dead job stays dead");
        // pause, then delete: the fence floor keeps the id's fences
        assert_eq!(b.act("/dashboard/queues/reports/pause").header("location"), "/dashboard/queues?done=pause&ok=1&n=0");
        assert!(s.queues(Now::system()).unwrap().iter().any(|q| q.name == "reports" && q.paused));
        assert_eq!(b.act("/dashboard/jobs/report-1/delete").header("location"), "/dashboard/jobs?done=delete&ok=1");
        assert!(db.row("report-1").is_none());
        s.enqueue_job(job("report-1")).unwrap();
        let next = s.claim(id("report-1").unwrap(), Owner::new("w3").unwrap(), Now::system(), Ttl::new(5.0).unwrap()).unwrap().unwrap();
        assert_eq!(next.fence, 3, "above the deleted job's fences");
        // every action is in the audit log, newest first
        let log = s.audit_log(None, 20).unwrap();
        let seen: Vec<(&str, &str, &str)> = log.iter().rev().map(|e| (e.action.as_str(), e.target.as_str(), e.result.as_str())).collect();
        assert_eq!(&seen[..2], [("release", "job stuck", "released the lease of worker-c under fence 1"),
                                ("release", "job live", "refused: the lease is live; only an expired lease is released here")]);
        assert_eq!(seen.iter().map(|e| e.0).collect::<Vec<_>>(),
                   ["release", "release", "cancel", "retry", "retry_dead", "pause", "delete"]);
        assert!(log.iter().all(|e| e.actor == "tester from 127.0.0.1"));
        let page = b.get("/dashboard/audit");
        assert!(page.body.contains("released the lease of worker-c under fence 1"));
    }

    fn notices_say_the_real_reason_and_pages_offer_and_show_what_is_so(db: &Db) {
        // A refused action's notice says why (a unique key held by another job, a job gone), only
        // after the dashboard's own form (a link from elsewhere shows none); the job page offers
        // only what the job can take and shows every refused write; the audit log links to the
        // exact job; the overview says what paused queues hold back.
        let s = direct(db);
        let srv = server(db);
        let mut b = Browser::new(&srv, Some(ADMIN));
        let (id, t) = (|i| JobId::new(i).unwrap(), Now::system);
        let keyed = |i: &str| job(i).queue("uq").unwrap().unique_key("K").unwrap().max_attempts(1);
        s.enqueue_many(&[keyed("uk-1")]).unwrap();
        let l = s.claim(id("uk-1"), Owner::new("o").unwrap(), t(), Ttl::new(30.0).unwrap()).unwrap().unwrap();
        s.fail(&l, t(), "nope", None).unwrap();
        s.enqueue_many(&[keyed("uk-2")]).unwrap();
        // retry of a dead job whose key another unfinished job holds
        let r = b.act("/dashboard/jobs/uk-1/retry");
        assert_eq!((r.status, r.header("location")), (303, "/dashboard/jobs/uk-1?done=retry&ok=0&why=duplicate"));
        let page = b.get_from("/dashboard/jobs/uk-1?done=retry&ok=0&why=duplicate", "same-origin");
        assert!(page.body.contains("Not retried: another unfinished job of its queue holds its unique key."), "{}", page.body);
        assert!(db.row("uk-1").unwrap().done, "still dead");
        let log = s.audit_log(None, 1).unwrap();
        assert_eq!((log[0].action.as_str(), log[0].result.as_str()),
                   ("retry", "refused: another unfinished job of its queue holds its unique key"));
        let r = b.act("/dashboard/queues/uq/retry-dead");
        assert_eq!(r.header("location"), "/dashboard/queues?done=retry_dead&ok=1&n=0&why=duplicate");
        let page = b.get_from(r.header("location"), "same-origin");
        assert!(page.body.contains("Retried 0 dead jobs of the queue. Some stay dead"), "{}", page.body);
        // a link from elsewhere (or a typed one) cannot make a page claim something was done
        for site in ["cross-site", "none"] {
            let forged = b.get_from("/dashboard/jobs/uk-2?done=delete&ok=1", site);
            assert_eq!(forged.status, 200);
            assert!(!forged.body.contains("class=\"notice\""), "{site}: {}", forged.body);
        }
        // an action on a job that is gone ends on the job list, saying so
        let r = b.act("/dashboard/jobs/gone-1/cancel");
        assert_eq!(r.header("location"), "/dashboard/jobs?done=cancel&ok=0&why=gone");
        let page = b.get_from(r.header("location"), "same-origin");
        assert_eq!(page.status, 200);
        assert!(page.body.contains("there is no such job"), "{}", page.body);
        // the scheduler role's job: only deleted from here
        s.enqueue(id(leasefence::SCHEDULER_JOB)).unwrap();
        let page = b.get("/dashboard/jobs/leasefence.scheduler");
        assert!(!page.body.contains("/dashboard/jobs/leasefence.scheduler/cancel"), "{}", page.body);
        assert!(page.body.contains("/dashboard/jobs/leasefence.scheduler/delete"), "{}", page.body);
        // writes refused under a fence no attempt had: a never-claimed job's, a later fence's
        s.enqueue(id("story-1")).unwrap();
        assert!(!s.complete(id("story-1"), Owner::new("mallory").unwrap(), 0, t(), "x").unwrap());
        let page = b.get("/dashboard/jobs/story-1");
        assert!(page.body.contains("refused under fence 0 (no attempt of this job has it): <strong>complete</strong> × 1"), "{}", page.body);
        let l = s.claim(id("story-1"), Owner::new("A").unwrap(), t(), Ttl::new(30.0).unwrap()).unwrap().unwrap();
        assert!(!s.renew(id("story-1"), Owner::new("A").unwrap(), l.fence + 2, t(), Ttl::new(5.0).unwrap()).unwrap());
        let page = b.get("/dashboard/jobs/story-1");
        assert!(page.body.contains("refused under fence 3 (no attempt of this job has it): <strong>renew</strong> × 1"), "{}", page.body);
        assert!(page.body.contains("refused under fence 0 (no attempt"), "{}", page.body);
        // the audit log links to the exact job, backslash (and, where it can be stored, NUL)
        let mut odd = vec!["back\\slash\\0"];
        if db.backend == Backend::Sqlite {
            odd.push("nul\0id");
        }
        for odd_id in odd {
            s.enqueue(id(odd_id)).unwrap();
            let r = b.act(&format!("/dashboard/jobs/{}/cancel", enc(odd_id)));
            assert_eq!(r.status, 303);
            let audit = b.get("/dashboard/audit");
            assert!(audit.body.contains(&format!("href=\"/dashboard/jobs/{}\"", enc(odd_id))), "{odd_id:?}: {}", audit.body);
            assert!(db.row(odd_id).unwrap().done);
        }
        // the overview: what paused queues hold back, and the grand total
        assert!(s.pause(&Queue::new("uq").unwrap()).unwrap());
        let page = b.get("/dashboard");
        assert!(page.body.contains("claimable now, but 1 in paused queues"), "{}", page.body);
        assert!(page.body.contains("job uk-2, of the paused queue uq"), "{}", page.body);
        // the light poll carries the same notes, so a page left open follows a pause or resume
        let live = |b: &mut Browser| serde_json::from_str::<serde_json::Value>(&b.get("/dashboard/live").body).unwrap();
        assert_eq!(live(&mut b)["totals"]["ready_note"], "claimable now, but 1 in paused queues");
        assert_eq!(live(&mut b)["oldest_ready_age_note"], "job uk-2, of the paused queue uq");
        assert!(s.resume(&Queue::new("uq").unwrap()).unwrap());
        assert_eq!(live(&mut b)["totals"]["ready_note"], "claimable now");
        assert_eq!(live(&mut b)["oldest_ready_age_note"], "job uk-2");
        assert!(s.pause(&Queue::new("uq").unwrap()).unwrap());
        let total = s.stats(t()).unwrap().total();
        assert!(page.body.contains(&format!("data-live=\"totals.total\">{total}<")), "{}", page.body);
        // an id prefix lists by id, and the order select says so
        let page = b.get("/dashboard/jobs?id=uk&order=oldest");
        assert!(page.body.contains("<option value=\"\" selected>by id (an id prefix)</option>"), "{}", page.body);
        assert!(page.body.contains("<caption>Jobs, by id (an id prefix)</caption>"), "no order to toggle: {}", page.body);
    }

    fn a_forged_or_confirmless_post_changes_nothing(db: &Db) {
        let s = direct(db);
        arrange(&s, 0);
        let srv = server(db);
        let mut b = Browser::new(&srv, Some(ADMIN));
        let csrf = csrf_of(&mut b);
        let r = b.post("/dashboard/jobs/live/cancel", &[("confirmed", "yes")]);
        assert_eq!(r.status, 403, "no CSRF token");
        let r = b.post("/dashboard/jobs/live/cancel", &[("csrf", "0123"), ("confirmed", "yes")]);
        assert_eq!(r.status, 403, "a wrong one");
        let r = b.post_from("/dashboard/jobs/live/cancel", &[("csrf", &csrf), ("confirmed", "yes")], "http://evil.example");
        assert_eq!(r.status, 403, "another site's page");
        let r = b.post("/dashboard/jobs/live/cancel", &[("csrf", &csrf)]);
        assert_eq!(r.status, 200, "unconfirmed: the confirmation page");
        assert!(r.body.contains("Cancel job live?"));
        assert!(!db.row("live").unwrap().done);
        assert_eq!(b.post("/dashboard/jobs/live/explode", &[("csrf", &csrf)]).status, 404);
        // A field that does not parse gets the dashboard's own page, not the framework's text.
        for fence in ["", "abc"] {
            let r = b.post("/dashboard/jobs/live/release", &[("csrf", &csrf), ("confirmed", "yes"), ("fence", fence)]);
            assert_eq!(r.status, 400, "fence={fence:?}: {}", r.body);
            assert!(r.header("content-type").starts_with("text/html"), "{}", r.header("content-type"));
            assert!(r.body.contains("the form could not be read") && r.body.contains("fence"), "{}", r.body);
        }
        let row = db.row("live").unwrap();
        assert!(!row.done && row.owner.is_some(), "the lease is still held: {row:?}");
        // An address that is no dashboard page: its own 404 page, with the way back.
        for path in ["/dashboard/nope", "/dashboard/jobs/live/cancel/more"] {
            let r = b.get(path);
            assert_eq!(r.status, 404, "{path}");
            assert!(r.header("content-type").starts_with("text/html"), "{path}: {}", r.header("content-type"));
            assert!(r.body.contains("href=\"/dashboard\""), "{path}: {}", r.body);
            assert_eq!(r.header("x-frame-options"), "DENY", "{path}");
        }
        assert!(s.audit_log(None, 10).unwrap().is_empty());
    }

    fn what_users_supplied_is_escaped_and_the_headers_are_strict(db: &Db) {
        let s = direct(db);
        let h = arrange(&s, 0);
        let srv = server(db);
        let mut b = Browser::new(&srv, Some(WORKER));
        let href = format!("/dashboard/jobs/{}", enc(h.xss_id));
        for page in ["/dashboard/jobs", "/dashboard/jobs?status=dead", &href, "/dashboard"] {
            let r = b.get(page);
            assert_eq!(r.status, 200, "{page}");
            for raw in ["<script>alert", "<img src=x", "<b>k</b>", "href=\"javascript:"] {
                assert!(!r.body.contains(raw), "{page} holds {raw}");
            }
            assert!(r.header("content-security-policy").contains("script-src 'self'"));
            assert_eq!(r.header("x-content-type-options"), "nosniff");
            assert_eq!(r.header("x-frame-options"), "DENY");
        }
        let job = b.get(&href);
        // askama escapes < > & " ' as numeric references
        assert!(job.body.contains("&#60;script&#62;alert(&#39;id&#39;)&#60;/script&#62;"), "{}", job.body);
        assert!(job.body.contains("&#60;img src=x onerror=alert(&#39;payload&#39;)&#62;"));
        assert!(job.body.contains("&#60;b&#62;k&#60;/b&#62;"));
        assert!(job.body.contains("javascript:alert(")); // as text in a <pre>, never a link
        // a binary payload is shown as hex, and downloads as itself
        let bin = b.get("/dashboard/jobs/binary");
        assert!(bin.body.contains("00 01 02 ff 41 42"), "{}", bin.body);
        let dl = b.get("/dashboard/jobs/binary/payload");
        assert_eq!(dl.header("content-type"), "application/octet-stream");
        assert!(dl.header("content-disposition").starts_with("attachment; filename=\"binary.payload\""));
    }

    fn hidden_payloads_are_neither_shown_nor_served(db: &Db) {
        let s = direct(db);
        arrange(&s, 0);
        let srv = Server::with(db, ServerConfig { tokens: tokens(), hide_payloads: true, ..ServerConfig::default() });
        let mut b = Browser::new(&srv, Some(ADMIN));
        let page = b.get("/dashboard/jobs/report-1");
        assert!(!page.body.contains("make the monthly report") && !page.body.contains("report by b"));
        assert!(page.body.contains("Hidden on this server (23 bytes)"), "{}", page.body);
        assert_eq!(b.get("/dashboard/jobs/report-1/payload").status, 403);
        assert_eq!(b.get("/dashboard/jobs/report-1/result").status, 403);
    }

    fn the_timeline_shows_each_fence_and_the_stale_write_it_refused(db: &Db) {
        let s = direct(db);
        let h = arrange(&s, 0);
        let srv = server(db);
        let mut b = Browser::new(&srv, Some(WORKER));
        let page = b.get(&format!("/dashboard/jobs/{}", h.takeover));
        assert_eq!(page.status, 200);
        let first = page.body.find("fence 1</strong> · worker-a").expect("fence 1 on the timeline");
        let second = page.body.find("fence 2</strong> · worker-b").expect("fence 2 on the timeline");
        assert!(first < second);
        let refused = page.body.find("refused under this fence: <strong>complete</strong> × 1").expect("the refusal");
        assert!(first < refused && refused < second, "under fence 1");
        assert!(page.body.contains(">lost<") && page.body.contains(">completed<"));
        assert!(page.body.contains("report by b"));
        // the overview counts the refusal
        let overview = b.get("/dashboard");
        assert!(overview.body.contains("Stale writes refused, last hour</span>\n        <span class=\"value\" data-live=\"refused_last_hour\">1</span>"), "{}", overview.body);
        let live = b.get("/dashboard/live");
        let v: serde_json::Value = serde_json::from_str(&live.body).unwrap();
        assert_eq!((v["refused_total"].as_str(), v["totals"]["dead"].as_str(), v["totals"]["expired"].as_str()), (Some("1"), Some("2"), Some("1")));
        assert_eq!(v["queues"]["mail"]["dead"], "1");
        // an unknown job is a 404 page
        let missing = b.get("/dashboard/jobs/nope");
        assert_eq!(missing.status, 404);
        assert!(missing.body.contains("no such job"));
    }

    fn the_job_search_filters_and_pages_through_every_job_once(db: &Db) {
        let s = direct(db);
        arrange(&s, 120);
        let srv = server(db);
        let mut b = Browser::new(&srv, Some(WORKER));
        let mut seen = Vec::new();
        let mut path = "/dashboard/jobs?status=ready&order=oldest&limit=50".to_owned();
        for _ in 0..10 {
            let page = b.get(&path);
            assert_eq!(page.status, 200);
            for part in page.body.split("class=\"id\">").skip(1) {
                seen.push(part[..part.find('<').unwrap()].to_owned());
            }
            match next_link(&page.body) {
                Some(next) => path = next,
                None => break,
            }
        }
        // stuck's lease expired: expired, not ready
        let want: Vec<String> = ["binary".to_owned()].into_iter()
            .chain((0..120).map(|i| format!("ready-{i:04}"))).collect();
        let mut got = seen.clone();
        got.sort();
        let mut want_sorted = want.clone();
        want_sorted.sort();
        assert_eq!(got, want_sorted, "every ready job once");
        assert_eq!(seen.len(), want.len(), "none twice");
        // filters by queue, kind, owner and id prefix
        let one = |b: &mut Browser, q: &str| b.get(&format!("/dashboard/jobs?{q}")).body;
        assert!(one(&mut b, "queue=mail").contains(">dead-1<"));
        assert!(one(&mut b, "kind=email").contains(">live<"));
        assert!(one(&mut b, "owner=worker-b").contains(">report-1<"));
        let prefix = one(&mut b, "id=ready-011");
        assert_eq!(prefix.matches("class=\"id\">").count(), 10);
        // bad input names the field
        let bad = b.get("/dashboard/jobs?status=bogus");
        assert_eq!(bad.status, 400);
        assert!(bad.body.contains("invalid `status`"), "{}", bad.body);
        assert_eq!(b.get("/dashboard/jobs?limit=0").status, 400);
        assert_eq!(b.get("/dashboard/jobs?after=zz").status, 400);
    }

    // A filter few jobs match fills its first page from further windows: the one dead job
    // behind 12,000 newer ones (more than one window of 10,000) is on the first page, not
    // after a *Next page* past an empty one; and with a limit of one, the next page goes on
    // from there without skipping or repeating a job.
    fn a_sparse_filter_fills_its_first_page_from_further_windows(db: &Db) {
        let s = direct(db);
        s.enqueue_many(&[job("dead-old").max_attempts(1), job("dead-older").max_attempts(1)]).unwrap();
        for id in ["dead-older", "dead-old"] {
            let l = s.claim(JobId::new(id).unwrap(), Owner::new("w").unwrap(), Now::system(), Ttl::new(30.0).unwrap())
                .unwrap().unwrap();
            s.fail(&l, Now::system(), "boom", None).unwrap();
        }
        let newer: Vec<NewJob> = (0..12_000).map(|i| job(&format!("newer-{i:05}"))).collect();
        s.enqueue_many(&newer).unwrap();
        let srv = server(db);
        let mut b = Browser::new(&srv, Some(WORKER));
        let page = b.get("/dashboard/jobs?status=dead");
        assert_eq!(page.status, 200);
        assert_eq!(page.body.matches("class=\"id\">dead-old").count(), 2, "{}", page.body);
        let first = b.get("/dashboard/jobs?status=dead&limit=1");
        let ids: Vec<&str> = first.body.split("class=\"id\">").skip(1).map(|p| &p[..p.find('<').unwrap()]).collect();
        assert_eq!(ids.len(), 1, "{}", first.body);
        let next = next_link(&first.body).expect("a next page");
        let second = b.get(&next);
        let more: Vec<&str> = second.body.split("class=\"id\">").skip(1).map(|p| &p[..p.find('<').unwrap()]).collect();
        assert_eq!(more.len(), 1, "{}", second.body);
        let mut both = [ids[0], more[0]];
        both.sort();
        assert_eq!(both, ["dead-old", "dead-older"]);
        // matches in the first window and the third, none in the second: the page is filled
        // from both (the limit carried over from window to window, never below zero)
        let fail_all = |ids: &[String]| {
            s.enqueue_many(&ids.iter().map(|i| job(i).max_attempts(1)).collect::<Vec<_>>()).unwrap();
            for id in ids {
                let l = s.claim(JobId::new(id).unwrap(), Owner::new("w").unwrap(), Now::system(), Ttl::new(30.0).unwrap())
                    .unwrap().unwrap();
                s.fail(&l, Now::system(), "boom", None).unwrap();
            }
        };
        fail_all(&(0..28).map(|i| format!("far-{i:02}")).collect::<Vec<_>>());
        let between: Vec<NewJob> = (0..10_000).map(|i| job(&format!("between-{i:05}"))).collect();
        s.enqueue_many(&between).unwrap();
        fail_all(&(0..30).map(|i| format!("near-{i:02}")).collect::<Vec<_>>());
        let page = b.get("/dashboard/jobs?status=dead&limit=50");
        assert_eq!(page.status, 200, "{}", page.body);
        assert_eq!(page.body.matches("class=\"id\">near-").count(), 30, "{}", page.body);
        assert_eq!(page.body.matches("class=\"id\">far-").count(), 20, "{}", page.body);
    }
}

#[test]
fn an_open_server_lets_loopback_act_with_the_csrf_token_still_required() {
    let db = Db::new(Backend::Sqlite).unwrap();
    let s = direct(&db);
    arrange(&s, 0);
    let srv = Server::start(&db);
    let mut b = Browser::new(&srv, None);
    let page = b.get("/dashboard/queues");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("open (no tokens set)"));
    assert_eq!(
        b.post("/dashboard/jobs/live/cancel", &[("confirmed", "yes")])
            .status,
        403
    );
    let r = b.act("/dashboard/jobs/live/cancel");
    assert_eq!(r.status, 303);
    assert!(db.row("live").unwrap().done);
    assert_eq!(
        s.audit_log(None, 1).unwrap()[0].actor,
        "local from 127.0.0.1"
    );
}

backends! {
    // An id and an owner of the longest length (`MAX_KEY_LEN` bytes) still fit the audit log
    // with the words around them: the release is done and audited, not done and then an error.
    fn an_action_on_the_longest_id_and_owner_is_audited(db: &Db) {
        let s = direct(db);
        let long_id = "j".repeat(leasefence::MAX_KEY_LEN);
        let long_owner = "o".repeat(leasefence::MAX_KEY_LEN);
        s.enqueue_job(job(&long_id)).unwrap();
        let past = Now::new(Now::system().seconds() - 100.0).unwrap();
        let lease = s
            .claim(JobId::new(&long_id).unwrap(), Owner::new(&long_owner).unwrap(), past, Ttl::new(10.0).unwrap())
            .unwrap()
            .unwrap();
        let srv = server(db);
        let mut b = Browser::new(&srv, Some(ADMIN));
        let fence = lease.fence.to_string();
        let r = b.act_with(&format!("/dashboard/jobs/{long_id}/release"), &[("fence", &fence)]);
        assert_eq!(r.header("location"), format!("/dashboard/jobs/{long_id}?done=release&ok=1"));
        let row = db.row(&long_id).unwrap();
        assert_eq!((row.owner, row.fence), (None, lease.fence), "released under its own fence");
        let log = s.audit_log(None, 10).unwrap();
        let seen: Vec<(&str, &str, &str)> =
            log.iter().map(|e| (e.action.as_str(), e.target.as_str(), e.result.as_str())).collect();
        assert_eq!(
            seen,
            [(
                "release",
                format!("job {long_id}").as_str(),
                format!("released the lease of {long_owner} under fence 1").as_str()
            )]
        );
    }
}

backends! {
    // A job id as long as the backend takes (PostgreSQL: 2048 bytes, SQLite: any) and an owner
    // longer than the audit log's field: the action is done, so it must be answered as done
    // and recorded — not done, then a 400 saying "nothing was changed" and no audit entry.
    fn an_action_on_an_id_or_owner_longer_than_an_audit_field_is_done_and_audited(db: &Db) {
        let s = direct(db);
        let long_id = "j".repeat(leasefence::PgStore::MAX_KEY_BYTES);
        let stuck_id = "stuck-long-owner";
        let long_owner = "o".repeat(leasefence::MAX_AUDIT_LEN + 10);
        s.enqueue_job(job(&long_id)).unwrap();
        s.enqueue_job(job(stuck_id)).unwrap();
        let past = Now::new(Now::system().seconds() - 100.0).unwrap();
        let lease = s
            .claim(JobId::new(stuck_id).unwrap(), Owner::new(&long_owner).unwrap(), past, Ttl::new(10.0).unwrap())
            .unwrap()
            .unwrap();
        let srv = server(db);
        let mut b = Browser::new(&srv, Some(ADMIN));
        let r = b.act(&format!("/dashboard/jobs/{long_id}/cancel"));
        assert_eq!(r.status, 303, "{}", r.body);
        assert_eq!(r.header("location"), format!("/dashboard/jobs/{long_id}?done=cancel&ok=1"));
        assert!(db.row(&long_id).unwrap().done, "cancelled");
        let fence = lease.fence.to_string();
        let r = b.act_with(&format!("/dashboard/jobs/{stuck_id}/release"), &[("fence", &fence)]);
        assert_eq!(r.status, 303, "{}", r.body);
        assert_eq!(r.header("location"), format!("/dashboard/jobs/{stuck_id}?done=release&ok=1"));
        assert_eq!(db.row(stuck_id).unwrap().owner, None, "released");
        let log = s.audit_log(None, 10).unwrap();
        let seen: Vec<(&str, bool, bool)> = log
            .iter()
            .rev()
            .map(|e| {
                let fits = e.target.len() <= leasefence::MAX_AUDIT_LEN && e.result.len() <= leasefence::MAX_AUDIT_LEN;
                (e.action.as_str(), fits, e.target.starts_with("job j") || e.result.starts_with("released the lease of ooo"))
            })
            .collect();
        assert_eq!(seen, [("cancel", true, true), ("release", true, true)]);
    }
}

// SQLite keeps a NUL in an id (PostgreSQL refuses such an id): the audit log's fields take
// none, yet an action on that job is done, so it is answered as done and recorded.
#[test]
fn an_action_on_an_id_holding_a_nul_is_done_and_audited() {
    let db = Db::new(Backend::Sqlite).unwrap();
    let s = direct(&db);
    let id = "nul\0id";
    s.enqueue_job(job(id)).unwrap();
    let srv = server(&db);
    let mut b = Browser::new(&srv, Some(ADMIN));
    let r = b.act(&format!("/dashboard/jobs/{}/cancel", enc(id)));
    assert_eq!(r.status, 303, "{}", r.body);
    assert!(db.row(id).unwrap().done, "cancelled");
    let log = s.audit_log(None, 10).unwrap();
    assert_eq!(log.len(), 1, "the cancel is in the audit log");
    assert_eq!(
        (log[0].action.as_str(), log[0].result.as_str()),
        ("cancel", "cancelled")
    );
}

backends! {
    // The action is the library's call and commits on its own; its audit record is written
    // after it. When that write fails (here: the audit table is gone), the visitor must not be
    // told the generic "nothing was written, retry" or "internal error" about a job that was
    // cancelled: the page says it was done and not recorded, and the server's log keeps the
    // record.
    fn an_action_whose_audit_record_fails_says_it_was_done(db: &Db) {
        let s = direct(db);
        s.enqueue_job(job("to-cancel")).unwrap();
        let srv = server(db);
        let mut b = Browser::new(&srv, Some(ADMIN));
        let csrf = b.get("/dashboard").csrf();
        match db.schema() {
            None => rusqlite::Connection::open(&db.db).unwrap().execute_batch("DROP TABLE audit").unwrap(),
            Some(schema) => leasefence::postgres::Client::connect(&db.db, leasefence::postgres::NoTls)
                .unwrap()
                .batch_execute(&format!("DROP TABLE {schema}.audit"))
                .unwrap(),
        }
        let r = b.post("/dashboard/jobs/to-cancel/cancel", &[("csrf", &csrf), ("confirmed", "yes")]);
        assert!(db.row("to-cancel").unwrap().done, "the cancel took effect");
        assert_eq!(r.status, 500, "{}", r.body);
        assert!(r.body.contains("cancelled") && r.body.contains("not recorded in the audit log"), "{}", r.body);
        assert!(!r.body.contains("nothing was"), "{}", r.body);
    }
}

backends! {
    // As the API refuses them: cancelling the scheduler role's job stops every scheduler,
    // retrying or releasing it hands it to ordinary workers. The dashboard answers 400 and
    // changes nothing; deleting it (which resets the role) stays allowed.
    fn the_scheduler_roles_job_is_not_cancelled_retried_or_released_here(db: &Db) {
        use leasefence::{SCHEDULER_JOB, SCHEDULER_QUEUE};
        let s = direct(db);
        s.enqueue_job(NewJob::new(SCHEDULER_JOB).unwrap().queue(SCHEDULER_QUEUE).unwrap())
            .unwrap();
        let srv = server(db);
        let mut b = Browser::new(&srv, Some(ADMIN));
        let csrf = b.get("/dashboard").csrf();
        for action in ["cancel", "retry", "release"] {
            let path = format!("/dashboard/jobs/{SCHEDULER_JOB}/{action}");
            let r = b.post(&path, &[("csrf", &csrf), ("confirmed", "yes")]);
            assert_eq!(r.status, 400, "{action}: {}", r.body);
            assert!(r.body.contains("delete it to reset the role"), "{}", r.body);
        }
        let row = db.row(SCHEDULER_JOB).unwrap();
        assert!(!row.done, "not cancelled");
        assert!(s.audit_log(None, 10).unwrap().is_empty(), "nothing was done");
        let r = b.act(&format!("/dashboard/jobs/{SCHEDULER_JOB}/delete"));
        assert_eq!(r.header("location"), "/dashboard/jobs?done=delete&ok=1");
        assert!(db.row(SCHEDULER_JOB).is_none());
    }
}

/// "Release the expired lease" gives back the lease the page showed, and only it: the page
/// sends that lease's fence, the confirmation names it, and if the job was claimed again
/// meanwhile (and that lease ran out too) nothing is released.
#[test]
fn a_release_gives_back_only_the_lease_the_page_showed() {
    let db = Db::new(Backend::Sqlite).unwrap();
    let s = direct(&db);
    s.enqueue_job(NewJob::new("j").unwrap()).unwrap();
    let id = JobId::new("j").unwrap();
    let ago = |secs: f64| Now::new(Now::system().seconds() - secs).unwrap();
    s.claim(
        id,
        Owner::new("worker-a").unwrap(),
        ago(100.0),
        Ttl::new(10.0).unwrap(),
    )
    .unwrap()
    .unwrap();
    let srv = server(&db);
    let mut b = Browser::new(&srv, Some(ADMIN));
    let page = b.get("/dashboard/jobs/j");
    assert!(
        page.body.contains("The lease of worker-a (fence 1) ended"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("name=\"fence\" value=\"1\""),
        "{}",
        page.body
    );
    let csrf = page.csrf();
    let confirm = b.post(
        "/dashboard/jobs/j/release",
        &[("csrf", &csrf), ("fence", "1")],
    );
    assert_eq!(confirm.status, 200);
    assert!(
        confirm.body.contains("(the lease under fence 1)"),
        "{}",
        confirm.body
    );
    // Meanwhile the job is claimed again, and that lease runs out as well.
    let second = s
        .claim(
            id,
            Owner::new("worker-b").unwrap(),
            ago(50.0),
            Ttl::new(10.0).unwrap(),
        )
        .unwrap()
        .unwrap();
    assert_eq!(second.fence, 2);
    let done = b.post(
        "/dashboard/jobs/j/release",
        &[("csrf", &csrf), ("fence", "1"), ("confirmed", "yes")],
    );
    assert_eq!(
        done.header("location"),
        "/dashboard/jobs/j?done=release&ok=0"
    );
    let row = db.row("j").unwrap();
    assert_eq!(
        (row.owner.as_deref(), row.fence),
        (Some("worker-b"), 2),
        "not released"
    );
    let audit = s.audit_log(None, 1).unwrap();
    assert!(
        audit[0].result.contains("changed since the page was shown"),
        "{audit:?}"
    );
    // A release that names no lease is refused, with nothing changed.
    let bare = b.post(
        "/dashboard/jobs/j/release",
        &[("csrf", &csrf), ("confirmed", "yes")],
    );
    assert_eq!(bare.status, 400, "{}", bare.body);
    assert_eq!(db.row("j").unwrap().owner.as_deref(), Some("worker-b"));
}

/// A sign-in whose `next` holds a control character (which no `Location` header can carry)
/// lands on the dashboard, not on a 500 after the session was made.
#[test]
fn a_sign_in_with_a_control_character_in_next_lands_on_the_dashboard() {
    let db = Db::new(Backend::Sqlite).unwrap();
    let srv = server(&db);
    let mut b = Browser::new(&srv, None);
    assert_eq!(b.get("/dashboard/login?next=%2Fdashboard%0A").status, 200);
    let r = b.post(
        "/dashboard/login",
        &[("user", "ann"), ("token", ADMIN), ("next", "/dashboard\n")],
    );
    assert_eq!(
        (r.status, r.header("location")),
        (303, "/dashboard"),
        "{}",
        r.body
    );
}

/// A payload, result or error taller than its box scrolls: the box takes keyboard focus, so
/// that it can be scrolled without a mouse (axe-core's `scrollable-region-focusable`).
#[test]
fn a_long_payload_can_be_scrolled_from_the_keyboard() {
    let db = Db::new(Backend::Sqlite).unwrap();
    let s = direct(&db);
    let long: String = (1..=200).map(|i| format!("line {i}\n")).collect();
    s.enqueue_job(NewJob::new("big").unwrap().payload(long.into_bytes()))
        .unwrap();
    let srv = server(&db);
    let mut b = Browser::new(&srv, Some(ADMIN));
    let page = b.get("/dashboard/jobs/big");
    assert!(
        page.body
            .contains("<pre class=\"data\" tabindex=\"0\">line 1\n"),
        "{}",
        page.body
    );
}

/// A job or queue named `.` or `..` (valid names) is reached by its link and acted on by its
/// buttons: browsers drop such path segments, even percent-encoded, so the dashboard writes
/// them (and names starting with `~`) after a `~`. Each link is fetched as a browser would
/// resolve it, dot segments removed.
#[test]
fn jobs_and_queues_named_with_dots_or_a_tilde_have_working_links_and_buttons() {
    let db = Db::new(Backend::Sqlite).unwrap();
    let s = direct(&db);
    for id in ["..", ".", "~x", "x"] {
        s.enqueue_job(NewJob::new(id).unwrap().queue("..").unwrap())
            .unwrap();
    }
    let srv = server(&db);
    let mut b = Browser::new(&srv, Some(ADMIN));
    let list = b.get("/dashboard/jobs");
    for id in ["..", ".", "~x", "x"] {
        let tag = format!("\" class=\"id\">{id}</a>");
        let end = list
            .body
            .find(&tag)
            .unwrap_or_else(|| panic!("{id} listed: {}", list.body));
        let start = list.body[..end].rfind("href=\"").unwrap() + 6;
        let href = &list.body[start..end];
        // RFC 3986 5.2.4: what a browser requests for this href.
        let mut segs: Vec<&str> = Vec::new();
        for seg in href.split('/').skip(1) {
            match seg {
                ".." => {
                    segs.pop();
                }
                "." => {}
                s => segs.push(s),
            }
        }
        let resolved = format!("/{}", segs.join("/"));
        assert_eq!(resolved, href, "{id}: the browser would fetch another page");
        let page = b.get(href);
        assert!(
            page.body
                .contains(&format!("<h1>Job <span class=\"id\">{id}</span>")),
            "{id}: {href} is not its page ({})",
            page.status
        );
    }
    // The buttons act on the job and the queue their page shows.
    let r = b.act("/dashboard/jobs/~../cancel");
    assert_eq!(r.header("location"), "/dashboard/jobs/~..?done=cancel&ok=1");
    assert!(db.row("..").unwrap().done);
    assert!(!db.row(".").unwrap().done, "only `..` was cancelled");
    let queues = b.get("/dashboard/queues");
    assert!(
        queues
            .body
            .contains("action=\"/dashboard/queues/~../pause\""),
        "{}",
        queues.body
    );
    b.act("/dashboard/queues/~../pause");
    let paused = s.queues(Now::system()).unwrap();
    assert!(
        paused.iter().any(|q| q.name == ".." && q.paused),
        "{paused:?}"
    );
}

/// The live figures bring the cards' notes and links along: once the oldest ready job is
/// claimed, the "oldest ready job" card names and links the next one, not a leased job
/// beside another one's age.
#[test]
fn the_live_figures_name_and_link_the_oldest_ready_job_of_now() {
    let db = Db::new(Backend::Sqlite).unwrap();
    let s = direct(&db);
    s.enqueue_job(NewJob::new("first").unwrap().not_before(1.0).unwrap())
        .unwrap();
    s.enqueue_job(NewJob::new("second").unwrap().not_before(2.0).unwrap())
        .unwrap();
    let srv = server(&db);
    let mut b = Browser::new(&srv, Some(ADMIN));
    let overview = b.get("/dashboard");
    assert!(
        overview
            .body
            .contains("data-live-href=\"oldest_ready_age_href\"")
            && overview
                .body
                .contains("data-live=\"oldest_ready_age_note\">job first<"),
        "{}",
        overview.body
    );
    let live = |b: &mut Browser| -> serde_json::Value {
        serde_json::from_str(&b.get("/dashboard/live").body).unwrap()
    };
    let v = live(&mut b);
    assert_eq!(
        (
            v["oldest_ready_age_note"].as_str(),
            v["oldest_ready_age_href"].as_str()
        ),
        (Some("job first"), Some("/dashboard/jobs/first"))
    );
    s.claim(
        JobId::new("first").unwrap(),
        Owner::new("w").unwrap(),
        Now::system(),
        Ttl::new(600.0).unwrap(),
    )
    .unwrap()
    .unwrap();
    let v = live(&mut b);
    assert_eq!(
        (
            v["oldest_ready_age_note"].as_str(),
            v["oldest_ready_age_href"].as_str()
        ),
        (Some("job second"), Some("/dashboard/jobs/second"))
    );
    assert_eq!(v["refused_last_hour_note"].as_str(), Some("0 in all"));
}

/// A dashboard form whose body does not arrive within the request timeout is answered 503
/// and its connection closed, as an API body is: the sign-in form needs no token, so any
/// client could otherwise hold connections open for as long as it likes. An action's form
/// that never arrives changes nothing.
#[test]
fn a_form_that_does_not_arrive_in_time_is_a_503() {
    use std::io::{Read as _, Write as _};
    use std::time::Instant;
    let db = Db::new(Backend::Sqlite).unwrap();
    direct(&db).enqueue_job(job("slow")).unwrap();
    let srv = Server::with(
        &db,
        ServerConfig {
            tokens: tokens(),
            request_timeout: Duration::from_millis(300),
            ..ServerConfig::default()
        },
    );
    let addr = srv.url.strip_prefix("http://").unwrap().to_owned();
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("tester:{ADMIN}"));
    for (path, auth) in [
        ("/dashboard/login", String::new()),
        (
            "/dashboard/jobs/slow/cancel",
            format!("Authorization: Basic {basic}\r\n"),
        ),
    ] {
        let mut conn = std::net::TcpStream::connect(&addr).unwrap();
        // The headers promise 100 bytes; a few arrive.
        conn.write_all(
            format!(
                "POST {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: \
                 application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\ncsrf="
            )
            .as_bytes(),
        )
        .unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let started = Instant::now();
        let mut buf = [0u8; 4096];
        let n = conn.read(&mut buf).unwrap_or(0);
        let answer = String::from_utf8_lossy(&buf[..n]);
        assert!(
            answer.starts_with("HTTP/1.1 503"),
            "{path}: {answer:?} after {:?}",
            started.elapsed()
        );
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{path}: {:?}",
            started.elapsed()
        );
    }
    assert!(!db.row("slow").unwrap().done, "nothing was changed");
}

/// A bad filter of the job search is named once, as the form's field: not `invalid `after`:
/// invalid argument `cursor`: …`, which names a field the form does not have.
#[test]
fn a_bad_search_filter_is_named_once_as_the_forms_field() {
    let db = Db::new(Backend::Sqlite).unwrap();
    let srv = server(&db);
    let mut b = Browser::new(&srv, Some(WORKER));
    for (query, field) in [
        ("after=%25%25%25", "after"),
        ("status=bogus", "status"),
        ("queue=a%20b", "queue"),
        ("order=sideways", "order"),
        ("owner=%00", "owner"),
    ] {
        let r = b.get(&format!("/dashboard/jobs?{query}"));
        assert_eq!(r.status, 400, "{query}: {}", r.body);
        let message = r
            .body
            .split("invalid `")
            .nth(1)
            .unwrap_or_else(|| panic!("{query}: {}", r.body));
        assert!(
            message.starts_with(&format!("{field}`: ")),
            "{query}: {message}"
        );
        assert!(!message.contains("invalid argument"), "{query}: {message}");
    }
}

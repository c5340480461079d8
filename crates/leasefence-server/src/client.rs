//! [`HttpStore`]: the [`Store`] contract over `leasefence serve`'s HTTP API, so the library's
//! [`Worker`](leasefence::Worker) — heartbeats, fenced completion, time limits, signals — runs
//! against a server instead of a database (`leasefence work --server URL`).
//!
//! Every fenced write is still judged by the store behind the server, in the write's own
//! transaction: this client keeps nothing. Leases are judged by the server's clock (on
//! PostgreSQL, the database's); the `now` a method is given is ignored, and
//! [`Store::database_now`] reads that clock (`GET /v1/clock`), so a worker anchors its own
//! deadlines to it.
//!
//! What the API does not offer is [`Error::Unsupported`]: `retry_dead`, `purge`, `history`
//! and the schedules. `retry` and `delete` of several ids are one request per id, not one
//! transaction. A server that cannot be reached, or answers 503, is [`Error::Unavailable`]
//! (retryable).

use std::time::Duration;

use leasefence::{
    Enqueued, Error, Failed, Fence, JobId, JobInfo, JobState, Lease, NewJob, Now, Owner, Queue,
    QueueInfo, Queues, Resource, Stats, Status, Store, Ttl,
};
use serde_json::{Value, json};

use crate::auth::Token;

mod wire;

use wire::{argument, chunks_by_size, job_body, lease_ref, oks, payload, segment, stats_of};

type Result<T> = leasefence::Result<T>;

/// The contract over HTTP: a client of `leasefence serve`.
#[derive(Clone)]
pub struct HttpStore {
    agent: ureq::Agent,
    base: String,
    token: Option<Token>,
}

/// The client's connection pool, every request limited to `timeout`; an HTTP status is an
/// answer to read, not a transport error.
fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .build()
        .into()
}

impl std::fmt::Debug for HttpStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpStore")
            .field("server", &self.base)
            .field("token", &self.token)
            .finish()
    }
}

impl HttpStore {
    /// A client of the server at `url` (`http://host:port` or `https://…`), sending `token`
    /// as its bearer token. Nothing is sent until the first call.
    ///
    /// # Errors
    /// `InvalidArgument` naming `server` for a URL that is not http(s).
    pub fn new(url: &str, token: Option<Token>) -> Result<HttpStore> {
        let base = url.trim_end_matches('/');
        let rest = base
            .strip_prefix("http://")
            .or_else(|| base.strip_prefix("https://"));
        if rest.is_none_or(|r| r.is_empty() || r.contains(['?', '#', ' ', '@'])) {
            return Err(Error::InvalidArgument {
                argument: "server",
                reason: "not an http:// or https:// URL of a server, without user or password \
                         (the token is the credential); e.g. http://127.0.0.1:7878"
                    .into(),
            });
        }
        Ok(HttpStore {
            agent: agent(HttpStore::DEFAULT_TIMEOUT),
            base: base.to_owned(),
            token,
        })
    }

    /// How long one request may take, from connecting to the last byte of the answer, unless
    /// [`HttpStore::timeout`] sets another: 60 s.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

    /// This client with every request limited to `timeout` (from connecting to the last byte
    /// of the answer; [`HttpStore::DEFAULT_TIMEOUT`] unless set). A request that runs past it
    /// is [`Error::Unavailable`] (retryable): a write whose answer was lost that way is read
    /// back by the [`Worker`](leasefence::Worker), never written twice. A shorter limit notices
    /// a server that stopped answering (a host cut off, a hung proxy) sooner; it must leave
    /// room for the server's own busy timeout.
    ///
    /// # Errors
    /// `InvalidArgument` naming `timeout` for a zero duration.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use leasefence_server::HttpStore;
    /// let http = HttpStore::new("http://127.0.0.1:7878", None)?.timeout(Duration::from_secs(5))?;
    /// # Ok::<(), leasefence::Error>(())
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Result<HttpStore> {
        if timeout.is_zero() {
            return Err(Error::InvalidArgument {
                argument: "timeout",
                reason: "a request needs a timeout above zero".into(),
            });
        }
        self.agent = agent(timeout);
        Ok(self)
    }

    /// The server's URL.
    pub fn url(&self) -> &str {
        &self.base
    }

    fn unsupported(&self, what: &str) -> Error {
        Error::Unsupported {
            database: self.base.clone(),
            detail: format!("{what} is not offered over HTTP; run it against the database"),
        }
    }

    fn unavailable(&self, reason: impl Into<String>) -> Error {
        Error::Unavailable {
            target: self.base.clone(),
            reason: reason.into(),
        }
    }

    /// A request that got no HTTP answer: a TLS handshake that failed — an `https://` URL of a
    /// plain-HTTP server, a certificate not trusted — is a setting to fix (bad `server`); the
    /// rest (refused, reset, timed out) is [`Error::Unavailable`], retried.
    fn transport(&self, e: &ureq::Error) -> Error {
        let text = e.to_string();
        let tls = matches!(e, ureq::Error::Tls(_))
            || [
                "InvalidContentType",
                "corrupt message",
                "certificate",
                "handshake",
            ]
            .iter()
            .any(|needle| text.contains(needle));
        if tls && self.base.starts_with("https://") {
            let hint = if text.contains("InvalidContentType") || text.contains("corrupt message") {
                "the server answered without TLS: use http://, or put TLS in front of it"
            } else {
                "check the server's certificate and the URL's host name"
            };
            return Error::InvalidArgument {
                argument: "server",
                reason: format!("TLS with {} failed ({text}); {hint}", self.base),
            };
        }
        self.unavailable(text)
    }

    /// Sends one request; `(status, body)` for 200, 201 and 409 — and 404 where `found`
    /// names what a 404 means (an unknown job or schedule) — an error otherwise: a 404
    /// elsewhere is a wrong URL, never a refusal.
    fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        found: bool,
    ) -> Result<(u16, Value)> {
        let url = format!("{}{path}", self.base);
        let bearer = self
            .token
            .as_ref()
            .map(|t| format!("Bearer {}", t.expose()));
        let answer = match (method, body) {
            ("GET", _) => {
                let mut req = self.agent.get(&url);
                if let Some(b) = &bearer {
                    req = req.header("Authorization", b);
                }
                req.call()
            }
            ("DELETE", _) => {
                let mut req = self.agent.delete(&url);
                if let Some(b) = &bearer {
                    req = req.header("Authorization", b);
                }
                req.call()
            }
            (_, body) => {
                let mut req = self.agent.post(&url);
                if let Some(b) = &bearer {
                    req = req.header("Authorization", b);
                }
                req.send_json(body.unwrap_or_else(|| json!({})))
            }
        };
        let mut resp = answer.map_err(|e| self.transport(&e))?;
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .read_to_string()
            .map_err(|e| self.unavailable(format!("the answer was cut short: {e}")))?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let message = || value["message"].as_str().unwrap_or("").to_owned();
        match status {
            200 | 201 | 409 => Ok((status, value)),
            404 if found && value["error"] == "not_found" => Ok((status, value)),
            400 | 413 => {
                let field = value["field"].as_str().unwrap_or("request");
                // The server's message names the field first (`invalid `ttl`: …`); the error
                // names it already.
                let message = message();
                let reason = message
                    .strip_prefix(&format!("invalid `{field}`: "))
                    .unwrap_or(&message)
                    .to_owned();
                Err(Error::InvalidArgument {
                    argument: argument(field),
                    reason,
                })
            }
            401 | 403 => Err(Error::InvalidArgument {
                argument: "token",
                reason: format!("the server refused it ({status}): {}", message()),
            }),
            // Busy, unreachable, a proxy's 502/504, rate limits: all retryable.
            429 | 500..=599 => {
                Err(self.unavailable(format!("the server answered {status}: {}", message())))
            }
            other => Err(Error::Unsupported {
                database: self.base.clone(),
                detail: format!(
                    "the server answered {other} to {method} {path} (is {} a leasefence \
                     server?): {}",
                    self.base,
                    message()
                ),
            }),
        }
    }

    fn post(&self, path: &str, body: Value) -> Result<(u16, Value)> {
        self.send("POST", path, Some(body), false)
    }

    /// A POST whose 404 means an unknown job (the operator verbs).
    fn post_found(&self, path: &str) -> Result<(u16, Value)> {
        self.send("POST", path, Some(json!({})), true)
    }

    fn lease(&self, v: &Value) -> Result<Lease> {
        let bad = || self.unavailable(format!("an answer the client cannot read: {v}"));
        Ok(Lease {
            job_id: v["job_id"].as_str().ok_or_else(bad)?.to_owned(),
            queue: v["queue"].as_str().unwrap_or("default").to_owned(),
            kind: v["kind"].as_str().map(str::to_owned),
            owner: v["owner"].as_str().ok_or_else(bad)?.to_owned(),
            fence: v["fence"].as_i64().ok_or_else(bad)?,
            until: v["until"].as_f64().ok_or_else(bad)?,
            payload: payload(v),
            priority: v["priority"].as_i64().unwrap_or(0),
            max_attempts: v["max_attempts"].as_u64().unwrap_or(0) as u32,
            last_error: v["last_error"].as_str().map(str::to_owned),
            attempt: v["attempt"].as_u64().unwrap_or(0) as u32,
        })
    }

    fn leases(&self, body: &Value) -> Result<Vec<Lease>> {
        body["leases"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|l| self.lease(l))
            .collect()
    }

    fn job_info(&self, v: &Value) -> Result<JobInfo> {
        let bad = || self.unavailable(format!("an answer the client cannot read: {v}"));
        Ok(JobInfo {
            state: JobState {
                id: v["id"].as_str().ok_or_else(bad)?.to_owned(),
                owner: v["owner"].as_str().map(str::to_owned),
                until: v["until"].as_f64().unwrap_or(0.0),
                fence: v["fence"].as_i64().unwrap_or(0),
                result: v["result"].as_str().map(str::to_owned),
                done: v["done"].as_bool().unwrap_or(false),
            },
            queue: v["queue"].as_str().unwrap_or("default").to_owned(),
            kind: v["kind"].as_str().map(str::to_owned),
            unique_key: v["unique_key"].as_str().map(str::to_owned),
            status: Status::parse(v["status"].as_str().ok_or_else(bad)?)?,
            payload: payload(v),
            priority: v["priority"].as_i64().unwrap_or(0),
            not_before: v["not_before"].as_f64().unwrap_or(0.0),
            max_attempts: v["max_attempts"].as_u64().unwrap_or(0) as u32,
            attempts: v["attempts"].as_u64().unwrap_or(0) as u32,
            error: v["error"].as_str().map(str::to_owned),
            finished_at: v["finished_at"].as_f64(),
            outcome: v["outcome"].as_str().map(str::to_owned),
            enqueued_at: v["enqueued_at"].as_f64(),
        })
    }

    fn stats_body(&self) -> Result<Value> {
        Ok(self.send("GET", "/v1/stats", None, false)?.1)
    }
}

impl Store for HttpStore {
    fn enqueue(&self, job_id: JobId<'_>) -> Result<bool> {
        let (status, _) = self.post("/v1/jobs", json!({ "id": job_id.as_str() }))?;
        Ok(status == 201)
    }

    fn state(&self, job_id: JobId<'_>) -> Result<Option<JobState>> {
        Ok(self.inspect(job_id, Now::system())?.map(|info| info.state))
    }

    fn claim(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        _now: Now,
        ttl: Ttl,
    ) -> Result<Option<Lease>> {
        let body =
            json!({ "owner": owner.as_str(), "ttl": ttl.seconds(), "job_id": job_id.as_str() });
        match self.post("/v1/claims", body)? {
            (200, answer) => Ok(self.leases(&answer)?.into_iter().next()),
            _ => Ok(None),
        }
    }

    fn renew(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        fence: Fence,
        _now: Now,
        ttl: Ttl,
    ) -> Result<bool> {
        let path = format!("/v1/jobs/{}/renew", segment(job_id.as_str()));
        let body = json!({ "owner": owner.as_str(), "fence": fence, "ttl": ttl.seconds() });
        Ok(self.post(&path, body)?.0 == 200)
    }

    fn complete(
        &self,
        job_id: JobId<'_>,
        owner: Owner<'_>,
        fence: Fence,
        _now: Now,
        result: &str,
    ) -> Result<bool> {
        let path = format!("/v1/jobs/{}/complete", segment(job_id.as_str()));
        let body = json!({ "owner": owner.as_str(), "fence": fence, "result": result });
        Ok(self.post(&path, body)?.0 == 200)
    }

    fn release(&self, job_id: JobId<'_>, owner: Owner<'_>, fence: Fence) -> Result<bool> {
        let path = format!("/v1/jobs/{}/release", segment(job_id.as_str()));
        let body = json!({ "owner": owner.as_str(), "fence": fence });
        Ok(self.post(&path, body)?.0 == 200)
    }

    fn enqueue_jobs(&self, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
        let body = json!({ "jobs": jobs.iter().map(job_body).collect::<Vec<_>>() });
        let (_, answer) = self.post("/v1/jobs", body)?;
        let results = answer["results"].as_array().cloned().unwrap_or_default();
        if results.len() != jobs.len() {
            return Err(self.unavailable(format!(
                "{} enqueue outcomes for {} jobs",
                results.len(),
                jobs.len()
            )));
        }
        results
            .iter()
            .map(|r| match r["outcome"].as_str() {
                Some("inserted") => Ok(Enqueued::Inserted),
                Some("known") => Ok(Enqueued::Known),
                Some("duplicate") => Ok(Enqueued::Duplicate {
                    of: r["of"].as_str().unwrap_or_default().to_owned(),
                }),
                _ => {
                    Err(self.unavailable(format!("an enqueue outcome the client cannot read: {r}")))
                }
            })
            .collect()
    }

    fn claim_batch_in(
        &self,
        queues: &Queues,
        owner: Owner<'_>,
        _now: Now,
        ttl: Ttl,
        n: leasefence::BatchSize,
    ) -> Result<Vec<Lease>> {
        let mut body = json!({ "owner": owner.as_str(), "ttl": ttl.seconds(), "n": n.get() });
        if let Some(names) = queues.names() {
            body["queues"] = json!(names.iter().map(Queue::as_str).collect::<Vec<_>>());
        }
        let (_, answer) = self.post("/v1/claims", body)?;
        self.leases(&answer)
    }

    fn fail(
        &self,
        lease: &Lease,
        now: Now,
        error: &str,
        retry_at: Option<Now>,
    ) -> Result<Option<Failed>> {
        let path = format!("/v1/jobs/{}/fail", segment(&lease.job_id));
        let mut body = json!({ "owner": lease.owner, "fence": lease.fence, "error": error });
        if let Some(at) = retry_at {
            body["retry_in"] = json!((at.seconds() - now.seconds()).max(0.0));
        }
        match self.post(&path, body)? {
            (200, answer) => Ok(Some(match answer["outcome"].as_str() {
                Some("dead") => Failed::Dead,
                _ => Failed::Retrying {
                    at: answer["retry_at"].as_f64().unwrap_or(now.seconds()),
                },
            })),
            _ => Ok(None),
        }
    }

    fn cancel(&self, job_id: JobId<'_>, _now: Now) -> Result<bool> {
        let path = format!("/v1/jobs/{}/cancel", segment(job_id.as_str()));
        Ok(self.post_found(&path)?.0 == 200)
    }

    fn retry(&self, job_ids: &[JobId<'_>], _now: Now) -> Result<Vec<bool>> {
        job_ids
            .iter()
            .map(|id| {
                let path = format!("/v1/jobs/{}/retry", segment(id.as_str()));
                Ok(self.post_found(&path)?.0 == 200)
            })
            .collect()
    }

    fn retry_dead(&self, _now: Now) -> Result<u64> {
        Err(self.unsupported("retry_dead"))
    }

    fn retry_dead_in(&self, _queues: &Queues, _now: Now) -> Result<u64> {
        Err(self.unsupported("retry_dead_in"))
    }

    fn delete(&self, job_ids: &[JobId<'_>]) -> Result<Vec<bool>> {
        job_ids
            .iter()
            .map(|id| {
                Ok(self
                    .send(
                        "DELETE",
                        &format!("/v1/jobs/{}", segment(id.as_str())),
                        None,
                        true,
                    )?
                    .0
                    == 200)
            })
            .collect()
    }

    fn purge(&self, _finished_before: Now) -> Result<u64> {
        Err(self.unsupported("purge"))
    }

    fn list(
        &self,
        _now: Now,
        status: Option<Status>,
        after: Option<JobId<'_>>,
        limit: usize,
    ) -> Result<Vec<JobInfo>> {
        let mut jobs = Vec::new();
        let mut after = after.map(|a| a.as_str().to_owned());
        while jobs.len() < limit {
            let page = (limit - jobs.len()).min(1000);
            let mut query = format!("/v1/jobs?limit={page}");
            if let Some(s) = status {
                query.push_str(&format!("&status={}", s.as_str()));
            }
            if let Some(a) = &after {
                query.push_str(&format!("&after={}", segment(a)));
            }
            let (_, answer) = self.send("GET", &query, None, false)?;
            let batch = answer["jobs"].as_array().cloned().unwrap_or_default();
            for job in &batch {
                jobs.push(self.job_info(job)?);
            }
            match answer["next"].as_str() {
                Some(next) if !batch.is_empty() => after = Some(next.to_owned()),
                _ => break,
            }
        }
        Ok(jobs)
    }

    fn inspect(&self, job_id: JobId<'_>, _now: Now) -> Result<Option<JobInfo>> {
        match self.send(
            "GET",
            &format!("/v1/jobs/{}", segment(job_id.as_str())),
            None,
            true,
        )? {
            (200, body) => Ok(Some(self.job_info(&body)?)),
            _ => Ok(None),
        }
    }

    fn history(&self, _job_id: JobId<'_>) -> Result<Option<leasefence::History>> {
        Err(self.unsupported("history (read GET /v1/jobs/{id}/history)"))
    }

    fn add_schedule(&self, _schedule: &leasefence::Schedule, _now: Now) -> Result<bool> {
        Err(self.unsupported("add_schedule"))
    }

    fn remove_schedule(&self, _name: leasefence::ScheduleName<'_>) -> Result<bool> {
        Err(self.unsupported("remove_schedule"))
    }

    fn schedules(&self) -> Result<Vec<leasefence::ScheduleInfo>> {
        Err(self.unsupported("schedules"))
    }

    fn enqueue_slots(
        &self,
        _scheduler: &Lease,
        _now: Now,
        _runs: &[leasefence::SlotRun],
    ) -> Result<Option<Vec<Option<Enqueued>>>> {
        Err(self.unsupported("the scheduler role"))
    }

    fn pause(&self, queue: &Queue) -> Result<bool> {
        let path = format!("/v1/queues/{}/pause", segment(queue.as_str()));
        Ok(self.post(&path, json!({}))?.1["changed"] == true)
    }

    fn resume(&self, queue: &Queue) -> Result<bool> {
        let path = format!("/v1/queues/{}/resume", segment(queue.as_str()));
        Ok(self.post(&path, json!({}))?.1["changed"] == true)
    }

    fn queues(&self, _now: Now) -> Result<Vec<QueueInfo>> {
        let body = self.stats_body()?;
        Ok(body["queues"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|q| QueueInfo {
                name: q["name"].as_str().unwrap_or_default().to_owned(),
                paused: q["paused"].as_bool().unwrap_or(false),
                stats: stats_of(&q["counts"]),
            })
            .collect())
    }

    fn stats(&self, _now: Now) -> Result<Stats> {
        Ok(stats_of(&self.stats_body()?["counts"]))
    }

    fn admit(&self, resource: Resource<'_>, fence: Fence) -> Result<bool> {
        let path = format!("/v1/fences/{}/admit", segment(resource.as_str()));
        Ok(self.post(&path, json!({ "fence": fence }))?.0 == 200)
    }

    fn database_now(&self) -> Result<Option<Now>> {
        let (_, body) = self.send("GET", "/v1/clock", None, false)?;
        let now = body["now"]
            .as_f64()
            .ok_or_else(|| self.unavailable(format!("a clock the client cannot read: {body}")))?;
        Ok(Some(Now::new(now)?))
    }

    fn renew_batch(&self, leases: &[&Lease], _now: Now, ttl: Ttl) -> Result<Vec<bool>> {
        let mut taken = Vec::with_capacity(leases.len());
        for chunk in leases.chunks(1000) {
            let body = json!({
                "ttl": ttl.seconds(),
                "leases": chunk.iter().map(|l| lease_ref(l)).collect::<Vec<_>>(),
            });
            let (_, answer) = self.post("/v1/renewals", body)?;
            taken.extend(oks(&answer, chunk.len()).map_err(|e| self.unavailable(e))?);
        }
        Ok(taken)
    }

    fn complete_batch(&self, completions: &[(&Lease, &str)], _now: Now) -> Result<Vec<bool>> {
        let mut taken = Vec::with_capacity(completions.len());
        for chunk in chunks_by_size(completions, |(l, r)| {
            l.job_id.len() + l.owner.len() + r.len()
        }) {
            let items: Vec<Value> = chunk
                .iter()
                .map(|(l, result)| {
                    json!({ "job_id": l.job_id, "owner": l.owner, "fence": l.fence, "result": result })
                })
                .collect();
            let (_, answer) = self.post("/v1/completions", json!({ "completions": items }))?;
            taken.extend(oks(&answer, chunk.len()).map_err(|e| self.unavailable(e))?);
        }
        Ok(taken)
    }
}

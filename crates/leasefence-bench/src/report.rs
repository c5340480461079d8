//! Medians, in-run ratios, the targets of issue 7, and the plot.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use plotters::prelude::*;
use serde::Serialize;

use crate::probes::Probes;
use crate::subjects::{BATCH, Durability, Subject};
use crate::summary::stats;
use crate::{Case, Sample, Who};

#[derive(Debug, Serialize)]
pub(crate) struct Row {
    pub(crate) case: Case,
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) samples: Vec<f64>,
    /// Each round's p99 of a single claim → complete cycle, in ms (single operations only).
    pub(crate) p99_ms: Vec<f64>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Report {
    pub(crate) rows: Vec<Row>,
    pub(crate) probes: Probes,
    pub(crate) rounds: usize,
    pub(crate) seconds: f64,
    pub(crate) quick: bool,
    pub(crate) machine: String,
    pub(crate) peer_sync: Vec<(String, String)>,
    pub(crate) peer_versions: Vec<(String, String)>,
}

impl Report {
    pub(crate) fn new(
        cases: Vec<Case>,
        samples: Vec<Sample>,
        probes: Probes,
        rounds: usize,
        took: Duration,
        quick: bool,
        peers: &crate::peers::Peers,
    ) -> Report {
        let rows = cases
            .into_iter()
            .enumerate()
            .map(|(i, case)| {
                let s: Vec<f64> = samples
                    .iter()
                    .filter(|x| x.case == i)
                    .map(|x| x.jobs_per_sec)
                    .collect();
                let (median, min, max) = stats(&s);
                let p99_ms = samples
                    .iter()
                    .filter(|x| x.case == i)
                    .filter_map(|x| x.p99_ms)
                    .collect();
                Row {
                    case,
                    median,
                    min,
                    max,
                    samples: s,
                    p99_ms,
                }
            })
            .collect();
        Report {
            rows,
            probes,
            rounds,
            seconds: took.as_secs_f64(),
            quick,
            machine: machine(),
            peer_sync: peers
                .sync
                .lock()
                .expect("not poisoned")
                .clone()
                .into_iter()
                .collect(),
            peer_versions: peers
                .versions
                .lock()
                .expect("not poisoned")
                .clone()
                .into_iter()
                .collect(),
        }
    }

    fn find(&self, who: &Who, d: Durability, workers: usize, processes: bool) -> Option<&Row> {
        self.rows.iter().find(|r| {
            &r.case.who == who
                && r.case.durability == d
                && r.case.workers == workers
                && r.case.processes == processes
        })
    }

    /// The median of the per-round ratios a / b (both measured in the same round).
    fn ratio(&self, a: &Row, b: &Row) -> f64 {
        let per_round: Vec<f64> = a
            .samples
            .iter()
            .zip(&b.samples)
            .map(|(x, y)| x / y)
            .collect();
        stats(&per_round).0
    }

    pub(crate) fn markdown(&self) -> String {
        let mut md = String::new();
        let _ = writeln!(
            md,
            "### Throughput: claim next → complete, jobs/s (median of {} rounds, min–max)\n",
            self.rounds
        );
        let _ = writeln!(
            md,
            "| durability | workers | subject | jobs | jobs/s | min–max | ÷ floor |\n|---|---|---|---:|---:|---:|---:|"
        );
        for row in &self.rows {
            let c = &row.case;
            let floor = self.find(
                &Who::Ours(Subject::Floor),
                c.durability,
                c.workers,
                c.processes,
            );
            let vs_floor = match floor {
                Some(f) if c.who != Who::Ours(Subject::Floor) => {
                    format!("{:.2}×", self.ratio(row, f))
                }
                _ => "—".into(),
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {:.0} | {:.0}–{:.0} | {} |",
                c.durability.label(),
                c.mode(),
                c.who.label(),
                c.jobs,
                row.median,
                row.min,
                row.max,
                vs_floor
            );
        }
        let latencies: Vec<&Row> = self.rows.iter().filter(|r| !r.p99_ms.is_empty()).collect();
        if !latencies.is_empty() {
            let _ = writeln!(
                md,
                "\n### Single operations: p99 of one claim → complete cycle, ms (median of the \
                 rounds' p99, min–max)\n\n| durability | workers | p99 | min–max |\n|---|---|---:|---:|"
            );
            for row in latencies {
                let (median, min, max) = stats(&row.p99_ms);
                let c = &row.case;
                let _ = writeln!(
                    md,
                    "| {} | {} | {median:.2} | {min:.2}–{max:.2} |",
                    c.durability.label(),
                    c.mode()
                );
            }
        }
        let _ = writeln!(
            md,
            "\n### leasefence ÷ peers (same durability and workers, per-round ratios)\n"
        );
        let _ = writeln!(
            md,
            "| durability | workers | peer | peer jobs/s | Worker ÷ peer | Store batch ÷ peer | Store single ÷ peer |\n|---|---|---|---:|---:|---:|---:|"
        );
        for row in self
            .rows
            .iter()
            .filter(|r| matches!(r.case.who, Who::Peer(_)))
        {
            let c = &row.case;
            let vs = |s: Subject| {
                self.find(&Who::Ours(s), c.durability, c.workers, c.processes)
                    .map_or("—".to_string(), |o| format!("{:.1}×", self.ratio(o, row)))
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {:.0} | {} | {} | {} |",
                c.durability.label(),
                c.mode(),
                c.who.label(),
                row.median,
                vs(Subject::Worker),
                vs(Subject::Batch),
                vs(Subject::Single)
            );
        }
        let _ = writeln!(md, "\n### Targets\n");
        let _ = writeln!(md, "| target | measured | verdict |\n|---|---|---|");
        for (name, measured, ok) in self.targets() {
            let _ = writeln!(
                md,
                "| {name} | {measured} | {} |",
                if ok { "met" } else { "**missed**" }
            );
        }
        if !self.probes.scaling.is_empty() {
            let _ = writeln!(
                md,
                "\n### claim_next → complete cost by queue size (µs per cycle, median, min–max)\n"
            );
            let _ = writeln!(
                md,
                "| backend | shape | jobs | µs/cycle | min–max | ÷ 1k |\n|---|---|---:|---:|---:|---:|"
            );
            for s in &self.probes.scaling {
                let base = self
                    .probes
                    .scaling
                    .iter()
                    .find(|b| b.backend == s.backend && b.shape == s.shape && b.size == 1_000)
                    .map_or(f64::NAN, |b| b.micros_per_cycle);
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {:.0} | {:.0}–{:.0} | {:.2}× |",
                    s.backend,
                    s.shape,
                    s.size,
                    s.micros_per_cycle,
                    s.min,
                    s.max,
                    s.micros_per_cycle / base
                );
            }
        }
        if let Some(c) = &self.probes.contention {
            let _ = writeln!(
                md,
                "\n### {} processes contending (SQLite NORMAL, default options, single ops)\n\n\
                 {} jobs: {} completed, {} busy errors reached the caller; claim latency p50 \
                 {:.2} ms, p99 {:.2} ms, max {:.2} ms; {:.0} jobs/s overall.",
                c.processes,
                c.jobs,
                c.completed,
                c.busy_errors,
                c.p50_ms,
                c.p99_ms,
                c.max_ms,
                c.jobs_per_sec
            );
        }
        if !self.peer_versions.is_empty() {
            let _ = writeln!(md, "\n### Peers as run\n");
            for (name, version) in &self.peer_versions {
                let ran: Vec<String> = self
                    .peer_sync
                    .iter()
                    .filter(|(k, _)| k.starts_with(&format!("{name} ")))
                    .map(|(k, v)| format!("{} → {v}", &k[name.len() + 1..]))
                    .collect();
                let _ = writeln!(md, "- {name} {version}: {}", ran.join("; "));
            }
        }
        let _ = writeln!(
            md,
            "\n{} run, {} rounds, {:.0} s in all, on {}.",
            if self.quick { "Quick" } else { "Full" },
            self.rounds,
            self.seconds,
            self.machine
        );
        md
    }

    /// Issue 7's targets: (what, measured, met).
    pub(crate) fn targets(&self) -> Vec<(String, String, bool)> {
        let mut t = Vec::new();
        let ours = |s| Who::Ours(s);
        for (d, min) in [(Durability::Full, 0.8), (Durability::Normal, 0.6)] {
            for (w, p) in [(1, false), (4, false), (4, true)] {
                if let (Some(s), Some(f)) = (
                    self.find(&ours(Subject::Single), d, w, p),
                    self.find(&ours(Subject::Floor), d, w, p),
                ) {
                    let r = self.ratio(s, f);
                    t.push((
                        format!("single ÷ floor ≥ {min}, {} {}", d.label(), s.case.mode()),
                        format!("{r:.2}×"),
                        r >= min,
                    ));
                }
            }
        }
        for (w, p) in [(1, false), (4, false), (4, true)] {
            if let (Some(b), Some(s)) = (
                self.find(&ours(Subject::Batch), Durability::Full, w, p),
                self.find(&ours(Subject::Single), Durability::Full, w, p),
            ) {
                let r = self.ratio(b, s);
                t.push((
                    format!("batch {BATCH} ÷ single ≥ 10, SQLite FULL {}", b.case.mode()),
                    format!("{r:.1}×"),
                    r >= 10.0,
                ));
            }
        }
        for d in [Durability::Full, Durability::Normal, Durability::Pg] {
            for w in [1, 4] {
                let Some(worker) = self.find(&ours(Subject::Worker), d, w, false) else {
                    continue;
                };
                let peers: Vec<&Row> = self
                    .rows
                    .iter()
                    .filter(|r| {
                        matches!(r.case.who, Who::Peer(_))
                            && r.case.durability == d
                            && r.case.workers == w
                    })
                    .collect();
                let Some(best) = peers.iter().max_by(|a, b| a.median.total_cmp(&b.median)) else {
                    continue;
                };
                // Issue 18: ≥ 5× the fastest peer, each peer in its best configuration.
                let r = self.ratio(worker, best);
                t.push((
                    format!(
                        "Worker ÷ fastest peer ({}) ≥ 5, {} {}",
                        best.case.who.label(),
                        d.label(),
                        worker.case.mode()
                    ),
                    format!("{r:.1}×"),
                    r >= 5.0,
                ));
            }
        }
        // Issue 18: the Worker scales with threads (≥ 1.5× at NORMAL, never below at FULL).
        for (d, need) in [(Durability::Normal, 1.5), (Durability::Full, 1.0)] {
            if let (Some(four), Some(one)) = (
                self.find(&ours(Subject::Worker), d, 4, false),
                self.find(&ours(Subject::Worker), d, 1, false),
            ) {
                let r = self.ratio(four, one);
                t.push((
                    format!("Worker 4 threads ÷ 1 ≥ {need}, {}", d.label()),
                    format!("{r:.2}×"),
                    r >= need,
                ));
            }
        }
        // Issue 18: single operations from 4 writer threads at least the single-writer floor
        // (SQLite FULL), and PostgreSQL's single operations ≥ 0.8× its floor.
        if let (Some(s), Some(f)) = (
            self.find(&ours(Subject::Single), Durability::Full, 4, false),
            self.find(&ours(Subject::Floor), Durability::Full, 1, false),
        ) {
            let r = self.ratio(s, f);
            t.push((
                "single, 4 threads ÷ the 1-writer floor ≥ 1.0, SQLite FULL".into(),
                format!("{r:.2}×"),
                r >= 1.0,
            ));
        }
        if let Some(s) = self.find(&ours(Subject::Single), Durability::Full, 4, false)
            && !s.p99_ms.is_empty()
        {
            let (p99, _, worst) = stats(&s.p99_ms);
            t.push((
                "single, 4 threads: p99 of a claim → complete ≤ 10 ms, SQLite FULL".into(),
                format!("{p99:.2} ms (worst round {worst:.2} ms)"),
                p99 <= 10.0,
            ));
        }
        for w in [1, 4] {
            if let (Some(s), Some(f)) = (
                self.find(&ours(Subject::Single), Durability::Pg, w, false),
                self.find(&ours(Subject::Floor), Durability::Pg, w, false),
            ) {
                let r = self.ratio(s, f);
                t.push((
                    format!("single ÷ floor ≥ 0.8, PostgreSQL {}", s.case.mode()),
                    format!("{r:.2}×"),
                    r >= 0.8,
                ));
            }
        }
        let biggest = self
            .probes
            .scaling
            .iter()
            .map(|s| s.size)
            .max()
            .unwrap_or(0);
        for s in self
            .probes
            .scaling
            .iter()
            .filter(|s| s.size == biggest && biggest > 1_000)
        {
            if let Some(b) = self
                .probes
                .scaling
                .iter()
                .find(|b| b.backend == s.backend && b.shape == s.shape && b.size == 1_000)
            {
                let r = s.micros_per_cycle / b.micros_per_cycle;
                t.push((
                    format!(
                        "claim-next at {} ÷ at 1k ≤ 1.2, {} {}",
                        s.size, s.backend, s.shape
                    ),
                    format!("{r:.2}×"),
                    r <= 1.2,
                ));
            }
        }
        if let Some(c) = &self.probes.contention {
            t.push((
                "8 processes: no busy error".into(),
                c.busy_errors.to_string(),
                c.busy_errors == 0,
            ));
            t.push((
                "8 processes: p99 claim ≤ 10 ms".into(),
                format!("{:.2} ms", c.p99_ms),
                c.p99_ms <= 10.0,
            ));
            t.push((
                "8 processes: max claim ≤ 100 ms".into(),
                format!("{:.2} ms", c.max_ms),
                c.max_ms <= 100.0,
            ));
        }
        t
    }

    pub(crate) fn write(&self, dir: &Path) -> Result<()> {
        std::fs::write(
            dir.join("results.json"),
            serde_json::to_string_pretty(self)?,
        )?;
        std::fs::write(dir.join("results.md"), self.markdown())?;
        self.plot(&dir.join("throughput.svg"))?;
        Ok(())
    }

    /// Throughput by configuration (durability × workers), one line per subject, log scale.
    fn plot(&self, path: &Path) -> Result<()> {
        let mut configs: Vec<(Durability, usize, bool)> = Vec::new();
        for r in &self.rows {
            let k = (r.case.durability, r.case.workers, r.case.processes);
            if !configs.contains(&k) {
                configs.push(k);
            }
        }
        let mut whos: Vec<Who> = Vec::new();
        for r in &self.rows {
            if !whos.contains(&r.case.who) {
                whos.push(r.case.who.clone());
            }
        }
        let labels: Vec<String> = configs
            .iter()
            .map(|(d, w, p)| {
                let short = match d {
                    Durability::Full => "FULL",
                    Durability::Normal => "NORMAL",
                    Durability::Pg => "PG",
                };
                match (w, p) {
                    (1, _) => format!("{short} 1"),
                    (n, false) => format!("{short} {n}t"),
                    (n, true) => format!("{short} {n}p"),
                }
            })
            .collect();
        let top = self.rows.iter().map(|r| r.max).fold(1.0, f64::max) * 2.0;
        let bottom = self
            .rows
            .iter()
            .map(|r| r.min)
            .fold(f64::MAX, f64::min)
            .max(1.0)
            / 2.0;
        let root = SVGBackend::new(path, (1100, 650)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "leasefence vs floor and peers: claim next -> complete, jobs/s (median)",
                ("sans-serif", 22),
            )
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(
                -0.5f64..(configs.len() as f64 - 0.5),
                (bottom..top).log_scale(),
            )?;
        chart
            .configure_mesh()
            .x_labels(configs.len())
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 0.01 && i >= 0.0 && (i as usize) < labels.len() {
                    labels[i as usize].clone()
                } else {
                    String::new()
                }
            })
            .y_desc("jobs/s (log)")
            .x_desc("durability, workers (t = threads, p = processes)")
            .draw()?;
        for (k, who) in whos.iter().enumerate() {
            let color = Palette99::pick(k).to_rgba();
            let points: Vec<(f64, f64)> = configs
                .iter()
                .enumerate()
                .filter_map(|(i, (d, w, p))| {
                    self.find(who, *d, *w, *p).map(|r| (i as f64, r.median))
                })
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
                .label(who.label())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
            chart.draw_series(
                points
                    .iter()
                    .map(|&(x, y)| Circle::new((x, y), 4, color.filled())),
            )?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
        Ok(())
    }
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cores} cores ({cpu}), {}", std::env::consts::OS)
}

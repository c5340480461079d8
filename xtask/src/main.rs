//! Project automation for leasefence, run as `cargo xtask <command>` (see `.cargo/config.toml`).
//!
//! - `cargo xtask test [--no-rust] [--no-python] [-- CARGO_TEST_ARGS…]`: the README's test
//!   command: `cargo test --workspace`, then the Python package installed into a scratch
//!   virtual environment (`target/python-venv`) and its pytest suite (`python/tests`).
//! - `cargo xtask mutants [--list] [--check] [--only ID]… [--target-dir DIR] [--test-threads N]
//!   [--full] [--keep-scratch]`:
//!   the hand-written mutation catalog `mutants/catalog.toml`, each entry applied to a scratch
//!   copy of the tree and judged by the integration tests; a full run rewrites
//!   `docs/worksheet.md`. `--since-base` (CI) runs only the entries a change concerns since
//!   each entry's verdict (`mutants/catalog.verdicts.json`: the commit a run on a committed
//!   tree last killed it at) or else since the full run in `mutants/catalog.base`;
//!   `--record-base` is a full run that records HEAD there when every entry was killed.
//! - `cargo xtask worksheet [--check]`: rewrites `docs/worksheet.md` from the catalog and the
//!   last observations, without running anything; `--check` verifies that the committed one is
//!   in sync with the catalog.
//! - `cargo xtask bench [--quick] [-- ARGS…]`: builds the peers and the harness and runs the
//!   benchmarks of `docs/benchmarks.md` (floor, leasefence, peers, alternating in one run).
//! - `cargo xtask reliability [--quick] [--soak MINUTES]`: the long tier of the reliability
//!   tests (model-based sequences, concurrency histories, pauses, crashes, faults, the soak),
//!   scaled up; `--soak MINUTES` runs only the soak, that long.
//! - `cargo xtask cargo-mutants [--in-diff REV | --since-base | --record-base] [--fresh]
//!   [-- ARGS…]`: cargo-mutants over the library's Rust code with `.cargo/mutants.toml`, staged
//!   (a quick screen, then the whole suite for what it did not catch), judged by its outcomes; `--since-base` mutates only the lines changed since the commit recorded
//!   in `mutants/cargo-mutants.base` (the last clean full run), `--record-base` records it.
//!
//! Exit status: 0 all well; 1 a mutant not killed as predicted (or missed by cargo-mutants);
//! 2 an error (catalog stale, unknown test name, failing baseline, bad usage); 130 Ctrl-C.

mod bench;
mod cargo_mutants;
mod catalog;
mod catalog_base;
mod git;
mod mutants;
mod process;
mod python;
mod reliability;
mod results;
mod suite;
mod verdicts;
mod worksheet;

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  test [--no-rust] [--no-python] [--pytest ARGS...] [-- CARGO_TEST_ARGS...]
      Every test: `cargo test --workspace --locked`, then the Python package (python/) built
      and installed with pip into target/python-venv (made on first use, with maturin, pytest,
      hypothesis and mypy), `mypy --strict` over the package and its stubs, and
      `pytest python/tests` (LEASEFENCE_CLI: the freshly built binary).
      PostgreSQL cases run when LEASEFENCE_TEST_PG is set; with CI set they fail without it.
  mutants [--list] [--check] [--only ID]... [--target-dir DIR] [--test-threads N] [--full] [--keep-scratch]
          [--since-base | --record-base]
      Apply every entry of mutants/catalog.toml in a scratch copy, run the tests, compare
      with the predictions. --only takes an id or a prefix ending in `*` (repeatable).
      --check only verifies that entries apply and predicted tests exist.
      --test-threads: threads of the test binary (default 8: the tests mostly wait).
      --full: run the whole suite for every mutant (default: the predicted tests first, and
      the whole suite only when one of them passes).
      --since-base: only the entries a change concerns since each one's verdict.
      --record-base: every entry; when all are killed, HEAD is recorded in mutants/catalog.base.
      On a tree whose inputs are HEAD's, each entry killed as predicted gets HEAD as its
      verdict in mutants/catalog.verdicts.json (commit it with the change it judged).
      A full run rewrites docs/worksheet.md.
  worksheet [--check]
      Rewrite docs/worksheet.md from the catalog and the last observations. --check only
      verifies that it shows every entry and prediction of the catalog, as they are now.
  cargo-mutants [--in-diff REV | --since-base | --record-base] [--fresh] [--file PATH]...
                [-- ARGS...]
      Run cargo-mutants over crates/leasefence/src at HEAD (config: .cargo/mutants.toml); fail
      on any missed or timed-out mutant. Staged: a quick screen (cargo-nextest, the tests of
      the mutated file's concern, stopping at the first failure) may only say caught; every
      mutant it does not catch is judged by the whole suite. Verdicts are kept in
      mutants/cargo-mutants.verdicts.json (commit it, so the run can be done in parts): a
      later run skips a mutant caught or unviable in an unchanged file (--fresh: judge all
      anew). --in-diff REV: only lines changed since REV.
      --file PATH: only mutants in that file or folder (repeatable).
      --since-base: only lines changed since the commit in mutants/cargo-mutants.base (the
      last clean full run); the whole library if that commit is unknown (e.g. a shallow clone).
      --record-base: a full run that, when clean, records HEAD in mutants/cargo-mutants.base
      (the library and the config must be committed).
  bench [--quick] [-- ARGS...]
      Build the peers (bench/peers) and the harness (crates/leasefence-bench) in release mode
      and run the benchmarks: the floor, leasefence and its peers alternating in one run;
      results in target/bench (results.md, results.json, throughput.svg). --quick: smaller
      sizes and 3 rounds (the ratio table in under three minutes once built). ARGS go to the
      harness (see `target/release/leasefence-bench --help`).
  reliability [--quick] [--soak MINUTES]
      The long tier of the reliability tests: model-based sequences, linearizability of
      concurrency histories, SIGSTOP pauses, SIGKILL crashes, faults and bad input, power
      cuts, PostgreSQL server faults and a 10-minute soak, scaled up (--quick: a shorter run),
      printing the counts each reports. PostgreSQL variants run when LEASEFENCE_TEST_PG is set.
      --soak MINUTES: only the soak (workers on SQLite and PostgreSQL, serve and an HTTP
      worker, faults at random; memory and descriptors sampled), MINUTES long.
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) if process::interrupted() => {
            eprintln!("stopped ({e}); the working tree was never modified");
            ExitCode::from(130)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn workspace_root() -> PathBuf {
    let xtask = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    xtask.parent().map(PathBuf::from).unwrap_or(xtask)
}

fn run(args: &[String]) -> Result<bool, String> {
    let root = workspace_root();
    let (command, rest) = args.split_first().ok_or_else(|| USAGE.to_string())?;
    let mut rest = rest.iter();
    let value = |flag: &str, v: Option<&String>| {
        v.cloned()
            .ok_or_else(|| format!("{flag} needs a value\n\n{USAGE}"))
    };
    match command.as_str() {
        "test" => {
            let mut options = suite::Options::default();
            while let Some(arg) = rest.next() {
                match arg.as_str() {
                    "--no-rust" => options.no_rust = true,
                    "--no-python" => options.no_python = true,
                    "--pytest" => options.pytest_args.extend(rest.by_ref().cloned()),
                    "--" => options.cargo_args.extend(rest.by_ref().cloned()),
                    other => return Err(format!("unknown argument `{other}`\n\n{USAGE}")),
                }
            }
            suite::run(&root, &options)
        }
        "mutants" => {
            let mut options = mutants::Options::default();
            while let Some(arg) = rest.next() {
                match arg.as_str() {
                    "--list" => options.list = true,
                    "--check" => options.check = true,
                    "--keep-scratch" => options.keep_scratch = true,
                    "--full" => options.full = true,
                    "--since-base" => options.since_base = true,
                    "--record-base" => options.record_base = true,
                    "--only" => options
                        .only
                        .extend(value("--only", rest.next())?.split(',').map(str::to_string)),
                    "--target-dir" => {
                        options.target_dir = Some(value("--target-dir", rest.next())?.into())
                    }
                    "--test-threads" => {
                        options.test_threads = Some(
                            value("--test-threads", rest.next())?
                                .parse()
                                .map_err(|e| format!("--test-threads: {e}"))?,
                        )
                    }
                    other => return Err(format!("unknown argument `{other}`\n\n{USAGE}")),
                }
            }
            if !options.list {
                process::install_interrupt_handler();
            }
            mutants::run(&root, &options)
        }
        "worksheet" => {
            let check = match rest.next().map(String::as_str) {
                None => false,
                Some("--check") => true,
                Some(other) => return Err(format!("unknown argument `{other}`\n\n{USAGE}")),
            };
            let catalog = catalog::Catalog::load(&root)?;
            if check {
                let problems = worksheet::check(&root, &catalog)?;
                for p in &problems {
                    println!("  - {p}");
                }
                if problems.is_empty() {
                    println!("{} is in sync with the catalog", worksheet::WORKSHEET);
                } else {
                    println!(
                        "{} is out of sync with mutants/catalog.toml: run `cargo xtask mutants` \
                         and commit it",
                        worksheet::WORKSHEET
                    );
                }
                return Ok(problems.is_empty());
            }
            let results = mutants::load_results(&mutants::default_target_dir(&root));
            let path = worksheet::write(&root, &catalog, &results)?;
            println!("worksheet written: {}", path.display());
            Ok(true)
        }
        "cargo-mutants" => {
            let mut options = cargo_mutants::Options::default();
            while let Some(arg) = rest.next() {
                match arg.as_str() {
                    "--in-diff" => options.in_diff = Some(value("--in-diff", rest.next())?),
                    "--since-base" => options.since_base = true,
                    "--record-base" => options.record_base = true,
                    "--fresh" => options.fresh = true,
                    "--file" => options.files.push(value("--file", rest.next())?),
                    "--" => options.extra.extend(rest.by_ref().cloned()),
                    other => return Err(format!("unknown argument `{other}`\n\n{USAGE}")),
                }
            }
            cargo_mutants::run(&root, &options)
        }
        "bench" => {
            let mut quick = false;
            let mut extra = Vec::new();
            while let Some(arg) = rest.next() {
                match arg.as_str() {
                    "--quick" => quick = true,
                    "--" => extra.extend(rest.by_ref().cloned()),
                    other => return Err(format!("unknown argument `{other}`\n\n{USAGE}")),
                }
            }
            bench::run(&root, quick, &extra)
        }
        "reliability" => {
            let mut quick = false;
            let mut soak = None;
            while let Some(arg) = rest.next() {
                match arg.as_str() {
                    "--quick" => quick = true,
                    "--soak" => {
                        let minutes = rest
                            .next()
                            .ok_or("--soak needs a number of minutes: --soak MINUTES")?;
                        soak = Some(reliability::soak_minutes(minutes)?);
                    }
                    other => return Err(format!("unknown argument `{other}`\n\n{USAGE}")),
                }
            }
            process::install_interrupt_handler();
            match soak {
                Some(minutes) => reliability::soak(minutes),
                None => reliability::run(quick),
            }
        }
        "help" | "--help" | "-h" => {
            print!("{USAGE}");
            Ok(true)
        }
        other => Err(format!("unknown command `{other}`\n\n{USAGE}")),
    }
}

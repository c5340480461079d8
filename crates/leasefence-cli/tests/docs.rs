//! The newcomer's path: every ```` ```console ```` block of `README.md` and `docs/*.md` is run
//! as written and its output compared with the lines under each command.
//!
//! - Each document runs in a fresh temporary folder of its own; its blocks run in order in that
//!   folder, so a later block sees what an earlier one did.
//! - A line starting `$ ` is a command, run verbatim with `sh -c` (stderr into the same stream
//!   as stdout, so the order of the two is kept). `leasefence` is the binary under test: its
//!   folder comes first on `PATH`; `LEASEFENCE_DB` and `LEASEFENCE_PG_SCHEMA` are removed.
//! - The lines after a command, up to the next command or the end of the block, are its whole
//!   expected output. In them `…` is a wildcard for any text within one line, for what is
//!   inherently variable (a time read from the system clock, a PID). Literal `…` in the output
//!   matches too.
//! - Every command must exit 0 (write `; echo "exit $?"` after one that is refused).
//! - A block whose info string is `console,no-run` is not run: it needs a PostgreSQL server or
//!   runs until it is stopped. The list of such blocks is in the README ("Examples are tested").
//! - A document holding the line `<!-- docs-test: serve -->` talks to a server: before its
//!   first step, `leasefence init` and `leasefence serve --bind 127.0.0.1:0` start in its folder
//!   with fresh tokens, and every step sees `LEASEFENCE_URL` (the server's address),
//!   `LEASEFENCE_WORKER_TOKEN` and `LEASEFENCE_ADMIN_TOKEN`; the server is stopped at the end.
//! - In any document, a ```` ```python ```` block whose first line is `# NAME.py` is written
//!   to its folder as `NAME.py` before the first step, so a step can run it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One command of a console block and the output the document shows for it.
#[derive(Debug)]
struct Step {
    /// Where it is: `README.md:52`.
    at: String,
    command: String,
    expected: Vec<String>,
}

/// The runnable steps of `doc`, in order, and how many blocks were skipped (`console,no-run`).
fn steps(doc: &Path) -> (Vec<Step>, usize) {
    let text = std::fs::read_to_string(doc).unwrap();
    let name = doc.file_name().unwrap().to_string_lossy().into_owned();
    let (mut steps, mut skipped) = (Vec::new(), 0);
    let mut block: Option<bool> = None; // Some(run?) inside a console block
    let mut in_other = false;
    for (n, line) in text.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (fence, block, in_other) {
            (Some(info), None, false) => {
                let info = info.trim();
                if info == "console" {
                    block = Some(true);
                } else if info == "console,no-run" {
                    block = Some(false);
                    skipped += 1;
                } else {
                    assert!(
                        !info.starts_with("console"),
                        "{name}:{}: unknown console info string {info:?} (console or \
                         console,no-run)",
                        n + 1
                    );
                    in_other = true;
                }
            }
            (Some(_), Some(_), _) => block = None,
            (Some(_), None, true) => in_other = false,
            (None, Some(true), _) => match line.strip_prefix("$ ") {
                Some(command) => steps.push(Step {
                    at: format!("{name}:{}", n + 1),
                    command: command.to_owned(),
                    expected: Vec::new(),
                }),
                None => steps
                    .last_mut()
                    .unwrap_or_else(|| panic!("{name}:{}: output before any `$ ` line", n + 1))
                    .expected
                    .push(line.to_owned()),
            },
            _ => {}
        }
    }
    assert!(
        block.is_none() && !in_other,
        "{name}: a code block is not closed"
    );
    (steps, skipped)
}

/// Whether `actual` is `expected`, `…` in `expected` matching any text.
fn matches(expected: &str, actual: &str) -> bool {
    let mut parts = expected.split('…');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = actual.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

/// The ```` ```python ```` blocks of `text` that name their file (`# NAME.py` on the first
/// line): `(NAME.py, the code)`.
fn python_files(text: &str) -> Vec<(String, String)> {
    /// Where the scan is: outside a block, on a python block's first line, inside one that
    /// names its file, or inside another block.
    enum At {
        Text,
        First,
        File(String, String),
        Other,
    }
    let mut files = Vec::new();
    let mut at = At::Text;
    for line in text.lines() {
        let fence = line.trim_start().strip_prefix("```");
        at = match (at, fence) {
            (At::Text, Some(info)) if info.trim() == "python" => At::First,
            (At::Text, Some(_)) => At::Other,
            (At::Text, None) => At::Text,
            (At::First | At::Other, Some(_)) => At::Text,
            (At::File(name, code), Some(_)) => {
                files.push((name, code));
                At::Text
            }
            (At::First, None) => match line
                .strip_prefix("# ")
                .filter(|n| n.ends_with(".py") && !n.contains(' '))
            {
                Some(name) => At::File(name.to_owned(), format!("{line}\n")),
                None => At::Other,
            },
            (At::File(name, mut code), None) => {
                code.push_str(line);
                code.push('\n');
                At::File(name, code)
            }
            (At::Other, None) => At::Other,
        };
    }
    files
}

/// A `leasefence serve` for a document's steps, stopped on drop.
struct Served {
    child: std::process::Child,
    env: Vec<(&'static str, String)>,
}

impl Served {
    /// Initialises `leasefence.db` in `dir` and serves it on a free loopback port with fresh
    /// tokens.
    fn start(dir: &Path, bin: &Path) -> Served {
        use std::io::BufRead as _;
        let init = Command::new(bin)
            .arg("init")
            .current_dir(dir)
            .env_remove("LEASEFENCE_DB")
            .output()
            .unwrap();
        assert!(init.status.success(), "{init:?}");
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let worker = format!("docs-worker-{nanos:x}");
        let admin = format!("docs-admin-{nanos:x}");
        let mut child = Command::new(bin)
            .args(["serve", "--bind", "127.0.0.1:0"])
            .current_dir(dir)
            .env_remove("LEASEFENCE_DB")
            .env("LEASEFENCE_WORKER_TOKEN", &worker)
            .env("LEASEFENCE_ADMIN_TOKEN", &admin)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("serve printed {line:?}"))
            .to_owned();
        Served {
            child,
            env: vec![
                ("LEASEFENCE_URL", url),
                ("LEASEFENCE_WORKER_TOKEN", worker),
                ("LEASEFENCE_ADMIN_TOKEN", admin),
            ],
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `step` in `dir` and returns its output lines, or why it failed.
fn run(
    step: &Step,
    dir: &Path,
    path: &str,
    env: &[(&'static str, String)],
) -> Result<Vec<String>, String> {
    let out_path = dir.join(".docs-output");
    let out = File::create(&out_path).unwrap();
    let status = Command::new("sh")
        .arg("-c")
        .arg(&step.command)
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("LEASEFENCE_DB")
        .env_remove("LEASEFENCE_PG_SCHEMA")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .status()
        .unwrap();
    let output = std::fs::read_to_string(&out_path).unwrap();
    std::fs::remove_file(&out_path).unwrap();
    let lines: Vec<String> = output.lines().map(str::to_owned).collect();
    if status.success() {
        Ok(lines)
    } else {
        Err(format!("exited with {status}; output:\n{output}"))
    }
}

/// Runs every step of `doc` in a fresh folder; the failures, described.
fn check(doc: &Path) -> Vec<String> {
    let (steps, _) = steps(doc);
    let dir = tempfile::tempdir().unwrap();
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_leasefence"));
    let path = std::env::join_paths(std::iter::once(bin.parent().unwrap().to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap()
    .into_string()
    .unwrap();
    let text = std::fs::read_to_string(doc).unwrap();
    for (name, code) in python_files(&text) {
        std::fs::write(dir.path().join(name), code).unwrap();
    }
    let served = text
        .lines()
        .any(|l| l.trim() == "<!-- docs-test: serve -->")
        .then(|| Served::start(dir.path(), &bin));
    let env = served.as_ref().map_or(&[][..], |s| &s.env[..]);
    let mut failures = Vec::new();
    for step in &steps {
        match run(step, dir.path(), &path, env) {
            Err(why) => failures.push(format!("{}: `{}` {why}", step.at, step.command)),
            Ok(actual) => {
                let same = actual.len() == step.expected.len()
                    && step
                        .expected
                        .iter()
                        .zip(&actual)
                        .all(|(e, a)| matches(e, a));
                if !same {
                    failures.push(format!(
                        "{}: `{}`\n--- the document shows:\n{}\n--- the command printed:\n{}",
                        step.at,
                        step.command,
                        step.expected.join("\n"),
                        actual.join("\n")
                    ));
                }
            }
        }
    }
    failures
}

/// `README.md` and every `docs/*.md`, from the workspace root.
fn documents() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    docs.insert(0, root.join("README.md"));
    docs
}

#[test]
fn every_console_example_prints_what_the_docs_show() {
    let mut failures = Vec::new();
    let mut ran = 0;
    for doc in documents() {
        ran += steps(&doc).0.len();
        failures.extend(check(&doc));
    }
    assert!(
        ran >= 20,
        "the README and the guide have console examples: {ran} commands"
    );
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}

#[test]
fn the_wildcard_matches_any_text_within_a_line() {
    assert!(matches("a", "a"));
    assert!(!matches("a", "ab"));
    assert!(matches(
        "enqueued  …",
        "enqueued  2026-12-01 07:30:12Z (now)"
    ));
    assert!(matches("x … y … z", "x 1 y 2 z"));
    assert!(!matches("x … y", "x 1 z"));
    assert!(matches("…", ""));
    assert!(matches("a…a", "a…a"));
}

#[test]
fn the_parser_finds_commands_outputs_and_skipped_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("t.md");
    std::fs::write(
        &doc,
        "text\n```console\n$ echo a\na\n$ true\n```\n```rust\n$ not a command\n```\n\
         ```console,no-run\n$ leasefence work\n```\n",
    )
    .unwrap();
    let (steps, skipped) = steps(&doc);
    assert_eq!(skipped, 1);
    assert_eq!(steps.len(), 2);
    assert_eq!(
        (steps[0].command.as_str(), &steps[0].expected[..]),
        ("echo a", &["a".to_owned()][..])
    );
    assert!(steps[1].expected.is_empty());
    assert_eq!(steps[0].at, "t.md:3");
}

#[test]
fn python_blocks_that_name_a_file_are_written_out() {
    let text = "```python\n# worker.py\nprint(1)\n```\n```python\nexcerpt()\n```\n\
                ```python\n# two.py\nx = 2\n```\n";
    assert_eq!(
        python_files(text),
        [
            ("worker.py".to_owned(), "# worker.py\nprint(1)\n".to_owned()),
            ("two.py".to_owned(), "# two.py\nx = 2\n".to_owned()),
        ]
    );
}

#[test]
fn the_rust_example_of_the_http_guide_is_the_example_that_builds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/http.md")).unwrap();
    let start = doc
        .find("```rust\n")
        .expect("docs/http.md has a Rust block")
        + "```rust\n".len();
    let block = &doc[start..start + doc[start..].find("```").unwrap()];
    let file =
        std::fs::read_to_string(root.join("crates/leasefence/examples/async_worker.rs")).unwrap();
    assert_eq!(
        block, file,
        "docs/http.md's Rust block differs from examples/async_worker.rs"
    );
}

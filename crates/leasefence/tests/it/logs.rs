//! What the library logs, captured: a global `tracing` subscriber, installed by the first
//! [`capture`], keeps each formatted event that mentions a marker some live [`Capture`] asked
//! for (an owner prefix, a resource name). Tests share one process under `cargo test`, so each
//! watches only a marker of its own.

use std::io;
use std::sync::{Arc, Mutex, OnceLock};

use tracing_subscriber::filter::LevelFilter;

type Lines = Arc<Mutex<Vec<String>>>;

/// The live captures: (id, marker, the lines kept for it).
static WATCHES: Mutex<Vec<(u64, String, Lines)>> = Mutex::new(Vec::new());
static INSTALLED: OnceLock<()> = OnceLock::new();
static NEXT: Mutex<u64> = Mutex::new(0);

/// `prefix` made unique in this process (`prefix-N`): a marker no other case logs, for the two
/// backends of one case run side by side too.
pub fn marker(prefix: &str) -> String {
    let mut next = NEXT.lock().unwrap();
    *next += 1;
    format!("{prefix}-{}", *next)
}

/// The library's log lines (INFO and above, as `tracing_subscriber::fmt` formats them) that
/// mention `marker`, from now until the capture is dropped.
pub fn capture(marker: &str) -> Capture {
    INSTALLED.get_or_init(|| {
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(LevelFilter::INFO)
            .with_writer(|| Line(Vec::new()))
            .finish();
        tracing::subscriber::set_global_default(subscriber)
            .expect("no other global subscriber in the test binary");
    });
    let id = {
        let mut next = NEXT.lock().unwrap();
        *next += 1;
        *next
    };
    let lines = Lines::default();
    WATCHES
        .lock()
        .unwrap()
        .push((id, marker.to_owned(), lines.clone()));
    Capture { id, lines }
}

/// The lines logged since [`capture`] that mention its marker.
pub struct Capture {
    id: u64,
    lines: Lines,
}

impl Capture {
    /// The lines kept so far that contain `text`.
    pub fn with(&self, text: &str) -> Vec<String> {
        let lines = self.lines.lock().unwrap();
        lines.iter().filter(|l| l.contains(text)).cloned().collect()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        WATCHES.lock().unwrap().retain(|(id, ..)| *id != self.id);
    }
}

/// One formatted event, handed to every capture whose marker it mentions when dropped.
struct Line(Vec<u8>);

impl io::Write for Line {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        let line = String::from_utf8_lossy(&self.0);
        for (_, marker, lines) in WATCHES.lock().unwrap().iter() {
            if line.contains(marker.as_str()) {
                lines.lock().unwrap().push(line.trim_end().to_owned());
            }
        }
    }
}

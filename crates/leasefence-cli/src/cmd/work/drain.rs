//! A command's stdout or stderr, read on a thread of its own until the pipe ends — or, once
//! the command's process group is gone, for a short grace only.

use std::io::Read;
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::Duration;

/// How long a command's output is still read once its process group is gone: enough for the
/// pipe's last bytes. Past it, whatever still holds the pipe open is a process the command
/// detached from its group (a daemon it started with `setsid`): its output is not the job's,
/// and the job does not wait for it.
const OUTPUT_GRACE: Duration = Duration::from_millis(500);

/// A command's pipe, read to its end on a thread of its own.
pub(super) struct Drain {
    bytes: Arc<Mutex<Vec<u8>>>,
    ended: mpsc::Receiver<()>,
}

impl Drain {
    pub(super) fn start(mut pipe: Option<impl Read + Send + 'static>) -> Drain {
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let (end, ended) = mpsc::channel();
        let read = bytes.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            while let Some(pipe) = &mut pipe {
                match pipe.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => read
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = end.send(());
        });
        Drain { bytes, ended }
    }

    /// What was read, once the pipe ended or [`OUTPUT_GRACE`] passed (the thread then reads on,
    /// unwaited, until the detached process closes the pipe).
    pub(super) fn take(self) -> Vec<u8> {
        let _ = self.ended.recv_timeout(OUTPUT_GRACE);
        std::mem::take(&mut *self.bytes.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

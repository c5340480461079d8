//! The simulated disk: for every tracked file, the image that has reached the platter (its
//! content as of its last successful sync) and the writes and truncates issued since, which
//! live only in the "page cache" (the real file). A cut keeps a random part of those: each
//! unsynced operation, taken in a random order, is dropped, applied whole, or torn (a random
//! subset of its 512-byte sectors applied).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use leasefence::rusqlite::ffi;

/// The sector size of torn writes: a sector is written whole or not at all.
pub const SECTOR: u64 = 512;

/// One I/O call on a tracked file.
pub(crate) enum Io<'a> {
    Write {
        offset: u64,
        data: &'a [u8],
    },
    Truncate(u64),
    Sync,
    /// `sync_dir`: SQLite asked for the folder to be synced after the unlink.
    Delete {
        sync_dir: bool,
    },
}

/// An operation not yet synced.
#[derive(Clone)]
enum Op {
    Write { offset: u64, data: Vec<u8> },
    Truncate(u64),
}

#[derive(Default)]
struct Tracked {
    durable: Vec<u8>,
    pending: Vec<Op>,
    /// Whether the file's directory entry is durable: false for a file created since its
    /// folder was last synced (its creation may be lost at a cut).
    entry_durable: bool,
}

/// What one cut did to the unsynced operations it found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CutReport {
    /// The tracked I/O call (write, truncate or sync; counted from the disk's creation) the cut
    /// fell on; that call failed and was not carried out (a write in flight may still be torn
    /// onto the image).
    pub at_event: u64,
    /// Unsynced writes and truncates the cut found.
    pub unsynced: usize,
    /// Of those, lost entirely.
    pub dropped: usize,
    /// Applied whole.
    pub applied: usize,
    /// Applied in part: some of their sectors.
    pub torn: usize,
    /// Files created since their folder's last sync that the cut made vanish.
    pub entries_lost: usize,
    /// Files deleted since their folder's last sync that the cut brought back.
    pub resurrected: usize,
}

#[derive(Default)]
struct State {
    /// The folder whose files are tracked (canonical), while a [`PowerCut`](crate::PowerCut)
    /// lives.
    root: Option<String>,
    files: HashMap<String, Tracked>,
    /// Files deleted while their folder was not synced since: the unlink may not survive a cut.
    deleted: HashMap<String, Tracked>,
    /// Tracked files open now.
    handles: usize,
    cut: bool,
    /// Tracked I/O calls still to go before the cut.
    countdown: Option<u64>,
    events: u64,
    /// Successful syncs of database files (not of their WAL or journal): checkpoints.
    checkpoints: u64,
    rng: u64,
    /// What each file holds after the cut (`None`: the file is gone).
    image: HashMap<String, Option<Vec<u8>>>,
    report: CutReport,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);
/// `State::cut`, readable without the lock.
static CUT: AtomicBool = AtomicBool::new(false);

fn lock() -> MutexGuard<'static, Option<State>> {
    STATE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    f(lock().get_or_insert_with(State::default))
}

/// Starts tracking the files under `root` with an empty history.
pub(crate) fn reset(root: Option<String>, seed: u64) {
    with(|s| {
        *s = State {
            root,
            rng: seed | 1,
            ..State::default()
        }
    });
    CUT.store(false, Ordering::SeqCst);
}

/// Whether a file (by SQLite's full path) lives on the simulated disk.
pub(crate) fn tracks(path: &str) -> bool {
    with(|s| {
        s.root
            .as_deref()
            .is_some_and(|root| path.starts_with(root) && path[root.len()..].starts_with('/'))
    })
}

/// Whether the power is off.
pub(crate) fn is_cut() -> bool {
    CUT.load(Ordering::SeqCst)
}

/// `created`: the open created the file (it did not exist before): its directory entry is
/// durable only once its folder is synced.
pub(crate) fn opened(path: &str, created: bool) {
    with(|s| {
        s.handles += 1;
        s.files.entry(path.to_owned()).or_insert_with(|| Tracked {
            // A file first seen now is as durable as it is on the real disk.
            durable: std::fs::read(path).unwrap_or_default(),
            pending: vec![],
            entry_durable: !created,
        });
    })
}

fn folder(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// The folder of `path` was synced (fsync of the directory): the creations and deletions of
/// its files so far are durable.
pub(crate) fn dir_synced(path: &str) {
    with(|s| {
        let dir = folder(path).to_owned();
        for (p, file) in s.files.iter_mut() {
            if folder(p) == dir {
                file.entry_durable = true;
            }
        }
        s.deleted.retain(|p, _| folder(p) != dir);
    })
}

pub(crate) fn closed(_path: &str) {
    with(|s| s.handles -= 1)
}

/// Carries out one I/O call on a tracked file (`call` does it on the real file), recording it,
/// or refuses it when the power is off or this is the call the cut falls on.
pub(crate) fn io(path: &str, io: Io<'_>, call: impl FnOnce() -> i32) -> i32 {
    let refused = match io {
        Io::Write { .. } => ffi::SQLITE_IOERR_WRITE,
        Io::Truncate(_) => ffi::SQLITE_IOERR_TRUNCATE,
        Io::Sync => ffi::SQLITE_IOERR_FSYNC,
        Io::Delete { .. } => ffi::SQLITE_IOERR_DELETE,
    };
    let mut guard = lock();
    let s = guard.get_or_insert_with(State::default);
    if s.cut {
        return refused;
    }
    if !matches!(io, Io::Delete { .. }) {
        s.events += 1;
        if let Some(left) = s.countdown.as_mut() {
            *left -= 1;
            if *left == 0 {
                // The write in flight is in the page cache's hands: it may be torn onto the disk.
                let op = match io {
                    Io::Write { offset, data } => Some(Op::Write {
                        offset,
                        data: data.to_vec(),
                    }),
                    Io::Truncate(size) => Some(Op::Truncate(size)),
                    _ => None,
                };
                if let (Some(op), Some(file)) = (op, s.files.get_mut(path)) {
                    file.pending.push(op);
                }
                s.cut();
                return refused;
            }
        }
    }
    let rc = call();
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    match io {
        Io::Delete { sync_dir } => {
            if let Some(file) = s.files.remove(path) {
                // The unlink is durable only once the folder is synced (unix's xDelete syncs
                // it when asked to); until then a cut may bring the file back as the disk
                // holds it.
                if file.entry_durable && !sync_dir {
                    s.deleted.insert(path.to_owned(), file);
                }
            }
            if sync_dir {
                drop(guard);
                dir_synced(path);
                return rc;
            }
        }
        Io::Write { offset, data } => s.file(path).pending.push(Op::Write {
            offset,
            data: data.to_vec(),
        }),
        Io::Truncate(size) => s.file(path).pending.push(Op::Truncate(size)),
        Io::Sync => {
            if !path.ends_with("-wal") && !path.ends_with("-journal") {
                s.checkpoints += 1;
            }
            let file = s.file(path);
            for op in std::mem::take(&mut file.pending) {
                apply(&mut file.durable, &op, None);
            }
        }
    }
    rc
}

impl State {
    fn file(&mut self, path: &str) -> &mut Tracked {
        self.files.entry(path.to_owned()).or_default()
    }

    fn below(&mut self, n: u64) -> u64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) % n
    }

    /// The power goes off: each file's image is its durable content plus a random part of its
    /// unsynced operations, in a random order.
    fn cut(&mut self) {
        let mut report = CutReport {
            at_event: self.events,
            ..CutReport::default()
        };
        let mut paths: Vec<(String, bool)> = self
            .files
            .keys()
            .map(|p| (p.clone(), false))
            .chain(
                self.deleted
                    .keys()
                    .filter(|p| !self.files.contains_key(*p))
                    .map(|p| (p.clone(), true)),
            )
            .collect();
        paths.sort();
        let mut images = HashMap::new();
        for (path, deleted) in paths {
            // The directory entry: an unsynced creation may vanish, an unsynced unlink may
            // not have happened.
            let entry_durable = self.files.get(&path).is_none_or(|f| f.entry_durable);
            if deleted {
                if self.below(2) == 0 {
                    continue; // the unlink reached the disk
                }
                report.resurrected += 1;
            } else if !entry_durable && self.below(2) == 0 {
                report.entries_lost += 1;
                images.insert(path, None);
                continue;
            }
            let file = if deleted {
                &self.deleted[&path]
            } else {
                &self.files[&path]
            };
            let mut image = file.durable.clone();
            let mut ops = file.pending.clone();
            // Fisher–Yates: the disk may have received them in any order.
            for i in (1..ops.len()).rev() {
                let j = self.below(i as u64 + 1) as usize;
                ops.swap(i, j);
            }
            for op in &ops {
                report.unsynced += 1;
                match self.below(3) {
                    0 => report.dropped += 1,
                    1 => {
                        apply(&mut image, op, None);
                        report.applied += 1;
                    }
                    _ => {
                        let sectors = match op {
                            Op::Write { offset, data } => {
                                let first = offset / SECTOR;
                                let last = (offset + data.len() as u64).div_ceil(SECTOR);
                                (first..last).filter(|_| self.below(2) == 0).collect()
                            }
                            Op::Truncate(_) => vec![],
                        };
                        apply(&mut image, op, Some(&sectors));
                        report.torn += 1;
                    }
                }
            }
            images.insert(path, Some(image));
        }
        self.image = images;
        self.report = report;
        self.cut = true;
        CUT.store(true, Ordering::SeqCst);
    }
}

/// Applies an operation to an image; `sectors`: only those sectors of a write (a torn write;
/// a torn truncate does not happen).
fn apply(image: &mut Vec<u8>, op: &Op, sectors: Option<&[u64]>) {
    match op {
        Op::Truncate(size) => {
            if sectors.is_none() {
                image.resize(*size as usize, 0);
            }
        }
        Op::Write { offset, data } => {
            let end = offset + data.len() as u64;
            let mut put = |from: u64, to: u64| {
                if image.len() < to as usize {
                    image.resize(to as usize, 0);
                }
                let src = &data[(from - offset) as usize..(to - offset) as usize];
                image[from as usize..to as usize].copy_from_slice(src);
            };
            match sectors {
                None => put(*offset, end),
                Some(sectors) => {
                    for &sector in sectors {
                        let from = (sector * SECTOR).max(*offset);
                        let to = ((sector + 1) * SECTOR).min(end);
                        put(from, to);
                    }
                }
            }
        }
    }
}

pub(crate) fn arm(events: u64) {
    with(|s| s.countdown = Some(events.max(1)));
}

pub(crate) fn cut_now() {
    with(|s| {
        if !s.cut {
            s.cut();
        }
    })
}

pub(crate) fn events() -> u64 {
    with(|s| s.events)
}

pub(crate) fn checkpoints() -> u64 {
    with(|s| s.checkpoints)
}

/// After a cut with every tracked file closed: writes each file's image onto the real disk,
/// drops the shared-memory wal-index (it does not survive a power loss) and starts afresh.
pub(crate) fn reboot() -> Result<CutReport, String> {
    with(|s| {
        if !s.cut {
            s.cut();
        }
        if s.handles > 0 {
            return Err(format!(
                "{} file(s) of the simulated disk are still open: close every connection before \
                 the reboot",
                s.handles
            ));
        }
        for (path, image) in s.image.drain() {
            match image {
                Some(image) => {
                    std::fs::write(&path, &image).map_err(|e| format!("write back {path}: {e}"))?
                }
                None => match std::fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(format!("remove {path}: {e}")),
                },
            }
            if !path.ends_with("-wal") && !path.ends_with("-journal") {
                let _ = std::fs::remove_file(format!("{path}-shm"));
            }
        }
        s.files.clear();
        s.deleted.clear();
        s.cut = false;
        s.countdown = None;
        CUT.store(false, Ordering::SeqCst);
        Ok(s.report)
    })
}

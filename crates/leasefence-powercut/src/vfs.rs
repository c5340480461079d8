//! The VFS itself: SQLite's default (`unix`) VFS wrapped so that every write, truncate and sync
//! of a file under the disk's folder is also recorded by [`Disk`](crate::disk::Disk). The real
//! file plays the page cache (what reads see); the disk's durable image is what a power cut
//! leaves.
//!
//! This is the crate's only unsafe code: SQLite's C interface.
#![allow(unsafe_code)]

use std::ffi::{CStr, c_char, c_int, c_void};
use std::mem::size_of;
use std::ptr::{self, null_mut};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicPtr, Ordering};

use leasefence::rusqlite::ffi;

use crate::disk::{self, Io};

/// The name the VFS registers under (it is also made SQLite's default).
pub const NAME: &CStr = c"powercut";

/// The wrapped VFS (`unix`), found once.
static BASE: AtomicPtr<ffi::sqlite3_vfs> = AtomicPtr::new(null_mut());
static INSTALLED: OnceLock<()> = OnceLock::new();

/// An open file: SQLite's header, the real file (allocated right behind this struct, within the
/// `szOsFile` bytes SQLite gives every file) and the path, when the disk tracks the file.
#[repr(C)]
struct CutFile {
    base: ffi::sqlite3_file,
    real: *mut ffi::sqlite3_file,
    /// `Box<String>` as a raw pointer, or null for a file the disk does not track.
    path: *mut String,
    /// The `unix` VFS syncs the folder at this file's first sync (a journal or WAL opened with
    /// `SQLITE_OPEN_CREATE`, as unix's `UNIXFILE_DIRSYNC`).
    dirsync: bool,
}

fn base() -> *mut ffi::sqlite3_vfs {
    BASE.load(Ordering::Acquire)
}

/// Registers the VFS as SQLite's default, once per process. Every connection opened afterwards
/// without naming a VFS goes through it; files outside a tracked folder pass straight through.
pub fn install() {
    INSTALLED.get_or_init(|| {
        // SAFETY: sqlite3_initialize and sqlite3_vfs_find are safe to call at any time; the VFS
        // struct is leaked, so it outlives every connection (SQLite keeps the pointer).
        unsafe {
            assert_eq!(ffi::sqlite3_initialize(), ffi::SQLITE_OK);
            let unix = ffi::sqlite3_vfs_find(ptr::null());
            assert!(!unix.is_null(), "SQLite has no default VFS");
            BASE.store(unix, Ordering::Release);
            let vfs = Box::leak(Box::new(ffi::sqlite3_vfs {
                iVersion: 2,
                szOsFile: (size_of::<CutFile>() + (*unix).szOsFile as usize) as c_int,
                mxPathname: (*unix).mxPathname,
                pNext: null_mut(),
                zName: NAME.as_ptr(),
                pAppData: null_mut(),
                xOpen: Some(x_open),
                xDelete: Some(x_delete),
                xAccess: Some(x_access),
                xFullPathname: Some(x_full_pathname),
                xDlOpen: Some(x_dl_open),
                xDlError: Some(x_dl_error),
                xDlSym: Some(x_dl_sym),
                xDlClose: Some(x_dl_close),
                xRandomness: Some(x_randomness),
                xSleep: Some(x_sleep),
                xCurrentTime: Some(x_current_time),
                xGetLastError: Some(x_get_last_error),
                xCurrentTimeInt64: Some(x_current_time_int64),
                xSetSystemCall: None,
                xGetSystemCall: None,
                xNextSystemCall: None,
            }));
            assert_eq!(ffi::sqlite3_vfs_register(vfs, 1), ffi::SQLITE_OK);
        }
    });
}

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(x_close),
    xRead: Some(x_read),
    xWrite: Some(x_write),
    xTruncate: Some(x_truncate),
    xSync: Some(x_sync),
    xFileSize: Some(x_file_size),
    xLock: Some(x_lock),
    xUnlock: Some(x_unlock),
    xCheckReservedLock: Some(x_check_reserved_lock),
    xFileControl: Some(x_file_control),
    xSectorSize: Some(x_sector_size),
    xDeviceCharacteristics: Some(x_device_characteristics),
    xShmMap: Some(x_shm_map),
    xShmLock: Some(x_shm_lock),
    xShmBarrier: Some(x_shm_barrier),
    xShmUnmap: Some(x_shm_unmap),
    xFetch: Some(x_fetch),
    xUnfetch: Some(x_unfetch),
};

/// SQLite's path argument as a string (None for a temporary file or a non-UTF-8 path).
unsafe fn path_of(name: *const c_char) -> Option<String> {
    if name.is_null() {
        return None;
    }
    // SAFETY: SQLite passes a NUL-terminated string.
    unsafe { CStr::from_ptr(name) }
        .to_str()
        .ok()
        .map(str::to_owned)
}

unsafe extern "C" fn x_open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    // SAFETY: `file` points to szOsFile bytes SQLite allocated for this file (8-aligned); the
    // real file lives behind our header.
    unsafe {
        let f = file.cast::<CutFile>();
        let real = file
            .cast::<u8>()
            .add(size_of::<CutFile>())
            .cast::<ffi::sqlite3_file>();
        ptr::write(
            f,
            CutFile {
                base: ffi::sqlite3_file {
                    pMethods: ptr::null(),
                },
                real,
                path: null_mut(),
                dirsync: false,
            },
        );
        (*real).pMethods = ptr::null();
        let durable_kind = flags
            & (ffi::SQLITE_OPEN_MAIN_DB | ffi::SQLITE_OPEN_WAL | ffi::SQLITE_OPEN_MAIN_JOURNAL)
            != 0;
        let tracked = if durable_kind {
            path_of(name).filter(|p| disk::tracks(p))
        } else {
            None
        };
        if tracked.is_some() && disk::is_cut() {
            return ffi::SQLITE_IOERR;
        }
        let existed = tracked
            .as_deref()
            .is_none_or(|p| std::path::Path::new(p).exists());
        let vfs = base();
        let rc = ((*vfs).xOpen.unwrap())(vfs, name, real, flags, out_flags);
        if rc != ffi::SQLITE_OK {
            if !(*real).pMethods.is_null() {
                ((*(*real).pMethods).xClose.unwrap())(real);
            }
            return rc;
        }
        if let Some(path) = tracked {
            disk::opened(&path, !existed);
            (*f).path = Box::into_raw(Box::new(path));
            (*f).dirsync = flags & ffi::SQLITE_OPEN_CREATE != 0
                && flags
                    & (ffi::SQLITE_OPEN_MAIN_JOURNAL
                        | ffi::SQLITE_OPEN_SUPER_JOURNAL
                        | ffi::SQLITE_OPEN_WAL)
                    != 0;
        }
        (*f).base.pMethods = &METHODS;
        ffi::SQLITE_OK
    }
}

unsafe extern "C" fn x_delete(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    sync_dir: c_int,
) -> c_int {
    // SAFETY: delegation to the wrapped VFS with SQLite's own arguments.
    unsafe {
        let vfs = base();
        match path_of(name).filter(|p| disk::tracks(p)) {
            Some(path) => disk::io(
                &path,
                Io::Delete {
                    sync_dir: sync_dir & 1 != 0,
                },
                || ((*vfs).xDelete.unwrap())(vfs, name, sync_dir),
            ),
            None => ((*vfs).xDelete.unwrap())(vfs, name, sync_dir),
        }
    }
}

// The rest of the VFS's methods are the wrapped VFS's own (called with the wrapped VFS, whose
// functions read their own pAppData).

unsafe extern "C" fn x_access(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    flags: c_int,
    out: *mut c_int,
) -> c_int {
    // SAFETY: delegation.
    unsafe {
        let vfs = base();
        ((*vfs).xAccess.unwrap())(vfs, name, flags, out)
    }
}

unsafe extern "C" fn x_full_pathname(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    n: c_int,
    out: *mut c_char,
) -> c_int {
    // SAFETY: delegation.
    unsafe {
        let vfs = base();
        ((*vfs).xFullPathname.unwrap())(vfs, name, n, out)
    }
}

unsafe extern "C" fn x_dl_open(_vfs: *mut ffi::sqlite3_vfs, name: *const c_char) -> *mut c_void {
    // SAFETY: delegation.
    unsafe {
        let vfs = base();
        ((*vfs).xDlOpen.unwrap())(vfs, name)
    }
}

unsafe extern "C" fn x_dl_error(_vfs: *mut ffi::sqlite3_vfs, n: c_int, out: *mut c_char) {
    // SAFETY: delegation.
    unsafe {
        let vfs = base();
        ((*vfs).xDlError.unwrap())(vfs, n, out)
    }
}

unsafe extern "C" fn x_dl_sym(
    _vfs: *mut ffi::sqlite3_vfs,
    handle: *mut c_void,
    symbol: *const c_char,
) -> Option<unsafe extern "C" fn(*mut ffi::sqlite3_vfs, *mut c_void, *const c_char)> {
    // SAFETY: delegation.
    unsafe {
        let vfs = base();
        ((*vfs).xDlSym.unwrap())(vfs, handle, symbol)
    }
}

unsafe extern "C" fn x_dl_close(_vfs: *mut ffi::sqlite3_vfs, handle: *mut c_void) {
    // SAFETY: delegation.
    unsafe {
        let vfs = base();
        ((*vfs).xDlClose.unwrap())(vfs, handle)
    }
}

unsafe extern "C" fn x_randomness(
    _vfs: *mut ffi::sqlite3_vfs,
    n: c_int,
    out: *mut c_char,
) -> c_int {
    // SAFETY: delegation.
    unsafe {
        let vfs = base();
        ((*vfs).xRandomness.unwrap())(vfs, n, out)
    }
}

unsafe extern "C" fn x_sleep(_vfs: *mut ffi::sqlite3_vfs, micros: c_int) -> c_int {
    // SAFETY: delegation.
    unsafe {
        let vfs = base();
        ((*vfs).xSleep.unwrap())(vfs, micros)
    }
}

unsafe extern "C" fn x_current_time(_vfs: *mut ffi::sqlite3_vfs, out: *mut f64) -> c_int {
    // SAFETY: delegation.
    unsafe {
        let vfs = base();
        ((*vfs).xCurrentTime.unwrap())(vfs, out)
    }
}

unsafe extern "C" fn x_get_last_error(
    _vfs: *mut ffi::sqlite3_vfs,
    n: c_int,
    out: *mut c_char,
) -> c_int {
    // SAFETY: delegation.
    unsafe {
        let vfs = base();
        ((*vfs).xGetLastError.unwrap())(vfs, n, out)
    }
}

unsafe extern "C" fn x_current_time_int64(
    _vfs: *mut ffi::sqlite3_vfs,
    out: *mut ffi::sqlite3_int64,
) -> c_int {
    // SAFETY: delegation.
    unsafe {
        let vfs = base();
        ((*vfs).xCurrentTimeInt64.unwrap())(vfs, out)
    }
}

/// The real file behind one of ours, and its methods.
unsafe fn real(
    file: *mut ffi::sqlite3_file,
) -> (*mut ffi::sqlite3_file, &'static ffi::sqlite3_io_methods) {
    // SAFETY: every file carrying METHODS was set up by x_open with an open real file.
    unsafe {
        let real = (*file.cast::<CutFile>()).real;
        (real, &*(*real).pMethods)
    }
}

/// The tracked path of a file, if the disk tracks it.
unsafe fn tracked<'a>(file: *mut ffi::sqlite3_file) -> Option<&'a str> {
    // SAFETY: `path` is null or a live Box<String> owned by this file until x_close.
    unsafe { (*file.cast::<CutFile>()).path.as_ref().map(String::as_str) }
}

unsafe extern "C" fn x_close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite closes each file once; the real file is closed and our path freed.
    unsafe {
        let (real, m) = real(file);
        let rc = (m.xClose.unwrap())(real);
        let f = file.cast::<CutFile>();
        if !(*f).path.is_null() {
            let path = Box::from_raw((*f).path);
            disk::closed(&path);
            (*f).path = null_mut();
        }
        (*f).base.pMethods = ptr::null();
        rc
    }
}

unsafe extern "C" fn x_read(
    file: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amt: c_int,
    off: ffi::sqlite3_int64,
) -> c_int {
    // SAFETY: delegation; reads change nothing the disk records.
    unsafe {
        let (real, m) = real(file);
        if tracked(file).is_some() && disk::is_cut() {
            return ffi::SQLITE_IOERR_READ;
        }
        (m.xRead.unwrap())(real, buf, amt, off)
    }
}

unsafe extern "C" fn x_write(
    file: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amt: c_int,
    off: ffi::sqlite3_int64,
) -> c_int {
    // SAFETY: SQLite passes `amt` readable bytes at `buf`.
    unsafe {
        let (real, m) = real(file);
        match tracked(file) {
            Some(path) => {
                let data = std::slice::from_raw_parts(buf.cast::<u8>(), amt as usize);
                let io = Io::Write {
                    offset: off as u64,
                    data,
                };
                disk::io(path, io, || (m.xWrite.unwrap())(real, buf, amt, off))
            }
            None => (m.xWrite.unwrap())(real, buf, amt, off),
        }
    }
}

unsafe extern "C" fn x_truncate(file: *mut ffi::sqlite3_file, size: ffi::sqlite3_int64) -> c_int {
    // SAFETY: delegation.
    unsafe {
        let (real, m) = real(file);
        match tracked(file) {
            Some(path) => disk::io(path, Io::Truncate(size as u64), || {
                (m.xTruncate.unwrap())(real, size)
            }),
            None => (m.xTruncate.unwrap())(real, size),
        }
    }
}

unsafe extern "C" fn x_sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    // SAFETY: delegation.
    unsafe {
        let (real, m) = real(file);
        match tracked(file) {
            Some(path) => {
                let rc = disk::io(path, Io::Sync, || (m.xSync.unwrap())(real, flags));
                let f = file.cast::<CutFile>();
                if rc == ffi::SQLITE_OK && (*f).dirsync {
                    // unix's xSync has just synced the folder too (once per file).
                    (*f).dirsync = false;
                    disk::dir_synced(path);
                }
                rc
            }
            None => (m.xSync.unwrap())(real, flags),
        }
    }
}

unsafe extern "C" fn x_file_size(
    file: *mut ffi::sqlite3_file,
    out: *mut ffi::sqlite3_int64,
) -> c_int {
    // SAFETY: delegation.
    unsafe {
        let (real, m) = real(file);
        (m.xFileSize.unwrap())(real, out)
    }
}

unsafe extern "C" fn x_lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    // SAFETY: delegation.
    unsafe {
        let (real, m) = real(file);
        (m.xLock.unwrap())(real, level)
    }
}

unsafe extern "C" fn x_unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    // SAFETY: delegation.
    unsafe {
        let (real, m) = real(file);
        (m.xUnlock.unwrap())(real, level)
    }
}

unsafe extern "C" fn x_check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    // SAFETY: delegation.
    unsafe {
        let (real, m) = real(file);
        (m.xCheckReservedLock.unwrap())(real, out)
    }
}

unsafe extern "C" fn x_file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    // SAFETY: delegation.
    unsafe {
        let (real, m) = real(file);
        (m.xFileControl.unwrap())(real, op, arg)
    }
}

unsafe extern "C" fn x_sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: delegation.
    unsafe {
        let (real, m) = real(file);
        (m.xSectorSize.unwrap())(real)
    }
}

unsafe extern "C" fn x_device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: delegation.
    unsafe {
        let (real, m) = real(file);
        (m.xDeviceCharacteristics.unwrap())(real)
    }
}

unsafe extern "C" fn x_shm_map(
    file: *mut ffi::sqlite3_file,
    page: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: delegation. The wal-index is shared memory, lost at a cut anyway: the first
    // connection after a reboot rebuilds it from the WAL.
    unsafe {
        let (real, m) = real(file);
        (m.xShmMap.unwrap())(real, page, size, extend, out)
    }
}

unsafe extern "C" fn x_shm_lock(
    file: *mut ffi::sqlite3_file,
    offset: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    // SAFETY: delegation.
    unsafe {
        let (real, m) = real(file);
        (m.xShmLock.unwrap())(real, offset, n, flags)
    }
}

unsafe extern "C" fn x_shm_barrier(file: *mut ffi::sqlite3_file) {
    // SAFETY: delegation.
    unsafe {
        let (real, m) = real(file);
        (m.xShmBarrier.unwrap())(real)
    }
}

unsafe extern "C" fn x_shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    // SAFETY: delegation.
    unsafe {
        let (real, m) = real(file);
        (m.xShmUnmap.unwrap())(real, delete)
    }
}

unsafe extern "C" fn x_fetch(
    _file: *mut ffi::sqlite3_file,
    _off: ffi::sqlite3_int64,
    _amt: c_int,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: SQLite passes a valid out pointer. No memory maps: every read goes through x_read,
    // which a cut can refuse.
    unsafe { *out = null_mut() };
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_unfetch(
    _file: *mut ffi::sqlite3_file,
    _off: ffi::sqlite3_int64,
    _p: *mut c_void,
) -> c_int {
    ffi::SQLITE_OK
}

//! Locking that survives a panicking handler: a poisoned mutex is used as it is.

use std::sync::{Mutex, MutexGuard, PoisonError};

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

//! The one poisoned-lock policy: a lock whose holder panicked is used as
//! it is.
//!
//! Every request runs under `catch_unwind`, so a bug in one handler can
//! poison a lock that every other request needs. Refusing the lock from
//! then on would turn one 500 into a dead server. Each critical section in
//! this crate is written so that a panic cannot leave what it guards half
//! changed (a change is one assignment or one `apply` after its checks),
//! so the data behind a poisoned lock is still consistent: take it.
//!
//! A leaf: imports nothing of the crate. Callers write `lock(&m)`,
//! `read(&rw)`, `write(&rw)`, `wait(&cv, guard)` and
//! `wait_timeout(&cv, guard, d)` instead of `.lock().unwrap()`.

use std::sync::{
    Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard, WaitTimeoutResult,
};
use std::time::Duration;

/// `mutex`'s guard, whether or not a holder panicked.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// `rw`'s read guard, whether or not a writer panicked.
pub fn read<T: ?Sized>(rw: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    rw.read().unwrap_or_else(|p| p.into_inner())
}

/// `rw`'s write guard, whether or not a holder panicked.
pub fn write<T: ?Sized>(rw: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    rw.write().unwrap_or_else(|p| p.into_inner())
}

/// Waits on `condvar`, taking the guard back whether or not a holder
/// panicked meanwhile.
pub fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar.wait(guard).unwrap_or_else(|p| p.into_inner())
}

/// As [`wait`], for at most `timeout`; whether it timed out.
pub fn wait_timeout<'a, T>(
    condvar: &Condvar,
    guard: MutexGuard<'a, T>,
    timeout: Duration,
) -> (MutexGuard<'a, T>, WaitTimeoutResult) {
    condvar
        .wait_timeout(guard, timeout)
        .unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_lock_poisoned_by_a_panic_is_still_taken_with_its_data() {
        let mutex = Arc::new(Mutex::new(1));
        let rw = Arc::new(RwLock::new(2));
        let (m, r) = (Arc::clone(&mutex), Arc::clone(&rw));
        let _ = std::thread::spawn(move || {
            let _held = m.lock().unwrap();
            let _written = r.write().unwrap();
            panic!("poison both");
        })
        .join();
        assert!(mutex.is_poisoned() && rw.is_poisoned());
        *lock(&mutex) += 1;
        assert_eq!(*lock(&mutex), 2);
        *write(&rw) += 1;
        assert_eq!(*read(&rw), 3);
        let condvar = Condvar::new();
        let (guard, timed_out) = wait_timeout(&condvar, lock(&mutex), Duration::from_millis(1));
        assert!(timed_out.timed_out());
        assert_eq!(*guard, 2);
    }
}

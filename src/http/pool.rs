//! The bounded pool of connection threads.
//!
//! One thread serves one connection at a time (blocking I/O, no hand-off
//! per request). Threads are created on demand up to `max` and wait a while
//! for the next connection before they exit, so a burst does not pay thread
//! creation twice and an idle server holds no threads. The pool never
//! queues past `max`: `submit` gives the connection back, and the acceptor
//! answers it 503 at once.
//!
//! Invariant: `busy + queue.len() <= max`, and that sum is the number of
//! connections open.

use std::collections::VecDeque;
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// Stack of each connection thread: small, since a handler needs little and
/// JSON nesting is bounded by serde_json's recursion limit.
const STACK_SIZE: usize = 256 * 1024;
/// How long a thread with nothing to do waits before it exits.
const KEEP_IDLE: Duration = Duration::from_secs(30);

type Job = (TcpStream, SocketAddr);
type Serve = Box<dyn Fn(TcpStream, SocketAddr) + Send + Sync>;

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    idle: usize,
    busy: usize,
    stopping: bool,
}

/// A bounded set of threads, each serving one connection at a time.
pub(crate) struct Pool {
    state: Mutex<State>,
    work: Condvar,
    done: Condvar,
    max: usize,
    serve: Serve,
}

impl Pool {
    pub(crate) fn new(max: usize, serve: Serve) -> Arc<Pool> {
        Arc::new(Pool {
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            done: Condvar::new(),
            max,
            serve,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding this lock; if it ever did, the counts
        // are still consistent (each update is a single statement).
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Connections open: being served or waiting for a thread.
    pub(crate) fn open(&self) -> usize {
        let state = self.lock();
        state.busy + state.queue.len()
    }

    /// Hands a connection to a thread, or gives it back at capacity.
    pub(crate) fn submit(
        self: &Arc<Self>,
        stream: TcpStream,
        peer: SocketAddr,
    ) -> Result<(), TcpStream> {
        let mut state = self.lock();
        if state.stopping || state.busy + state.queue.len() >= self.max {
            return Err(stream);
        }
        if state.idle > state.queue.len() {
            state.queue.push_back((stream, peer));
            self.work.notify_one();
            return Ok(());
        }
        state.busy += 1;
        drop(state);
        let pool = Arc::clone(self);
        let spawned = thread::Builder::new()
            .name("conn".into())
            .stack_size(STACK_SIZE)
            .spawn(move || pool.work_from((stream, peer)));
        if let Err(e) = spawned {
            // The connection went down with the closure: it is closed, not
            // left hanging.
            log::error!("cannot start a connection thread: {e}");
            self.lock().busy -= 1;
        }
        Ok(())
    }

    /// A thread's life: serve, then wait for the next connection.
    fn work_from(&self, mut job: Job) {
        loop {
            let (stream, peer) = job;
            (self.serve)(stream, peer);
            let mut state = self.lock();
            state.busy -= 1;
            if state.busy == 0 {
                self.done.notify_all();
            }
            state.idle += 1;
            let idle_since = Instant::now();
            job = loop {
                if let Some(next) = state.queue.pop_front() {
                    state.idle -= 1;
                    state.busy += 1;
                    break next;
                }
                let waited = idle_since.elapsed();
                if state.stopping || waited >= KEEP_IDLE {
                    state.idle -= 1;
                    return;
                }
                state = self
                    .work
                    .wait_timeout(state, KEEP_IDLE - waited)
                    .map(|(s, _)| s)
                    .unwrap_or_else(|p| p.into_inner().0);
            };
        }
    }

    /// Stops taking connections and waits up to `grace` for the open ones
    /// to finish. Returns how many were still open.
    pub(crate) fn drain(&self, grace: Duration) -> usize {
        let until = Instant::now() + grace;
        let mut state = self.lock();
        state.stopping = true;
        self.work.notify_all();
        loop {
            let open = state.busy + state.queue.len();
            let left = until.saturating_duration_since(Instant::now());
            if open == 0 || left.is_zero() {
                return open;
            }
            state = self
                .done
                .wait_timeout(state, left)
                .map(|(s, _)| s)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }
}

//! Threads for WASI guests' calls, kept warm between calls.
//!
//! wasmtime-wasi's synchronous host functions block on a tokio runtime, so a WASI guest's call
//! runs on a thread outside any runtime (inside an async worker it would nest runtimes: a
//! panic). A thread made per call cost an interpreter's call more than its making: its stack
//! (the guest's wasm frames run on it) was faulted in page by page, then unmapped, which flushes
//! the TLB of every core the process runs on (issue 38's profile: TLB-flush IPIs were 19% of a
//! CPython call's CPU). Here a thread that finished a call waits for the next one, up to
//! `MAX_IDLE` of them for `IDLE_FOR`; more calls at once than idle threads get new threads, so a
//! long call never holds up another (the pool of instance slots bounds how many run at once).
//! Nothing of a call stays on its thread: the guest's state lives in its Store, made and dropped
//! within the call.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, sync_channel};
use std::time::Duration;

/// How long an idle thread waits for a call before it ends.
const IDLE_FOR: Duration = Duration::from_secs(30);

type Job = Box<dyn FnOnce() + Send + 'static>;

/// A set of threads for guest calls, each with a stack of `stack_bytes`.
pub struct GuestThreads {
    stack_bytes: usize,
    max_idle: usize,
    /// Threads waiting for a call: an id and where to send it. A thread is taken out under the
    /// lock before a call is sent to it, and takes itself out under the lock before it ends, so
    /// a call is never sent to a thread that ended.
    idle: Mutex<Vec<(u64, Sender<Job>)>>,
    next_id: std::sync::atomic::AtomicU64,
}

impl GuestThreads {
    /// Threads with stacks of `stack_bytes`, at most `max_idle` kept waiting.
    pub fn new(stack_bytes: usize, max_idle: usize) -> std::sync::Arc<Self> {
        std::sync::Arc::new(GuestThreads { stack_bytes, max_idle, idle: Mutex::new(Vec::new()), next_id: Default::default() })
    }

    /// Run `f` on one of the threads and wait for it: `Err` if no thread could be made or `f`
    /// panicked.
    pub fn run<R: Send>(self: &std::sync::Arc<Self>, f: impl FnOnce() -> R + Send) -> Result<R, String> {
        let (done, result) = sync_channel::<std::thread::Result<R>>(1);
        let job: Box<dyn FnOnce() + Send + '_> = Box::new(move || {
            let _ = done.send(catch_unwind(AssertUnwindSafe(f)));
        });
        // SAFETY: the job may borrow from this frame ('_). It is either run to its end on a
        // thread (which sends its result, caught panic included, as its last act) while this
        // frame waits below for that result, or dropped here if no thread takes it. It never
        // outlives this call.
        let mut job: Job = unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + '_>, Job>(job) };
        loop {
            let waiting = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
            match waiting {
                Some((_, thread)) => match thread.send(job) {
                    Ok(()) => break,
                    // Cannot happen (a thread leaves the idle list before it ends); try another.
                    Err(unsent) => job = unsent.0,
                },
                None => {
                    self.spawn(job)?;
                    break;
                }
            }
        }
        match result.recv() {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(_)) => Err("the guest call's thread panicked".into()),
            Err(_) => Err("the guest call's thread ended before the call".into()),
        }
    }

    /// A new thread that runs `first` and then waits for more.
    fn spawn(self: &std::sync::Arc<Self>, first: Job) -> Result<(), String> {
        let (send, receive) = std::sync::mpsc::channel::<Job>();
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let threads = std::sync::Arc::clone(self);
        std::thread::Builder::new()
            .name("wasi-guest".into())
            .stack_size(self.stack_bytes)
            .spawn(move || threads.serve(id, send, receive, first))
            .map(drop)
            .map_err(|e| format!("no thread for the guest call: {e}"))
    }

    fn serve(&self, id: u64, send: Sender<Job>, receive: Receiver<Job>, first: Job) {
        first();
        loop {
            {
                let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
                if idle.len() >= self.max_idle {
                    return;
                }
                idle.push((id, send.clone()));
            }
            match receive.recv_timeout(IDLE_FOR) {
                Ok(job) => job(),
                Err(RecvTimeoutError::Timeout) => {
                    let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
                    match idle.iter().position(|(i, _)| *i == id) {
                        Some(at) => {
                            idle.swap_remove(at);
                            return;
                        }
                        // Taken for a call just now: it is on its way.
                        None => {
                            drop(idle);
                            match receive.recv() {
                                Ok(job) => job(),
                                Err(_) => return,
                            }
                        }
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    /// Threads waiting for a call now.
    #[cfg(test)]
    fn idle(&self) -> usize {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_runs_on_a_kept_thread_borrows_and_returns() {
        let threads = GuestThreads::new(1 << 20, 2);
        let words = ["Zun".to_string(), "Doko".to_string()];
        let first = threads.run(|| (std::thread::current().id(), words.join(" "))).unwrap();
        assert_eq!(first.1, "Zun Doko");
        assert_ne!(first.0, std::thread::current().id(), "not on the caller's thread");
        // The thread that finished waits for the next call: the same thread runs it.
        for _ in 0..100 {
            if threads.idle() == 1 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let second = threads.run(|| std::thread::current().id()).unwrap();
        assert_eq!(second, first.0, "a kept thread runs the next call");
        assert_eq!(threads.run(|| -> u32 { panic!("guest host bug") }).unwrap_err(), "the guest call's thread panicked");
        assert_eq!(threads.run(|| 7).unwrap(), 7, "and a panic does not lose the set");
    }

    #[test]
    fn calls_at_once_each_get_a_thread_and_at_most_max_idle_wait() {
        let threads = GuestThreads::new(1 << 20, 2);
        let barrier = std::sync::Barrier::new(6);
        std::thread::scope(|s| {
            for _ in 0..6 {
                s.spawn(|| threads.run(|| barrier.wait()).unwrap());
            }
        });
        // Six calls waited for each other: six threads ran at once; two stay.
        for _ in 0..100 {
            if threads.idle() == 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(threads.idle(), 2);
    }
}

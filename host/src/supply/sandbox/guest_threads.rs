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
//!
//! An async caller hands its whole decision to a thread here with [`GuestThreads::start`] and
//! awaits what it sends back; the call it makes there through [`GuestThreads::run`] runs on that
//! same thread. One handoff each way per call, not two (through tokio's blocking pool first): a
//! thread woken is a context switch, and at 1,000 Hikawas singing Python rules the wakeups were
//! several percent of the operator's CPU (issue 38's profile of bench-scale).

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, sync_channel};
use std::time::Duration;

/// How long an idle thread waits for a call before it ends.
const IDLE_FOR: Duration = Duration::from_secs(30);

/// What a thread runs: given `ready`, which lists the thread as idle, called by the job once its
/// work is done and before it hands the result on. Whoever the result wakes may make the next call
/// at once; listed first, this thread takes that call instead of a new thread being made for it
/// (a thread made and ended per call is what these threads are kept to avoid).
type Job = BorrowingJob<'static>;
/// A job that may borrow from its caller's frame (`run`).
type BorrowingJob<'a> = Box<dyn FnOnce(&dyn Fn()) + Send + 'a>;

thread_local! {
    /// Set on the threads of a `GuestThreads`: a call made on one runs where it is.
    static ON_GUEST_THREAD: Cell<bool> = const { Cell::new(false) };
}

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
    ///
    /// On one of the threads already (a job given to [`start`](Self::start)), `f` runs here.
    pub fn run<R: Send>(self: &std::sync::Arc<Self>, f: impl FnOnce() -> R + Send) -> Result<R, String> {
        if ON_GUEST_THREAD.get() {
            return catch_unwind(AssertUnwindSafe(f)).map_err(|_| "the guest call's thread panicked".to_string());
        }
        let (done, result) = sync_channel::<std::thread::Result<R>>(1);
        let job: BorrowingJob<'_> = Box::new(move |ready: &dyn Fn()| {
            let outcome = catch_unwind(AssertUnwindSafe(f));
            ready();
            let _ = done.send(outcome);
        });
        // SAFETY: the job may borrow from this frame ('_). It is either run to its end on a
        // thread (which sends its result, caught panic included, as its last act) while this
        // frame waits below for that result, or dropped here if no thread takes it. It never
        // outlives this call.
        let job: Job = unsafe { std::mem::transmute::<BorrowingJob<'_>, Job>(job) };
        self.hand_over(job)?;
        match result.recv() {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(_)) => Err("the guest call's thread panicked".into()),
            Err(_) => Err("the guest call's thread ended before the call".into()),
        }
    }

    /// Run `work` on one of the threads without waiting for it, then `deliver` its result (`Err`
    /// if it panicked: the thread lives on) where its caller waits: an async caller awaits it.
    /// `Err` if no thread could be made.
    pub fn start<R: Send + 'static>(
        self: &std::sync::Arc<Self>,
        work: impl FnOnce() -> R + Send + 'static,
        deliver: impl FnOnce(std::thread::Result<R>) + Send + 'static,
    ) -> Result<(), String> {
        self.hand_over(Box::new(move |ready: &dyn Fn()| {
            let outcome = catch_unwind(AssertUnwindSafe(work));
            ready();
            let _ = catch_unwind(AssertUnwindSafe(|| deliver(outcome)));
        }))
    }

    /// Give `job` to an idle thread, or to a new one if none is idle.
    fn hand_over(self: &std::sync::Arc<Self>, mut job: Job) -> Result<(), String> {
        loop {
            let waiting = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
            match waiting {
                Some((_, thread)) => match thread.send(job) {
                    Ok(()) => return Ok(()),
                    // Cannot happen (a thread leaves the idle list before it ends); try another.
                    Err(unsent) => job = unsent.0,
                },
                None => return self.spawn(job),
            }
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
        ON_GUEST_THREAD.set(true);
        let mut job = first;
        loop {
            // Whether this thread is listed as idle (`None`: not asked yet). A job sent to it
            // while its last job hands its result on waits in its channel for a moment.
            let listed: Cell<Option<bool>> = Cell::new(None);
            let ready = || {
                if listed.get().is_none() {
                    listed.set(Some(self.list_idle(id, &send)));
                }
            };
            job(&ready);
            ready();
            if listed.get() == Some(false) {
                // Enough threads wait already: this one ends (none can have been given a job).
                return;
            }
            job = match receive.recv_timeout(IDLE_FOR) {
                Ok(job) => job,
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
                                Ok(job) => job,
                                Err(_) => return,
                            }
                        }
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return,
            };
        }
    }

    /// List this thread as idle, unless `max_idle` threads are already: whether it was listed.
    fn list_idle(&self, id: u64, send: &Sender<Job>) -> bool {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() >= self.max_idle {
            return false;
        }
        idle.push((id, send.clone()));
        true
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
    fn a_started_job_runs_its_call_where_it_is_and_survives_a_panic() {
        let threads = GuestThreads::new(1 << 20, 2);
        let (send, receive) = std::sync::mpsc::channel();
        let inner = std::sync::Arc::clone(&threads);
        threads
            .start(
                move || {
                    let here = std::thread::current().id();
                    (here, inner.run(|| std::thread::current().id()).unwrap())
                },
                move |result| send.send(result.unwrap()).unwrap(),
            )
            .unwrap();
        let (here, call) = receive.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_ne!(here, std::thread::current().id(), "the job is not run on the caller's thread");
        assert_eq!(call, here, "a call made on a guest thread runs there: no second handoff");
        assert_eq!(inner_panics(&threads), "the guest call's thread panicked");

        // Work that panics: its caller hears it, and the set still runs the next job.
        let (send, receive) = std::sync::mpsc::channel();
        threads.start(|| -> u32 { panic!("guest host bug") }, move |result| send.send(result.is_err()).unwrap()).unwrap();
        assert!(receive.recv_timeout(Duration::from_secs(10)).unwrap(), "the panic is delivered as an error");
        let (send, receive) = std::sync::mpsc::channel();
        threads.start(|| 7, move |result| send.send(result.unwrap()).unwrap()).unwrap();
        assert_eq!(receive.recv_timeout(Duration::from_secs(10)).unwrap(), 7);
    }

    /// A panicking call made inside a started job: reported to the job, not lost.
    fn inner_panics(threads: &std::sync::Arc<GuestThreads>) -> String {
        let (send, receive) = std::sync::mpsc::channel();
        let inner = std::sync::Arc::clone(threads);
        threads
            .start(move || inner.run(|| -> u32 { panic!("guest host bug") }).unwrap_err(), move |result| send.send(result.unwrap()).unwrap())
            .unwrap();
        receive.recv_timeout(Duration::from_secs(10)).unwrap()
    }

    #[test]
    fn calls_one_after_another_are_made_by_one_thread() {
        // Each result wakes its caller, who makes the next call at once: the thread that made
        // the last one is listed as idle before the result is handed on, so it takes the next.
        let threads = GuestThreads::new(1 << 20, 2);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            seen.insert(threads.run(|| std::thread::current().id()).unwrap());
            let (send, receive) = std::sync::mpsc::channel();
            threads.start(|| std::thread::current().id(), move |result| send.send(result.unwrap()).unwrap()).unwrap();
            seen.insert(receive.recv_timeout(Duration::from_secs(10)).unwrap());
        }
        assert_eq!(seen.len(), 1, "400 calls in a row, each made as the last one's result arrived");
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

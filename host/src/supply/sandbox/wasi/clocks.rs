//! Virtual time: the wall clock reads the call's `now`, the monotonic clock starts at zero
//! for every call, and neither moves unless the guest waits, when time jumps to the end of
//! the wait at once. A guest's `sleep(3600)` returns immediately with its clocks an hour on:
//! a reconcile never sleeps, and reading the clocks stays a function of the call's input.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use wasmtime::component::{HasData, Resource, ResourceTable};
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock;
use wasmtime_wasi::p2::{DynPollable, Pollable, subscribe};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock};

/// One call's clocks: the call's `now` and the nanoseconds the guest has waited since.
pub struct VirtualTime {
    /// The call's `observed.now`, in nanoseconds since the Unix epoch (never before it).
    start_nanos: u64,
    /// The monotonic clock: nanoseconds since the call began.
    elapsed: AtomicU64,
}

impl VirtualTime {
    pub fn new(now_ms: i64) -> Arc<Self> {
        Arc::new(VirtualTime {
            start_nanos: (now_ms.max(0) as u64).saturating_mul(1_000_000),
            elapsed: AtomicU64::new(0),
        })
    }

    fn elapsed(&self) -> u64 {
        self.elapsed.load(Ordering::Relaxed)
    }

    /// Time passes to `instant` (monotonic nanoseconds), never backwards.
    fn advance_to(&self, instant: u64) {
        self.elapsed.fetch_max(instant, Ordering::Relaxed);
    }
}

/// The wall clock a guest reads: the call's `now`, plus any time it waited.
pub struct VirtualWallClock(pub Arc<VirtualTime>);

impl HostWallClock for VirtualWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }

    fn now(&self) -> Duration {
        Duration::from_nanos(self.0.start_nanos.saturating_add(self.0.elapsed()))
    }
}

/// The monotonic clock, for `WasiCtx` (the linker serves `wasi:clocks/monotonic-clock` from
/// [`MonotonicView`], which also owns its pollables).
pub struct VirtualMonotonicClock(pub Arc<VirtualTime>);

impl HostMonotonicClock for VirtualMonotonicClock {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        self.0.elapsed()
    }
}

/// `wasi:clocks/monotonic-clock`, served from virtual time.
pub struct VirtualMonotonic;

impl HasData for VirtualMonotonic {
    type Data<'a> = MonotonicView<'a>;
}

pub struct MonotonicView<'a> {
    pub time: &'a Arc<VirtualTime>,
    pub table: &'a mut ResourceTable,
}

impl monotonic_clock::Host for MonotonicView<'_> {
    fn now(&mut self) -> wasmtime::Result<monotonic_clock::Instant> {
        Ok(self.time.elapsed())
    }

    fn resolution(&mut self) -> wasmtime::Result<monotonic_clock::Duration> {
        Ok(1)
    }

    fn subscribe_instant(
        &mut self,
        when: monotonic_clock::Instant,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        let deadline = self.table.push(Deadline {
            time: self.time.clone(),
            at: when,
        })?;
        subscribe(self.table, deadline)
    }

    fn subscribe_duration(
        &mut self,
        duration: monotonic_clock::Duration,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        let at = self.time.elapsed().saturating_add(duration);
        self.subscribe_instant(at)
    }
}

/// A wait for the monotonic clock to reach `at`: ready at once, moving time there.
struct Deadline {
    time: Arc<VirtualTime>,
    at: u64,
}

#[wasmtime_wasi::async_trait]
impl Pollable for Deadline {
    async fn ready(&mut self) {
        self.time.advance_to(self.at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wall_clock_is_the_calls_now_until_the_guest_waits() {
        let time = VirtualTime::new(1_700_000_000_123);
        let wall = VirtualWallClock(time.clone());
        let mono = VirtualMonotonicClock(time.clone());
        assert_eq!(wall.now(), Duration::from_millis(1_700_000_000_123));
        assert_eq!(wall.now(), wall.now(), "reading does not move it");
        assert_eq!(mono.now(), 0);
        time.advance_to(5_000_000_000);
        time.advance_to(1);
        assert_eq!(mono.now(), 5_000_000_000, "never backwards");
        assert_eq!(wall.now(), Duration::from_millis(1_700_000_005_123));
    }
}

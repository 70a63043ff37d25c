//! The virtual WASI: every interface a language runtime imports (a CPython or a JavaScript
//! engine compiled to a component), none of the capabilities, and nothing that makes a call
//! depend on more than its input. Rust modules import none of it and never pay for it.
//!
//! - clocks: the wall clock reads the call's `now`, the monotonic clock starts at zero, and
//!   waiting moves time instead of the thread ([`clocks`]);
//! - random: bytes drawn from the call's `entropy` ([`random`]);
//! - stdout and stderr: into the call's bounded guest log ([`stdio`]); stdin is empty;
//! - environment and arguments: empty; no directory preopened (so no file can be opened);
//! - sockets and name lookup: always access-denied;
//! - what the host holds for a call is bounded: [`MAX_RESOURCES`] table entries,
//!   [`MAX_HANDLES`] handles, poll lists of [`MAX_POLL_LIST`], [`MAX_HOSTCALL_BYTES`] lifted
//!   per host call; a call reserves [`HOST_BYTES_PER_CALL`] beside its memory budget.
//!
//! wasmtime-wasi serves the interfaces; its synchronous bindings block on a tokio runtime,
//! so calls of such a module run on a thread of their own (`RulesModule::call_metered`).
//!
//! As in wasmtime-wasi, the store's data reaches this module through a view trait
//! ([`VirtualWasiView`]) that the host state implements (`host_state.rs`): nothing here
//! imports the host state.

mod clocks;
pub mod imports;
mod random;
mod stdio;

use std::sync::Arc;

use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::DynPollable;
use wasmtime_wasi::p2::bindings::{
    self, cli, clocks as wasi_clocks, filesystem, random as wasi_random, sockets,
};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use self::clocks::{
    MonotonicView, VirtualMonotonic, VirtualMonotonicClock, VirtualTime, VirtualWallClock,
};
pub use self::stdio::Captured;
use self::stdio::{Capture, Which};

/// The most random bytes one `get-random-bytes` call may ask for (more traps): a guest's
/// randomness is a few words, and the host builds each answer in memory first.
const MAX_RANDOM_BYTES: u64 = 1 << 20;

/// The most entries one call's resource table may hold (wasmtime-wasi's default is a
/// million): a pollable is two (the clock's wait and the pollable over it), a stream one. A
/// CPython or JavaScript call holds a few dozen; past this the call fails with
/// `HostResourceLimit` instead of making the host hold ~150 bytes an entry outside every cap.
pub const MAX_RESOURCES: usize = 4096;
/// The most component-model handles one call's store may hold at once (wasmtime's default is
/// 100,000), borrows lent to a host call (each entry of a poll list) included.
pub const MAX_HANDLES: usize = 4096;
/// The longest list `wasi:io/poll.poll` accepts: wasi-libc polls a handful at once.
pub const MAX_POLL_LIST: usize = 1024;
/// The most bytes one host call may lift out of the guest (wasmtime's hostcall fuel, 128 MiB
/// by default): strings, lists, the poll list's handles at 16 bytes each.
pub const MAX_HOSTCALL_BYTES: usize = 4 << 20;
/// What the host may hold for one WASI call beyond the guest's linear memory, at most: the
/// resource table full (~256 bytes an entry, the box behind it included), one host call's
/// lifted data and the captured output ([`VirtualWasi::new`]'s bound is added by the caller).
pub const HOST_BYTES_PER_CALL: usize = MAX_RESOURCES * 256 + MAX_HOSTCALL_BYTES;

/// A bound of the virtual WASI reached: the call traps with this, and fails as
/// `HostResourceLimit`.
#[derive(Debug, thiserror::Error)]
#[error("{what}: the limit is {limit}")]
pub struct HostLimitReached {
    pub what: &'static str,
    pub limit: usize,
}

/// What a call's virtual WASI is made from: the call's own input.
#[derive(Clone, Copy, Debug, Default)]
pub struct CallInput {
    pub now_ms: i64,
    pub entropy: u64,
}

/// One call's WASI state, built the first time the guest touches WASI.
pub struct VirtualWasi {
    ctx: WasiCtx,
    table: ResourceTable,
    time: Arc<VirtualTime>,
    capture: Capture,
}

impl VirtualWasi {
    pub fn new(input: CallInput, max_output_bytes: usize) -> Self {
        let time = VirtualTime::new(input.now_ms);
        let capture = Capture::new(max_output_bytes);
        let ctx = WasiCtx::builder()
            .wall_clock(VirtualWallClock(time.clone()))
            .monotonic_clock(VirtualMonotonicClock(time.clone()))
            .secure_random(random::SeededRandom::new(
                input.entropy,
                random::Stream::Random,
            ))
            .insecure_random(random::SeededRandom::new(
                input.entropy,
                random::Stream::Insecure,
            ))
            .insecure_random_seed(random::insecure_seed(input.entropy))
            .max_random_size(MAX_RANDOM_BYTES)
            .stdout(capture.sink(Which::Stdout))
            .stderr(capture.sink(Which::Stderr))
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_RESOURCES);
        VirtualWasi {
            ctx,
            table,
            time,
            capture,
        }
    }

    /// What the guest wrote to stdout and stderr, taken out.
    pub fn take_output(&self) -> Captured {
        self.capture.take()
    }
}

impl VirtualWasi {
    /// wasmtime-wasi's view of this state (what a [`WasiView`] gives).
    pub fn ctx_view(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.ctx,
            table: &mut self.table,
        }
    }
}

/// What the store's data gives the virtual WASI, as wasmtime-wasi's `WasiView` does: the
/// call's [`VirtualWasi`], built the first time the guest touches WASI. The host state
/// implements it (and `WasiView` through [`VirtualWasi::ctx_view`]).
pub trait VirtualWasiView: WasiView + 'static {
    fn virtual_wasi(&mut self) -> &mut VirtualWasi;
}

fn monotonic<T: VirtualWasiView>(t: &mut T) -> MonotonicView<'_> {
    let wasi = t.virtual_wasi();
    MonotonicView {
        time: &wasi.time,
        table: &mut wasi.table,
    }
}

/// `wasi:io` works on the resource table alone.
struct Io;

impl HasData for Io {
    type Data<'a> = &'a mut ResourceTable;
}

/// `wasi:io/poll` over the call's table, refusing a list longer than [`MAX_POLL_LIST`]
/// before anything is built for it (wasmtime-wasi builds a map and a future per entry).
struct BoundedPoll;

impl HasData for BoundedPoll {
    type Data<'a> = PollTable<'a>;
}

pub struct PollTable<'a>(&'a mut ResourceTable);

impl bindings::sync::io::poll::Host for PollTable<'_> {
    fn poll(&mut self, pollables: Vec<Resource<DynPollable>>) -> wasmtime::Result<Vec<u32>> {
        if pollables.len() > MAX_POLL_LIST {
            return Err(HostLimitReached { what: "a poll list of more pollables than the sandbox polls at once", limit: MAX_POLL_LIST }.into());
        }
        bindings::sync::io::poll::Host::poll(self.0, pollables)
    }
}

impl bindings::sync::io::poll::HostPollable for PollTable<'_> {
    fn ready(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<bool> {
        bindings::sync::io::poll::HostPollable::ready(self.0, pollable)
    }
    fn block(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        bindings::sync::io::poll::HostPollable::block(self.0, pollable)
    }
    fn drop(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        bindings::sync::io::poll::HostPollable::drop(self.0, pollable)
    }
}

/// Add every interface of [`imports`] to `linker`: wasmtime-wasi's synchronous bindings, but
/// the monotonic clock from [`clocks`] (wasmtime-wasi's waits for real time).
pub fn add_to_linker<T: VirtualWasiView>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    let l = linker;
    bindings::io::error::add_to_linker::<T, Io>(l, |t| &mut t.virtual_wasi().table)?;
    bindings::sync::io::poll::add_to_linker::<T, BoundedPoll>(l, |t| PollTable(&mut t.virtual_wasi().table))?;
    bindings::sync::io::streams::add_to_linker::<T, Io>(l, |t| &mut t.virtual_wasi().table)?;
    wasi_clocks::wall_clock::add_to_linker::<T, wasmtime_wasi::clocks::WasiClocks>(l, |t| {
        wasmtime_wasi::clocks::WasiClocksView::clocks(t)
    })?;
    wasi_clocks::monotonic_clock::add_to_linker::<T, VirtualMonotonic>(l, monotonic::<T>)?;
    wasi_random::random::add_to_linker::<T, wasmtime_wasi::random::WasiRandom>(l, |t| {
        t.virtual_wasi().ctx.random()
    })?;
    wasi_random::insecure::add_to_linker::<T, wasmtime_wasi::random::WasiRandom>(l, |t| {
        t.virtual_wasi().ctx.random()
    })?;
    wasi_random::insecure_seed::add_to_linker::<T, wasmtime_wasi::random::WasiRandom>(l, |t| {
        t.virtual_wasi().ctx.random()
    })?;
    {
        use wasmtime_wasi::cli::{WasiCli, WasiCliView};
        cli::exit::add_to_linker::<T, WasiCli>(l, T::cli)?;
        cli::environment::add_to_linker::<T, WasiCli>(l, T::cli)?;
        cli::stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
        cli::stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
        cli::stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;
        cli::terminal_input::add_to_linker::<T, WasiCli>(l, T::cli)?;
        cli::terminal_output::add_to_linker::<T, WasiCli>(l, T::cli)?;
        cli::terminal_stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
        cli::terminal_stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
        cli::terminal_stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;
    }
    {
        use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView};
        filesystem::preopens::add_to_linker::<T, WasiFilesystem>(l, T::filesystem)?;
        bindings::sync::filesystem::types::add_to_linker::<T, WasiFilesystem>(l, T::filesystem)?;
    }
    {
        use wasmtime_wasi::sockets::{WasiSockets, WasiSocketsView};
        let options = sockets::network::LinkOptions::default();
        sockets::tcp_create_socket::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
        sockets::instance_network::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
        sockets::network::add_to_linker::<T, WasiSockets>(l, &options, T::sockets)?;
        sockets::ip_name_lookup::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
        bindings::sync::sockets::tcp::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
        bindings::sync::sockets::udp::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
        bindings::sync::sockets::udp_create_socket::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    }
    Ok(())
}

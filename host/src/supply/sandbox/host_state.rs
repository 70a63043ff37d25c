//! The data each guest call's `Store` holds: the memory cap, the guest's log lines and, for a
//! module that imports WASI, the call's virtual WASI.

use super::bindings::zundokokiyoshi::rules::log;
use super::limits::SandboxLimits;
use super::wasi::{CallInput, Captured, VirtualWasi, VirtualWasiView};
use crate::text::printable;

/// Longest panic message kept for an error (it reaches the Hikawa's condition and Events).
const MAX_PANIC_MESSAGE_BYTES: usize = 256;

/// One guest call's host-side state.
pub struct HostState {
    pub memory: MemoryCap,
    pub logs: GuestLogs,
    /// What the call's virtual WASI reads its clocks and randomness from.
    pub call_input: CallInput,
    /// Built the first time the guest calls into WASI; never for a Rust module.
    pub wasi: Option<VirtualWasi>,
    /// The last line the guest wrote to stderr (its uncaught exception, if it failed).
    pub stderr_last_line: Option<String>,
}

impl HostState {
    pub fn new(limits: &SandboxLimits, call_input: CallInput) -> Self {
        HostState {
            call_input,
            wasi: None,
            stderr_last_line: None,
            memory: MemoryCap {
                limit: limits.memory_bytes,
                refused: None,
                peak: 0,
            },
            logs: GuestLogs {
                lines: Vec::new(),
                dropped: 0,
                max_lines: limits.max_log_lines,
                max_line_bytes: limits.max_log_line_bytes,
            },
        }
    }
}

impl VirtualWasiView for HostState {
    fn virtual_wasi(&mut self) -> &mut VirtualWasi {
        let (input, max_output) = (self.call_input, self.logs.max_bytes());
        self.wasi.get_or_insert_with(|| VirtualWasi::new(input, max_output))
    }
}

impl wasmtime_wasi::WasiView for HostState {
    fn ctx(&mut self) -> wasmtime_wasi::WasiCtxView<'_> {
        self.virtual_wasi().ctx_view()
    }
}

/// Refuses memory growth past the cap and remembers that it did, so the failure can be
/// reported as "memory cap" rather than as an anonymous trap.
pub struct MemoryCap {
    pub limit: usize,
    /// The size the guest asked for when it was refused.
    pub refused: Option<usize>,
    /// The largest size granted (its initial memory included: wasmtime asks for that too).
    pub peak: usize,
}

/// The error a refused memory growth traps with.
#[derive(Debug, thiserror::Error)]
#[error("memory cap of {limit} bytes reached (guest asked for {requested})")]
pub struct MemoryCapReached {
    pub limit: usize,
    pub requested: usize,
}

impl wasmtime::ResourceLimiter for MemoryCap {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.limit {
            self.refused = Some(desired);
            // An error (rather than `Ok(false)`) traps at once: a Rust guest would otherwise
            // see a failed grow as an allocation failure and abort anonymously.
            return Err(MemoryCapReached { limit: self.limit, requested: desired }.into());
        }
        self.peak = self.peak.max(desired);
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 10_000)
    }
}

/// A guest's log line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestLog {
    pub level: log::Level,
    pub message: String,
}

/// The log lines of one call, bounded so a guest cannot flood the operator's log.
pub struct GuestLogs {
    pub lines: Vec<GuestLog>,
    pub dropped: usize,
    max_lines: usize,
    max_line_bytes: usize,
}

impl GuestLogs {
    /// The most bytes a call's log may hold: also the bound on what it may print.
    pub fn max_bytes(&self) -> usize {
        self.max_lines * self.max_line_bytes
    }

    /// What the guest printed to stdout (as info) and stderr (as warnings), line by line,
    /// within the same bounds as its log lines; what was cut is counted as dropped lines.
    pub fn add_output(&mut self, output: &Captured) {
        for (level, bytes) in [(log::Level::Info, &output.stdout), (log::Level::Warn, &output.stderr)] {
            for line in String::from_utf8_lossy(bytes).lines().filter(|l| !l.trim().is_empty()) {
                self.push(level, line);
            }
        }
        if output.dropped_bytes > 0 {
            self.dropped += 1;
        }
    }

    /// The message of the guest's panic, if it reported one before trapping: bounded, and
    /// (like every kept line) escaped.
    pub fn panic_message(&self) -> Option<String> {
        self.lines
            .iter()
            .rev()
            .find_map(|line| line.message.strip_prefix("panic: "))
            .map(|m| printable(m, MAX_PANIC_MESSAGE_BYTES))
    }
}

impl log::Host for HostState {
    fn log(&mut self, level: log::Level, message: String) {
        self.logs.push(level, &message);
    }
}

impl GuestLogs {
    fn push(&mut self, level: log::Level, message: &str) {
        let logs = self;
        if logs.lines.len() >= logs.max_lines {
            logs.dropped += 1;
            return;
        }
        // Cut and escaped here, so no control character from a guest reaches a terminal.
        let message = printable(message, logs.max_line_bytes);
        match level {
            log::Level::Trace => tracing::trace!(target: "guest", "{message}"),
            log::Level::Debug => tracing::debug!(target: "guest", "{message}"),
            log::Level::Info => tracing::info!(target: "guest", "{message}"),
            log::Level::Warn => tracing::warn!(target: "guest", "{message}"),
            log::Level::Error => tracing::error!(target: "guest", "{message}"),
        }
        logs.lines.push(GuestLog { level, message });
    }
}

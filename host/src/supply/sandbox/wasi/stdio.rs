//! A guest's stdout and stderr: kept in memory up to a bound, then only counted, and handed
//! to the call's guest log line by line (escaped and cut like every guest log line). The
//! last bytes of stderr are kept apart, so an uncaught exception's last line ("ValueError:
//! ...") names a failed call even after megabytes of output.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Bytes of stderr kept at the end, for the message of a failed call.
const TAIL_BYTES: usize = 4096;

/// Which stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    Stdout,
    Stderr,
}

/// Both streams of one call.
#[derive(Default)]
pub struct Captured {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The last [`TAIL_BYTES`] of stderr, whatever was dropped before.
    pub stderr_tail: Vec<u8>,
    /// Bytes written past the bound, counted only.
    pub dropped_bytes: u64,
    max_bytes: usize,
}

impl Captured {
    fn append(&mut self, which: Which, bytes: &[u8]) {
        let room = self
            .max_bytes
            .saturating_sub(self.stdout.len() + self.stderr.len());
        let kept = bytes.len().min(room);
        let buffer = match which {
            Which::Stdout => &mut self.stdout,
            Which::Stderr => &mut self.stderr,
        };
        buffer.extend_from_slice(&bytes[..kept]);
        self.dropped_bytes += (bytes.len() - kept) as u64;
        if which == Which::Stderr {
            let tail = &bytes[bytes.len().saturating_sub(TAIL_BYTES)..];
            let keep_old = (TAIL_BYTES - tail.len()).min(self.stderr_tail.len());
            self.stderr_tail.drain(..self.stderr_tail.len() - keep_old);
            self.stderr_tail.extend_from_slice(tail);
        }
    }

    /// The line of stderr that says why a call failed: the exception line of the last Python
    /// traceback ("RuntimeError: ..."), else the last line that is not a language runtime's
    /// own epilogue (componentize-py's Rust panic note after an uncaught exception).
    pub fn last_stderr_line(&self) -> Option<String> {
        let text = String::from_utf8_lossy(&self.stderr_tail);
        let lines: Vec<&str> = text.lines().collect();
        if let Some(start) = lines.iter().rposition(|l| l.starts_with("Traceback (most recent call last):")) {
            let exception = lines[start + 1..].iter().find(|l| !l.is_empty() && !l.starts_with(char::is_whitespace));
            if let Some(line) = exception {
                return Some(line.trim().to_string());
            }
        }
        let epilogue = |l: &str| {
            l.starts_with("note: run with `RUST_BACKTRACE") || l.starts_with("thread '") || l == "Python function threw an unexpected exception"
        };
        lines.iter().rev().map(|l| l.trim()).find(|l| !l.is_empty() && !epilogue(l)).map(str::to_string)
    }
}

/// One call's capture, shared by its two streams.
#[derive(Clone)]
pub struct Capture(Arc<Mutex<Captured>>);

impl Capture {
    pub fn new(max_bytes: usize) -> Self {
        Capture(Arc::new(Mutex::new(Captured {
            max_bytes,
            ..Captured::default()
        })))
    }

    pub fn sink(&self, which: Which) -> Sink {
        Sink {
            capture: self.clone(),
            which,
        }
    }

    pub fn take(&self) -> Captured {
        let mut captured = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let max_bytes = captured.max_bytes;
        std::mem::replace(
            &mut *captured,
            Captured {
                max_bytes,
                ..Captured::default()
            },
        )
    }

    fn append(&self, which: Which, bytes: &[u8]) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .append(which, bytes);
    }
}

/// stdout or stderr of a call, as `WasiCtx` wants it.
#[derive(Clone)]
pub struct Sink {
    capture: Capture,
    which: Which,
}

impl IsTerminal for Sink {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Sink {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

/// Writes never wait: the bytes are kept or counted at once.
#[wasmtime_wasi::async_trait]
impl Pollable for Sink {
    async fn ready(&mut self) {}
}

impl OutputStream for Sink {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.capture.append(self.which, &bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 << 10)
    }
}

impl tokio::io::AsyncWrite for Sink {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.capture.append(self.which, buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_past_the_bound_is_counted_and_the_last_error_line_kept() {
        let capture = Capture::new(10);
        capture.append(Which::Stdout, b"hello\n");
        capture.append(Which::Stderr, &vec![b'x'; 5000]);
        capture.append(Which::Stderr, b"\nTraceback...\nValueError: no\n");
        let captured = capture.take();
        assert_eq!(captured.stdout, b"hello\n");
        assert_eq!(captured.stderr, b"xxxx");
        assert_eq!(captured.dropped_bytes, 4996 + 29);
        assert_eq!(captured.stderr_tail.len(), TAIL_BYTES);
        assert_eq!(captured.last_stderr_line().as_deref(), Some("ValueError: no"));
        assert!(capture.take().stdout.is_empty(), "taken");
        // componentize-py after an uncaught exception: the traceback, then its runtime's panic.
        let capture = Capture::new(1 << 20);
        capture.append(
            Which::Stderr,
            b"Traceback (most recent call last):\n  File \"/0/app.py\", line 84, in reconcile\nRuntimeError: on purpose\n\
              thread '<unnamed>' (1) panicked at runtime/src/lib.rs:1293:29:\nPython function threw an unexpected exception\n\
              note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
        );
        assert_eq!(capture.take().last_stderr_line().as_deref(), Some("RuntimeError: on purpose"));
    }
}

//! A line in the operator's log (the guest's one import). The host bounds and escapes what
//! it keeps. Natively (in `cargo test`) the line goes to stderr.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    {
        use crate::bindings::zundokokiyoshi::rules::log::{Level as Wit, log};
        let level = match level {
            Level::Trace => Wit::Trace,
            Level::Debug => Wit::Debug,
            Level::Info => Wit::Info,
            Level::Warn => Wit::Warn,
            Level::Error => Wit::Error,
        };
        log(level, message);
    }
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("[{level:?}] {message}");
}

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
    crate::component::write_log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("[{level:?}] {message}");
}

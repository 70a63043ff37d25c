//! Logging: tracing to stderr, as text or JSON.

use std::io::IsTerminal;

use tracing_subscriber::{EnvFilter, fmt, prelude::*};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Install the global subscriber. `filter` uses `RUST_LOG` syntax.
pub fn init(format: LogFormat, filter: &str) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        // Colour only on a terminal: a log written to a file or a pipe stays plain text.
        LogFormat::Text => registry
            .with(fmt::layer().with_ansi(std::io::stderr().is_terminal()).with_writer(std::io::stderr))
            .init(),
        LogFormat::Json => registry.with(fmt::layer().json().with_writer(std::io::stderr)).init(),
    }
}

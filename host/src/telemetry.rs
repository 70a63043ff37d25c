//! Logging: tracing to stderr, as text or JSON.

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
        LogFormat::Text => registry.with(fmt::layer().with_writer(std::io::stderr)).init(),
        LogFormat::Json => registry.with(fmt::layer().json().with_writer(std::io::stderr)).init(),
    }
}

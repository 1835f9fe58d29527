//! Log output: `tracing` events as plain text or JSON lines on standard error.
//!
//! The level comes from `-v` (klog style) unless `RUST_LOG` is set, which then wins completely.
//! `HCLOUD_DEBUG=true` additionally turns on the API client's request/response logging
//! (target `hcloud_api`, level trace).

use tracing_subscriber::EnvFilter;

use crate::config::{LogFormat, LoggingSettings};

/// The crates of this workspace, which get more detail than dependencies at higher verbosity.
const OWN_CRATES: [&str; 4] = [
    "hcloud_ccm",
    "cloud_provider",
    "hcloud_provider",
    "hcloud_api",
];

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    /// `RUST_LOG` does not parse.
    #[error("RUST_LOG is invalid: {0}")]
    InvalidRustLog(String),
    /// The filter derived from the flags does not parse (a bug).
    #[error("invalid log filter {directives:?}: {message}")]
    InvalidFilter {
        /// The directives.
        directives: String,
        /// The parser's complaint.
        message: String,
    },
    /// A global subscriber was installed already.
    #[error("logging was already initialised: {0}")]
    AlreadyInitialised(String),
}

/// The filter directives for a klog verbosity: 0–2 info, 3–4 debug for this workspace's crates,
/// 5–6 trace for them and debug for dependencies, 7 and more trace for everything.
pub fn filter_directives(verbosity: u8, hcloud_debug: bool) -> String {
    let own = |level: &str| {
        OWN_CRATES
            .iter()
            .map(|c| format!("{c}={level}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut directives = match verbosity {
        0..=2 => "info".to_owned(),
        3..=4 => format!("info,{}", own("debug")),
        5..=6 => format!("debug,{}", own("trace")),
        _ => "trace".to_owned(),
    };
    if hcloud_debug && verbosity < 7 {
        directives.push_str(",hcloud_api=trace");
    }
    directives
}

/// Builds the filter: `rust_log` (the value of `RUST_LOG`) when non-empty, else the flags.
pub fn build_filter(
    settings: &LoggingSettings,
    rust_log: Option<&str>,
) -> Result<EnvFilter, LoggingError> {
    match rust_log.filter(|v| !v.trim().is_empty()) {
        Some(value) => EnvFilter::builder()
            .parse(value)
            .map_err(|e| LoggingError::InvalidRustLog(e.to_string())),
        None => {
            let directives = filter_directives(settings.verbosity, settings.hcloud_debug);
            EnvFilter::builder()
                .parse(&directives)
                .map_err(|e| LoggingError::InvalidFilter {
                    message: e.to_string(),
                    directives,
                })
        }
    }
}

/// Installs the global subscriber (stderr, text or JSON). Reads `RUST_LOG`.
pub fn init(settings: &LoggingSettings) -> Result<(), LoggingError> {
    let rust_log = std::env::var("RUST_LOG").ok();
    let filter = build_filter(settings, rust_log.as_deref())?;
    // Colours only for a person at a terminal: a log collector would store the escape codes.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_target(true);
    let result = match settings.format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
    };
    result.map_err(|e| LoggingError::AlreadyInitialised(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(verbosity: u8, hcloud_debug: bool) -> LoggingSettings {
        LoggingSettings {
            format: LogFormat::Text,
            verbosity,
            hcloud_debug,
        }
    }

    #[test]
    fn verbosity_levels() {
        assert_eq!(filter_directives(0, false), "info");
        assert_eq!(filter_directives(2, false), "info");
        assert!(filter_directives(3, false).contains("hcloud_ccm=debug"));
        assert!(filter_directives(5, false).starts_with("debug,"));
        assert_eq!(filter_directives(9, true), "trace");
        assert!(filter_directives(0, true).ends_with(",hcloud_api=trace"));
    }

    #[test]
    fn every_derived_filter_parses() {
        for v in 0..=10 {
            for debug in [false, true] {
                build_filter(&settings(v, debug), None).unwrap();
            }
        }
    }

    #[test]
    fn rust_log_wins_and_is_checked() {
        let filter = build_filter(&settings(0, false), Some("warn,hcloud_ccm=trace")).unwrap();
        assert!(filter.to_string().contains("hcloud_ccm=trace"));
        // Empty RUST_LOG counts as unset.
        assert_eq!(
            build_filter(&settings(0, false), Some(" "))
                .unwrap()
                .to_string(),
            "info"
        );
        assert!(matches!(
            build_filter(&settings(0, false), Some("hcloud_ccm=loud")),
            Err(LoggingError::InvalidRustLog(_))
        ));
    }
}

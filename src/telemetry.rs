//! Logging through `tracing`: text or JSON lines on stderr, filtered by klog-style verbosity
//! (`--v`) or an explicit `EnvFilter` directive (`--log-level` / `RUST_LOG`).

use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::cli::LogFormat;

/// Telemetry setup errors.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The filter directive does not parse.
    #[error("invalid log filter '{directive}': {source}")]
    Filter {
        /// The directive given.
        directive: String,
        /// Parser error.
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    /// A global subscriber is already installed.
    #[error("installing the log subscriber: {0}")]
    Init(#[from] tracing_subscriber::util::TryInitError),
}

/// The default filter directive for a klog verbosity: 0-1 info, 2-4 debug, 5+ trace for our
/// crate. kube's runtime and client stay at `warn` below trace level so watcher backoff stays visible
/// without flooding the log.
pub fn filter_directive(verbosity: u8) -> String {
    match verbosity {
        0 | 1 => "info,kube_runtime=warn,kube_client=warn".to_owned(),
        2..=4 => "debug,kube_runtime=info,kube_client=warn,hyper=info,hyper_util=info,rustls=info,tower=info,h2=info".to_owned(),
        _ => "trace,hyper=debug,hyper_util=debug,h2=debug,rustls=debug".to_owned(),
    }
}

/// Builds the filter: `override_directive` when given (and non-empty), else the verbosity default.
pub fn build_filter(verbosity: u8, override_directive: Option<&str>) -> Result<EnvFilter, TelemetryError> {
    let directive = override_directive
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map_or_else(|| filter_directive(verbosity), str::to_owned);
    EnvFilter::builder()
        .parse(&directive)
        .map_err(|source| TelemetryError::Filter { directive, source })
}

/// Whether text logs carry ANSI colour codes: only when stderr is a terminal (a Pod's log, a file
/// or a pipe gets plain text) and `NO_COLOR` is not set.
pub fn ansi_colours(stderr_is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    stderr_is_terminal && no_color.is_none_or(std::ffi::OsStr::is_empty)
}

/// Installs the global subscriber (stderr, text or JSON).
pub fn init(
    verbosity: u8,
    override_directive: Option<&str>,
    format: LogFormat,
) -> Result<(), TelemetryError> {
    let filter = build_filter(verbosity, override_directive)?;
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        LogFormat::Text => {
            use std::io::IsTerminal;
            let ansi = ansi_colours(
                std::io::stderr().is_terminal(),
                std::env::var_os("NO_COLOR").as_deref(),
            );
            registry
                .with(
                    tracing_subscriber::fmt::layer()
                        .with_ansi(ansi)
                        .with_writer(std::io::stderr),
                )
                .try_init()?
        }
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(false)
                    .json()
                    .flatten_event(true)
                    .with_current_span(true)
                    .with_writer(std::io::stderr),
            )
            .try_init()?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbosity_maps_to_levels() {
        assert!(filter_directive(0).starts_with("info,"));
        assert!(filter_directive(1).starts_with("info,"));
        assert!(filter_directive(2).starts_with("debug,"));
        assert!(filter_directive(4).starts_with("debug,"));
        assert!(filter_directive(5).starts_with("trace,"));
        assert!(filter_directive(10).starts_with("trace,"));
        for v in 0..=10 {
            assert!(build_filter(v, None).is_ok(), "verbosity {v}");
        }
    }

    #[test]
    fn colours_only_on_a_terminal_without_no_color() {
        assert!(ansi_colours(true, None));
        assert!(!ansi_colours(false, None));
        assert!(!ansi_colours(true, Some(std::ffi::OsStr::new("1"))));
        assert!(ansi_colours(true, Some(std::ffi::OsStr::new(""))));
    }

    #[test]
    fn override_wins_and_is_validated() {
        let f = build_filter(0, Some("capmox=trace")).unwrap();
        assert_eq!(f.to_string(), "capmox=trace");
        assert_eq!(
            build_filter(0, Some("  ")).unwrap().to_string(),
            build_filter(0, None).unwrap().to_string()
        );
        assert!(matches!(
            build_filter(0, Some("capmox=notalevel")),
            Err(TelemetryError::Filter { .. })
        ));
    }
}

//! SIGTERM / SIGINT handling: the first signal cancels a [`CancellationToken`] that every part
//! of the process watches; a second one ends the process at once (exit status 1), as Kubernetes
//! components do.

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// Starts listening for SIGTERM and SIGINT and returns the process-wide shutdown token.
/// Must be called inside a Tokio runtime.
pub fn shutdown_on_signals() -> std::io::Result<CancellationToken> {
    let token = CancellationToken::new();
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let cancel = token.clone();
    tokio::spawn(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        tracing::info!(
            signal = name,
            "shutting down; send the signal again to exit at once"
        );
        cancel.cancel();
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        tracing::warn!(signal = name, "second signal: exiting immediately");
        std::process::exit(1);
    });
    Ok(token)
}

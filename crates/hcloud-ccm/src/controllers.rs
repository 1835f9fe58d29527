//! The point where controllers start once this replica leads: [`start_controllers`].
//!
//! NOT WIRED YET: the framework controllers (crate `cloud-provider`) and the Hetzner provider
//! (crate `hcloud-provider`) are being written; this function currently starts nothing and
//! says so in the log for every controller the configuration asks for.

use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, Controller};
use crate::http::Endpoints;

/// Everything a controller needs from the process.
#[derive(Clone)]
pub struct ControllerContext {
    /// The Kubernetes client (CCM credentials).
    pub client: kube::Client,
    /// The validated configuration (controllers, periods, concurrency, hcloud settings).
    pub config: Config,
    /// Health/readiness checks and the metrics registry. Controllers register a named
    /// `/healthz` check each and a `/readyz` check that passes once their caches synced.
    pub endpoints: Endpoints,
    /// Fires when the controllers must stop (shutdown or lost leadership).
    pub stop: CancellationToken,
}

impl std::fmt::Debug for ControllerContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerContext")
            .field("config", &self.config)
            .field("endpoints", &self.endpoints)
            .finish_non_exhaustive()
    }
}

/// Why controllers could not start (fatal: the process exits non-zero).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A controller's configuration is unusable (e.g. route CIDRs).
    #[error("cannot start {controller}: {message}")]
    Controller {
        /// Which controller.
        controller: Controller,
        /// Why.
        message: String,
    },
}

/// The started controllers; each runs as a task until the context's stop token fires.
#[derive(Debug, Default)]
pub struct RunningControllers {
    tasks: JoinSet<(Controller, Result<(), String>)>,
}

impl RunningControllers {
    /// Adds a controller task.
    pub fn spawn(
        &mut self,
        controller: Controller,
        task: impl Future<Output = Result<(), String>> + Send + 'static,
    ) {
        self.tasks.spawn(async move { (controller, task.await) });
    }

    /// How many controllers run.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether none runs.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Resolves when the first controller ends (its name and result); never when none runs.
    pub async fn first_exit(&mut self) -> (Controller, Result<(), String>) {
        loop {
            match self.tasks.join_next().await {
                Some(Ok(exit)) => return exit,
                Some(Err(e)) => tracing::error!(error = %e, "a controller task panicked"),
                None => std::future::pending::<()>().await,
            }
        }
    }

    /// Waits up to `grace` for every controller to end (after the stop token fired), then
    /// aborts the rest.
    pub async fn shutdown(mut self, grace: Duration) {
        let drained = tokio::time::timeout(grace, async {
            while let Some(result) = self.tasks.join_next().await {
                if let Ok((controller, Err(e))) = result {
                    tracing::warn!(%controller, error = %e, "controller ended with an error");
                }
            }
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                remaining = self.tasks.len(),
                "controllers did not stop in time"
            );
            self.tasks.abort_all();
        }
    }
}

/// Starts every enabled controller. Called once leadership is won (or at once with
/// `--leader-elect=false`).
pub async fn start_controllers(ctx: ControllerContext) -> Result<RunningControllers, StartError> {
    let running = RunningControllers::default();
    for controller in Controller::ALL {
        if !ctx.config.controller_wanted(controller) {
            tracing::info!(%controller, "controller disabled by configuration");
            continue;
        }
        tracing::warn!(
            %controller,
            "controller not started: the controllers are not wired into this binary yet"
        );
    }
    Ok(running)
}

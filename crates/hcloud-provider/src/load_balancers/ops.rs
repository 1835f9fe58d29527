//! Carrying out [`Step`]s against the API.
//!
//! The API locks a load balancer while one of its actions runs (a second action gets 423
//! `locked`), so the steps of one load balancer run one after the other, each waited for.
//! A `locked` / `conflict` answer therefore means another actor is busy with the load
//! balancer (or its network): it becomes a transient error (or a conflict) with a retry-after,
//! which the controller turns into `max(retry-after, its growing backoff)` instead of spinning
//! here. Every failed call is categorised by [`crate::errors::categorize`], with the executor's
//! `retry_after` as the busy delay.

use std::time::Duration;

use cloud_provider::Error;
use cloud_provider::provider::Result;
use hcloud_api::Client;
use hcloud_api::models::{Action, LoadBalancer, UpdateRequest};

use super::desired::Step;
use crate::errors::{Call, categorize};

/// A step that failed: the error for the controller, and the API's error code when the API
/// refused the step itself (the caller may go on without that step).
#[derive(Debug)]
pub struct Failed {
    /// What the controller gets when the caller gives up.
    pub error: Error,
    /// The API's refusal of the request, if that is what failed.
    pub code: Option<hcloud_api::ErrorCode>,
}

impl From<Failed> for Error {
    fn from(failed: Failed) -> Error {
        failed.error
    }
}

/// Runs steps on one load balancer.
#[derive(Debug)]
pub struct Executor<'a> {
    /// The API.
    pub client: &'a Client,
    /// Load balancer ID.
    pub id: i64,
    /// Load balancer name, for messages.
    pub name: &'a str,
    /// Longest wait for one action.
    pub action_timeout: Duration,
    /// Delay of the retry asked for when busy.
    pub retry_after: Duration,
    /// The service controller's worker pool, lent a slot while an action runs.
    pub workers: Option<&'a cloud_provider::runtime::Workers>,
}

impl Executor<'_> {
    /// Wait for `actions` (polled together with every other waiter's); a timeout asks for a
    /// retry. The controller's worker is free for other keys meanwhile.
    pub async fn wait(&self, what: &str, actions: &[Action]) -> Result<()> {
        let api = self.client.actions();
        let waited = tokio::time::timeout(self.action_timeout, api.wait_all(actions));
        let waited = match self.workers {
            Some(workers) => workers.waiting(waited).await,
            None => waited.await,
        };
        match waited {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) => Err(categorize(self.call(what), err)),
            Err(_) => Err(Error::retry(
                format!(
                    "{what}: the action did not finish within {:?}",
                    self.action_timeout
                ),
                self.retry_after,
            )),
        }
    }

    /// Carry out `step` and wait for its action.
    pub async fn run(&self, step: &Step) -> Result<(), Failed> {
        let lbs = self.client.load_balancers();
        let id = self.id;
        let what = format!("load balancer {:?} (ID {id}): {step}", self.name);
        tracing::info!(load_balancer = id, %step, "changing load balancer");
        let action = match step {
            Step::Update { name, labels } => {
                let request = UpdateRequest {
                    name: name.clone(),
                    labels: labels.clone(),
                };
                lbs.update(id, &request)
                    .await
                    .map_err(|err| self.refused(&what, err))?;
                return Ok(());
            }
            Step::DetachNetwork(network) => lbs.detach_from_network(id, *network).await,
            Step::AttachNetwork(request) => lbs.attach_to_network(id, request).await,
            Step::RemoveTarget(target) => lbs.remove_target(id, target).await,
            Step::DeleteService(port) => lbs.delete_service(id, *port).await,
            Step::ChangeType { to, .. } => lbs.change_type(id, to).await,
            Step::ChangeAlgorithm { to, .. } => lbs.change_algorithm(id, to.clone()).await,
            Step::UpdateService { update, .. } => lbs.update_service(id, update).await,
            Step::AddService(service) => lbs.add_service(id, service).await,
            Step::AddTarget(target) => lbs.add_target(id, target).await,
            Step::EnablePublicInterface => lbs.enable_public_interface(id).await,
            Step::DisablePublicInterface => lbs.disable_public_interface(id).await,
            Step::ChangeDnsPtr(request) => lbs.change_dns_ptr(id, request).await,
            Step::ChangeLabels { labels, .. } => {
                let request = UpdateRequest {
                    name: None,
                    labels: Some(labels.clone()),
                };
                lbs.update(id, &request)
                    .await
                    .map_err(|err| self.refused(&what, err))?;
                return Ok(());
            }
            Step::ChangeProtection(delete) => lbs.change_protection(id, *delete).await,
        }
        .map_err(|err| self.refused(&what, err))?;
        self.wait(&what, &[action])
            .await
            .map_err(|error| Failed { error, code: None })
    }

    fn refused(&self, what: &str, err: hcloud_api::Error) -> Failed {
        Failed {
            code: err.code().cloned(),
            error: categorize(self.call(what), err),
        }
    }

    /// A call on this load balancer: busy for the executor's `retry_after`.
    fn call(&self, what: impl Into<String>) -> Call {
        Call::new(what).busy_for(self.retry_after)
    }

    /// `GET` the load balancer.
    pub async fn reload(&self) -> Result<LoadBalancer> {
        self.client
            .load_balancers()
            .get(self.id)
            .await
            .map_err(|err| {
                let what = format!("reading load balancer {:?} (ID {})", self.name, self.id);
                categorize(self.call(what), err)
            })
    }
}

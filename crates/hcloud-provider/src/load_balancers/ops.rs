//! Carrying out [`Step`]s against the API.
//!
//! The API locks a load balancer while one of its actions runs (a second action gets 423
//! `locked`), so the steps of one load balancer run one after the other, each waited for.
//! A `locked` / `conflict` answer therefore means another actor is busy with the load
//! balancer (or its network): it becomes a transient error (or a conflict) with a retry-after,
//! which the controller turns into `max(retry-after, its growing backoff)` instead of spinning
//! here. See [`api_error`] for every category.

use std::time::Duration;

use cloud_provider::Error;
use cloud_provider::provider::Result;
use hcloud_api::Client;
use hcloud_api::models::{Action, LoadBalancer, UpdateRequest};

use super::desired::Step;

/// Map an API error of `what` onto the controllers' categories:
///
/// - `locked` (another action runs): transient, retried no sooner than `retry_after`;
/// - `conflict`: a conflict, retried no sooner than `retry_after`;
/// - `not_found`: not found;
/// - the API's refusals - `invalid_input` (an unknown location, say), `uniqueness_error` (the
///   name is taken), `invalid_load_balancer_type`, `source_port_already_used`,
///   `cloud_resource_ip_not_allowed`, `targets_without_use_private_ip`, `networks_overlap`,
///   `resource_limit_exceeded`: rejected, retried with a growing delay (capped at 5 min): the
///   world outside the Service may change what the API accepts (a location available again, a
///   quota raised, another load balancer gone), as the official CCM retries every failure;
/// - everything else (5xx, rate limits, transport): transient.
pub fn api_error(what: &str, err: hcloud_api::Error, retry_after: Duration) -> Error {
    use hcloud_api::ErrorCode as C;
    match err.code() {
        Some(C::Locked) => Error::retry(
            format!("{what}: the load balancer is busy with another action ({err})"),
            retry_after,
        ),
        Some(C::Conflict) => Error::conflict(format!("{what}: {err}"), Some(retry_after)),
        Some(C::NotFound) => Error::not_found(what.to_owned(), err),
        Some(
            C::InvalidInput
            | C::UniquenessError
            | C::InvalidLoadBalancerType
            | C::SourcePortAlreadyUsed
            | C::CloudResourceIpNotAllowed
            | C::TargetsWithoutUsePrivateIp
            | C::NetworksOverlap
            | C::ResourceLimitExceeded,
        ) => Error::rejected_by(format!("{what}: the API rejected the request"), err),
        _ => Error::api(what.to_owned(), err),
    }
}

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
            Ok(Err(err)) => Err(api_error(what, err, self.retry_after)),
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
            error: api_error(what, err, self.retry_after),
        }
    }

    /// `GET` the load balancer.
    pub async fn reload(&self) -> Result<LoadBalancer> {
        self.client
            .load_balancers()
            .get(self.id)
            .await
            .map_err(|err| {
                api_error(
                    &format!("reading load balancer {:?} (ID {})", self.name, self.id),
                    err,
                    self.retry_after,
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cloud_provider::Category;

    fn answer(status: u16, code: &str) -> hcloud_api::Error {
        hcloud_api::Error::Api(Box::new(hcloud_api::ApiError {
            status,
            code: hcloud_api::ErrorCode::from(code.to_owned()),
            message: "m".into(),
            details: hcloud_api::ErrorDetails::default(),
            method: "POST".into(),
            path: "/load_balancers".into(),
        }))
    }

    #[test]
    fn api_answers_map_onto_categories() {
        let delay = Duration::from_secs(5);
        let cases = [
            (423, "locked", Category::Transient, Some(delay)),
            (409, "conflict", Category::Conflict, Some(delay)),
            (404, "not_found", Category::NotFound, None),
            (422, "invalid_input", Category::Rejected, None),
            (409, "uniqueness_error", Category::Rejected, None),
            (403, "resource_limit_exceeded", Category::Rejected, None),
            (503, "unavailable", Category::Transient, None),
            (429, "rate_limit_exceeded", Category::Transient, None),
        ];
        for (status, code, category, retry_after) in cases {
            let err = api_error("creating load balancer \"x\"", answer(status, code), delay);
            assert_eq!(err.category(), category, "{code}: {err}");
            assert_eq!(err.retry_after(), retry_after, "{code}");
        }
    }
}

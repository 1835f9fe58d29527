//! Carrying a decision out: the managed certificate, the creation, the rounds of steps, the
//! deletions, and the notices published as events.
//!
//! The API locks a load balancer while one of its actions runs (a second action gets 423
//! `locked`), so the steps of one load balancer run one after the other, each waited for
//! ([`Executor`]). A `locked` / `conflict` answer therefore means another actor is busy with
//! the load balancer (or its network): it becomes a transient error (or a conflict) with a
//! retry-after, which the controller turns into `max(retry-after, its growing backoff)`
//! instead of spinning here. Every failed call is categorised by
//! [`crate::errors::categorize`], with the settings' `retry_after` as the busy delay.
//!
//! The rounds are the decision's: nothing is diffed again here. What only the API's answers
//! tell (the created certificate's ID, the created load balancer's addresses) is named by
//! stand-ins in the steps and filled in before a step runs ([`resolve`]).

use std::sync::Arc;
use std::time::Duration;

use cloud_provider::provider::Result;
use cloud_provider::{Category, Error};
use hcloud_api::Client;
use hcloud_api::models::{
    self, Action, Certificate, CreateCertificateRequest, CreateLoadBalancerRequest, LoadBalancer,
    UpdateRequest,
};
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};

use super::HcloudLoadBalancers;
use super::cluster;
use super::decide::{self, Decision, Deletion, PendingCertificate, Target, predict};
use super::desired::{self, Certificates, Desired, ManagedCertificate, Notice, Step, Subject};
use super::naming::{SERVICE_UID_LABEL, service_key};
use super::read::MadeOf;
use super::services::NEW_CERTIFICATE;
use super::steps::reasons;
use super::tls_secret::SecretCertificate;
use crate::errors::{Call, categorize};
use crate::metrics::op::{certificates as cert_op, load_balancer_ops as lb_op};

/// Label asking Hetzner to issue a managed certificate from Let's Encrypt staging (internal).
const STAGING_LABEL: &str = "HC-Use-Staging-CA";

/// Carries decisions out (see the module docs).
pub(super) struct Applier<'a> {
    pub lbs: &'a HcloudLoadBalancers,
}

impl Applier<'_> {
    /// Carry `decision` out: the managed certificate first, then the load balancer (created,
    /// or as found), then the decision's rounds. Returns the status and the notices of the
    /// rounds.
    pub async fn carry_out(
        &self,
        service: &Service,
        decision: Decision,
    ) -> Result<(LoadBalancerStatus, Vec<Notice>)> {
        let lbs = self.lbs;
        let Decision {
            mut desired,
            certificate,
            retired,
            target,
            mut rounds,
            ..
        } = decision;
        let mut created_certificate = None;
        // The certificate made for the Service, remembered once nothing is left to retire.
        let mut made = None;
        if let Some(pending) = certificate {
            let managed = match &desired.certificates {
                Certificates::Managed(want) => Some(MadeOf::domains(&want.domains)),
                _ => None,
            };
            let (id, made_of) = match pending {
                PendingCertificate::Create(want) => {
                    let created = self.create_managed_certificate(&desired.uid, &want).await?;
                    let id = self.issued(created).await?;
                    created_certificate = Some(id);
                    (id, managed)
                }
                PendingCertificate::Wait(cert) => (self.issued(*cert).await?, managed),
                PendingCertificate::Upload(want) => {
                    let id = self.upload_secret_certificate(&desired.uid, &want).await?;
                    created_certificate = Some(id);
                    (id, Some(MadeOf::Secret(want.digest.clone())))
                }
            };
            made = made_of.map(|made_of| (id, made_of));
            desired.set_certificates(&[id]);
        }
        let lb = match target {
            Target::Refused(message) => return Err(Error::rejected(message)),
            Target::Existing(lb) => *lb,
            Target::Create(mut request) => {
                // The certificate may be known only now.
                request.services = desired.create_request_services();
                match self.create(service, &desired, &request).await {
                    // One target server does not exist, or has no public IPv4 (the answer
                    // does not say which): create without targets; the first round adds them
                    // one by one and leaves out only those the API refuses.
                    Err(failed)
                        if !request.targets.is_empty()
                            && (failed.error.category() == Category::NotFound
                                || failed.code == Some(hcloud_api::ErrorCode::MissingIpv4)) =>
                    {
                        tracing::warn!(
                            service = %service_key(service),
                            error = %failed.error,
                            "a target server does not exist or has no public IPv4; creating the load balancer without targets first"
                        );
                        let targets = std::mem::take(&mut request.targets);
                        decide::add_first(&mut rounds, targets);
                        self.create(service, &desired, &request).await?
                    }
                    other => other?,
                }
            }
        };
        let stand_ins = StandIns {
            certificate: created_certificate,
        };
        let (lb, notices) = self
            .run_rounds(service, &desired, lb, &rounds, &stand_ins)
            .await?;
        // After the swap: the retired certificates no service of the load balancer carries.
        let carried: Vec<i64> = lb
            .services
            .iter()
            .filter_map(|s| s.http.as_ref())
            .flat_map(|h| h.certificates.iter().copied())
            .collect();
        let unused: Vec<Certificate> = retired
            .into_iter()
            .filter(|c| !carried.contains(&c.id))
            .collect();
        self.delete_certificates(&service_key(service), &unused)
            .await?;
        if let Some((id, made_of)) = made {
            lbs.managed_certificates.remember(&desired.uid, id, made_of);
        }
        lbs.operations
            .count(crate::metrics::op::load_balancers::GET_LOAD_BALANCER_STATUS_INGRESS);
        let status = desired::status(&lb, &desired.status).map_err(|why| {
            // Still being created as last seen: read it again next time.
            lbs.cache.doubt(lb.id);
            Error::retry(why, lbs.settings.retry_after)
        })?;
        Ok((status, notices))
    }

    /// Run `rounds` on `lb`, one after the other: target steps are applied to the known
    /// state, any other step makes the round end with one read of the load balancer. Returns
    /// the load balancer as left and the notices (`MaxTargetsReached`, servers that do not
    /// exist, targets left out).
    pub async fn run_rounds(
        &self,
        service: &Service,
        desired: &Desired,
        mut lb: LoadBalancer,
        rounds: &[Vec<Step>],
        stand_ins: &StandIns,
    ) -> Result<(LoadBalancer, Vec<Notice>)> {
        let lbs = self.lbs;
        let mut notices = Vec::new();
        // Targets whose server turns out not to exist, has no public IPv4 or does not fit are
        // dropped from this copy, and not asked for again by a later round.
        let mut desired = desired.clone();
        let desired = &mut desired;
        let name = desired.name.clone();
        lbs.operations.count(lb_op::RECONCILE_HCLB);
        for round in rounds {
            let exec = lbs.executor(&lb, &name);
            let mut applied = true;
            // The API said the load balancer holds no more targets: the remaining additions
            // are left out without asking again.
            let mut full = false;
            for step in round {
                if !wanted(desired, step) {
                    continue;
                }
                let Some(step) = resolve(step, &lb, stand_ins) else {
                    tracing::info!(service = %service_key(service), %step, "left out: the load balancer has no such address yet");
                    continue;
                };
                if full && let Some(node) = drop_added_node(desired, &step) {
                    notices.push(desired.max_targets_reached(&node));
                    continue;
                }
                count_step(&lbs.operations, &step);
                let Err(failed) = exec.run(&step).await else {
                    applied &= step.apply_to(&mut lb);
                    continue;
                };
                let err = &failed.error;
                let limit = failed.code == Some(hcloud_api::ErrorCode::ResourceLimitExceeded);
                let no_ipv4 = failed.code == Some(hcloud_api::ErrorCode::MissingIpv4);
                let left_out = match err.category() {
                    // As officially: the targets that fit stay, the others get a Warning.
                    _ if limit => drop_added_node(desired, &step).map(|node| {
                        full = true;
                        desired.max_targets_reached(&node)
                    }),
                    // A server not seen without a public IPv4 before: left out with a Warning
                    // on its Node, the other targets are still set (see `cloud_targets.rs`).
                    _ if no_ipv4 => drop_added_target(desired, &step).map(|(node, server)| {
                        super::cloud_targets::refused(&node, server, &service_key(service))
                    }),
                    Category::NotFound => drop_added_target(desired, &step).map(|(node, server)| {
                        Notice::warn(
                            reasons::TARGET_SERVER_NOT_FOUND,
                            format!(
                                "Node {node} was left out of load balancer {:?}: its server {server} does not exist",
                                desired.name
                            ),
                        )
                    }),
                    _ => None,
                };
                let Some(notice) = left_out else {
                    lbs.cache.doubt(lb.id);
                    return Err(failed.into());
                };
                if no_ipv4 {
                    learn_server(lbs, &step).await;
                }
                tracing::warn!(service = %service_key(service), error = %err, "{}", notice.message);
                notices.push(notice);
            }
            if applied {
                // Only target steps, all done: the load balancer is known without a read.
                lbs.cache.store(&lb);
                continue;
            }
            lb = self.reread(&exec).await?;
        }
        notices.extend(desired.left_out(&lb));
        Ok((lb, notices))
    }

    /// Carry `deletion` out for `service` (with `uid`): the load balancers, then the managed
    /// certificates; a protected load balancer is kept with a `DeleteProtected` Warning.
    pub async fn carry_out_deletion(
        &self,
        service: &Service,
        uid: &str,
        deletion: &Deletion,
    ) -> Result<()> {
        let key = service_key(service);
        for lb in &deletion.kept {
            tracing::info!(service = %key, load_balancer = lb.name, id = lb.id, "keeping the load balancer: it has delete protection");
            self.lbs
                .events
                .warn(
                    service,
                    reasons::DELETE_PROTECTED,
                    &decide::kept_message(lb),
                )
                .await;
        }
        for lb in &deletion.load_balancers {
            self.delete_one(&key, lb).await?;
        }
        // Shared load balancers that stay: the Service's services and label go.
        for (lb, steps) in &deletion.released {
            let exec = self.lbs.executor(lb, &lb.name);
            for step in steps {
                count_step(&self.lbs.operations, step);
                let ran = exec.run(step).await;
                // Read again on the next lookup, whatever came of it.
                self.lbs.cache.doubt(lb.id);
                ran?;
            }
        }
        self.delete_certificates(&key, &deletion.certificates)
            .await?;
        if deletion.kept.is_empty() {
            self.lbs.managed_certificates.forget(uid);
        }
        Ok(())
    }

    /// Delete one load balancer of the Service (kept when the API says it is protected).
    pub async fn delete_one(&self, key: &str, lb: &LoadBalancer) -> Result<()> {
        let lbs = self.lbs;
        lbs.operations.count(lb_op::DELETE);
        tracing::info!(service = %key, load_balancer = lb.name, id = lb.id, "deleting load balancer");
        let what = || format!("deleting load balancer {:?} (ID {})", lb.name, lb.id);
        match lbs.client.load_balancers().delete(lb.id).await {
            // The load balancer is gone once its delete action succeeded.
            Ok(Some(action)) => {
                let waited = lbs.executor(lb, &lb.name).wait(&what(), &[action]).await;
                match &waited {
                    Ok(()) => lbs.cache.remove(lb.id),
                    Err(_) => lbs.cache.doubt(lb.id),
                }
                waited
            }
            Ok(None) => {
                lbs.cache.remove(lb.id);
                Ok(())
            }
            Err(err) if err.is_not_found() => {
                lbs.cache.remove(lb.id);
                Ok(())
            }
            Err(err) if err.code() == Some(&hcloud_api::ErrorCode::Protected) => {
                tracing::info!(service = %key, load_balancer = lb.name, "keeping the load balancer: it has delete protection");
                Ok(())
            }
            Err(err) => Err({
                lbs.cache.doubt(lb.id);
                categorize(lbs.lb_call(what()), err)
            }),
        }
    }

    /// Delete `certificates` (ones this CCM made for the Service: once its load balancers
    /// are gone, or retired after a swap).
    pub async fn delete_certificates(&self, key: &str, certificates: &[Certificate]) -> Result<()> {
        for cert in certificates {
            let what = decide::made_certificate(cert);
            tracing::info!(service = %key, "deleting {what}");
            match self.lbs.client.certificates().delete(cert.id).await {
                Ok(()) => {}
                Err(err) if err.is_not_found() => {}
                Err(err) => return Err(categorize(format!("deleting {what}"), err)),
            }
        }
        Ok(())
    }

    /// Publish `notices` as `Warning` events on the Service (or the named Node), or log them.
    pub async fn publish(&self, service: &Service, nodes: &[Arc<Node>], notices: &[Notice]) {
        let key = service_key(service);
        let events = &self.lbs.events;
        for notice in notices {
            match (notice.reason, &notice.subject) {
                (None, _) => tracing::info!(service = %key, "{}", notice.message),
                (Some(reason), Subject::Service) => {
                    events.warn(service, reason, &notice.message).await;
                }
                (Some(reason), Subject::Node(name)) => {
                    match nodes
                        .iter()
                        .find(|n| n.metadata.name.as_deref() == Some(name.as_str()))
                    {
                        Some(node) => events.warn(node.as_ref(), reason, &notice.message).await,
                        None => {
                            tracing::warn!(service = %key, node = %name, reason, "{}", notice.message)
                        }
                    }
                }
            }
        }
    }

    /// Create the Service's managed certificate (labelled with its UID).
    async fn create_managed_certificate(
        &self,
        uid: &str,
        want: &ManagedCertificate,
    ) -> Result<Certificate> {
        self.lbs.operations.count(cert_op::CREATE_MANAGED);
        let mut labels = models::Labels::new();
        labels.insert(SERVICE_UID_LABEL.to_owned(), uid.to_owned());
        if want.acme_staging {
            labels.insert(STAGING_LABEL.to_owned(), "true".to_owned());
        }
        let request = CreateCertificateRequest::managed(&want.name, want.domains.clone());
        tracing::info!(certificate = want.name, domains = ?want.domains, "creating managed certificate");
        self.create_certificate(
            request,
            labels,
            format!("creating managed certificate {:?}", want.name),
        )
        .await
    }

    /// Upload the certificate of the Service's Secret (labelled with its UID, the Secret and
    /// the content's digest); its ID.
    async fn upload_secret_certificate(&self, uid: &str, want: &SecretCertificate) -> Result<i64> {
        self.lbs.operations.count(cert_op::CREATE_FROM_SECRET);
        let request = CreateCertificateRequest::uploaded(
            &want.name,
            &want.content.certificate,
            &want.content.private_key,
        );
        tracing::info!(
            certificate = want.name,
            secret = want.secret,
            digest = want.digest,
            "uploading certificate from Secret"
        );
        let what = format!(
            "uploading certificate {:?} from Secret {}",
            want.name, want.secret
        );
        let created = self
            .create_certificate(request, want.labels(uid), what)
            .await?;
        Ok(created.id)
    }

    /// Create a certificate this CCM makes for a Service, with `labels` and the cluster label
    /// (where set); `what` names the call in an error.
    async fn create_certificate(
        &self,
        request: CreateCertificateRequest,
        mut labels: models::Labels,
        what: String,
    ) -> Result<Certificate> {
        if let Some(cluster) = &self.lbs.settings.cluster_name {
            labels.insert(cluster::CLUSTER_NAME_LABEL.to_owned(), cluster.clone());
        }
        let created = self
            .lbs
            .client
            .certificates()
            .create(&request.with_labels(labels))
            .await
            .map_err(|err| categorize(what, err))?;
        Ok(created.certificate)
    }

    /// Wait until `cert` is issued (bounded by `certificate_timeout`: then a retry). It polls
    /// the certificate, which has no action to wait for.
    async fn issued(&self, mut cert: Certificate) -> Result<i64> {
        let lbs = self.lbs;
        let deadline = tokio::time::Instant::now() + lbs.settings.certificate_timeout;
        loop {
            if decide::issuance(&cert)? {
                return Ok(cert.id);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::retry(
                    format!(
                        "managed certificate {:?} (ID {}) is not issued yet",
                        cert.name, cert.id
                    ),
                    lbs.settings.retry_after,
                ));
            }
            lbs.waiting(tokio::time::sleep(
                lbs.client
                    .poll_interval()
                    .max(std::time::Duration::from_millis(10)),
            ))
            .await;
            cert = lbs
                .client
                .certificates()
                .get(cert.id)
                .await
                .map_err(|err| categorize(format!("reading certificate {:?}", cert.name), err))?;
        }
    }

    /// Create the load balancer and wait until it is ready (a refusal keeps the API's code).
    async fn create(
        &self,
        service: &Service,
        desired: &Desired,
        request: &CreateLoadBalancerRequest,
    ) -> std::result::Result<LoadBalancer, Failed> {
        let lbs = self.lbs;
        lbs.operations.count(lb_op::CREATE);
        lbs.project.allows_creation().await.map_err(|why| {
            Error::rejected(format!(
                "not creating load balancer {:?}: {why}",
                desired.name
            ))
        })?;
        tracing::info!(service = %service_key(service), load_balancer = desired.name, placement = ?desired.placement, lb_type = desired.create_type, "creating load balancer");
        let created = match lbs.client.load_balancers().create(request).await {
            Ok(created) => created,
            // The name is taken: by a load balancer the cache did not show yet. Look again
            // (a fresh listing) on the retry: it is adopted, or refused when it belongs to
            // another Service.
            Err(err) if err.code() == Some(&hcloud_api::ErrorCode::UniquenessError) => {
                lbs.cache.forget();
                return Err(Error::conflict(
                    format!(
                        "creating load balancer {:?}: the name is taken ({err}); looking again",
                        desired.name
                    ),
                    Some(lbs.settings.retry_after),
                )
                .into());
            }
            Err(err) => {
                if err.may_have_acted() {
                    // The load balancer may exist although the answer did not say so: the
                    // next lookup asks by label before anything is created again.
                    lbs.cache.doubt_service(&desired.uid);
                }
                // Named with what the request asked for, so a rejected location or type is
                // visible in the Warning.
                let at = match (&request.location, &request.network_zone) {
                    (Some(location), _) => format!("location {location:?}"),
                    (None, Some(zone)) => format!("network zone {zone:?}"),
                    (None, None) => "no placement".to_owned(),
                };
                let what = format!(
                    "creating load balancer {:?} (type {:?}, {at})",
                    desired.name, request.load_balancer_type
                );
                let code = err.code().cloned();
                return Err(Failed {
                    error: categorize(lbs.lb_call(what), err),
                    code,
                });
            }
        };
        let lb = created.load_balancer;
        // Known from here on, whatever happens to its action or the read that follows.
        lbs.cache.store(&lb);
        let exec = lbs.executor(&lb, &desired.name);
        if let Err(err) = exec
            .wait(
                &format!("creating load balancer {:?}", desired.name),
                &[created.action],
            )
            .await
        {
            let action_failed = std::error::Error::source(&err)
                .and_then(|cause| cause.downcast_ref::<hcloud_api::Error>())
                .is_some_and(|cause| matches!(cause, hcloud_api::Error::Action(_)));
            if action_failed {
                // The API failed the creation: what it left has no address and never gets one.
                // It is this Service's, created by this very call: delete it, so that the next
                // sync creates one that works instead of waiting for an address forever.
                let key = service_key(service);
                tracing::warn!(service = %key, load_balancer = desired.name, id = lb.id, error = %err, "the creation failed; deleting what it left");
                if let Err(cleanup) = self.delete_one(&key, &lb).await {
                    tracing::warn!(service = %key, error = %cleanup, "could not delete the failed load balancer; the next sync finds it by its label");
                }
            } else {
                lbs.cache.doubt(lb.id);
            }
            return Err(err.into());
        }
        // The answer to the creation shows the load balancer as asked for (services,
        // targets); its addresses may only come with the finished action. Read it once only
        // when the answer lacks them.
        let addressed = desired::status(&lb, &desired.status).is_ok()
            && (request.network.is_none() || lb.private_net.iter().any(|p| !p.ip.is_empty()));
        if !addressed {
            return Ok(self.reread(&exec).await?);
        }
        lbs.cache.store(&lb);
        Ok(lb)
    }

    /// Read the load balancer of `exec` again and keep it in the cache (marked for another
    /// read when this one fails).
    async fn reread(&self, exec: &Executor<'_>) -> Result<LoadBalancer> {
        let lbs = self.lbs;
        lbs.operations.count(lb_op::GET_BY_NAME);
        let lb = exec
            .reload()
            .await
            .inspect_err(|_| lbs.cache.doubt(exec.id))?;
        lbs.cache.store(&lb);
        Ok(lb)
    }
}

/// What the API answered that the decision's steps name by stand-ins.
#[derive(Clone, Debug, Default)]
pub(super) struct StandIns {
    /// The ID of the managed certificate created for [`NEW_CERTIFICATE`].
    pub certificate: Option<i64>,
}

/// `step` as it runs on `lb`: a [`NEW_CERTIFICATE`] replaced by the created certificate, a
/// reverse DNS entry of a new address ([`predict::NEW_IPV4`], [`predict::NEW_IPV6`]) given
/// `lb`'s address (`None` when `lb` has none).
fn resolve(step: &Step, lb: &LoadBalancer, stand_ins: &StandIns) -> Option<Step> {
    let certificates = |http: &mut Option<models::ServiceHttp>| {
        let (Some(http), Some(id)) = (http, stand_ins.certificate) else {
            return;
        };
        for cert in &mut http.certificates {
            if *cert == NEW_CERTIFICATE {
                *cert = id;
            }
        }
    };
    let mut step = step.clone();
    match &mut step {
        Step::AddService(spec) => certificates(&mut spec.http),
        Step::UpdateService { update, .. } => certificates(&mut update.http),
        Step::ChangeDnsPtr(request) => {
            let ip = match request.ip.as_str() {
                predict::NEW_IPV4 => &lb.public_net.ipv4.ip,
                predict::NEW_IPV6 => &lb.public_net.ipv6.ip,
                _ => return Some(step),
            };
            request.ip = ip.clone()?;
        }
        _ => {}
    }
    Some(step)
}

/// Whether `step` is still wanted by `desired`: a target addition is not once an earlier
/// round dropped its Node (its server does not exist, or the load balancer is full).
fn wanted(desired: &Desired, step: &Step) -> bool {
    let Step::AddTarget(target) = step else {
        return true;
    };
    match (&target.server, &target.ip) {
        (Some(server), _) => desired.targets.iter().any(|t| t.server == server.id),
        (_, Some(ip)) => desired.ip_targets.iter().any(|t| t.ip == ip.ip),
        _ => true,
    }
}

fn count_step(operations: &crate::metrics::Operations, step: &Step) {
    let op = match step {
        // Beyond the official CCM, counted with the other changes of the load balancer
        // itself: labels and delete protection.
        Step::Update { .. } | Step::ChangeLabels { .. } | Step::ChangeProtection(_) => {
            lb_op::CHANGE_HCLB_INFO
        }
        Step::DetachNetwork(_) => lb_op::DETACH_FROM_NETWORK,
        Step::AttachNetwork(_) => lb_op::ATTACH_TO_NETWORK,
        Step::RemoveTarget(_) | Step::AddTarget(_) => lb_op::RECONCILE_HCLB_TARGETS,
        Step::DeleteService(_) => lb_op::RECONCILE_HCLB_SERVICES,
        Step::ChangeType { .. } => lb_op::CHANGE_TYPE,
        Step::ChangeAlgorithm { .. } => lb_op::CHANGE_ALGORITHM,
        Step::UpdateService { .. } => lb_op::SERVICE_OPTS_BUILD_UPDATE,
        Step::AddService(_) => lb_op::SERVICE_OPTS_BUILD_ADD,
        Step::EnablePublicInterface | Step::DisablePublicInterface => {
            lb_op::TOGGLE_PUBLIC_INTERFACE
        }
        Step::ChangeDnsPtr(r) if r.ip.contains(':') => lb_op::CHANGE_IPV6_RDNS,
        Step::ChangeDnsPtr(_) => lb_op::CHANGE_IPV4_RDNS,
    };
    operations.count(op);
}

/// When `step` adds a server or IP target: drop it from `desired` and return its Node's name.
fn drop_added_node(desired: &mut Desired, step: &Step) -> Option<String> {
    if let Some((node, _)) = drop_added_target(desired, step) {
        return Some(node);
    }
    let Step::AddTarget(target) = step else {
        return None;
    };
    let ip = &target.ip.as_ref()?.ip;
    let node = desired
        .ip_targets
        .iter()
        .find(|t| t.ip == *ip)
        .map(|t| t.node.clone())?;
    desired.ip_targets.retain(|t| t.ip != *ip);
    Some(node)
}

/// Let the server cache learn the server of `step`'s target, refused for its missing public
/// IPv4 (one read, only when the cache's view of it is too old or missing), so that the next
/// decision reaches it over the network or leaves it out without asking the API again.
async fn learn_server(lbs: &HcloudLoadBalancers, step: &Step) {
    let (Some(servers), Step::AddTarget(target)) = (&lbs.servers, step) else {
        return;
    };
    let Some(server) = &target.server else { return };
    if let Err(err) = servers.get(&crate::ServerKey::Id(server.id)).await {
        tracing::debug!(server = server.id, error = %err, "could not read the refused target's server");
    }
}

/// When `step` adds a server target: drop that target from `desired` (it is not asked for
/// again by this ensure) and return its Node's name and server. `None` for any other step.
fn drop_added_target(desired: &mut Desired, step: &Step) -> Option<(String, i64)> {
    let Step::AddTarget(target) = step else {
        return None;
    };
    let server = target.server.as_ref()?.id;
    let node = desired
        .targets
        .iter()
        .find(|t| t.server == server)
        .map(|t| t.node.clone())?;
    desired.targets.retain(|t| t.server != server);
    Some((node, server))
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

/// A failure that is no refusal of the API's.
impl From<Error> for Failed {
    fn from(error: Error) -> Failed {
        Failed { error, code: None }
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
        let update =
            |name: Option<String>, labels: Option<models::Labels>| UpdateRequest { name, labels };
        let action = match step {
            Step::Update { name, labels } => {
                lbs.update(id, &update(name.clone(), labels.clone()))
                    .await
                    .map_err(|err| self.refused(&what, err))?;
                return Ok(());
            }
            Step::ChangeLabels { labels, .. } => {
                lbs.update(id, &update(None, Some(labels.clone())))
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

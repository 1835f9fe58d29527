//! The I/O shell of ensure, update and plan: lookups, certificates, creation, running the
//! desired state's steps, and publishing the notices as events.

use std::sync::Arc;

use cloud_provider::provider::Result;
use cloud_provider::{Category, Error};
use hcloud_api::api::params::ListCertificatesParams;
use hcloud_api::models::{self, Certificate, CreateCertificateRequest, CreateLoadBalancerRequest};
use k8s_openapi::api::core::v1::{Node, Service};

use super::HcloudLoadBalancers;
use super::annotations::keys;
use super::cluster::{self, Claim};
use super::desired::{self, Desired, ManagedCertificate, Notice, Placement, Step, Subject};
use super::naming::{SERVICE_UID_LABEL, service_key, uid_selector};
use super::snapshot::Lookup;
use super::steps::reasons;
use crate::errors::categorize;
use crate::metrics::op::{certificates as cert_op, load_balancer_ops as lb_op};

/// Label asking Hetzner to issue a managed certificate from Let's Encrypt staging (internal).
const STAGING_LABEL: &str = "HC-Use-Staging-CA";

/// What the Service's load balancer lookup found.
#[derive(Debug, Default)]
pub(super) struct Found {
    /// The load balancer to use (lowest ID when several carry the UID).
    pub lb: Option<models::LoadBalancer>,
    /// Other load balancers labelled with the same UID.
    pub duplicates: Vec<models::LoadBalancer>,
    /// Notices of the lookup (a load balancer of another Service, duplicates).
    pub notices: Vec<Notice>,
}

impl HcloudLoadBalancers {
    /// Every load balancer labelled with `uid`, lowest ID first, as the API lists them now
    /// (one request by label selector, never the snapshot); with a cluster name, those of
    /// other clusters are left out (never reported, changed or deleted).
    pub(super) async fn list_labelled_now(&self, uid: &str) -> Result<Vec<models::LoadBalancer>> {
        self.operations.count(lb_op::GET_BY_K8S_SERVICE_UID);
        let mut labelled = self
            .snapshot
            .labelled_now(uid)
            .await
            .map_err(|err| categorize(labelled_lookup(uid), err))?;
        labelled.retain(|lb| self.claim(&lb.labels).usable());
        Ok(labelled)
    }

    /// Whom `labels` say an object belongs to, for this cluster (see `cluster.rs`).
    pub(super) fn claim(&self, labels: &models::Labels) -> Claim {
        cluster::claim(labels, self.settings.cluster_name.as_deref())
    }

    async fn lookup(&self, uid: &str, name: Option<&str>) -> Result<Lookup> {
        self.snapshot
            .lookup(uid, name)
            .await
            .map_err(|err| categorize(labelled_lookup(uid), err))
    }

    /// The Service's load balancer.
    ///
    /// Only a load balancer labelled with the Service's UID is the Service's own. Several with
    /// the UID: the lowest ID is used and a `DuplicateLoadBalancers` warning names the others
    /// (the official CCM refuses to act instead). Ensure (`adopt_by_name`) may also take over a
    /// load balancer with the Service's name that carries no UID label (made by hand or by a
    /// very old CCM; the label is written as the first step), but never one labelled for
    /// another Service: that is an error and a `LoadBalancerOwnedByOtherService` warning (the
    /// official CCM would relabel it).
    pub(super) async fn find(&self, uid: &str, name: &str, adopt_by_name: bool) -> Result<Found> {
        self.operations.count(lb_op::GET_BY_K8S_SERVICE_UID);
        let lookup = self.lookup(uid, adopt_by_name.then_some(name)).await?;
        // Another cluster's load balancer with this UID (a cluster restored from another's
        // backup) is not this Service's: refused, never changed.
        let (labelled, foreign): (Vec<_>, Vec<_>) = lookup
            .labelled
            .into_iter()
            .partition(|lb| self.claim(&lb.labels).usable());
        let mut labelled = labelled.into_iter();
        let mut found = Found {
            lb: labelled.next(),
            duplicates: labelled.collect(),
            notices: Vec::new(),
        };
        if found.lb.is_none()
            && let Some(lb) = foreign.first()
        {
            found
                .notices
                .push(owned_by_other_cluster(lb, &self.claim(&lb.labels)));
            return Ok(found);
        }
        if let Some(lb) = &found.lb {
            if !found.duplicates.is_empty() {
                let others: Vec<String> = found
                    .duplicates
                    .iter()
                    .map(|d| format!("{:?} (ID {})", d.name, d.id))
                    .collect();
                found.notices.push(Notice::warn(
                    reasons::DUPLICATE_LOAD_BALANCERS,
                    format!(
                        "several load balancers carry the label {}: using {:?} (ID {}), the lowest ID; not managed: {}. Deleting the Service deletes all of them",
                        uid_selector(uid),
                        lb.name,
                        lb.id,
                        others.join(", ")
                    ),
                ));
            }
            return Ok(found);
        }
        if !adopt_by_name {
            return Ok(found);
        }
        self.operations.count(lb_op::GET_BY_NAME);
        let by_name = lookup.by_name;
        if let Some(lb) = &by_name
            && !self.claim(&lb.labels).usable()
        {
            found
                .notices
                .push(owned_by_other_cluster(lb, &self.claim(&lb.labels)));
            return Ok(found);
        }
        match by_name {
            Some(lb) => match lb.labels.get(SERVICE_UID_LABEL) {
                Some(owner) if owner != uid => {
                    let message = format!(
                        "load balancer {name:?} belongs to the Service with UID {owner} (label {SERVICE_UID_LABEL}); choose another name with the annotation {}, or remove that label from the load balancer to hand it over",
                        keys::NAME
                    );
                    found.notices.push(Notice::warn(
                        reasons::LOAD_BALANCER_OWNED_BY_OTHER_SERVICE,
                        message,
                    ));
                    Ok(found)
                }
                _ => {
                    found.lb = Some(lb);
                    Ok(found)
                }
            },
            None => Ok(found),
        }
    }

    /// Publish `notices` as `Warning` events on the Service (or the named Node), or log them.
    pub(super) async fn publish(&self, service: &Service, nodes: &[Arc<Node>], notices: &[Notice]) {
        let key = service_key(service);
        for notice in notices {
            match (notice.reason, &notice.subject) {
                (None, _) => tracing::info!(service = %key, "{}", notice.message),
                (Some(reason), Subject::Service) => {
                    self.events.warn(service, reason, &notice.message).await;
                }
                (Some(reason), Subject::Node(name)) => {
                    match nodes
                        .iter()
                        .find(|n| n.metadata.name.as_deref() == Some(name.as_str()))
                    {
                        Some(node) => {
                            self.events
                                .warn(node.as_ref(), reason, &notice.message)
                                .await
                        }
                        None => {
                            tracing::warn!(service = %key, node = %name, reason, "{}", notice.message)
                        }
                    }
                }
            }
        }
    }

    /// Resolve uploaded certificate names to IDs (IDs need no request). A name that does not
    /// exist fails the sync, naming the annotation(s) `key_naming` gives for it.
    pub(super) async fn resolve_uploaded(
        &self,
        refs: &[String],
        key_naming: impl Fn(&str) -> String,
    ) -> Result<Vec<i64>> {
        let mut ids = Vec::with_capacity(refs.len());
        for reference in refs {
            if let Ok(id) = reference.parse::<i64>() {
                ids.push(id);
                continue;
            }
            self.operations
                .count(lb_op::SERVICE_OPTS_RESOLVE_CERTS_BY_NAME_OR_ID);
            self.operations.count(cert_op::GET_BY_NAME_OR_ID);
            let found = self
                .client
                .certificates()
                .get_by_name(reference)
                .await
                .map_err(|err| categorize(format!("looking up certificate {reference:?}"), err))?;
            match found {
                Some(cert) => ids.push(cert.id),
                // It may be uploaded later: retried until it is.
                None => {
                    return Err(Error::rejected(format!(
                        "{}: certificate {reference:?} does not exist",
                        key_naming(reference)
                    )));
                }
            }
        }
        Ok(ids)
    }

    /// The certificates labelled with the Service's UID (with a cluster name: not another
    /// cluster's).
    pub(super) async fn labelled_certificates(&self, uid: &str) -> Result<Vec<Certificate>> {
        self.operations.count(cert_op::GET_BY_LABEL);
        let mut certificates = self
            .client
            .certificates()
            .list_all(&ListCertificatesParams::label_selector(uid_selector(uid)))
            .await
            .map_err(|err| {
                categorize(
                    format!("listing certificates labelled {}", uid_selector(uid)),
                    err,
                )
            })?;
        certificates.retain(|c| self.claim(&c.labels).usable());
        Ok(certificates)
    }

    /// Delete `certificates` (the Service's managed ones, once its load balancers are gone).
    pub(super) async fn delete_certificates(
        &self,
        key: &str,
        certificates: &[Certificate],
    ) -> Result<()> {
        for cert in certificates {
            tracing::info!(service = %key, certificate = cert.name, id = cert.id, "deleting managed certificate");
            match self.client.certificates().delete(cert.id).await {
                Ok(()) => {}
                Err(err) if err.is_not_found() => {}
                Err(err) => {
                    return Err(categorize(
                        format!(
                            "deleting managed certificate {:?} (ID {})",
                            cert.name, cert.id
                        ),
                        err,
                    ));
                }
            }
        }
        Ok(())
    }

    /// Create the Service's managed certificate (labelled with its UID).
    pub(super) async fn create_managed_certificate(
        &self,
        uid: &str,
        want: &ManagedCertificate,
    ) -> Result<Certificate> {
        self.operations.count(cert_op::CREATE_MANAGED);
        let mut labels = models::Labels::new();
        labels.insert(SERVICE_UID_LABEL.to_owned(), uid.to_owned());
        if let Some(cluster) = &self.settings.cluster_name {
            labels.insert(cluster::CLUSTER_NAME_LABEL.to_owned(), cluster.clone());
        }
        if want.acme_staging {
            labels.insert(STAGING_LABEL.to_owned(), "true".to_owned());
        }
        let request =
            CreateCertificateRequest::managed(&want.name, want.domains.clone()).with_labels(labels);
        tracing::info!(certificate = want.name, domains = ?want.domains, "creating managed certificate");
        let created = self
            .client
            .certificates()
            .create(&request)
            .await
            .map_err(|err| {
                categorize(format!("creating managed certificate {:?}", want.name), err)
            })?;
        Ok(created.certificate)
    }

    /// Wait until `cert` is issued (bounded by `certificate_timeout`: then a retry).
    pub(super) async fn issued(&self, mut cert: Certificate) -> Result<i64> {
        let deadline = tokio::time::Instant::now() + self.settings.certificate_timeout;
        loop {
            if super::decide::issuance(&cert)? {
                return Ok(cert.id);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::retry(
                    format!(
                        "managed certificate {:?} (ID {}) is not issued yet",
                        cert.name, cert.id
                    ),
                    self.settings.retry_after,
                ));
            }
            self.waiting(tokio::time::sleep(
                self.client
                    .poll_interval()
                    .max(std::time::Duration::from_millis(10)),
            ))
            .await;
            cert = self
                .client
                .certificates()
                .get(cert.id)
                .await
                .map_err(|err| categorize(format!("reading certificate {:?}", cert.name), err))?;
        }
    }

    /// Check the type the desired state creates or changes to: `Err` when it can no longer be
    /// ordered, a `LoadBalancerTypeDeprecated` notice while deprecated.
    async fn type_for_order(&self, name: &str) -> Result<Option<Arc<models::LoadBalancerType>>> {
        let found = match &self.lb_types {
            Some(cache) => cache.get(name).await.map_err(|err| {
                categorize(format!("looking up load balancer type {name:?}"), err)
            })?,
            None => self
                .client
                .load_balancer_types()
                .get_by_name(name)
                .await
                .map_err(|err| categorize(format!("looking up load balancer type {name:?}"), err))?
                .map(Arc::new),
        };
        Ok(found)
    }

    async fn checked_type(
        &self,
        service: &Service,
        name: &str,
        notices: &mut Vec<Notice>,
    ) -> Result<Arc<models::LoadBalancerType>> {
        // A type the API does not offer (now) is the API's answer, not a typo we can tell:
        // retried, as the catalog may change.
        let lb_type = self.type_for_order(name).await?.ok_or_else(|| {
            Error::rejected(format!(
                "service {}: load balancer type {name:?} does not exist ({} or HCLOUD_LOAD_BALANCERS_TYPE)",
                service_key(service),
                keys::TYPE
            ))
        })?;
        match desired::deprecation(&lb_type, chrono::Utc::now()) {
            Ok(notice) => notices.extend(notice),
            Err(why) => {
                return Err(Error::rejected(format!(
                    "service {}: {why}",
                    service_key(service)
                )));
            }
        }
        Ok(lb_type)
    }

    /// The create request for `plan` and the type it creates (checked: orderable).
    pub(super) async fn create_request(
        &self,
        service: &Service,
        plan: &Desired,
        notices: &mut Vec<Notice>,
    ) -> Result<(CreateLoadBalancerRequest, Arc<models::LoadBalancerType>)> {
        let key = service_key(service);
        let placement: &Placement = plan.placement.as_ref().ok_or_else(|| {
            Error::invalid_input(format!(
                "service {key}: cannot create load balancer {:?}: no location or network zone: set the {} or {} annotation, or HCLOUD_LOAD_BALANCERS_LOCATION or HCLOUD_LOAD_BALANCERS_NETWORK_ZONE",
                plan.name,
                keys::LOCATION,
                keys::NETWORK_ZONE,
            ))
        })?;
        let lb_type = self
            .checked_type(service, &plan.create_type, notices)
            .await?;
        let max_targets = match lb_type.max_targets {
            0 => usize::MAX,
            n => n as usize,
        };
        Ok((plan.create_request(placement, max_targets), lb_type))
    }

    /// Create the load balancer and wait until it is ready.
    pub(super) async fn create(
        &self,
        service: &Service,
        plan: &Desired,
        request: &CreateLoadBalancerRequest,
    ) -> Result<models::LoadBalancer> {
        self.operations.count(lb_op::CREATE);
        self.project.allows_creation().await.map_err(|why| {
            Error::rejected(format!("not creating load balancer {:?}: {why}", plan.name))
        })?;
        tracing::info!(service = %service_key(service), load_balancer = plan.name, placement = ?plan.placement, lb_type = plan.create_type, "creating load balancer");
        let created = match self.client.load_balancers().create(request).await {
            Ok(created) => created,
            // The name is taken: by a load balancer the snapshot did not show yet. Look again
            // (a fresh listing) on the retry: it is adopted, or refused when it belongs to
            // another Service.
            Err(err) if err.code() == Some(&hcloud_api::ErrorCode::UniquenessError) => {
                self.snapshot.forget();
                return Err(Error::conflict(
                    format!(
                        "creating load balancer {:?}: the name is taken ({err}); looking again",
                        plan.name
                    ),
                    Some(self.settings.retry_after),
                ));
            }
            Err(err) => {
                if err.may_have_acted() {
                    // The load balancer may exist although the answer did not say so: the
                    // next lookup asks by label before anything is created again.
                    self.snapshot.doubt_service(&plan.uid);
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
                    plan.name, request.load_balancer_type
                );
                return Err(categorize(self.lb_call(what), err));
            }
        };
        let lb = created.load_balancer;
        // Known from here on, whatever happens to its action or the read that follows.
        self.snapshot.store(&lb);
        let exec = self.executor(&lb, &plan.name);
        if let Err(err) = exec
            .wait(
                &format!("creating load balancer {:?}", plan.name),
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
                tracing::warn!(service = %service_key(service), load_balancer = plan.name, id = lb.id, error = %err, "the creation failed; deleting what it left");
                let key = service_key(service);
                if let Err(cleanup) = self.delete_one(&key, &lb).await {
                    tracing::warn!(service = %key, error = %cleanup, "could not delete the failed load balancer; the next sync finds it by its label");
                }
            } else {
                self.snapshot.doubt(lb.id);
            }
            return Err(err);
        }
        // The answer to the creation shows the load balancer as asked for (services,
        // targets); its addresses may only come with the finished action. Read it once only
        // when the answer lacks them; reconciling then diffs against it and reads again only
        // when something is left to change.
        let addressed = desired::status(&lb, &plan.status).is_ok()
            && (request.network.is_none() || lb.private_net.iter().any(|p| !p.ip.is_empty()));
        if !addressed {
            return self.reread(&exec).await;
        }
        self.snapshot.store(&lb);
        Ok(lb)
    }

    /// Read the load balancer of `exec` again and keep it in the snapshot (marked for another
    /// read when this one fails).
    async fn reread(&self, exec: &super::ops::Executor<'_>) -> Result<models::LoadBalancer> {
        self.operations.count(lb_op::GET_BY_NAME);
        let lb = exec
            .reload()
            .await
            .inspect_err(|_| self.snapshot.doubt(exec.id))?;
        self.snapshot.store(&lb);
        Ok(lb)
    }

    /// Deprecation notices for the type the desired state keeps or changes to on `lb`: the embedded
    /// type when it stays (no request), a lookup only when changing. Returns the type changed
    /// to, if `steps` change it.
    pub(super) async fn type_notices(
        &self,
        service: &Service,
        plan: &Desired,
        lb: &models::LoadBalancer,
        steps: &[Step],
        notices: &mut Vec<Notice>,
    ) -> Result<Option<Arc<models::LoadBalancerType>>> {
        if let Some(Step::ChangeType { to, .. }) =
            steps.iter().find(|s| matches!(s, Step::ChangeType { .. }))
        {
            return self.checked_type(service, to, notices).await.map(Some);
        }
        if plan.create_type == lb.load_balancer_type.name {
            // Already of that type: a deprecation is only a warning, never an error.
            match desired::deprecation(&lb.load_balancer_type, chrono::Utc::now()) {
                Ok(notice) => notices.extend(notice),
                Err(why) => notices.push(Notice::warn(reasons::LOAD_BALANCER_TYPE_DEPRECATED, why)),
            }
        }
        Ok(None)
    }

    fn count_step(&self, step: &Step) {
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
        self.operations.count(op);
    }

    /// Apply `plan` to `lb` in rounds, each diffed against the load balancer as the API left
    /// it (only target steps with `targets_only`); the fresh load balancer and the notices
    /// (`MaxTargetsReached`, servers that do not exist, targets left out).
    pub(super) async fn apply_rounds(
        &self,
        service: &Service,
        plan: &Desired,
        mut lb: models::LoadBalancer,
        targets_only: bool,
    ) -> Result<(models::LoadBalancer, Vec<Notice>)> {
        let mut notices = Vec::new();
        // Targets whose server turns out not to exist are dropped from this copy.
        let mut plan = plan.clone();
        let plan = &mut plan;
        let name = plan.name.clone();
        self.operations.count(lb_op::RECONCILE_HCLB);
        for _ in 0..super::decide::ROUNDS {
            let mut steps = plan.diff(&lb);
            if targets_only {
                steps.retain(Step::is_target_step);
            }
            if steps.is_empty() {
                break;
            }
            let exec = self.executor(&lb, &name);
            let mut applied = true;
            // The API said the load balancer holds no more targets: the remaining additions
            // are left out without asking again.
            let mut full = false;
            for step in &steps {
                if full && let Some(node) = drop_added_node(plan, step) {
                    notices.push(plan.max_targets_reached(&node));
                    continue;
                }
                self.count_step(step);
                let Err(failed) = exec.run(step).await else {
                    applied &= step.apply_to(&mut lb);
                    continue;
                };
                let err = &failed.error;
                let limit = failed.code == Some(hcloud_api::ErrorCode::ResourceLimitExceeded);
                let left_out = match err.category() {
                    // As officially: the targets that fit stay, the others get a Warning.
                    _ if limit => drop_added_node(plan, step).map(|node| {
                        full = true;
                        plan.max_targets_reached(&node)
                    }),
                    Category::NotFound => drop_added_target(plan, step).map(|(node, server)| {
                        Notice::warn(
                            reasons::TARGET_SERVER_NOT_FOUND,
                            format!(
                                "Node {node} was left out of load balancer {:?}: its server {server} does not exist",
                                plan.name
                            ),
                        )
                    }),
                    _ => None,
                };
                let Some(notice) = left_out else {
                    self.snapshot.doubt(lb.id);
                    return Err(failed.into());
                };
                tracing::warn!(service = %service_key(service), error = %err, "{}", notice.message);
                notices.push(notice);
            }
            if applied {
                // Only target steps, all done: the load balancer is known without a read.
                self.snapshot.store(&lb);
                continue;
            }
            lb = self.reread(&exec).await?;
        }
        notices.extend(plan.left_out(&lb));
        Ok((lb, notices))
    }
}

/// The notice refusing `lb`, labelled for another cluster (`claim`).
fn owned_by_other_cluster(lb: &models::LoadBalancer, claim: &Claim) -> Notice {
    let other = match claim {
        Claim::Other(name) => name.as_str(),
        Claim::Ours | Claim::Unclaimed => "",
    };
    Notice::warn(
        reasons::LOAD_BALANCER_OWNED_BY_OTHER_CLUSTER,
        format!(
            "load balancer {:?} (ID {}) belongs to the cluster {other:?} (label {}), not to this one; it is not changed. Choose another name with the annotation {}; if the other cluster is gone, change that label to hand it over",
            lb.name,
            lb.id,
            cluster::CLUSTER_NAME_LABEL,
            keys::NAME
        ),
    )
}

fn labelled_lookup(uid: &str) -> String {
    format!(
        "looking up the load balancers labelled {}",
        uid_selector(uid)
    )
}

/// When `step` adds a server or IP target: drop it from `plan` and return its Node's name.
fn drop_added_node(plan: &mut Desired, step: &Step) -> Option<String> {
    if let Some((node, _)) = drop_added_target(plan, step) {
        return Some(node);
    }
    let Step::AddTarget(target) = step else {
        return None;
    };
    let ip = &target.ip.as_ref()?.ip;
    let node = plan
        .ip_targets
        .iter()
        .find(|t| t.ip == *ip)
        .map(|t| t.node.clone())?;
    plan.ip_targets.retain(|t| t.ip != *ip);
    Some(node)
}

/// When `step` adds a server target: drop that target from `plan` (it is not asked for again
/// by this ensure) and return its Node's name and server. `None` for any other step.
fn drop_added_target(plan: &mut Desired, step: &Step) -> Option<(String, i64)> {
    let Step::AddTarget(target) = step else {
        return None;
    };
    let server = target.server.as_ref()?.id;
    let node = plan
        .targets
        .iter()
        .find(|t| t.server == server)
        .map(|t| t.node.clone())?;
    plan.targets.retain(|t| t.server != server);
    Some((node, server))
}

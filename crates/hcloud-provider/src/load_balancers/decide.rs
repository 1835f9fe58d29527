//! The one decision of ensure: what the Service's load balancer needs, found with reads only.
//!
//! [`HcloudLoadBalancers::decide`] reads (the load balancer by label or name, certificates,
//! load balancer types) and decides (the desired state, the creation request, the steps of
//! every round). `ensure` carries the decision out ([`HcloudLoadBalancers::carry_out`]);
//! `plan` prints it ([`Decision::to_plan`]). There is no second path: what `plan` shows is
//! what ensure does, round for round; only what the API alone knows (addresses, a server
//! that turns out not to exist) can differ, and ensure diffs the real load balancer again
//! after each round.

use std::sync::Arc;

use cloud_provider::change::{Change, Verb, Warning, Write};
use cloud_provider::provider::Result;
use cloud_provider::{Category, Error, LoadBalancerPlan};
use hcloud_api::models::{
    self, Certificate, CreateLoadBalancerRequest, IssuanceStatus, LoadBalancerType,
};
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};

use super::HcloudLoadBalancers;
use super::annotations::keys;
use super::desired::{self, Certificates, Desired, ManagedCertificate, Notice, Step, Subject};
use super::naming::service_key;
use super::predict;
use super::services::NEW_CERTIFICATE;
use super::steps::reasons;
use crate::metrics::op::load_balancers as lbs_op;

/// How many diff-and-apply rounds one ensure runs (a type change can make room for more
/// targets and a re-attached network can drop private targets, which only the next round
/// sees).
pub(super) const ROUNDS: usize = 3;

/// The managed certificate ensure needs before its load balancer changes.
#[derive(Clone, Debug)]
pub(super) enum PendingCertificate {
    /// None exists: create it, then wait until it is issued.
    Create(ManagedCertificate),
    /// It exists but is not issued yet: wait.
    Wait(Box<Certificate>),
}

/// What happens to the load balancer itself.
#[derive(Clone, Debug)]
pub(super) enum Target {
    /// It exists: the rounds change it.
    Existing(Box<models::LoadBalancer>),
    /// It is created with this request, of this type.
    Create(Box<CreateLoadBalancerRequest>),
    /// The name belongs to another Service's load balancer: nothing is done (retried).
    Refused(String),
}

/// What ensure will do for one Service (see the module docs).
#[derive(Clone, Debug)]
pub(super) struct Decision {
    /// The desired state, certificate IDs filled in where known.
    pub desired: Desired,
    /// The managed certificate to create or wait for first, if any.
    pub certificate: Option<PendingCertificate>,
    /// The load balancer.
    pub target: Target,
    /// The steps of every round, as predicted from the current (or created) load balancer.
    pub rounds: Vec<Vec<Step>>,
    /// The load balancer after the predicted rounds (`None` when refused).
    pub predicted: Option<models::LoadBalancer>,
    /// Warnings and notes ensure publishes.
    pub notices: Vec<Notice>,
}

/// What deleting a Service's load balancers does (see [`HcloudLoadBalancers::decide_deletion`]).
#[derive(Clone, Debug, Default)]
pub(super) struct Deletion {
    /// The load balancers deleted, lowest ID first.
    pub load_balancers: Vec<models::LoadBalancer>,
    /// The load balancers kept: they have delete protection.
    pub kept: Vec<models::LoadBalancer>,
    /// The managed certificates deleted once the load balancers are gone (none while one is
    /// kept: it may still carry them).
    pub certificates: Vec<Certificate>,
}

impl Deletion {
    /// The deletion as the provider-neutral plan.
    pub(super) fn to_plan(&self) -> LoadBalancerPlan {
        let mut out = LoadBalancerPlan::default();
        for lb in &self.load_balancers {
            out.changes.push(Change::new(
                Verb::Delete,
                format!("load balancer {:?} (ID {})", lb.name, lb.id),
            ));
            out.writes.push(Write::cloud("DELETE /load_balancers/{id}"));
        }
        for lb in &self.kept {
            out.warnings
                .push(Warning::new(reasons::DELETE_PROTECTED, kept_message(lb)));
        }
        for cert in &self.certificates {
            out.changes.push(Change::new(
                Verb::Delete,
                format!("managed certificate {:?} (ID {})", cert.name, cert.id),
            ));
            out.writes.push(Write::cloud("DELETE /certificates/{id}"));
        }
        out
    }
}

/// The `DeleteProtected` Warning for `lb`, kept when its Service is deleted.
pub(super) fn kept_message(lb: &models::LoadBalancer) -> String {
    format!(
        "load balancer {:?} (ID {}) is kept: it has delete protection, so the Service is released without deleting it; turn the protection off and delete it by hand, or, to reuse it, remove its label {} and name it in the annotation {} of a Service",
        lb.name,
        lb.id,
        super::naming::SERVICE_UID_LABEL,
        keys::NAME
    )
}

impl HcloudLoadBalancers {
    /// Decide what deleting the Service with `uid` does: every load balancer labelled with
    /// the UID as the API lists them now (one request by label selector, never the snapshot:
    /// the Service is released once this finds none), and, when all of them go, the managed
    /// certificates this CCM (or the official one) created for it.
    pub(super) async fn decide_deletion(&self, uid: &str) -> Result<Deletion> {
        let (kept, load_balancers): (Vec<_>, Vec<_>) = self
            .list_labelled_now(uid)
            .await?
            .into_iter()
            .partition(|lb| lb.protection.delete);
        let certificates = if load_balancers.is_empty() || !kept.is_empty() {
            Vec::new()
        } else {
            self.labelled_certificates(uid)
                .await?
                .into_iter()
                .filter(|c| {
                    c.kind == Some(models::CertificateType::Managed)
                        && c.labels
                            .get(super::naming::SERVICE_UID_LABEL)
                            .map(String::as_str)
                            == Some(uid)
                })
                .collect()
        };
        Ok(Deletion {
            load_balancers,
            kept,
            certificates,
        })
    }

    /// Decide what ensure does for `service` with `nodes` (reads only).
    pub(super) async fn decide(&self, service: &Service, nodes: &[Arc<Node>]) -> Result<Decision> {
        let uid = Self::uid(service)?;
        let mut desired = self.desired(service, nodes).await?;
        let found = self.find(uid, &desired.name, true).await?;
        let mut notices = desired.notices.clone();
        notices.extend(found.notices.iter().cloned());
        if found.lb.is_none()
            && let Some(owned) = found.notices.iter().find(|n| {
                n.reason == Some(reasons::LOAD_BALANCER_OWNED_BY_OTHER_SERVICE)
                    || n.reason == Some(reasons::LOAD_BALANCER_OWNED_BY_OTHER_CLUSTER)
            })
        {
            return Ok(Decision {
                desired,
                certificate: None,
                target: Target::Refused(owned.message.clone()),
                rounds: Vec::new(),
                predicted: None,
                notices,
            });
        }
        let certificate = self.decide_certificates(&mut desired).await?;
        // A managed certificate created first is predicted with a stand-in ID, so that the
        // plan shows the services that will carry it.
        let mut predicting = desired.clone();
        if let Some(PendingCertificate::Create(_)) = certificate {
            predicting.set_certificates(&[NEW_CERTIFICATE]);
        }
        let (target, start, new_type) = match found.lb {
            Some(lb) => {
                let first = predicting.diff(&lb);
                let new_type = self
                    .type_notices(service, &desired, &lb, &first, &mut notices)
                    .await?;
                (Target::Existing(Box::new(lb.clone())), lb, new_type)
            }
            None => {
                let (request, lb_type) = self
                    .create_request(service, &predicting, &mut notices)
                    .await?;
                let created = predict::created(&request, &lb_type);
                (Target::Create(Box::new(request)), created, None)
            }
        };
        let (rounds, predicted) = predict_rounds(&predicting, start, new_type.as_deref());
        notices.extend(desired.left_out(&predicted));
        Ok(Decision {
            desired,
            certificate,
            target,
            rounds,
            predicted: Some(predicted),
            notices,
        })
    }

    /// Fill in the certificate IDs the desired state needs, as far as reads can: uploaded ones
    /// by ID or name, a managed one by the Service UID label (or as remembered). A managed
    /// certificate that does not exist yet, or is not issued yet, is what ensure creates or
    /// waits for first.
    async fn decide_certificates(
        &self,
        desired: &mut Desired,
    ) -> Result<Option<PendingCertificate>> {
        self.resolve_port_certificates(desired).await?;
        match desired.certificates.clone() {
            Certificates::Unset => Ok(None),
            Certificates::Uploaded(refs) => {
                let ids = self
                    .resolve_uploaded(&refs, |_| keys::HTTP_CERTIFICATES.to_owned())
                    .await?;
                desired.set_certificates(&ids);
                Ok(None)
            }
            Certificates::Managed(want) => {
                // Every HTTPS service carries the managed certificate, as officially: also
                // when it had another one (e.g. the Service switched from uploaded). Its ID is
                // looked up once per Service and process, so a no-op ensure costs no
                // certificate request.
                if let Some(id) = self.remembered_managed_certificate(&desired.uid) {
                    desired.set_certificates(&[id]);
                    return Ok(None);
                }
                self.operations
                    .count(crate::metrics::op::load_balancer_ops::RECONCILE_MANAGED_CERTIFICATE);
                let existing = self.labelled_certificates(&desired.uid).await?;
                let found = existing
                    .into_iter()
                    .filter(|c| c.kind == Some(models::CertificateType::Managed))
                    .min_by_key(|c| c.id);
                match found {
                    None => Ok(Some(PendingCertificate::Create(want))),
                    Some(cert) => {
                        desired.set_certificates(&[cert.id]);
                        match issuance(&cert)? {
                            true => {
                                self.remember_managed_certificate(&desired.uid, cert.id);
                                Ok(None)
                            }
                            false => Ok(Some(PendingCertificate::Wait(Box::new(cert)))),
                        }
                    }
                }
            }
        }
    }

    /// Carry `decision` out: the managed certificate first, then the load balancer (created,
    /// or as found), then the rounds, each diffed against the load balancer as the API left
    /// it. Returns the status and the notices of the last round.
    pub(super) async fn carry_out(
        &self,
        service: &Service,
        decision: Decision,
    ) -> Result<(LoadBalancerStatus, Vec<Notice>)> {
        let Decision {
            mut desired,
            certificate,
            target,
            ..
        } = decision;
        let mut notices = Vec::new();
        if let Some(pending) = certificate {
            let id = match pending {
                PendingCertificate::Create(want) => {
                    let created = self.create_managed_certificate(&desired.uid, &want).await?;
                    self.issued(created).await?
                }
                PendingCertificate::Wait(cert) => self.issued(*cert).await?,
            };
            self.remember_managed_certificate(&desired.uid, id);
            desired.set_certificates(&[id]);
        }
        let lb = match target {
            Target::Refused(message) => return Err(Error::rejected(message)),
            Target::Existing(lb) => *lb,
            Target::Create(mut request) => {
                // The certificate may be known only now.
                request.services = desired.create_request_services();
                match self.create(service, &desired, &request).await {
                    // One target server does not exist (the answer does not say which):
                    // create without targets; the rounds add them one by one and leave out
                    // only the missing ones.
                    Err(err)
                        if err.category() == Category::NotFound && !request.targets.is_empty() =>
                    {
                        tracing::warn!(
                            service = %service_key(service),
                            error = %err,
                            "a target server does not exist; creating the load balancer without targets first"
                        );
                        request.targets.clear();
                        self.create(service, &desired, &request).await?
                    }
                    other => other?,
                }
            }
        };
        let (lb, more) = self.apply_rounds(service, &desired, lb, false).await?;
        notices.extend(more);
        self.operations
            .count(lbs_op::GET_LOAD_BALANCER_STATUS_INGRESS);
        let status = desired::status(&lb, &desired.status).map_err(|why| {
            // Still being created as last seen: read it again next time.
            self.snapshot.doubt(lb.id);
            Error::retry(why, self.settings.retry_after)
        })?;
        Ok((status, notices))
    }
}

/// Whether `cert` is issued: `Ok(false)` while pending, an error naming it once issuance
/// failed.
pub(super) fn issuance(cert: &Certificate) -> Result<bool> {
    let status = cert.status.clone().unwrap_or_default();
    match status.issuance {
        Some(IssuanceStatus::Failed) => {
            let why = status
                .error
                .map(|e| format!("{}: {}", e.code, e.message))
                .unwrap_or_else(|| "no reason given".to_owned());
            Err(Error::other(format!(
                "managed certificate {:?} (ID {}): issuance failed ({why}); fix the domains in {} or delete the certificate to try again",
                cert.name,
                cert.id,
                super::annotations::keys::HTTP_MANAGED_CERTIFICATE_DOMAINS
            )))
        }
        Some(IssuanceStatus::Pending) => Ok(false),
        // Completed, uploaded, or a status this client does not know: usable.
        _ => Ok(true),
    }
}

/// The steps of every round from `start` (at most [`ROUNDS`]), and the load balancer they
/// are predicted to leave.
fn predict_rounds(
    desired: &Desired,
    start: models::LoadBalancer,
    new_type: Option<&LoadBalancerType>,
) -> (Vec<Vec<Step>>, models::LoadBalancer) {
    let mut lb = start;
    let mut rounds = Vec::new();
    for _ in 0..ROUNDS {
        let steps = desired.diff(&lb);
        if steps.is_empty() {
            break;
        }
        for step in &steps {
            predict::after(step, &mut lb, new_type);
        }
        rounds.push(steps);
    }
    (rounds, lb)
}

impl Decision {
    /// The decision as the provider-neutral plan `hcloud-ccm plan` prints.
    pub(super) fn to_plan(&self) -> LoadBalancerPlan {
        let mut out = LoadBalancerPlan::default();
        match &self.certificate {
            Some(PendingCertificate::Create(want)) => {
                out.changes.push(Change::new(
                    Verb::Create,
                    format!("managed certificate {:?}", want.name),
                ));
                out.writes.push(Write::cloud("POST /certificates"));
            }
            Some(PendingCertificate::Wait(cert)) => out.changes.push(Change::new(
                Verb::Change,
                format!(
                    "managed certificate {:?} (ID {}): wait until it is issued",
                    cert.name, cert.id
                ),
            )),
            None => {}
        }
        match &self.target {
            Target::Create(request) => {
                let at = request
                    .location
                    .as_deref()
                    .or(request.network_zone.as_deref())
                    .unwrap_or("?");
                out.changes.push(Change::new(
                    Verb::Create,
                    format!(
                        "load balancer {:?} ({} in {at}, {} services, {} targets)",
                        request.name,
                        request.load_balancer_type,
                        request.services.len(),
                        request.targets.len()
                    ),
                ));
                out.writes.push(Write::cloud("POST /load_balancers"));
            }
            Target::Refused(_) | Target::Existing(_) => {}
        }
        for step in self.rounds.iter().flatten() {
            out.changes.push(Change::new(step.verb(), step.to_string()));
            out.writes.push(Write::cloud(step.write()));
        }
        out.warnings = self
            .notices
            .iter()
            .filter_map(|notice| {
                let reason = notice.reason?;
                let message = match &notice.subject {
                    Subject::Service => notice.message.clone(),
                    Subject::Node(node) => format!("(on Node {node}) {}", notice.message),
                };
                Some(Warning::new(reason, message))
            })
            .collect();
        // Known only when the load balancer exists and no step changes its addresses.
        let addresses_change = self.rounds.iter().flatten().any(|step| {
            matches!(
                step,
                Step::EnablePublicInterface
                    | Step::DisablePublicInterface
                    | Step::AttachNetwork(_)
                    | Step::DetachNetwork(_)
            )
        });
        out.status = match (&self.target, &self.predicted) {
            (Target::Existing(_), Some(lb)) if !addresses_change => {
                desired::status(lb, &self.desired.status).ok()
            }
            _ => None,
        };
        out
    }
}

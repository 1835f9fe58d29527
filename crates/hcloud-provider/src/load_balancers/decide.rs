//! The decisions, pure: what ensure, update and delete do, from what was read (`read.rs`).
//!
//! [`decide`] turns a [`Read`] into a [`Decision`]: the desired state, the certificate to
//! create or wait for, the creation request, and the steps of every round, each round diffed
//! against the load balancer as the rounds before it leave it ([`predict`]). Ensure carries
//! the decision out (`apply.rs`), round for round, without diffing again; `plan` prints it
//! ([`Decision::to_plan`]). What only the API's answers tell is named by stand-ins in the
//! steps: the ID of the managed certificate created first ([`NEW_CERTIFICATE`]) and the
//! public addresses of a load balancer being created ([`predict::NEW_IPV4`],
//! [`predict::NEW_IPV6`]).

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use cloud_provider::change::{Change, Verb, Warning, Write};
use cloud_provider::provider::Result;
use cloud_provider::{Error, LoadBalancerPlan};
use hcloud_api::models::{
    self, Certificate, CreateLoadBalancerRequest, IssuanceStatus, LoadBalancerType, TargetSpec,
};

use super::annotations::keys;
use super::desired::{self, Certificates, Desired, ManagedCertificate, Notice, Step, Subject};
use super::read::{Found, ManagedRead, Read, TypeRead};
use super::services::NEW_CERTIFICATE;
use super::steps::reasons;
use super::tls_secret::{self, SecretCertificate};

/// How many rounds one ensure runs at most (a type change can make room for more targets,
/// which only the next round's diff sees).
pub(super) const ROUNDS: usize = 3;

/// The managed certificate ensure needs before its load balancer changes.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum PendingCertificate {
    /// None exists: create it, then wait until it is issued.
    Create(ManagedCertificate),
    /// It exists but is not issued yet: wait.
    Wait(Box<Certificate>),
    /// No certificate was uploaded from the Secret's current content: upload it (under the
    /// free name it carries).
    Upload(Box<SecretCertificate>),
}

/// What happens to the load balancer itself.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Target {
    /// It exists: the rounds change it.
    Existing(Box<models::LoadBalancer>),
    /// It is created with this request; the rounds change the created one.
    Create(Box<CreateLoadBalancerRequest>),
    /// The name belongs to another Service's load balancer: nothing is done (retried).
    Refused(String),
}

/// What ensure will do for one Service (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Decision {
    /// The desired state, certificate IDs filled in where known.
    pub desired: Desired,
    /// The managed certificate to create or wait for first, if any.
    pub certificate: Option<PendingCertificate>,
    /// The Service's managed certificates for domains it no longer asks for: deleted once the
    /// rounds ran and no service of the load balancer carries them (after the swap).
    pub retired: Vec<Certificate>,
    /// The load balancer.
    pub target: Target,
    /// The steps of every round, as predicted from the current (or created) load balancer.
    pub rounds: Vec<Vec<Step>>,
    /// The load balancer after the predicted rounds (`None` when refused).
    pub predicted: Option<models::LoadBalancer>,
    /// Warnings and notes ensure publishes.
    pub notices: Vec<Notice>,
}

/// What `update_load_balancer` does: the target steps on the Service's load balancer.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct TargetUpdate {
    /// The desired state, with a shared load balancer's share decided.
    pub desired: Desired,
    /// The load balancer, as found.
    pub lb: models::LoadBalancer,
    /// The target steps of every round.
    pub rounds: Vec<Vec<Step>>,
}

/// What deleting a Service's load balancers does.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Deletion {
    /// The load balancers deleted, lowest ID first.
    pub load_balancers: Vec<models::LoadBalancer>,
    /// The load balancers kept: they have delete protection.
    pub kept: Vec<models::LoadBalancer>,
    /// The managed certificates deleted once the load balancers are gone (none while one is
    /// kept: it may still carry them).
    pub certificates: Vec<Certificate>,
    /// Shared load balancers that stay: the steps removing the Service's ports and label.
    pub released: Vec<(models::LoadBalancer, Vec<Step>)>,
}

/// What becomes of a load balancer found by the Service's name that carries another
/// Service's UID label (see [`takeover`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Takeover {
    /// The Service it was labelled for is gone from this cluster (a Service re-created with
    /// the same `name` annotation): it is the Service's, and its UID label is rewritten.
    Adopt(Notice),
    /// Another Service's, or nothing tells it is not: never changed.
    Refuse(Notice),
}

/// The rule for a load balancer `lb` found by the name of the Service with `uid`, labelled
/// for the Service `owner` (another UID), in the cluster named `cluster` (when set), with
/// `owner_exists` answered from the caller's view of the cluster's Services (`None`: it cannot
/// tell). A load balancer of another cluster is refused before this is asked.
///
/// Adopted only when the owner is known to be gone and, with a cluster name, the load
/// balancer carries this cluster's label (without it, it may be another cluster's, whose
/// Services this cluster cannot see). The official CCM relabels it unconditionally.
pub(super) fn takeover(
    lb: &models::LoadBalancer,
    uid: &str,
    owner: &str,
    cluster: Option<&str>,
    owner_exists: Option<bool>,
) -> Takeover {
    use super::cluster::{CLUSTER_NAME_LABEL, Claim, claim};
    use super::naming::SERVICE_UID_LABEL;
    let name = &lb.name;
    let refuse = |why: String| {
        Takeover::Refuse(Notice::warn(
            reasons::LOAD_BALANCER_OWNED_BY_OTHER_SERVICE,
            format!(
                "load balancer {name:?} belongs to the Service with UID {owner} (label {SERVICE_UID_LABEL}), {why}; choose another name with the annotation {}, or remove that label from the load balancer to hand it over",
                keys::NAME
            ),
        ))
    };
    if let (Some(cluster), Claim::Unclaimed) = (cluster, claim(&lb.labels, cluster)) {
        return refuse(format!(
            "and has no label {CLUSTER_NAME_LABEL}, so it may be another cluster's; it is not taken over (label it {CLUSTER_NAME_LABEL}={cluster} if it is this cluster's)"
        ));
    }
    match owner_exists {
        Some(false) => Takeover::Adopt(Notice::log(format!(
            "adopting load balancer {name:?} (ID {}): the Service with UID {owner} it is labelled for no longer exists in this cluster; its label {SERVICE_UID_LABEL} becomes {uid}",
            lb.id
        ))),
        Some(true) => refuse("which exists in this cluster".to_owned()),
        None => {
            refuse("and whether that Service still exists is not known yet; retried".to_owned())
        }
    }
}

/// Decide what ensure does with what `read` found.
pub(super) fn decide(read: Read) -> Result<Decision> {
    let Read {
        service,
        mut desired,
        found,
        managed,
        lb_type,
        owners,
        now,
    } = read;
    let mut notices = desired.notices.clone();
    notices.extend(found.notices.iter().cloned());
    if let Some(owned) = found.refusal() {
        return Ok(Decision {
            desired,
            certificate: None,
            retired: Vec::new(),
            target: Target::Refused(owned.message.clone()),
            rounds: Vec::new(),
            predicted: None,
            notices,
        });
    }
    if desired.shared.is_some() {
        let max_services = found
            .lb
            .as_ref()
            .map_or(0, |lb| lb.load_balancer_type.max_services);
        notices.extend(super::shared::share(
            &mut desired,
            found.lb.as_ref(),
            &owners,
            max_services,
        )?);
    }
    let (certificate, retired) = managed_certificate(&mut desired, managed)?;
    // A managed certificate created first is named by its stand-in ID, so that the plan
    // shows the services that will carry it.
    let mut predicting = desired.clone();
    if let Some(PendingCertificate::Create(_) | PendingCertificate::Upload(_)) = certificate {
        predicting.set_certificates(&[NEW_CERTIFICATE]);
    }
    let types = Types {
        service: &service,
        read: lb_type.as_ref(),
        now,
    };
    let (target, start, new_type) = match found.lb {
        Some(lb) => {
            let new_type = match desired.type_change(&lb) {
                Some(to) => Some(types.orderable(to, &mut notices)?),
                None => {
                    if desired.create_type == lb.load_balancer_type.name {
                        // Already of that type: a deprecation is only a warning.
                        match desired::deprecation(&lb.load_balancer_type, now) {
                            Ok(notice) => notices.extend(notice),
                            Err(why) => notices
                                .push(Notice::warn(reasons::LOAD_BALANCER_TYPE_DEPRECATED, why)),
                        }
                    }
                    None
                }
            };
            notices.extend(desired.not_moved(&lb));
            (Target::Existing(Box::new(lb.clone())), lb, new_type)
        }
        None => {
            let placement = desired.placement.as_ref().ok_or_else(|| {
                Error::invalid_input(format!(
                    "service {service}: cannot create load balancer {:?}: no location or network zone: set the {} or {} annotation, or HCLOUD_LOAD_BALANCERS_LOCATION or HCLOUD_LOAD_BALANCERS_NETWORK_ZONE",
                    desired.name,
                    keys::LOCATION,
                    keys::NETWORK_ZONE,
                ))
            })?;
            let lb_type = types.orderable(&desired.create_type, &mut notices)?;
            let max_targets = match lb_type.max_targets {
                0 => usize::MAX,
                n => n as usize,
            };
            let request = predicting.create_request(placement, max_targets);
            let created = predict::created(&request, &lb_type);
            (Target::Create(Box::new(request)), created, None)
        }
    };
    let (rounds, predicted) = predict_rounds(&predicting, start, new_type.as_deref(), false);
    notices.extend(desired.left_out(&predicted));
    Ok(Decision {
        desired,
        certificate,
        retired,
        target,
        rounds,
        predicted: Some(predicted),
        notices,
    })
}

/// Decide what `update_load_balancer` does for `desired` with what the lookup `found` (for
/// the Service `service`): target steps only. No load balancer is
/// [`cloud_provider::Category::NotFound`].
pub(super) fn decide_update(
    service: &str,
    desired: &Desired,
    found: Found,
    owners: &super::shared::Owners,
) -> Result<TargetUpdate> {
    let Some(lb) = found.lb else {
        return Err(Error::not_found_msg(format!(
            "service {service}: load balancer {:?}",
            desired.name
        )));
    };
    // A shared load balancer's targets are its primary owner's.
    let mut desired = desired.clone();
    if desired.shared.is_some() && super::shared::share(&mut desired, Some(&lb), owners, 0).is_err()
    {
        // Refused (a port of its is another owner's): it sets no targets; its ensure says why.
        return Ok(TargetUpdate {
            desired,
            lb,
            rounds: Vec::new(),
        });
    }
    let (rounds, _) = predict_rounds(&desired, lb.clone(), None, true);
    Ok(TargetUpdate {
        desired,
        lb,
        rounds,
    })
}

/// The targets a creation had to leave out (one of their servers does not exist) as the
/// first steps of the first round: added one by one, the missing ones left out.
pub(super) fn add_first(rounds: &mut Vec<Vec<Step>>, targets: Vec<TargetSpec>) {
    if rounds.is_empty() {
        rounds.push(Vec::new());
    }
    rounds[0].splice(0..0, targets.into_iter().map(Step::AddTarget));
}

/// The domains of a managed certificate as compared: trimmed, lower case, each once, in order.
pub(super) fn domain_set(domains: &[String]) -> BTreeSet<String> {
    domains
        .iter()
        .map(|d| d.trim().to_ascii_lowercase())
        .filter(|d| !d.is_empty())
        .collect()
}

/// Whether `cert` is for exactly `domains`.
pub(super) fn same_domains(cert: &Certificate, domains: &[String]) -> bool {
    domain_set(&cert.domain_names) == domain_set(domains)
}

/// `name`, else (another of the Service's certificates has it: the one whose domains
/// changed) the first of `name-2`, `name-3`, … that none of them has. Certificate names are
/// unique in a project.
fn free_name(name: &str, listed: &[Certificate]) -> String {
    let taken = |candidate: &str| listed.iter().any(|c| c.name == candidate);
    if !taken(name) {
        return name.to_owned();
    }
    (2..)
        .map(|n| format!("{name}-{n}"))
        .find(|candidate| !taken(candidate))
        .unwrap_or_else(|| name.to_owned())
}

/// Fill in the managed certificate's ID where `managed` knows it; the certificate to create
/// or wait for first, if any, and the Service's managed certificates for other domains,
/// retired after the swap.
///
/// Beyond the official CCM, which keeps the first certificate when the domains annotation is
/// edited: a certificate for the new domains is created under a name of its own (the old one
/// still has the name) and waited for while the old one keeps serving; the services are
/// switched to it, and only then is the old one deleted.
fn managed_certificate(
    desired: &mut Desired,
    managed: Option<ManagedRead>,
) -> Result<(Option<PendingCertificate>, Vec<Certificate>)> {
    if let (Certificates::Secret(_), Some(ManagedRead::FromSecret { want, listed })) =
        (&desired.certificates, &managed)
    {
        return Ok(secret_certificate(desired, want, listed));
    }
    // Every HTTPS service carries the managed certificate, as officially: also when it had
    // another one (e.g. the Service switched from uploaded).
    let want = match &desired.certificates {
        Certificates::Managed(want) => want,
        Certificates::Secret(_) => {
            if let Some(ManagedRead::Remembered(id)) = managed {
                desired.set_certificates(&[id]);
            }
            return Ok((None, Vec::new()));
        }
        Certificates::Unset | Certificates::Uploaded(_) => return Ok((None, Vec::new())),
    };
    match managed {
        None | Some(ManagedRead::FromSecret { .. }) => Ok((None, Vec::new())),
        Some(ManagedRead::Remembered(id)) => {
            desired.set_certificates(&[id]);
            Ok((None, Vec::new()))
        }
        Some(ManagedRead::Listed(listed)) => {
            let (current, retired): (Vec<Certificate>, Vec<Certificate>) = listed
                .iter()
                .cloned()
                .partition(|c| same_domains(c, &want.domains));
            let Some(cert) = current.into_iter().next() else {
                let create = ManagedCertificate {
                    name: free_name(&want.name, &listed),
                    ..want.clone()
                };
                return Ok((Some(PendingCertificate::Create(create)), retired));
            };
            desired.set_certificates(&[cert.id]);
            match issuance(&cert)? {
                true => Ok((None, retired)),
                false => Ok((Some(PendingCertificate::Wait(Box::new(cert))), retired)),
            }
        }
    }
}

/// The certificate uploaded from the Secret's current content `want` among the Service's
/// uploads `listed` (the lowest ID when several are): carried by the https services, the
/// others retired after the swap; none: upload it under a free name first.
fn secret_certificate(
    desired: &mut Desired,
    want: &SecretCertificate,
    listed: &[Certificate],
) -> (Option<PendingCertificate>, Vec<Certificate>) {
    let current = listed.iter().find(|c| want.made(c));
    let retired = listed
        .iter()
        .filter(|c| Some(c.id) != current.map(|c| c.id))
        .cloned()
        .collect();
    match current {
        Some(cert) => {
            desired.set_certificates(&[cert.id]);
            (None, retired)
        }
        None => {
            let upload = SecretCertificate {
                name: free_name(&want.name, listed),
                ..want.clone()
            };
            (Some(PendingCertificate::Upload(Box::new(upload))), retired)
        }
    }
}

/// How a certificate this CCM made for a Service is called in plans and logs.
pub(super) fn made_certificate(cert: &Certificate) -> String {
    match tls_secret::from_secret(cert) {
        true => format!(
            "certificate {:?} (ID {}) uploaded from Secret {}",
            cert.name,
            cert.id,
            cert.labels
                .get(tls_secret::SECRET_LABEL)
                .map_or("?", String::as_str)
        ),
        false => format!("managed certificate {:?} (ID {})", cert.name, cert.id),
    }
}

/// The load balancer types as read, checked for ordering.
struct Types<'a> {
    service: &'a str,
    read: Option<&'a TypeRead>,
    now: DateTime<Utc>,
}

impl Types<'_> {
    /// The type `name`, checked: `Err` when the API does not offer it (now) or it can no
    /// longer be ordered, a `LoadBalancerTypeDeprecated` notice while deprecated.
    fn orderable(&self, name: &str, notices: &mut Vec<Notice>) -> Result<Arc<LoadBalancerType>> {
        let service = self.service;
        // A type the API does not offer (now) is the API's answer, not a typo we can tell:
        // retried, as the catalog may change.
        let lb_type = self
            .read
            .filter(|t| t.name == name)
            .and_then(|t| t.found.clone())
            .ok_or_else(|| {
                Error::rejected(format!(
                    "service {service}: load balancer type {name:?} does not exist ({} or HCLOUD_LOAD_BALANCERS_TYPE)",
                    keys::TYPE
                ))
            })?;
        match desired::deprecation(&lb_type, self.now) {
            Ok(notice) => notices.extend(notice),
            Err(why) => return Err(Error::rejected(format!("service {service}: {why}"))),
        }
        Ok(lb_type)
    }
}

impl Deletion {
    /// The deletion of `labelled` (every load balancer labelled with the Service's UID): the
    /// protected ones are kept. The certificates are added by the caller when
    /// [`Deletion::deletes_certificates`].
    pub(super) fn of(labelled: Vec<models::LoadBalancer>) -> Self {
        let (kept, load_balancers) = labelled.into_iter().partition(|lb| lb.protection.delete);
        Self {
            load_balancers,
            kept,
            ..Self::default()
        }
    }

    /// Whether the Service's managed certificates go too: all of its load balancers go.
    pub(super) fn deletes_certificates(&self) -> bool {
        !self.load_balancers.is_empty() && self.kept.is_empty()
    }

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
        for (lb, steps) in &self.released {
            for step in steps {
                out.changes.push(Change::new(
                    step.verb(),
                    format!("shared load balancer {:?} (ID {}): {step}", lb.name, lb.id),
                ));
                out.writes.push(Write::cloud(step.write()));
            }
        }
        for cert in &self.certificates {
            out.changes
                .push(Change::new(Verb::Delete, made_certificate(cert)));
            out.writes.push(Write::cloud("DELETE /certificates/{id}"));
        }
        out
    }
}

/// The certificates this CCM made of `certificates` (listed by the Service's UID label: the
/// managed ones and those uploaded from a Secret) that carry the UID `uid`: what deleting the
/// Service deletes.
pub(super) fn managed_of(uid: &str, certificates: Vec<Certificate>) -> Vec<Certificate> {
    certificates
        .into_iter()
        .filter(|c| {
            (c.kind == Some(models::CertificateType::Managed) || tls_secret::from_secret(c))
                && c.labels
                    .get(super::naming::SERVICE_UID_LABEL)
                    .map(String::as_str)
                    == Some(uid)
        })
        .collect()
}

/// The `DeleteProtected` Warning for `lb`, kept when its Service is deleted.
pub(super) fn kept_message(lb: &models::LoadBalancer) -> String {
    format!(
        "load balancer {:?} (ID {}) is kept: it has delete protection, so the Service is released without deleting it; turn the protection off and delete it by hand, or, to reuse it, name it in the annotation {} of a new Service, which adopts it once this Service is gone (it keeps its label {} until then)",
        lb.name,
        lb.id,
        keys::NAME,
        super::naming::SERVICE_UID_LABEL
    )
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

/// The steps of every round from `start` (at most [`ROUNDS`]; only target steps with
/// `targets_only`), and the load balancer they are predicted to leave.
fn predict_rounds(
    desired: &Desired,
    start: models::LoadBalancer,
    new_type: Option<&LoadBalancerType>,
    targets_only: bool,
) -> (Vec<Vec<Step>>, models::LoadBalancer) {
    let mut lb = start;
    let mut rounds = Vec::new();
    for _ in 0..ROUNDS {
        let mut steps = desired.diff(&lb);
        if targets_only {
            steps.retain(Step::is_target_step);
        }
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
            Some(PendingCertificate::Upload(want)) => {
                out.changes.push(Change::new(
                    Verb::Create,
                    format!(
                        "certificate {:?} uploaded from Secret {} (content {})",
                        want.name, want.secret, want.digest
                    ),
                ));
                out.writes.push(Write::cloud("POST /certificates"));
            }
            None => {}
        }
        match &self.target {
            Target::Create(request) => {
                let at = request
                    .location
                    .as_deref()
                    .or(request.network_zone.as_deref())
                    .unwrap_or("?");
                let private = request
                    .targets
                    .iter()
                    .filter(|t| t.use_private_ip == Some(true))
                    .count();
                let mut over_network = match private {
                    0 => String::new(),
                    n => format!(", {n} of them over the private network"),
                };
                if self.desired.shared.is_some() {
                    // Each owner is planned alone: any of them may be the one to create it.
                    over_network.push_str("; shared: created by the first of its owners synced, the others add their ports");
                }
                out.changes.push(Change::new(
                    Verb::Create,
                    format!(
                        "load balancer {:?} ({} in {at}, {} services, {} targets{over_network})",
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
        for cert in &self.retired {
            let why = match tls_secret::from_secret(cert) {
                true => "replaced by the Secret's current content".to_owned(),
                false => format!(
                    "for {}: its domains are no longer asked for",
                    cert.domain_names.join(", ")
                ),
            };
            out.changes.push(Change::new(
                Verb::Delete,
                format!(
                    "{} {why}, once no service carries it",
                    made_certificate(cert)
                ),
            ));
            out.writes.push(Write::cloud("DELETE /certificates/{id}"));
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

pub(super) mod predict {
    //! What a load balancer looks like after a creation or a [`Step`], as far as that is known
    //! without asking the API.
    //!
    //! The decision works in rounds: the difference to the wanted state gives steps, the
    //! predicted result of the steps gives the next round (a type change makes room for more
    //! targets). Ensure runs these rounds and `plan` shows them. What the API alone decides
    //! (defaults it fills in, addresses) is not predicted; the public addresses of a load
    //! balancer being created are stand-ins, which carrying a step out replaces.

    use hcloud_api::models::{
        Algorithm, CreateLoadBalancerRequest, LoadBalancer, LoadBalancerPrivateNet,
        LoadBalancerService, LoadBalancerTarget, LoadBalancerType, ServiceSpec, TargetSpec,
    };

    use super::super::desired::Step;

    /// The public IPv4 of a load balancer being created, for which a step is decided: it is
    /// known once the API created it (never an IP itself).
    pub const NEW_IPV4: &str = "the new public IPv4";

    /// The public IPv6 of a load balancer being created (see [`NEW_IPV4`]).
    pub const NEW_IPV6: &str = "the new public IPv6";

    /// The load balancer as `request` creates it, of type `lb_type`: its public addresses are
    /// the stand-ins [`NEW_IPV4`] and [`NEW_IPV6`].
    pub fn created(
        request: &CreateLoadBalancerRequest,
        lb_type: &LoadBalancerType,
    ) -> LoadBalancer {
        let mut lb = LoadBalancer {
            name: request.name.clone(),
            labels: request.labels.clone().unwrap_or_default(),
            load_balancer_type: lb_type.clone(),
            algorithm: request
                .algorithm
                .clone()
                .unwrap_or_else(|| Algorithm::new(hcloud_api::models::AlgorithmType::RoundRobin)),
            services: request.services.iter().map(service).collect(),
            targets: request.targets.iter().map(target).collect(),
            ..LoadBalancer::default()
        };
        lb.public_net.enabled = request.public_interface.unwrap_or(true);
        lb.public_net.ipv4.ip = Some(NEW_IPV4.to_owned());
        lb.public_net.ipv6.ip = Some(NEW_IPV6.to_owned());
        if let Some(network) = request.network {
            lb.private_net.push(LoadBalancerPrivateNet {
                network,
                ip: String::new(),
            });
        }
        lb
    }

    /// `lb` after `step`; `new_type` is the type a [`Step::ChangeType`] changes to.
    pub fn after(step: &Step, lb: &mut LoadBalancer, new_type: Option<&LoadBalancerType>) {
        match step {
            Step::Update { name, labels } => {
                if let Some(name) = name {
                    lb.name.clone_from(name);
                }
                if let Some(labels) = labels {
                    lb.labels.clone_from(labels);
                }
            }
            Step::ChangeLabels { labels, .. } => lb.labels.clone_from(labels),
            Step::ChangeProtection(delete) => lb.protection.delete = *delete,
            Step::DetachNetwork(network) => lb.private_net.retain(|p| p.network != *network),
            Step::AttachNetwork(request) => lb.private_net.push(LoadBalancerPrivateNet {
                network: request.network,
                ip: request.ip.clone().unwrap_or_default(),
            }),
            Step::ChangeType { .. } => {
                if let Some(new_type) = new_type {
                    lb.load_balancer_type = new_type.clone();
                }
            }
            Step::ChangeAlgorithm { to, .. } => lb.algorithm.kind = to.clone(),
            Step::DeleteService(port) => lb.services.retain(|s| s.listen_port != *port),
            Step::AddService(spec) => lb.services.push(service(spec)),
            Step::UpdateService { update, .. } => {
                if let Some(current) = lb
                    .services
                    .iter_mut()
                    .find(|s| s.listen_port == update.listen_port)
                {
                    if let Some(protocol) = &update.protocol {
                        current.protocol = protocol.clone();
                    }
                    if let Some(port) = update.destination_port {
                        current.destination_port = port;
                    }
                    if let Some(proxyprotocol) = update.proxyprotocol {
                        current.proxyprotocol = proxyprotocol;
                    }
                    if update.http.is_some() {
                        current.http.clone_from(&update.http);
                    }
                    if update.health_check.is_some() {
                        current.health_check.clone_from(&update.health_check);
                    }
                }
            }
            Step::AddTarget(_) | Step::RemoveTarget(_) => {
                step.apply_to(lb);
            }
            Step::EnablePublicInterface => lb.public_net.enabled = true,
            Step::DisablePublicInterface => lb.public_net.enabled = false,
            Step::ChangeDnsPtr(request) => {
                for ip in [&mut lb.public_net.ipv4, &mut lb.public_net.ipv6] {
                    if ip.ip.as_deref() == Some(request.ip.as_str()) {
                        ip.dns_ptr.clone_from(&request.dns_ptr);
                    }
                }
            }
        }
    }

    /// The service as the load balancer holds it once `spec` was sent.
    pub(in crate::load_balancers) fn service(spec: &ServiceSpec) -> LoadBalancerService {
        LoadBalancerService {
            protocol: spec.protocol.clone(),
            listen_port: spec.listen_port,
            destination_port: spec.destination_port,
            proxyprotocol: spec.proxyprotocol,
            http: spec.http.clone(),
            health_check: spec.health_check.clone(),
        }
    }

    fn target(spec: &TargetSpec) -> LoadBalancerTarget {
        let mut lb = LoadBalancer::default();
        Step::AddTarget(spec.clone()).apply_to(&mut lb);
        lb.targets.pop().unwrap_or_default()
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use hcloud_api::models::{AlgorithmType, ServiceProtocol};

        #[test]
        fn a_created_load_balancer_has_what_its_request_asked_for() {
            let request = CreateLoadBalancerRequest {
                name: "web".into(),
                load_balancer_type: "lb11".into(),
                services: vec![ServiceSpec {
                    protocol: ServiceProtocol::Tcp,
                    listen_port: 80,
                    destination_port: 30080,
                    ..ServiceSpec::default()
                }],
                targets: vec![TargetSpec::server(7, false)],
                network: Some(3),
                public_interface: Some(false),
                ..CreateLoadBalancerRequest::default()
            };
            let lb_type = LoadBalancerType {
                name: "lb11".into(),
                max_targets: 25,
                ..LoadBalancerType::default()
            };
            let lb = created(&request, &lb_type);
            assert_eq!(lb.name, "web");
            assert_eq!(lb.load_balancer_type.max_targets, 25);
            assert_eq!(lb.algorithm.kind, AlgorithmType::RoundRobin);
            assert_eq!(lb.services[0].destination_port, 30080);
            assert_eq!(lb.targets[0].server.as_ref().map(|s| s.id), Some(7));
            assert_eq!(lb.private_net[0].network, 3);
            assert!(!lb.public_net.enabled);
        }

        #[test]
        fn steps_change_what_they_name() {
            let mut lb = LoadBalancer::default();
            let bigger = LoadBalancerType {
                name: "lb21".into(),
                max_targets: 75,
                ..LoadBalancerType::default()
            };
            after(
                &Step::ChangeType {
                    from: "lb11".into(),
                    to: "lb21".into(),
                },
                &mut lb,
                Some(&bigger),
            );
            assert_eq!(lb.load_balancer_type.max_targets, 75);
            after(
                &Step::ChangeAlgorithm {
                    from: AlgorithmType::RoundRobin,
                    to: AlgorithmType::LeastConnections,
                },
                &mut lb,
                None,
            );
            assert_eq!(lb.algorithm.kind, AlgorithmType::LeastConnections);
            after(&Step::DisablePublicInterface, &mut lb, None);
            assert!(!lb.public_net.enabled);
            after(
                &Step::AttachNetwork(hcloud_api::models::AttachToNetworkRequest {
                    network: 4,
                    ip: Some("10.0.0.9".into()),
                    ip_range: None,
                }),
                &mut lb,
                None,
            );
            assert_eq!(lb.private_net[0].ip, "10.0.0.9");
            after(&Step::DetachNetwork(4), &mut lb, None);
            assert!(lb.private_net.is_empty());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load_balancers::LoadBalancerSettings;
    use crate::load_balancers::desired::RobotView;
    use crate::test_support::annotations as ann;
    use hcloud_api::models::{CertificateStatus, CertificateType, LoadBalancerService};
    use k8s_openapi::api::core::v1::{Node, NodeSpec, Service, ServicePort};

    const UID: &str = "0f2f6c0e-1b2a-4c3d-9e8f-0123456789ab";

    fn service(ports: &[(i32, i32)]) -> Service {
        crate::test_support::web_service(
            UID,
            ports.iter().map(|&(port, node_port)| ServicePort {
                port,
                protocol: Some("TCP".into()),
                node_port: Some(node_port),
                ..ServicePort::default()
            }),
        )
    }

    fn nodes(servers: &[i64]) -> Vec<Arc<Node>> {
        servers
            .iter()
            .map(|id| {
                let mut node = Node::default();
                node.metadata.name = Some(format!("node-{id}"));
                node.spec = Some(NodeSpec {
                    provider_id: Some(format!("hcloud://{id}")),
                    ..NodeSpec::default()
                });
                Arc::new(node)
            })
            .collect()
    }

    fn lb_type(name: &str, max_targets: u32) -> LoadBalancerType {
        LoadBalancerType {
            id: max_targets.into(),
            name: name.into(),
            max_targets,
            ..LoadBalancerType::default()
        }
    }

    /// What `read.rs` would read for a Service with `ports`, `pairs` (annotations, the
    /// location `fsn1` added) and the Nodes of `servers`, finding `lb`.
    fn read(
        ports: &[(i32, i32)],
        pairs: &[(&str, &str)],
        servers: &[i64],
        lb: Option<models::LoadBalancer>,
    ) -> Read {
        let mut pairs = pairs.to_vec();
        pairs.push((keys::LOCATION, "fsn1"));
        let mut desired = Desired::new(
            &service(ports),
            &ann(&pairs),
            &LoadBalancerSettings::default(),
            None,
            &nodes(servers),
        )
        .unwrap();
        desired.choose_robot_targets(RobotView::Off);
        let type_name = match &lb {
            Some(lb) => desired.type_change(lb).map(str::to_owned),
            None => Some(desired.create_type.clone()),
        };
        Read {
            service: "default/web".into(),
            desired,
            found: Found {
                lb,
                ..Found::default()
            },
            managed: None,
            owners: Default::default(),
            lb_type: type_name.map(|name| TypeRead {
                found: Some(Arc::new(match name.as_str() {
                    "lb21" => lb_type("lb21", 5),
                    other => lb_type(other, 25),
                })),
                name,
            }),
            now: Utc::now(),
        }
    }

    /// The load balancer the plain Service (port 80, the Nodes of servers 1 and 2) gets, as
    /// the API shows it once created.
    fn current() -> models::LoadBalancer {
        let decision = decide(read(&[(80, 30080)], &[], &[1, 2], None)).unwrap();
        let Target::Create(request) = &decision.target else {
            panic!("{decision:?}");
        };
        let mut lb = predict::created(request, &lb_type("lb11", 25));
        lb.id = 7;
        lb.public_net.ipv4.ip = Some("198.51.100.1".into());
        lb.public_net.ipv6.ip = Some("2001:db8::1".into());
        lb
    }

    fn rounds(decision: &Decision) -> Vec<Vec<String>> {
        decision
            .rounds
            .iter()
            .map(|round| round.iter().map(ToString::to_string).collect())
            .collect()
    }

    fn target(decision: &Decision) -> &'static str {
        match decision.target {
            Target::Existing(_) => "existing",
            Target::Create(_) => "create",
            Target::Refused(_) => "refused",
        }
    }

    type Change = fn(&mut models::LoadBalancer);

    /// A Service with `ports`, `pairs` and the Nodes of `servers`, whose load balancer is
    /// [`current`] changed by `change` (none with `None`): the `target` and `rounds` decided.
    struct Row {
        name: &'static str,
        ports: &'static [(i32, i32)],
        pairs: &'static [(&'static str, &'static str)],
        servers: &'static [i64],
        change: Option<Change>,
        target: &'static str,
        rounds: &'static [&'static [&'static str]],
    }

    #[test]
    fn decisions_table() {
        let with_8080: Change = |lb| {
            lb.services.push(LoadBalancerService {
                listen_port: 8080,
                destination_port: 30088,
                ..lb.services[0].clone()
            });
        };
        let small_type: Change = |lb| {
            lb.load_balancer_type = lb_type("lb11", 1);
            lb.targets.truncate(1);
        };
        let cases = [
            Row {
                name: "create: everything in the one request",
                ports: &[(80, 30080)],
                pairs: &[],
                servers: &[1, 2],
                change: None,
                target: "create",
                rounds: &[],
            },
            Row {
                name: "create: the reverse DNS of the new address is set after it",
                ports: &[(80, 30080)],
                pairs: &[(keys::IPV4_RDNS, "web.example.com")],
                servers: &[1, 2],
                change: None,
                target: "create",
                rounds: &[&["set reverse DNS of the new public IPv4 to \"web.example.com\""]],
            },
            Row {
                name: "no-op",
                ports: &[(80, 30080)],
                pairs: &[],
                servers: &[1, 2],
                change: Some(|_| {}),
                target: "existing",
                rounds: &[],
            },
            Row {
                name: "port added",
                ports: &[(80, 30080), (443, 30443)],
                pairs: &[],
                servers: &[1, 2],
                change: Some(|_| {}),
                target: "existing",
                rounds: &[&["add service 443 (tcp -> 30443)"]],
            },
            Row {
                name: "port removed",
                ports: &[(80, 30080)],
                pairs: &[],
                servers: &[1, 2],
                change: Some(with_8080),
                target: "existing",
                rounds: &[&["delete service 8080"]],
            },
            Row {
                name: "targets changed",
                ports: &[(80, 30080)],
                pairs: &[],
                servers: &[1, 3],
                change: Some(|_| {}),
                target: "existing",
                rounds: &[&["remove target server 2", "add target server 3"]],
            },
            Row {
                name: "a type change makes room for a target in a second round",
                ports: &[(80, 30080)],
                pairs: &[(keys::TYPE, "lb21")],
                servers: &[1, 2],
                change: Some(small_type),
                target: "existing",
                rounds: &[&["change type lb11 -> lb21"], &["add target server 2"]],
            },
            Row {
                name: "the reverse DNS of a known address",
                ports: &[(80, 30080)],
                pairs: &[(keys::IPV4_RDNS, "web.example.com")],
                servers: &[1, 2],
                change: Some(|_| {}),
                target: "existing",
                rounds: &[&["set reverse DNS of 198.51.100.1 to \"web.example.com\""]],
            },
        ];
        for Row {
            name,
            ports,
            pairs,
            servers,
            change,
            target: want_target,
            rounds: want_rounds,
        } in cases
        {
            let lb = change.map(|change| {
                let mut lb = current();
                change(&mut lb);
                lb
            });
            let decision = decide(read(ports, pairs, servers, lb)).unwrap();
            assert_eq!(target(&decision), want_target, "{name}");
            let want: Vec<Vec<String>> = want_rounds
                .iter()
                .map(|round| round.iter().map(|s| (*s).to_owned()).collect())
                .collect();
            assert_eq!(rounds(&decision), want, "{name}");
            // The plan names one request per step, and the creation.
            let plan = decision.to_plan();
            let steps: usize = decision.rounds.iter().map(Vec::len).sum();
            let creates = usize::from(want_target == "create");
            assert_eq!(plan.writes.len(), steps + creates, "{name}: {plan:?}");
        }
    }

    #[test]
    fn a_created_load_balancer_gets_the_services_and_targets_in_its_request() {
        let decision = decide(read(&[(80, 30080)], &[], &[1, 2], None)).unwrap();
        let Target::Create(request) = &decision.target else {
            panic!("{decision:?}");
        };
        assert_eq!(request.location.as_deref(), Some("fsn1"));
        assert_eq!(request.services.len(), 1);
        let servers: Vec<i64> = request
            .targets
            .iter()
            .filter_map(|t| t.server.map(|s| s.id))
            .collect();
        assert_eq!(servers, [1, 2]);
        let writes: Vec<String> = decision
            .to_plan()
            .writes
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(writes, ["POST /load_balancers"]);
        // Predicted as created: nothing left to do, and no status known yet.
        assert!(decision.rounds.is_empty());
        assert_eq!(decision.to_plan().status, None);
    }

    #[test]
    fn errors_and_refusals_table() {
        let no_location = {
            let mut read = read(&[(80, 30080)], &[], &[1], None);
            read.desired.placement = None;
            read
        };
        let unknown_type = {
            let mut read = read(&[(80, 30080)], &[(keys::TYPE, "lb99")], &[1], None);
            read.lb_type = Some(TypeRead {
                name: "lb99".into(),
                found: None,
            });
            read
        };
        let owned = {
            let mut read = read(&[(80, 30080)], &[], &[1], None);
            read.found.notices.push(Notice::warn(
                reasons::LOAD_BALANCER_OWNED_BY_OTHER_SERVICE,
                "someone else's",
            ));
            read
        };
        let category = |read: Read| decide(read).map(|d| target(&d)).map_err(|e| e.category());
        assert_eq!(category(no_location), Err(cloud_provider::Category::User));
        assert_eq!(
            category(unknown_type),
            Err(cloud_provider::Category::Rejected)
        );
        assert_eq!(category(owned.clone()), Ok("refused"));
        let refused = decide(owned).unwrap();
        assert!(refused.rounds.is_empty() && refused.to_plan().writes.is_empty());
    }

    #[test]
    fn takeover_table() {
        use crate::load_balancers::cluster::CLUSTER_NAME_LABEL;
        use crate::load_balancers::naming::SERVICE_UID_LABEL;
        let lb = |labels: &[(&str, &str)]| models::LoadBalancer {
            id: 7,
            name: "shared".into(),
            labels: crate::test_support::labels(labels),
            ..models::LoadBalancer::default()
        };
        let old = [(SERVICE_UID_LABEL, "old")];
        let ours = [(SERVICE_UID_LABEL, "old"), (CLUSTER_NAME_LABEL, "prod")];
        let cases = [
            // (name, labels, cluster name, does the old Service exist, adopted, the message says)
            (
                "gone, no cluster name",
                &old[..],
                None,
                Some(false),
                true,
                "no longer exists in this cluster",
            ),
            (
                "gone, labelled for this cluster",
                &ours[..],
                Some("prod"),
                Some(false),
                true,
                "becomes new-uid",
            ),
            (
                "live",
                &old[..],
                None,
                Some(true),
                false,
                "which exists in this cluster",
            ),
            (
                "live, labelled for this cluster",
                &ours[..],
                Some("prod"),
                Some(true),
                false,
                "which exists",
            ),
            (
                "not known yet",
                &old[..],
                None,
                None,
                false,
                "not known yet; retried",
            ),
            (
                "gone, but no cluster label with a cluster name",
                &old[..],
                Some("prod"),
                Some(false),
                false,
                "may be another cluster's",
            ),
        ];
        for (name, labels, cluster, exists, adopted, says) in cases {
            let got = takeover(&lb(labels), "new-uid", "old", cluster, exists);
            let notice = match (&got, adopted) {
                (Takeover::Adopt(notice), true) => {
                    assert_eq!(notice.reason, None, "{name}: adoption is no Warning");
                    notice
                }
                (Takeover::Refuse(notice), false) => {
                    assert_eq!(
                        notice.reason,
                        Some(reasons::LOAD_BALANCER_OWNED_BY_OTHER_SERVICE),
                        "{name}"
                    );
                    assert!(
                        notice.message.contains(keys::NAME),
                        "{name}: {}",
                        notice.message
                    );
                    notice
                }
                _ => panic!("{name}: {got:?}"),
            };
            assert!(notice.message.contains(says), "{name}: {}", notice.message);
            assert!(
                notice.message.contains("UID old"),
                "{name}: {}",
                notice.message
            );
        }
    }

    #[test]
    fn an_adopted_load_balancer_is_relabelled_and_a_refused_one_untouched_in_the_plan() {
        use crate::load_balancers::naming::SERVICE_UID_LABEL;
        let mut theirs = current();
        theirs
            .labels
            .insert(SERVICE_UID_LABEL.to_owned(), "old".to_owned());
        for (exists, want_target, want_writes) in [
            (Some(false), "existing", vec!["PUT /load_balancers/{id}"]),
            (Some(true), "refused", vec![]),
        ] {
            let mut read = read(&[(80, 30080)], &[], &[1, 2], None);
            match takeover(&theirs, UID, "old", None, exists) {
                Takeover::Adopt(notice) => {
                    read.found.lb = Some(theirs.clone());
                    read.found.notices.push(notice);
                }
                Takeover::Refuse(notice) => read.found.notices.push(notice),
            }
            let decision = decide(read).unwrap();
            assert_eq!(target(&decision), want_target, "{exists:?}");
            let plan = decision.to_plan();
            let writes: Vec<String> = plan.writes.iter().map(ToString::to_string).collect();
            assert_eq!(writes, want_writes, "{exists:?}");
            if want_target == "existing" {
                assert_eq!(
                    rounds(&decision),
                    [[format!("set label {SERVICE_UID_LABEL}={UID}")]]
                );
            } else {
                assert!(
                    plan.warnings
                        .iter()
                        .any(|w| w.reason == reasons::LOAD_BALANCER_OWNED_BY_OTHER_SERVICE),
                    "{plan:?}"
                );
            }
        }
    }

    #[test]
    fn the_warnings_of_the_desired_state_and_the_location_come_out_in_the_plan() {
        let mut lb = current();
        lb.location.name = "fsn1".into();
        let mut read = read(
            &[(80, 30080)],
            &[(
                "load-balancer.hetzner.cloud/algoritm-type",
                "least_connections",
            )],
            &[1, 2],
            Some(lb),
        );
        // `read` sets the location fsn1; the Service now asks for nbg1.
        read.desired.placement = Some(desired::Placement::Location("nbg1".into()));
        let decision = decide(read).unwrap();
        let warnings: Vec<String> = decision
            .to_plan()
            .warnings
            .iter()
            .map(|w| format!("{}: {}", w.reason, w.message))
            .collect();
        let has = |part: &str| warnings.iter().any(|w| w.contains(part));
        assert!(has(reasons::LOAD_BALANCER_NOT_MOVED), "{warnings:?}");
        assert!(has("stays in fsn1, not nbg1"), "{warnings:?}");
        assert!(has(reasons::UNKNOWN_ANNOTATION), "{warnings:?}");
        assert!(
            has("the closest known key is load-balancer.hetzner.cloud/algorithm-type"),
            "{warnings:?}"
        );
        // Nothing is written for either.
        assert!(decision.rounds.is_empty(), "{:?}", decision.rounds);
    }

    fn managed_read(managed: Option<ManagedRead>, lb: Option<models::LoadBalancer>) -> Read {
        let mut read = read(
            &[(443, 30443)],
            &[
                (keys::PROTOCOL, "https"),
                (keys::CERTIFICATE_TYPE, "managed"),
                (keys::HTTP_MANAGED_CERTIFICATE_DOMAINS, "shop.example.com"),
            ],
            &[1],
            lb,
        );
        read.managed = managed;
        read
    }

    fn certificate(id: i64, issuance: IssuanceStatus) -> Certificate {
        certificate_for(
            id,
            issuance,
            "ccm-managed-certificate",
            &["shop.example.com"],
        )
    }

    fn certificate_for(
        id: i64,
        issuance: IssuanceStatus,
        name: &str,
        domains: &[&str],
    ) -> Certificate {
        Certificate {
            id,
            name: name.into(),
            kind: Some(CertificateType::Managed),
            domain_names: domains.iter().map(|d| (*d).to_owned()).collect(),
            status: Some(CertificateStatus {
                issuance: Some(issuance),
                ..CertificateStatus::default()
            }),
            ..Certificate::default()
        }
    }

    /// The certificate IDs the services of the creation request carry.
    fn requested_certificates(decision: &Decision) -> Vec<i64> {
        let Target::Create(request) = &decision.target else {
            panic!("{decision:?}");
        };
        request
            .services
            .iter()
            .flat_map(|s| s.http.iter().flat_map(|h| h.certificates.clone()))
            .collect()
    }

    #[test]
    fn managed_certificates_table() {
        let cases = [
            (
                ManagedRead::Listed(Vec::new()),
                Some("create"),
                vec![NEW_CERTIFICATE],
            ),
            (
                ManagedRead::Listed(vec![certificate(5, IssuanceStatus::Pending)]),
                Some("wait"),
                vec![5],
            ),
            (
                ManagedRead::Listed(vec![certificate(5, IssuanceStatus::Completed)]),
                None,
                vec![5],
            ),
            (ManagedRead::Remembered(6), None, vec![6]),
        ];
        for (managed, want_pending, want_ids) in cases {
            let decision = decide(managed_read(Some(managed.clone()), None)).unwrap();
            let pending = decision.certificate.as_ref().map(|p| match p {
                PendingCertificate::Create(want) => {
                    assert_eq!(want.domains, ["shop.example.com"]);
                    "create"
                }
                PendingCertificate::Wait(_) => "wait",
                PendingCertificate::Upload(_) => "upload",
            });
            assert_eq!(pending, want_pending, "{managed:?}");
            assert_eq!(requested_certificates(&decision), want_ids, "{managed:?}");
        }
        let failed = ManagedRead::Listed(vec![certificate(5, IssuanceStatus::Failed)]);
        let err = decide(managed_read(Some(failed), None)).unwrap_err();
        assert!(err.to_string().contains("issuance failed"), "{err}");
    }

    fn secret_read(managed: ManagedRead) -> Read {
        let mut read = read(
            &[(443, 30443)],
            &[
                (keys::PROTOCOL, "https"),
                (keys::HTTP_CERTIFICATE_SECRET, "web-tls"),
            ],
            &[1],
            None,
        );
        read.managed = Some(managed);
        read
    }

    fn from_secret(content: &str) -> SecretCertificate {
        SecretCertificate::new(
            UID,
            "default",
            "web-tls",
            cloud_provider::secrets::TlsSecret {
                certificate: content.to_owned(),
                private_key: "KEY".to_owned(),
            },
        )
    }

    /// A certificate uploaded from `content` of the Secret.
    fn uploaded(id: i64, name: &str, content: &str) -> Certificate {
        Certificate {
            id,
            name: name.into(),
            kind: Some(CertificateType::Uploaded),
            labels: from_secret(content).labels(UID),
            ..Certificate::default()
        }
    }

    #[test]
    fn a_secret_is_uploaded_once_per_content_and_the_old_upload_retires_after_the_swap() {
        let name = format!("ccm-tls-secret-{UID}");
        let want = || Box::new(from_secret("CERT-2"));
        let first = uploaded(5, &name, "CERT-1");
        let second = uploaded(8, &format!("{name}-2"), "CERT-2");
        // (listed, upload under, carried, retired)
        let cases = [
            (vec![], Some(name.clone()), vec![NEW_CERTIFICATE], vec![]),
            // Renewed: the new content under a free name, the old one retires.
            (
                vec![first.clone()],
                Some(format!("{name}-2")),
                vec![NEW_CERTIFICATE],
                vec![5],
            ),
            // Uploaded already (the answer to a swap that failed after it).
            (vec![first.clone(), second.clone()], None, vec![8], vec![5]),
            (vec![second.clone()], None, vec![8], vec![]),
        ];
        for (listed, upload, carried, retired) in cases {
            let decision = decide(secret_read(ManagedRead::FromSecret {
                want: want(),
                listed: listed.clone(),
            }))
            .unwrap();
            let uploads = match &decision.certificate {
                Some(PendingCertificate::Upload(up)) => {
                    assert_eq!(up.digest, want().digest);
                    Some(up.name.clone())
                }
                None => None,
                other => panic!("{other:?}"),
            };
            assert_eq!(uploads, upload, "{listed:?}");
            assert_eq!(requested_certificates(&decision), carried, "{listed:?}");
            let retires: Vec<i64> = decision.retired.iter().map(|c| c.id).collect();
            assert_eq!(retires, retired, "{listed:?}");
        }
        let decision = decide(secret_read(ManagedRead::FromSecret {
            want: want(),
            listed: vec![first],
        }))
        .unwrap();
        let changes: Vec<String> = decision
            .to_plan()
            .changes
            .iter()
            .map(|c| c.target.clone())
            .collect();
        let has = |part: &str| changes.iter().any(|c| c.contains(part));
        assert!(
            has(&format!(
                "certificate \"{name}-2\" uploaded from Secret default/web-tls (content {})",
                want().digest
            )),
            "{changes:?}"
        );
        assert!(
            has(&format!(
                "certificate \"{name}\" (ID 5) uploaded from Secret web-tls replaced by the Secret's current content, once no service carries it"
            )),
            "{changes:?}"
        );
        // Remembered: carried without a listing.
        let decision = decide(secret_read(ManagedRead::Remembered(7))).unwrap();
        assert_eq!(decision.certificate, None);
        assert_eq!(requested_certificates(&decision), [7]);
    }

    #[test]
    fn a_secret_beside_another_certificate_annotation_names_both() {
        let cases = [
            (
                vec![(keys::CERTIFICATE_TYPE, "managed")],
                "cannot be used with load-balancer.hetzner.cloud/certificate-type: managed",
            ),
            (
                vec![(keys::HTTP_CERTIFICATES, "shop-cert")],
                "cannot be used with load-balancer.hetzner.cloud/http-certificates: shop-cert",
            ),
            (vec![], "is not a Secret name"),
        ];
        for (mut pairs, want) in cases {
            let secret = if pairs.is_empty() {
                "Web_TLS"
            } else {
                "web-tls"
            };
            pairs.extend([
                (keys::PROTOCOL, "https"),
                (keys::HTTP_CERTIFICATE_SECRET, secret),
            ]);
            let err = Desired::new(
                &service(&[(443, 30443)]),
                &ann(&pairs),
                &LoadBalancerSettings::default(),
                None,
                &nodes(&[1]),
            )
            .unwrap_err();
            let message = err.to_string();
            assert!(message.contains(keys::HTTP_CERTIFICATE_SECRET), "{message}");
            assert!(message.contains(want), "{message} / {want}");
        }
    }

    #[test]
    fn edited_domains_get_a_new_certificate_under_a_free_name_and_the_old_one_retires() {
        // The domains were www.example.com; the annotation now says shop.example.com.
        let name = "ccm-managed-certificate-0f2f6c0e-1b2a-4c3d-9e8f-0123456789ab";
        let renamed = format!("{name}-2");
        let old = certificate_for(5, IssuanceStatus::Completed, name, &["www.example.com"]);
        let decision = decide(managed_read(
            Some(ManagedRead::Listed(vec![old.clone()])),
            None,
        ))
        .unwrap();
        let Some(PendingCertificate::Create(want)) = &decision.certificate else {
            panic!("{:?}", decision.certificate);
        };
        assert_eq!(want.domains, ["shop.example.com"]);
        assert_eq!(want.name, renamed, "the old one has the name");
        assert_eq!(decision.retired, std::slice::from_ref(&old));
        let plan = decision.to_plan();
        assert!(
            plan.changes.iter().any(|c| c.target.contains(
                &format!("managed certificate {name:?} (ID 5) for www.example.com: its domains are no longer asked for")
            )),
            "{:?}",
            plan.changes
        );

        // The new one exists, not issued yet: waited for; the old one still retires after.
        let new = certificate_for(9, IssuanceStatus::Pending, &renamed, &["SHOP.example.com "]);
        let decision = decide(managed_read(
            Some(ManagedRead::Listed(vec![old.clone(), new])),
            None,
        ))
        .unwrap();
        assert!(matches!(
            decision.certificate,
            Some(PendingCertificate::Wait(ref c)) if c.id == 9
        ));
        assert_eq!(requested_certificates(&decision), [9]);
        assert_eq!(decision.retired, [old]);

        // Only the one for the wanted domains left: nothing retires.
        let issued = certificate_for(
            9,
            IssuanceStatus::Completed,
            &renamed,
            &["shop.example.com"],
        );
        let decision = decide(managed_read(Some(ManagedRead::Listed(vec![issued])), None)).unwrap();
        assert_eq!(decision.certificate, None);
        assert!(decision.retired.is_empty());

        // Names taken by several earlier generations: the first free one.
        let taken = [
            certificate_for(1, IssuanceStatus::Completed, "c", &["a.example.com"]),
            certificate_for(2, IssuanceStatus::Completed, "c-2", &["b.example.com"]),
        ];
        assert_eq!(free_name("c", &taken), "c-3");
        assert_eq!(free_name("d", &taken), "d");
    }

    #[test]
    fn a_certificate_created_first_is_named_by_its_stand_in_on_an_existing_load_balancer() {
        let mut lb = current();
        lb.services[0].listen_port = 443;
        lb.services[0].destination_port = 30443;
        lb.targets.truncate(1);
        let decision = decide(managed_read(
            Some(ManagedRead::Listed(Vec::new())),
            Some(lb),
        ))
        .unwrap();
        let carried: Vec<Vec<i64>> = decision
            .rounds
            .iter()
            .flatten()
            .filter_map(|step| match step {
                Step::UpdateService { update, .. } => {
                    update.http.as_ref().map(|h| h.certificates.clone())
                }
                _ => None,
            })
            .collect();
        assert_eq!(carried, [vec![NEW_CERTIFICATE]], "{:?}", decision.rounds);
        let writes: Vec<String> = decision
            .to_plan()
            .writes
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(writes[0], "POST /certificates");
    }

    #[test]
    fn an_update_decides_target_steps_only() {
        let lb = current();
        let read = read(
            &[(80, 30080), (443, 30443)],
            &[(keys::ALGORITHM_TYPE, "least_connections")],
            &[2, 3],
            None,
        );
        let found = Found {
            lb: Some(lb.clone()),
            ..Found::default()
        };
        let update =
            decide_update("default/web", &read.desired, found, &Default::default()).unwrap();
        assert_eq!(update.lb, lb);
        let steps: Vec<Vec<String>> = update
            .rounds
            .iter()
            .map(|round| round.iter().map(ToString::to_string).collect())
            .collect();
        assert_eq!(steps, [["remove target server 1", "add target server 3"]]);
        let none = decide_update(
            "default/web",
            &read.desired,
            Found::default(),
            &Default::default(),
        )
        .unwrap_err();
        assert_eq!(none.category(), cloud_provider::Category::NotFound);
    }

    #[test]
    fn targets_a_creation_left_out_come_first_in_the_first_round() {
        let mut rounds = vec![vec![Step::EnablePublicInterface]];
        add_first(&mut rounds, vec![TargetSpec::server(1, false)]);
        assert_eq!(
            rounds,
            [vec![
                Step::AddTarget(TargetSpec::server(1, false)),
                Step::EnablePublicInterface
            ]]
        );
        let mut none = Vec::new();
        add_first(&mut none, vec![TargetSpec::server(2, false)]);
        assert_eq!(none, [vec![Step::AddTarget(TargetSpec::server(2, false))]]);
    }

    #[test]
    fn deletions_table() {
        let lb = |id: i64, protected: bool| {
            let mut lb = models::LoadBalancer {
                id,
                name: format!("lb-{id}"),
                ..models::LoadBalancer::default()
            };
            lb.protection.delete = protected;
            lb
        };
        let cases = [
            (vec![], vec![], vec![], false),
            (vec![lb(1, false), lb(2, false)], vec![1, 2], vec![], true),
            (vec![lb(1, false), lb(2, true)], vec![1], vec![2], false),
        ];
        for (labelled, deleted, kept, certificates) in cases {
            let deletion = Deletion::of(labelled);
            let ids = |lbs: &[models::LoadBalancer]| lbs.iter().map(|lb| lb.id).collect::<Vec<_>>();
            assert_eq!(ids(&deletion.load_balancers), deleted);
            assert_eq!(ids(&deletion.kept), kept);
            assert_eq!(deletion.deletes_certificates(), certificates);
            let plan = deletion.to_plan();
            assert_eq!(plan.writes.len(), deleted.len());
            assert_eq!(plan.warnings.len(), kept.len());
        }
        let labelled = |id: i64, kind: CertificateType, uid: &str| Certificate {
            id,
            kind: Some(kind),
            labels: crate::test_support::labels(&[(super::super::naming::SERVICE_UID_LABEL, uid)]),
            ..Certificate::default()
        };
        let managed = managed_of(
            UID,
            vec![
                labelled(1, CertificateType::Managed, UID),
                labelled(2, CertificateType::Uploaded, UID),
                labelled(3, CertificateType::Managed, "another"),
            ],
        );
        assert_eq!(managed.iter().map(|c| c.id).collect::<Vec<_>>(), [1]);
    }
}

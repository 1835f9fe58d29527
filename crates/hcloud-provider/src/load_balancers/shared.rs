//! Shared load balancers (the annotation `shared-load-balancer`, beyond the official CCM):
//! several Services name one load balancer, and each owns its listen ports.
//!
//! Ownership is kept on the load balancer, in labels: `hcloud-ccm/owner-<uid>` lists the
//! ports of the Service with that UID (`80.443`), `hcloud-ccm/shared` says whether this CCM
//! created it (`created`: deleted with its last owner) or found it (`adopted`: never deleted,
//! its other services and targets kept), and `hcloud-ccm/shared-targets` carries a digest of
//! the target settings in force. A shared load balancer carries no `hcloud-ccm/service-uid`
//! label: no single Service's lookup (ours or the official CCM's) takes it for its own.
//!
//! The rules ([`share`]), pure, from the load balancer as found and the caller's view of which
//! owners still exist:
//! - A port another existing (or not yet known) owner holds, or that a service of the load
//!   balancer listens on without an owner, is refused: the ensure fails naming the port and
//!   the owner, and nothing is changed. A port of an owner known to be gone is taken over.
//! - The owner of the lowest port among the owners that exist is the **primary**: it alone
//!   sets the targets and the load balancer's own settings (type, algorithm, network, public
//!   interface, reverse DNS, user labels, protection). Another owner whose target settings
//!   (`node-selector`, `use-private-ip`) differ gets a `SharedLoadBalancerSettingsIgnored`
//!   Warning; nothing flaps, as every owner finds the same primary.
//! - The type's `max_services` is respected: a Service whose ports would exceed it is refused.
//! - On an adopted load balancer targets are only added, never removed (the others may be
//!   the load balancer's own).
//! - Deleting an owner removes its services and its label; the load balancer goes with its
//!   last owner, and only when this CCM created it ([`release`]).

use std::collections::{BTreeMap, BTreeSet};

use cloud_provider::Error;
use cloud_provider::provider::Result;
use hcloud_api::models::{self, Labels};

use super::cluster::CLUSTER_NAME_LABEL;
use super::desired::{Desired, Notice, Step};
use super::steps::reasons;

/// `created` or `adopted`.
pub const SHARED_LABEL: &str = "hcloud-ccm/shared";
/// This CCM created the load balancer.
pub const CREATED: &str = "created";
/// The load balancer existed before a Service shared it.
pub const ADOPTED: &str = "adopted";
/// Prefix of an owner's label; the value lists its ports, joined by `.`.
pub const OWNER_PREFIX: &str = "hcloud-ccm/owner-";
/// The digest of the primary owner's target settings.
pub const TARGETS_LABEL: &str = "hcloud-ccm/shared-targets";

/// The label of the owner with `uid`.
pub fn owner_key(uid: &str) -> String {
    format!("{OWNER_PREFIX}{uid}")
}

/// The label selector finding the shared load balancers `uid` owns ports of.
pub fn owner_selector(uid: &str) -> String {
    owner_key(uid)
}

/// Every owner of `labels` with its ports.
pub fn owners(labels: &Labels) -> BTreeMap<String, BTreeSet<u16>> {
    labels
        .iter()
        .filter_map(|(key, value)| {
            let uid = key.strip_prefix(OWNER_PREFIX)?;
            let ports = value.split('.').filter_map(|p| p.parse().ok()).collect();
            Some((uid.to_owned(), ports))
        })
        .collect()
}

/// The value of an owner's label for `ports`.
fn ports_value(ports: &BTreeSet<u16>) -> String {
    ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(".")
}

/// Whether `labels` are a shared load balancer's.
pub fn is_shared(labels: &Labels) -> bool {
    labels.contains_key(SHARED_LABEL) || labels.keys().any(|k| k.starts_with(OWNER_PREFIX))
}

/// How the Service takes part in its shared load balancer (set on [`Desired::share`] by
/// [`share`], read by the diff).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Share {
    /// This Service sets the targets and the load balancer's own settings.
    pub primary: bool,
    /// The load balancer was found, not created here: targets are only added.
    pub adopted: bool,
    /// The load balancer's labels once the Service's ownership is written.
    pub labels: Labels,
}

/// The digest of the settings that choose targets (`node-selector`, `use-private-ip`), as
/// the primary owner records it: 16 hex digits.
pub fn targets_digest(settings: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, settings.as_bytes());
    digest
        .as_ref()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Who the other owners are: whether each still exists (`None`: not known yet) and its
/// `namespace/name` when known, by UID.
pub type Owners = BTreeMap<String, (Option<bool>, Option<String>)>;

/// The Service's part in the shared load balancer `lb` (`None`: it is created now), given the
/// other owners `others` and the type's `max_services` (0: no limit); sets
/// `desired.share` and the ports it keeps, and returns the notices. An error (refused,
/// retried) names every port another owner holds.
pub fn share(
    desired: &mut Desired,
    lb: Option<&models::LoadBalancer>,
    others: &Owners,
    max_services: u32,
) -> Result<Vec<Notice>> {
    let me = desired.uid.clone();
    let wanted: BTreeSet<u16> = desired.services.iter().map(|s| s.listen_port).collect();
    let digest = targets_digest(&desired.target_settings);
    // A label value holds at most 63 characters: about ten ports.
    let value = ports_value(&wanted);
    if value.len() > 63 {
        return Err(Error::invalid_input(format!(
            "service {}: {} ports are too many to share a load balancer (their list {value:?} must fit a label value of 63 characters)",
            desired.service,
            wanted.len()
        )));
    }
    let Some(lb) = lb else {
        let mut labels = desired.user_labels.apply(&Labels::new());
        labels.insert(SHARED_LABEL.to_owned(), CREATED.to_owned());
        labels.insert(TARGETS_LABEL.to_owned(), digest);
        if !wanted.is_empty() {
            labels.insert(owner_key(&me), ports_value(&wanted));
        }
        if let Some(cluster) = &desired.cluster {
            labels.insert(CLUSTER_NAME_LABEL.to_owned(), cluster.clone());
        }
        desired.share = Some(Share {
            primary: true,
            adopted: false,
            labels,
        });
        return Ok(Vec::new());
    };
    let name = &lb.name;
    let mut owners = owners(&lb.labels);
    let mine = owners.remove(&me).unwrap_or_default();
    let gone = |uid: &str| {
        others
            .get(uid)
            .is_some_and(|(exists, _)| *exists == Some(false))
    };
    let who = |uid: &str| match others.get(uid).and_then(|(_, name)| name.as_deref()) {
        Some(service) => format!("the Service {service} (UID {uid})"),
        None => format!("the Service with UID {uid}"),
    };
    let mut taken = Vec::new();
    for port in &wanted {
        if mine.contains(port) {
            continue;
        }
        let holder = owners.iter().find(|(_, ports)| ports.contains(port));
        match holder {
            Some((uid, _)) if gone(uid) => {}
            Some((uid, _)) => taken.push(format!("port {port} is {}'s", who(uid))),
            None if lb.services.iter().any(|s| s.listen_port == *port) => taken.push(format!(
                "port {port} is a service of the load balancer this CCM does not manage"
            )),
            None => {}
        }
    }
    if !taken.is_empty() {
        return Err(Error::rejected(format!(
            "service {}: shared load balancer {name:?}: {}; nothing was changed (choose other ports, or another shared load balancer)",
            desired.service,
            taken.join("; ")
        )));
    }
    // Ports of owners known to be gone are released (by the primary, below).
    for (uid, ports) in owners.iter_mut() {
        if gone(uid) {
            ports.retain(|p| !wanted.contains(p));
        }
    }
    let live: BTreeMap<&String, &BTreeSet<u16>> =
        owners.iter().filter(|(uid, _)| !gone(uid)).collect();
    let kept: BTreeSet<u16> = lb
        .services
        .iter()
        .map(|s| s.listen_port)
        .filter(|p| !wanted.contains(p) && !mine.contains(p))
        .collect();
    let total = kept.len() + wanted.len();
    if max_services > 0 && total > max_services as usize {
        return Err(Error::rejected(format!(
            "service {}: shared load balancer {name:?} of type {} holds at most {max_services} services; with this Service's {} ports it would hold {total}",
            desired.service,
            lb.load_balancer_type.name,
            wanted.len()
        )));
    }
    // The owner of the lowest port among those that exist (this Service among them).
    let lowest = |ports: &BTreeSet<u16>| ports.iter().next().copied().unwrap_or(u16::MAX);
    let primary = live
        .iter()
        .map(|(uid, ports)| (lowest(ports), uid.as_str()))
        .chain(std::iter::once((lowest(&wanted), me.as_str())))
        .min()
        .is_some_and(|(_, uid)| uid == me);
    let adopted = lb.labels.get(SHARED_LABEL).map(String::as_str) != Some(CREATED);
    let mut labels = match primary {
        true => desired.user_labels.apply(&lb.labels),
        false => lb.labels.clone(),
    };
    labels
        .entry(SHARED_LABEL.to_owned())
        .or_insert_with(|| ADOPTED.to_owned());
    match wanted.is_empty() {
        true => labels.remove(&owner_key(&me)),
        false => labels.insert(owner_key(&me), ports_value(&wanted)),
    };
    let mut notices = Vec::new();
    let mut released = BTreeSet::new();
    if primary {
        labels.insert(TARGETS_LABEL.to_owned(), digest);
        for (uid, ports) in &owners {
            if gone(uid) {
                labels.remove(&owner_key(uid));
                released.extend(ports.iter().copied());
            }
        }
    } else if lb.labels.get(TARGETS_LABEL) != Some(&digest) {
        notices.push(Notice::warn(
            reasons::SHARED_LOAD_BALANCER_SETTINGS_IGNORED,
            format!(
                "shared load balancer {name:?}: its targets and its own settings (type, algorithm, network, public interface, reverse DNS, labels, protection) follow the Service that owns its lowest port; this Service's node-selector or use-private-ip differ from that Service's and are ignored"
            ),
        ));
    }
    if let Some(cluster) = &desired.cluster {
        labels.insert(CLUSTER_NAME_LABEL.to_owned(), cluster.clone());
    }
    // Every port that is not this Service's is kept as it is, except the released ones.
    desired
        .kept_ports
        .extend(kept.iter().filter(|p| !released.contains(p)));
    if !primary {
        // The type is the primary's to change.
        desired.lb_type = None;
    }
    desired.share = Some(Share {
        primary,
        adopted,
        labels,
    });
    Ok(notices)
}

/// What deleting the Service with `uid` does to the shared load balancer `lb`: `None` when
/// the load balancer goes (this CCM created it and no other owner is left; owners known to be
/// gone do not count), else the steps that remove the Service's services and its label
/// (with an adopted load balancer's last owner: every label of ours).
pub fn release(lb: &models::LoadBalancer, uid: &str, others: &Owners) -> Option<Vec<Step>> {
    let mut owners = owners(&lb.labels);
    let mine = owners.remove(uid).unwrap_or_default();
    let left = owners.keys().any(|other| {
        others
            .get(other)
            .is_none_or(|(exists, _)| *exists != Some(false))
    });
    let created = lb.labels.get(SHARED_LABEL).map(String::as_str) == Some(CREATED);
    if !left && created {
        return None;
    }
    let mut steps: Vec<Step> = lb
        .services
        .iter()
        .filter(|s| mine.contains(&s.listen_port))
        .map(|s| Step::DeleteService(s.listen_port))
        .collect();
    let mut labels = lb.labels.clone();
    labels.remove(&owner_key(uid));
    if !left {
        labels.retain(|key, _| {
            key != SHARED_LABEL && key != TARGETS_LABEL && !key.starts_with(OWNER_PREFIX)
        });
    }
    if labels != lb.labels {
        steps.push(Step::Update {
            name: None,
            labels: Some(labels),
        });
    }
    Some(steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load_balancers::LoadBalancerSettings;
    use crate::test_support::{annotations, labels, web_service};
    use k8s_openapi::api::core::v1::ServicePort;

    /// The desired state of the Service with `uid` sharing `shop-lb` on `ports`.
    fn desired(uid: &str, ports: &[i32]) -> Desired {
        let service = web_service(
            uid,
            ports.iter().map(|&port| ServicePort {
                port,
                protocol: Some("TCP".into()),
                node_port: Some(30000 + port),
                ..ServicePort::default()
            }),
        );
        Desired::new(
            &service,
            &annotations(&[(
                "load-balancer.hetzner.cloud/shared-load-balancer",
                "shop-lb",
            )]),
            &LoadBalancerSettings::default(),
            None,
            &[],
        )
        .unwrap()
    }

    /// `shop-lb` with services on `ports` and `pairs` as labels.
    fn lb(ports: &[u16], pairs: &[(&str, &str)]) -> models::LoadBalancer {
        let mut lb = models::LoadBalancer {
            name: "shop-lb".into(),
            labels: labels(pairs),
            ..models::LoadBalancer::default()
        };
        lb.load_balancer_type.name = "lb11".into();
        lb.services = ports
            .iter()
            .map(|&listen_port| models::LoadBalancerService {
                listen_port,
                ..models::LoadBalancerService::default()
            })
            .collect();
        lb
    }

    fn owners_of(pairs: &[(&str, Option<bool>)]) -> Owners {
        pairs
            .iter()
            .map(|(uid, exists)| ((*uid).to_owned(), (*exists, None)))
            .collect()
    }

    #[test]
    fn ports_are_refused_taken_over_or_released_by_who_holds_them() {
        let shared = [(SHARED_LABEL, CREATED)];
        // Held by an owner that exists, or may (not known yet): refused, naming both.
        for exists in [Some(true), None] {
            let found = lb(&[80], &[shared[0], ("hcloud-ccm/owner-b", "80")]);
            let err = share(
                &mut desired("a", &[80]),
                Some(&found),
                &owners_of(&[("b", exists)]),
                0,
            )
            .unwrap_err();
            assert!(
                err.to_string()
                    .contains("port 80 is the Service with UID b's"),
                "{err}"
            );
        }
        // Held by an owner known to be gone: taken over; its other port is released by the
        // new primary (not kept), and its label goes.
        let found = lb(&[80, 81], &[shared[0], ("hcloud-ccm/owner-b", "80.81")]);
        let mut d = desired("a", &[80]);
        share(&mut d, Some(&found), &owners_of(&[("b", Some(false))]), 0).unwrap();
        let taken = d.share.clone().unwrap();
        assert!(taken.primary);
        assert!(!taken.adopted);
        assert_eq!(
            taken.labels.get("hcloud-ccm/owner-a").map(String::as_str),
            Some("80")
        );
        assert!(!taken.labels.contains_key("hcloud-ccm/owner-b"));
        assert!(d.kept_ports.is_empty(), "{:?}", d.kept_ports);
        assert_eq!(
            d.diff(&found)
                .iter()
                .filter(|s| matches!(s, Step::DeleteService(81)))
                .count(),
            1
        );
    }

    #[test]
    fn the_owner_of_the_lowest_port_is_primary_and_the_type_limits_the_services() {
        let found = lb(
            &[80, 443],
            &[
                (SHARED_LABEL, CREATED),
                ("hcloud-ccm/owner-b", "80"),
                ("hcloud-ccm/owner-a", "443"),
                (TARGETS_LABEL, "other"),
            ],
        );
        let live = owners_of(&[("b", Some(true))]);
        let mut d = desired("a", &[443]);
        let notices = share(&mut d, Some(&found), &live, 0).unwrap();
        let part = d.share.clone().unwrap();
        assert!(!part.primary);
        assert_eq!(d.kept_ports, BTreeSet::from([80]));
        assert_eq!(d.lb_type, None, "the type is the primary's");
        assert!(
            notices
                .iter()
                .any(|n| n.reason == Some(reasons::SHARED_LOAD_BALANCER_SETTINGS_IGNORED)),
            "{notices:?}"
        );
        // Not primary: only its own service is diffed (no label, target or type step).
        let steps = d.diff(&found);
        assert!(
            !steps.is_empty()
                && steps.iter().all(
                    |s| matches!(s, Step::UpdateService { update, .. } if update.listen_port == 443)
                ),
            "{steps:?}"
        );
        // With the owner of port 80 gone, it is primary.
        let mut d = desired("a", &[443]);
        share(&mut d, Some(&found), &owners_of(&[("b", Some(false))]), 0).unwrap();
        assert!(d.share.unwrap().primary);
        // Two more ports do not fit a type of three services.
        let err = share(
            &mut desired("a", &[443, 8080, 8443]),
            Some(&found),
            &live,
            3,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("holds at most 3 services"),
            "{err}"
        );
    }

    #[test]
    fn the_last_owner_deletes_only_what_this_ccm_created() {
        let created = lb(
            &[80],
            &[(SHARED_LABEL, CREATED), ("hcloud-ccm/owner-a", "80")],
        );
        assert_eq!(release(&created, "a", &Owners::new()), None);
        // Another owner left: only the Service's port and label.
        let both = lb(
            &[80, 443],
            &[
                (SHARED_LABEL, CREATED),
                ("hcloud-ccm/owner-a", "80"),
                ("hcloud-ccm/owner-b", "443"),
            ],
        );
        let steps = release(&both, "a", &owners_of(&[("b", Some(true))])).unwrap();
        assert!(matches!(steps[0], Step::DeleteService(80)), "{steps:?}");
        assert!(
            matches!(&steps[1], Step::Update { labels: Some(l), .. } if !l.contains_key("hcloud-ccm/owner-a") && l.contains_key("hcloud-ccm/owner-b")),
            "{steps:?}"
        );
        // The other owner is gone: the load balancer goes.
        assert_eq!(release(&both, "a", &owners_of(&[("b", Some(false))])), None);
        // Adopted: kept, every label of ours removed, the user's kept.
        let adopted = lb(
            &[80, 8080],
            &[
                (SHARED_LABEL, ADOPTED),
                ("hcloud-ccm/owner-a", "80"),
                (TARGETS_LABEL, "x"),
                ("team", "shop"),
            ],
        );
        let steps = release(&adopted, "a", &Owners::new()).unwrap();
        assert!(matches!(steps[0], Step::DeleteService(80)), "{steps:?}");
        assert!(
            matches!(&steps[1], Step::Update { labels: Some(l), .. } if l.len() == 1 && l["team"] == "shop"),
            "{steps:?}"
        );
    }

    #[test]
    fn owners_are_read_from_their_labels() {
        let mut labels = Labels::new();
        labels.insert(owner_key("a"), "80.443".into());
        labels.insert(owner_key("b"), "8080".into());
        labels.insert(SHARED_LABEL.into(), CREATED.into());
        let found = owners(&labels);
        assert_eq!(found["a"], BTreeSet::from([80, 443]));
        assert_eq!(found["b"], BTreeSet::from([8080]));
        assert_eq!(found.len(), 2);
        assert_eq!(ports_value(&BTreeSet::from([443, 80])), "80.443");
        assert!(is_shared(&labels));
        assert!(!is_shared(&Labels::new()));
        assert_eq!(targets_digest("x").len(), 16);
        assert_ne!(targets_digest("x"), targets_digest("y"));
    }
}

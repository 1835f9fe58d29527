//! Several clusters in one Hetzner project: the cluster label (pure).
//!
//! With a cluster name set ([`super::LoadBalancerSettings::cluster_name`],
//! `HCLOUD_LOAD_BALANCERS_CLUSTER_NAME`), every load balancer and managed certificate this CCM
//! creates carries the label [`CLUSTER_NAME_LABEL`]`=<name>`, the listing of all load balancers
//! asks for that label only, and a load balancer is this cluster's when it carries this
//! cluster's name or no cluster name at all ([`claim`]). The second half keeps what the cluster
//! made before the name was set: such a load balancer is still found by its Service UID label
//! (or its name) and gets the cluster label as its first step. A load balancer labelled for
//! another cluster is never changed, adopted or deleted, not even when it carries the
//! Service's UID (a cluster restored from another's backup has the same UIDs).
//!
//! Without a cluster name nothing here applies: no label is written, no selector is sent, and
//! cluster labels are ignored, exactly as before.
//!
//! Orphans ([`orphans`]) are load balancers labelled with this cluster's name whose Service UID
//! label names no Service of the cluster: `hcloud-ccm plan` lists them, and only
//! `hcloud-ccm delete-orphans` deletes them.

use std::collections::HashSet;

use hcloud_api::models::{Labels, LoadBalancer};

use super::naming::SERVICE_UID_LABEL;
use super::selector::valid_name;

/// Label on every load balancer and managed certificate of a cluster with a cluster name.
pub const CLUSTER_NAME_LABEL: &str = "hcloud-ccm/cluster-name";

/// Whom a load balancer (or certificate) belongs to, by its cluster label.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// This cluster's: labelled with its name, or no cluster name is set.
    Ours,
    /// No cluster label (made before the name was set, by hand, or by the official CCM):
    /// ours to take when the Service UID or name says so.
    Unclaimed,
    /// Labelled for another cluster (the value): never touched.
    Other(String),
}

impl Claim {
    /// Whether this cluster may use (and label) it.
    pub fn usable(&self) -> bool {
        !matches!(self, Self::Other(_))
    }
}

/// Whom `labels` say the object belongs to, for a cluster named `cluster` (`None`: no name
/// set, everything is [`Claim::Ours`] as before).
pub fn claim(labels: &Labels, cluster: Option<&str>) -> Claim {
    let Some(cluster) = cluster else {
        return Claim::Ours;
    };
    match labels.get(CLUSTER_NAME_LABEL) {
        None => Claim::Unclaimed,
        Some(name) if name == cluster => Claim::Ours,
        Some(other) => Claim::Other(other.clone()),
    }
}

/// The label selector of the cluster's load balancers (`None`: no name, no selector).
pub fn selector(cluster: Option<&str>) -> Option<String> {
    cluster.map(|c| format!("{CLUSTER_NAME_LABEL}={c}"))
}

/// Check `name` as a cluster name: it becomes a label value, so the label rule of
/// [`super::selector::valid_name`] applies (at most 63 characters, letters, digits, `-`, `_`
/// and `.`, starting and ending with a letter or digit). The error says what is wrong; the
/// caller names the variable.
pub fn check_name(name: &str) -> Result<(), String> {
    // The rule is `valid_name`'s; what follows only says which part of it `name` breaks.
    if valid_name(name) {
        return Ok(());
    }
    if name.is_empty() {
        return Err("must not be empty".to_owned());
    }
    if name.len() > 63 {
        return Err(format!(
            "{name:?} is {} characters long; a label value has at most 63",
            name.len()
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(format!(
            "{name:?} contains {bad:?}; a label value has only letters, digits, '-', '_' and '.'"
        ));
    }
    // Not empty, short enough and made of allowed characters: only the first or last one can
    // be wrong.
    Err(format!(
        "{name:?} must start and end with a letter or digit (it becomes a label value)"
    ))
}

/// A load balancer of this cluster that no Service owns any more.
#[derive(Clone, Debug, PartialEq)]
pub struct Orphan {
    /// The load balancer as listed.
    pub lb: LoadBalancer,
    /// Its Service UID label (`None`: it has none).
    pub service_uid: Option<String>,
}

impl Orphan {
    /// One line for people: what it is and why it is an orphan.
    pub fn describe(&self) -> String {
        let why = match &self.service_uid {
            Some(uid) => format!("no Service has the UID {uid} of its label {SERVICE_UID_LABEL}"),
            None if super::shared::is_shared(&self.lb.labels) => format!(
                "it is shared, and no Service of its owners (labels {}<uid>) exists",
                super::shared::OWNER_PREFIX
            ),
            None => format!("it has no label {SERVICE_UID_LABEL}"),
        };
        let protected = if self.lb.protection.delete {
            "; it has delete protection, so it is kept until that is turned off"
        } else {
            ""
        };
        format!(
            "load balancer {:?} (ID {}) of this cluster is orphaned: {why}{protected}",
            self.lb.name, self.lb.id
        )
    }
}

/// The orphans among `lbs` (the cluster's load balancers, as listed by [`selector`]), given
/// the UIDs of every Service of the cluster (of any type: a Service that stopped being of type
/// LoadBalancer is cleaned up by the service controller, not here). Lowest ID first.
pub fn orphans(lbs: &[LoadBalancer], cluster: &str, services: &HashSet<String>) -> Vec<Orphan> {
    let mut found: Vec<Orphan> = lbs
        .iter()
        .filter(|lb| claim(&lb.labels, Some(cluster)) == Claim::Ours)
        .filter_map(|lb| {
            let service_uid = lb.labels.get(SERVICE_UID_LABEL).cloned();
            let owned = service_uid
                .as_ref()
                .is_some_and(|uid| services.contains(uid))
                || super::shared::owners(&lb.labels)
                    .keys()
                    .any(|uid| services.contains(uid));
            (!owned).then(|| Orphan {
                lb: lb.clone(),
                service_uid,
            })
        })
        .collect();
    found.sort_by_key(|o| o.lb.id);
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::labels;

    fn lb(id: i64, pairs: &[(&str, &str)]) -> LoadBalancer {
        LoadBalancer {
            id,
            name: format!("lb-{id}"),
            labels: labels(pairs),
            ..LoadBalancer::default()
        }
    }

    #[test]
    fn claims_by_the_cluster_label() {
        let cases = [
            // (labels, cluster name, claim)
            (labels(&[]), None, Claim::Ours),
            (labels(&[(CLUSTER_NAME_LABEL, "b")]), None, Claim::Ours),
            (labels(&[]), Some("a"), Claim::Unclaimed),
            (labels(&[(CLUSTER_NAME_LABEL, "a")]), Some("a"), Claim::Ours),
            (
                labels(&[(CLUSTER_NAME_LABEL, "b")]),
                Some("a"),
                Claim::Other("b".to_owned()),
            ),
        ];
        for (labels, cluster, want) in cases {
            let got = claim(&labels, cluster);
            assert_eq!(got, want, "{labels:?} in cluster {cluster:?}");
            assert_eq!(got.usable(), !matches!(want, Claim::Other(_)));
        }
        assert_eq!(selector(None), None);
        assert_eq!(
            selector(Some("prod")).as_deref(),
            Some("hcloud-ccm/cluster-name=prod")
        );
    }

    #[test]
    fn cluster_names_are_label_values() {
        for good in ["prod", "a", "eu-1.prod_2", &"x".repeat(63)] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        for (bad, says) in [
            ("", "empty"),
            (&*"x".repeat(64), "63"),
            ("my cluster", "' '"),
            ("prod/eu", "'/'"),
            ("-prod", "start and end"),
            ("prod.", "start and end"),
        ] {
            let err = check_name(bad).expect_err(bad);
            assert!(err.contains(says), "{bad:?}: {err}");
        }
    }

    #[test]
    fn orphans_are_the_clusters_load_balancers_no_service_owns() {
        let lbs = [
            lb(5, &[(CLUSTER_NAME_LABEL, "a"), (SERVICE_UID_LABEL, "gone")]),
            lb(1, &[(CLUSTER_NAME_LABEL, "a"), (SERVICE_UID_LABEL, "live")]),
            lb(3, &[(CLUSTER_NAME_LABEL, "a")]),
            // Another cluster's, and one without a cluster label: never orphans here.
            lb(4, &[(CLUSTER_NAME_LABEL, "b"), (SERVICE_UID_LABEL, "gone")]),
            lb(2, &[(SERVICE_UID_LABEL, "gone")]),
        ];
        let services: HashSet<String> = ["live".to_owned()].into();
        let found = orphans(&lbs, "a", &services);
        let ids: Vec<(i64, Option<&str>)> = found
            .iter()
            .map(|o| (o.lb.id, o.service_uid.as_deref()))
            .collect();
        assert_eq!(ids, [(3, None), (5, Some("gone"))]);
        assert!(found[1].describe().contains("no Service has the UID gone"));
        assert!(found[0].describe().contains("has no label"));
        let mut protected = found[1].clone();
        protected.lb.protection.delete = true;
        assert!(protected.describe().contains("delete protection"));
        let all: HashSet<String> = ["live".to_owned(), "gone".to_owned()].into();
        assert_eq!(orphans(&lbs, "a", &all).len(), 1, "only the unlabelled one");
        // A shared one is owned while one of its owners exists.
        let shared = [lb(
            6,
            &[
                (CLUSTER_NAME_LABEL, "a"),
                ("hcloud-ccm/shared", "created"),
                ("hcloud-ccm/owner-gone", "80"),
                ("hcloud-ccm/owner-live", "443"),
            ],
        )];
        assert!(orphans(&shared, "a", &services).is_empty());
        let none = HashSet::new();
        let found = orphans(&shared, "a", &none);
        assert!(
            found[0]
                .describe()
                .contains("it is shared, and no Service of its owners"),
            "{}",
            found[0].describe()
        );
    }
}

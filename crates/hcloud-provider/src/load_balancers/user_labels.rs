//! Beyond the official CCM: the `labels` annotation (user labels of the load balancer) and the
//! `protection-delete` annotation (its delete protection), read into what the desired state
//! changes (pure).
//!
//! **Labels.** `load-balancer.hetzner.cloud/labels: "team=a,env=prod,old-"` sets `team` and
//! `env` and removes `old`, the way `kubectl label` reads `key=value` and `key-`. Only what the
//! annotation names is changed: a label the annotation does not name is left as the load
//! balancer has it, whoever set it (the Console, Terraform, another tool). A key removed
//! from the annotation therefore stays on the load balancer: this CCM cannot tell a label it
//! set earlier from one set by hand with the same key, and never deletes what it cannot
//! prove it set. Write `key-` to remove one. Keys and values follow Hetzner's label rules;
//! keys under `hcloud-ccm/` (this CCM's own labels, e.g. the Service UID label it finds its
//! load balancers by) and `hetzner.cloud/` (reserved by Hetzner) are refused.
//!
//! **Delete protection.** `protection-delete: "true"` or `"false"` turns it on or off; unset
//! leaves it as it is (set in the Console, say). A Service whose load balancer is protected
//! is released without deleting it, as the official CCM does (see `decide_deletion`).

use std::collections::{BTreeMap, BTreeSet};

use hcloud_api::models::Labels;

use super::annotations::{AnnotationError, Annotations, Errors, keys};
use super::selector::{valid_key, valid_value};

/// Key prefixes the annotation may not touch: this CCM's own labels and Hetzner's.
const RESERVED_PREFIXES: [&str; 2] = ["hcloud-ccm/", "hetzner.cloud/"];

/// What the `labels` annotation asks for: labels to set and labels to remove.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelChanges {
    /// Labels set to these values.
    pub set: BTreeMap<String, String>,
    /// Labels removed.
    pub remove: BTreeSet<String>,
}

impl LabelChanges {
    /// The `labels` annotation; a bad entry is collected into `errors` (nothing is changed
    /// then).
    pub fn read(a: &Annotations, errors: &mut Errors) -> Self {
        match a.raw(keys::LABELS) {
            None => Self::default(),
            Some(raw) => Self::parse(raw).unwrap_or_else(|reason| {
                errors.0.push(AnnotationError {
                    annotation: keys::LABELS.to_owned(),
                    value: raw.to_owned(),
                    reason,
                });
                Self::default()
            }),
        }
    }

    /// Parse `key=value` (set) and `key-` (remove) entries, comma separated; blank entries are
    /// skipped. The error names the first bad entry.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let mut out = Self::default();
        for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (key, value) = match entry.split_once('=') {
                Some((key, value)) => (key.trim(), Some(value.trim())),
                None => match entry.strip_suffix('-') {
                    Some(key) => (key, None),
                    None => {
                        return Err(format!(
                            "has the entry {entry:?}, which is neither key=value nor key- (to remove)"
                        ));
                    }
                },
            };
            if !valid_key(key) {
                return Err(format!(
                    "has the key {key:?}, which is not a label key (an optional DNS prefix and a slash, then up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)"
                ));
            }
            if let Some(prefix) = RESERVED_PREFIXES.iter().find(|p| key.starts_with(**p)) {
                return Err(format!(
                    "has the key {key:?}: keys starting with {prefix:?} are reserved"
                ));
            }
            if out.set.contains_key(key) || out.remove.contains(key) {
                return Err(format!("names the key {key:?} twice"));
            }
            match value {
                Some(value) if !valid_value(value) => {
                    return Err(format!(
                        "has the value {value:?} for {key:?}, which is not a label value (up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit, or empty)"
                    ));
                }
                Some(value) => {
                    out.set.insert(key.to_owned(), value.to_owned());
                }
                None => {
                    out.remove.insert(key.to_owned());
                }
            }
        }
        Ok(out)
    }

    /// `current` with the changes applied.
    pub fn apply(&self, current: &Labels) -> Labels {
        let mut labels = current.clone();
        labels.retain(|k, _| !self.remove.contains(k));
        labels.extend(self.set.iter().map(|(k, v)| (k.clone(), v.clone())));
        labels
    }

    /// What applying the changes to `current` changes, one `set k=v` / `remove k` each (empty:
    /// nothing).
    pub fn differences(&self, current: &Labels) -> Vec<String> {
        let mut out = Vec::new();
        for (key, value) in &self.set {
            match current.get(key) {
                Some(old) if old == value => {}
                Some(old) => out.push(format!("change label {key} {old:?} -> {value:?}")),
                None => out.push(format!("set label {key}={value:?}")),
            }
        }
        for key in &self.remove {
            if current.contains_key(key) {
                out.push(format!("remove label {key}"));
            }
        }
        out
    }
}

/// The `protection-delete` annotation: `Some` turns delete protection on or off, `None`
/// leaves it as it is.
pub fn delete_protection(a: &Annotations, errors: &mut Errors) -> Option<bool> {
    errors.take(a.bool(keys::PROTECTION_DELETE))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load_balancers::decide::predict;
    use crate::load_balancers::desired::{Desired, Placement, Step};
    use crate::load_balancers::naming::SERVICE_UID_LABEL;
    use crate::load_balancers::settings::LoadBalancerSettings;
    use crate::test_support::labels;
    use hcloud_api::models::LoadBalancerType;

    #[test]
    fn entries_set_and_remove_like_kubectl_label() {
        let changes =
            LabelChanges::parse(" team=a, env = prod ,, old-, example.com/tier=").unwrap();
        assert_eq!(
            changes.set,
            labels(&[("team", "a"), ("env", "prod"), ("example.com/tier", "")])
        );
        assert_eq!(changes.remove, BTreeSet::from(["old".to_owned()]));
        assert_eq!(LabelChanges::parse(""), Ok(LabelChanges::default()));
    }

    #[test]
    fn bad_entries_are_refused_with_the_reason() {
        let cases = [
            ("team", "neither key=value nor key-"),
            ("-=a", "is not a label key"),
            ("bad key=a", "is not a label key"),
            ("team=a b", "is not a label value"),
            ("team=-a", "is not a label value"),
            (&format!("team={}", "x".repeat(64)), "is not a label value"),
            ("hcloud-ccm/service-uid=x", "reserved"),
            ("hcloud-ccm/service-uid-", "reserved"),
            ("hetzner.cloud/x=y", "reserved"),
            ("team=a,team-", "twice"),
        ];
        for (raw, why) in cases {
            let err = LabelChanges::parse(raw).unwrap_err();
            assert!(err.contains(why), "{raw}: {err}");
        }
    }

    #[test]
    fn only_named_labels_change() {
        let changes = LabelChanges::parse("team=a,env=prod,old-,gone-").unwrap();
        let current = labels(&[
            ("hcloud-ccm/service-uid", "u1"),
            ("team", "a"),
            ("env", "dev"),
            ("old", "1"),
            ("console", "kept"),
        ]);
        assert_eq!(
            changes.apply(&current),
            labels(&[
                ("hcloud-ccm/service-uid", "u1"),
                ("team", "a"),
                ("env", "prod"),
                ("console", "kept"),
            ])
        );
        assert_eq!(
            changes.differences(&current),
            vec!["change label env \"dev\" -> \"prod\"", "remove label old"]
        );
        assert!(changes.differences(&changes.apply(&current)).is_empty());
        assert!(LabelChanges::default().differences(&current).is_empty());
    }

    fn desired(pairs: &[(&str, &str)]) -> Desired {
        let svc = crate::test_support::web_service(
            "u1",
            [k8s_openapi::api::core::v1::ServicePort {
                port: 80,
                node_port: Some(30080),
                ..Default::default()
            }],
        );
        Desired::new(
            &svc,
            &crate::test_support::annotations(pairs),
            &LoadBalancerSettings::default(),
            None,
            &[],
        )
        .unwrap()
    }

    fn texts(steps: &[Step]) -> Vec<String> {
        steps.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn unset_annotations_leave_labels_and_protection_as_they_are() {
        let plain = desired(&[]);
        let request = plain.create_request(&Placement::Location("fsn1".into()), 25);
        let mut lb = predict::created(&request, &LoadBalancerType::default());
        assert_eq!(lb.labels, labels(&[(SERVICE_UID_LABEL, "u1")]));
        lb.labels.insert("console".into(), "x".into());
        lb.protection.delete = true;
        assert_eq!(plain.diff(&lb), Vec::new());
    }

    #[test]
    fn the_annotations_set_labels_and_protection_in_one_step_each() {
        let want = desired(&[
            (keys::LABELS, "team=a,old-"),
            (keys::PROTECTION_DELETE, "true"),
        ]);
        // Created with the labels; the protection needs its action.
        let request = want.create_request(&Placement::Location("fsn1".into()), 25);
        assert_eq!(
            request.labels,
            Some(labels(&[(SERVICE_UID_LABEL, "u1"), ("team", "a")]))
        );
        let mut lb = predict::created(&request, &LoadBalancerType::default());
        assert_eq!(want.diff(&lb), vec![Step::ChangeProtection(true)]);

        lb.labels = labels(&[
            (SERVICE_UID_LABEL, "u1"),
            ("team", "b"),
            ("old", "1"),
            ("console", "x"),
        ]);
        lb.protection.delete = true;
        let steps = want.diff(&lb);
        assert_eq!(
            steps,
            vec![Step::ChangeLabels {
                labels: labels(&[(SERVICE_UID_LABEL, "u1"), ("team", "a"), ("console", "x")]),
                changes: vec![
                    "change label team \"b\" -> \"a\"".into(),
                    "remove label old".into()
                ],
            }]
        );
        assert_eq!(steps[0].write(), "PUT /load_balancers/{id}");
        let off = desired(&[(keys::PROTECTION_DELETE, "false")]);
        assert_eq!(texts(&off.diff(&lb)), vec!["turn delete protection off"]);
        assert_eq!(
            off.diff(&lb)[0].write(),
            "POST /load_balancers/{id}/actions/change_protection"
        );

        // Adopted by name (no UID label yet): one PUT writes the UID label and the user labels.
        lb.labels = labels(&[("old", "1")]);
        assert_eq!(
            want.diff(&lb),
            vec![Step::Update {
                name: None,
                labels: Some(labels(&[(SERVICE_UID_LABEL, "u1"), ("team", "a")])),
            }]
        );
    }

    #[test]
    fn a_bad_annotation_is_an_error_naming_it() {
        let map = BTreeMap::from([(keys::LABELS.to_owned(), "team=a b".to_owned())]);
        let mut errors = Errors::default();
        assert_eq!(
            LabelChanges::read(&Annotations::new(&map), &mut errors),
            LabelChanges::default()
        );
        let err = errors.finish().unwrap_err().to_string();
        assert!(
            err.starts_with("load-balancer.hetzner.cloud/labels: \"team=a b\" has the value"),
            "{err}"
        );
        let map = BTreeMap::from([(keys::PROTECTION_DELETE.to_owned(), "yes".to_owned())]);
        let mut errors = Errors::default();
        assert_eq!(
            delete_protection(&Annotations::new(&map), &mut errors),
            None
        );
        assert!(
            errors
                .finish()
                .unwrap_err()
                .to_string()
                .contains("protection-delete: \"yes\" is not a boolean")
        );
    }
}

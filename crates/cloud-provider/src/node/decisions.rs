//! Pure decisions of the cloud node controller: metadata → Node changes, label reconciliation.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeAddress, Taint};

use super::addresses::{
    NodeIpError, current_addresses, desired_addresses, filter_by_node_ips, provided_node_ip,
};
use crate::change::{Change, Verb, Warning, Write};
use crate::provider::InstanceMetadata;
use crate::well_known::{
    LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA, LABEL_REGION, LABEL_REGION_BETA, LABEL_ZONE,
    LABEL_ZONE_BETA, TAINT_UNINITIALIZED,
};

/// Why a Node cannot be initialized from the metadata.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InitError {
    /// Neither the cloud nor the Node knows the providerID.
    #[error("no providerID from the cloud provider and none on the node")]
    MissingProviderId,
    /// The kubelet's provided node IP does not fit the cloud's addresses.
    #[error(transparent)]
    NodeIp(#[from] NodeIpError),
}

/// An additional label that was not applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SkippedLabel {
    /// The key lies in the `kubernetes.io` / `k8s.io` domains.
    ReservedDomain(String),
    /// The Node already has the key with another value (never overwritten).
    Conflict {
        /// Label key.
        key: String,
        /// Value on the Node.
        existing: String,
        /// Value the cloud wanted.
        wanted: String,
    },
}

/// The changes that initialize a tainted Node.
#[derive(Clone, Debug, PartialEq)]
pub struct Initialization {
    /// providerID to set (only when the Node has none).
    pub provider_id: Option<String>,
    /// Labels to add or change.
    pub labels: BTreeMap<String, String>,
    /// Additional labels that were left out, for logging.
    pub skipped_labels: Vec<SkippedLabel>,
    /// The Node's complete taint list without the uninitialized taint.
    pub taints: Vec<Taint>,
}

/// The Node's taints (empty when none).
pub fn taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}

/// Whether the Node carries the uninitialized taint (matched by key only).
pub fn is_uninitialized(node: &Node) -> bool {
    taints(node).iter().any(|t| t.key == TAINT_UNINITIALIZED)
}

/// The Node's `spec.providerID`, if non-empty.
pub fn node_provider_id(node: &Node) -> Option<&str> {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .filter(|id| !id.is_empty())
}

/// Whether a label key lies in the `kubernetes.io` or `k8s.io` domains (or a subdomain).
pub fn is_reserved_label_key(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else {
        return false;
    };
    ["kubernetes.io", "k8s.io"]
        .iter()
        .any(|domain| prefix == *domain || prefix.ends_with(&format!(".{domain}")))
}

fn node_labels(node: &Node) -> &BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    node.metadata.labels.as_ref().unwrap_or(&EMPTY)
}

/// Compute the Node changes for `metadata`.
pub fn decide_initialization(
    node: &Node,
    metadata: &InstanceMetadata,
) -> Result<Initialization, InitError> {
    let provider_id = match node_provider_id(node) {
        Some(_) => None,
        None if !metadata.provider_id.is_empty() => Some(metadata.provider_id.clone()),
        None => return Err(InitError::MissingProviderId),
    };

    // As upstream: with the annotation, the cloud's addresses must match it, even when the
    // cloud returned none (then nothing matches and the Node stays tainted).
    if let Some(annotation) = provided_node_ip(node) {
        filter_by_node_ips(annotation, &metadata.node_addresses)?;
    }

    let existing = node_labels(node);
    let mut labels = BTreeMap::new();
    let mut set = |key: &str, value: &str| {
        if !value.is_empty() && existing.get(key).map(String::as_str) != Some(value) {
            labels.insert(key.to_owned(), value.to_owned());
        }
    };
    set(LABEL_INSTANCE_TYPE, &metadata.instance_type);
    set(LABEL_INSTANCE_TYPE_BETA, &metadata.instance_type);
    set(LABEL_ZONE, &metadata.zone);
    set(LABEL_ZONE_BETA, &metadata.zone);
    set(LABEL_REGION, &metadata.region);
    set(LABEL_REGION_BETA, &metadata.region);

    let mut skipped_labels = Vec::new();
    for (key, value) in &metadata.additional_labels {
        if is_reserved_label_key(key) {
            skipped_labels.push(SkippedLabel::ReservedDomain(key.clone()));
            continue;
        }
        match existing.get(key) {
            Some(current) if current != value => skipped_labels.push(SkippedLabel::Conflict {
                key: key.clone(),
                existing: current.clone(),
                wanted: value.clone(),
            }),
            Some(_) => {}
            None => {
                labels.insert(key.clone(), value.clone());
            }
        }
    }

    let taints = taints(node)
        .iter()
        .filter(|t| t.key != TAINT_UNINITIALIZED)
        .cloned()
        .collect();

    Ok(Initialization {
        provider_id,
        labels,
        skipped_labels,
        taints,
    })
}

/// Beta → GA label pairs; the beta label is the source of truth.
pub const BETA_TO_GA: [(&str, &str); 3] = [
    (LABEL_ZONE_BETA, LABEL_ZONE),
    (LABEL_REGION_BETA, LABEL_REGION),
    (LABEL_INSTANCE_TYPE_BETA, LABEL_INSTANCE_TYPE),
];

/// GA labels to set on an initialized Node so that they mirror their beta twins.
pub fn reconcile_labels(node: &Node) -> BTreeMap<String, String> {
    let labels = node_labels(node);
    BETA_TO_GA
        .iter()
        .filter_map(|(beta, ga)| {
            let value = labels.get(*beta)?;
            (labels.get(*ga) != Some(value)).then(|| ((*ga).to_owned(), value.clone()))
        })
        .collect()
}

/// What the cloud node controller does to one Node, decided from the Node and (where needed)
/// the cloud's metadata. The controller carries it out, `plan` prints it: one patch of the
/// Node for its initialization or its GA labels, one patch of its status for the addresses.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeDecision {
    /// The initialization of a tainted Node (providerID, labels, taints in one patch).
    pub initialization: Option<Initialization>,
    /// GA labels an initialized Node gets from their beta twins.
    pub labels: BTreeMap<String, String>,
    /// The addresses to write, when they differ from the Node's.
    pub addresses: Option<Vec<NodeAddress>>,
    /// Why the addresses cannot be written (they do not fit the provided node IP).
    pub address_error: Option<NodeIpError>,
    /// The Warnings the initialization records on the Node (the cloud's
    /// [`InstanceMetadata::warnings`]; none for an initialized Node).
    pub warnings: Vec<Warning>,
}

/// Decide what the controller does to `node`. An initialized Node gets its GA labels, and with
/// `metadata` its addresses; a tainted one is initialized from `metadata` (nothing without it:
/// it stays tainted until the cloud knows it), then gets the addresses as initialized.
pub fn decide(node: &Node, metadata: Option<&InstanceMetadata>) -> Result<NodeDecision, InitError> {
    let mut decision = NodeDecision::default();
    let target = if is_uninitialized(node) {
        let Some(metadata) = metadata else {
            return Ok(decision);
        };
        let init = decide_initialization(node, metadata)?;
        let mut initialized = node.clone();
        if let Some(spec) = initialized.spec.as_mut() {
            spec.taints = Some(init.taints.clone());
            if init.provider_id.is_some() {
                spec.provider_id.clone_from(&init.provider_id);
            }
        }
        decision.initialization = Some(init);
        decision.warnings.clone_from(&metadata.warnings);
        initialized
    } else {
        decision.labels = reconcile_labels(node);
        node.clone()
    };
    if let Some(metadata) = metadata {
        match desired_addresses(&target, &metadata.node_addresses) {
            Ok(addresses) => decision.addresses = addresses,
            Err(err) => decision.address_error = Some(err),
        }
    }
    Ok(decision)
}

impl NodeDecision {
    /// Whether nothing changes.
    pub fn is_empty(&self) -> bool {
        self.initialization.is_none() && self.labels.is_empty() && self.addresses.is_none()
    }

    /// The changes to `node`, for people.
    pub fn changes(&self, node: &Node) -> Vec<Change> {
        let existing = node_labels(node);
        let label = |key: &str, value: &str| {
            let verb = if existing.contains_key(key) {
                Verb::Change
            } else {
                Verb::Add
            };
            Change::new(verb, format!("label {key}"))
                .values(existing.get(key).cloned(), Some(value.to_owned()))
        };
        let mut addresses = self.addresses.as_ref().map(|addresses| {
            Change::new(Verb::Change, "status.addresses").values(
                Some(addresses_text(current_addresses(node))),
                Some(addresses_text(addresses)),
            )
        });
        let mut out = Vec::new();
        if let Some(init) = &self.initialization {
            // In the order of the writes: the addresses before the taint goes.
            out.extend(addresses.take());
            if let Some(provider_id) = &init.provider_id {
                out.push(
                    Change::new(Verb::Add, "spec.providerID")
                        .values(None, Some(provider_id.clone())),
                );
            }
            out.extend(init.labels.iter().map(|(k, v)| label(k, v)));
            for taint in taints(node) {
                if taint.key == TAINT_UNINITIALIZED {
                    out.push(Change::new(
                        Verb::Remove,
                        format!("taint {}", taint_text(taint)),
                    ));
                }
            }
        }
        out.extend(self.labels.iter().map(|(k, v)| label(k, v)));
        out.extend(addresses);
        out
    }

    /// The writes that carry the changes out, in the controller's order: a Node being
    /// initialised gets its addresses before its taint goes (so nobody sees it initialised
    /// without them); an initialised one its labels, then its addresses.
    pub fn writes(&self, name: &str) -> Vec<Write> {
        let node = (self.initialization.is_some() || !self.labels.is_empty())
            .then(|| Write::kube("patch", "nodes", name));
        let status = self
            .addresses
            .is_some()
            .then(|| Write::kube("patch", "nodes/status", name));
        if self.initialization.is_some() {
            status.into_iter().chain(node).collect()
        } else {
            node.into_iter().chain(status).collect()
        }
    }
}

/// A taint for people: `key=value:Effect`.
pub fn taint_text(taint: &Taint) -> String {
    match taint.value.as_deref() {
        Some(value) if !value.is_empty() => format!("{}={}:{}", taint.key, value, taint.effect),
        _ => format!("{}:{}", taint.key, taint.effect),
    }
}

fn addresses_text(addresses: &[NodeAddress]) -> String {
    if addresses.is_empty() {
        return "(none)".to_owned();
    }
    addresses
        .iter()
        .map(|a| format!("{}={}", a.type_, a.address))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::test_support::{addr, taint, tainted_node};

    fn metadata() -> InstanceMetadata {
        InstanceMetadata {
            provider_id: "cloud://42".into(),
            instance_type: "cx22".into(),
            node_addresses: vec![addr("InternalIP", "10.0.0.2")],
            zone: "fsn1-dc14".into(),
            region: "fsn1".into(),
            additional_labels: BTreeMap::new(),
            warnings: Vec::new(),
        }
    }

    #[test]
    fn reserved_label_keys() {
        for (key, reserved) in [
            ("kubernetes.io/hostname", true),
            ("node.kubernetes.io/foo", true),
            ("k8s.io/x", true),
            ("sub.k8s.io/x", true),
            ("instance.example.com/provided-by", false),
            ("xkubernetes.io/x", false),
            ("kubernetes.io.example.com/x", false),
            ("plain", false),
            ("example.com/kubernetes.io", false),
        ] {
            assert_eq!(is_reserved_label_key(key), reserved, "{key}");
        }
    }

    #[test]
    fn plan_sets_provider_id_labels_and_drops_only_the_uninitialized_taint() {
        let mut node = tainted_node("n1");
        node.spec.get_or_insert_default().taints = Some(vec![
            taint(TAINT_UNINITIALIZED, "NoSchedule"),
            taint("other", "NoExecute"),
            taint(TAINT_UNINITIALIZED, "NoExecute"),
        ]);
        let plan = decide_initialization(&node, &metadata()).unwrap();
        assert_eq!(plan.provider_id.as_deref(), Some("cloud://42"));
        let want: BTreeMap<String, String> = [
            (LABEL_INSTANCE_TYPE, "cx22"),
            (LABEL_INSTANCE_TYPE_BETA, "cx22"),
            (LABEL_ZONE, "fsn1-dc14"),
            (LABEL_ZONE_BETA, "fsn1-dc14"),
            (LABEL_REGION, "fsn1"),
            (LABEL_REGION_BETA, "fsn1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(plan.labels, want);
        assert_eq!(plan.taints, vec![taint("other", "NoExecute")]);
    }

    #[test]
    fn provider_id_rules() {
        let mut with_id = tainted_node("n1");
        with_id.spec.get_or_insert_default().provider_id = Some("cloud://7".into());
        // The node's own providerID is never replaced.
        assert_eq!(
            decide_initialization(&with_id, &metadata())
                .unwrap()
                .provider_id,
            None
        );
        // Empty from the cloud: the node's is used.
        let empty = InstanceMetadata {
            provider_id: String::new(),
            ..metadata()
        };
        assert_eq!(
            decide_initialization(&with_id, &empty).unwrap().provider_id,
            None
        );
        // Empty on both sides is an error.
        assert_eq!(
            decide_initialization(&tainted_node("n2"), &empty),
            Err(InitError::MissingProviderId)
        );
    }

    #[test]
    fn empty_values_produce_no_labels_and_equal_values_are_not_rewritten() {
        let md = InstanceMetadata {
            instance_type: String::new(),
            zone: String::new(),
            ..metadata()
        };
        let mut node = tainted_node("n1");
        node.metadata.labels = Some(
            [(LABEL_REGION.to_owned(), "fsn1".to_owned())]
                .into_iter()
                .collect(),
        );
        let plan = decide_initialization(&node, &md).unwrap();
        assert_eq!(
            plan.labels.keys().collect::<Vec<_>>(),
            vec![LABEL_REGION_BETA]
        );
    }

    #[test]
    fn well_known_labels_overwrite_existing_values() {
        let mut node = tainted_node("n1");
        node.metadata.labels = Some(
            [(LABEL_ZONE.to_owned(), "old".to_owned())]
                .into_iter()
                .collect(),
        );
        let plan = decide_initialization(&node, &metadata()).unwrap();
        assert_eq!(
            plan.labels.get(LABEL_ZONE).map(String::as_str),
            Some("fsn1-dc14")
        );
    }

    #[test]
    fn additional_labels_never_overwrite_and_skip_reserved_domains() {
        let mut node = tainted_node("n1");
        node.metadata.labels = Some(
            [
                ("team".to_owned(), "a".to_owned()),
                ("same".to_owned(), "v".to_owned()),
            ]
            .into_iter()
            .collect(),
        );
        let md = InstanceMetadata {
            additional_labels: [
                ("team", "b"),
                ("same", "v"),
                ("new", "x"),
                ("node.kubernetes.io/evil", "y"),
                ("k8s.io/evil", "z"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
            ..metadata()
        };
        let plan = decide_initialization(&node, &md).unwrap();
        assert_eq!(plan.labels.get("new").map(String::as_str), Some("x"));
        assert!(!plan.labels.contains_key("team"));
        assert!(!plan.labels.contains_key("same"));
        assert!(!plan.labels.contains_key("node.kubernetes.io/evil"));
        assert!(!plan.labels.contains_key("k8s.io/evil"));
        assert!(plan.skipped_labels.contains(&SkippedLabel::Conflict {
            key: "team".into(),
            existing: "a".into(),
            wanted: "b".into()
        }));
        assert!(
            plan.skipped_labels
                .contains(&SkippedLabel::ReservedDomain("k8s.io/evil".into()))
        );
    }

    #[test]
    fn provided_node_ip_is_checked_against_raw_cloud_addresses() {
        let annotate = |value: &str| {
            let mut node = tainted_node("n1");
            node.metadata.annotations = Some(
                [(
                    crate::well_known::ANNOTATION_PROVIDED_NODE_IP.to_owned(),
                    value.to_owned(),
                )]
                .into_iter()
                .collect(),
            );
            node
        };
        assert!(decide_initialization(&annotate("10.0.0.2"), &metadata()).is_ok());
        assert!(matches!(
            decide_initialization(&annotate("10.0.0.9"), &metadata()),
            Err(InitError::NodeIp(NodeIpError::NoMatch(_)))
        ));
        assert!(matches!(
            decide_initialization(&annotate("garbage"), &metadata()),
            Err(InitError::NodeIp(NodeIpError::Unparsable { .. }))
        ));
        // No cloud addresses: the annotated IP matches nothing, so the Node stays tainted.
        let no_addresses = InstanceMetadata {
            node_addresses: vec![],
            ..metadata()
        };
        assert!(matches!(
            decide_initialization(&annotate("10.0.0.9"), &no_addresses),
            Err(InitError::NodeIp(NodeIpError::NoMatch(_)))
        ));
        // Without the annotation, no addresses is fine.
        assert!(decide_initialization(&tainted_node("n1"), &no_addresses).is_ok());
    }

    #[test]
    fn the_cloud_warnings_come_with_the_initialization_only() {
        let warned = InstanceMetadata {
            warnings: vec![Warning::new("NodeNameMismatch", "names differ")],
            ..metadata()
        };
        let tainted = decide(&tainted_node("n1"), Some(&warned)).unwrap();
        assert_eq!(tainted.warnings, warned.warnings);
        assert!(tainted.initialization.is_some());
        let mut initialized = tainted_node("n1");
        initialized.spec.get_or_insert_default().taints = None;
        assert!(
            decide(&initialized, Some(&warned))
                .unwrap()
                .warnings
                .is_empty()
        );
    }

    #[test]
    fn label_reconciliation_table() {
        type Labels = Vec<(&'static str, &'static str)>;
        let cases: Vec<(Labels, Labels)> = vec![
            (vec![], vec![]),
            (vec![(LABEL_ZONE_BETA, "z1")], vec![(LABEL_ZONE, "z1")]),
            (vec![(LABEL_ZONE_BETA, "z1"), (LABEL_ZONE, "z1")], vec![]),
            (
                vec![(LABEL_ZONE_BETA, "z1"), (LABEL_ZONE, "z2")],
                vec![(LABEL_ZONE, "z1")],
            ),
            (vec![(LABEL_ZONE, "z2")], vec![]),
            (
                vec![(LABEL_REGION_BETA, "r"), (LABEL_INSTANCE_TYPE_BETA, "t")],
                vec![(LABEL_REGION, "r"), (LABEL_INSTANCE_TYPE, "t")],
            ),
        ];
        for (have, want) in cases {
            let mut node = Node::default();
            node.metadata.labels = Some(
                have.iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            );
            let want: BTreeMap<String, String> = want
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            assert_eq!(reconcile_labels(&node), want, "{have:?}");
        }
    }
}

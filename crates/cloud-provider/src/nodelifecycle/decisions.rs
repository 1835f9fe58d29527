//! Pure decisions of the lifecycle controller.

use k8s_openapi::api::core::v1::{Node, Taint};

use super::brake::{self, Verdict};
use crate::change::{Change, Planned, Verb, Warning, Write};
use crate::node::decisions::taints;
use crate::provider;
use crate::well_known::{TAINT_EFFECT_NO_SCHEDULE, TAINT_SHUTDOWN};

/// Value of the Node's `Ready` condition; a missing condition counts as `Unknown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadyStatus {
    /// `True`
    True,
    /// `False`
    False,
    /// `Unknown` or absent.
    Unknown,
}

/// The Node's `Ready` condition status.
pub fn ready_status(node: &Node) -> ReadyStatus {
    let condition = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    match condition.map(|c| c.status.as_str()) {
        Some("True") => ReadyStatus::True,
        Some("False") => ReadyStatus::False,
        _ => ReadyStatus::Unknown,
    }
}

/// The shutdown taint (`node.cloudprovider.kubernetes.io/shutdown:NoSchedule`, empty value).
pub fn shutdown_taint() -> Taint {
    Taint {
        key: TAINT_SHUTDOWN.to_owned(),
        effect: TAINT_EFFECT_NO_SCHEDULE.to_owned(),
        ..Taint::default()
    }
}

fn is_shutdown_taint(taint: &Taint) -> bool {
    taint.key == TAINT_SHUTDOWN && taint.effect == TAINT_EFFECT_NO_SCHEDULE
}

/// Whether the Node carries the shutdown taint (key and effect).
pub fn has_shutdown_taint(node: &Node) -> bool {
    taints(node).iter().any(is_shutdown_taint)
}

/// A change of the Node's taint list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaintChange {
    /// Add the shutdown taint.
    AddShutdown,
    /// Remove the shutdown taint.
    RemoveShutdown,
}

/// The Node's new taint list after `change`, or `None` when nothing changes.
pub fn apply_taint_change(node: &Node, change: TaintChange) -> Option<Vec<Taint>> {
    let current = taints(node);
    match change {
        TaintChange::AddShutdown if has_shutdown_taint(node) => None,
        TaintChange::AddShutdown => {
            let mut new = current.to_vec();
            new.push(shutdown_taint());
            Some(new)
        }
        TaintChange::RemoveShutdown if !has_shutdown_taint(node) => None,
        TaintChange::RemoveShutdown => Some(
            current
                .iter()
                .filter(|t| !is_shutdown_taint(t))
                .cloned()
                .collect(),
        ),
    }
}

/// What to do with a Node at the start of a monitor pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstStep {
    /// Ready and untainted: nothing.
    Nothing,
    /// Ready with the shutdown taint: remove it. The cloud is not asked.
    RemoveShutdownTaint,
    /// Not Ready: ask the cloud whether the instance exists.
    CheckExistence,
}

/// Ready nodes are never existence-checked.
pub fn first_step(node: &Node) -> FirstStep {
    match ready_status(node) {
        ReadyStatus::True if has_shutdown_taint(node) => FirstStep::RemoveShutdownTaint,
        ReadyStatus::True => FirstStep::Nothing,
        ReadyStatus::False | ReadyStatus::Unknown => FirstStep::CheckExistence,
    }
}

/// Taint change after the shutdown answer for a not-Ready Node whose instance exists.
/// The taint is only ever removed once the Node is Ready again.
pub fn shutdown_verdict(
    node: &Node,
    answer: &Result<bool, provider::Error>,
) -> Option<TaintChange> {
    match answer {
        Ok(true) if !has_shutdown_taint(node) => Some(TaintChange::AddShutdown),
        _ => None,
    }
}

/// What the cloud said of one Node: the answer of the controller's read step, the only step
/// that asks the cloud (`instance_exists`, then `instance_shutdown` for an instance that
/// exists). A failed question is an error of the read step, never a reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    /// The Node is Ready: the cloud is not asked.
    Ready,
    /// The cloud confirmed that the instance no longer exists.
    Gone,
    /// The instance exists, shut down or not.
    Exists {
        /// `instance_shutdown` said yes.
        shut_down: bool,
    },
}

/// What the lifecycle controller does with one Node: the value its apply step executes and
/// `plan` prints.
#[derive(Clone, Debug, PartialEq)]
pub enum LifecycleDecision {
    /// Leave the Node as it is.
    Nothing,
    /// Add or remove the shutdown taint.
    ChangeTaint(TaintChange),
    /// The cloud reports the instance gone for the first time in this pass: the Node is deleted
    /// when a pass a period later still finds it gone (the brake's confirmation).
    ConfirmDeletion,
    /// The cloud confirmed the instance gone, and the brake lets it through: delete the Node.
    DeleteNode,
    /// Too many Nodes are reported gone at once: the Node stays, with a Warning.
    HoldDeletion {
        /// Nodes reported gone in the last passes.
        gone: usize,
        /// The cluster's cloud Nodes.
        nodes: usize,
        /// The share one pass may delete.
        max_share: f64,
    },
}

/// The reason of the Warning on a Node whose deletion the brake holds.
pub const REASON_DELETION_HELD: &str = "NodeDeletionHeld";

/// The reason of the Normal event on a Node the controller deletes.
pub const REASON_DELETING_NODE: &str = "DeletingNode";

/// Decide what to do with `node` from what the cloud said and, for a Node reported gone, the
/// deletion brake's verdict on that report (`None`: no brake memory, as for a first report);
/// `max_share` is the share the brake holds above, for the Warning of a held deletion.
pub fn decide(
    node: &Node,
    reading: Reading,
    brake: Option<Verdict>,
    max_share: f64,
) -> LifecycleDecision {
    match reading {
        Reading::Ready if has_shutdown_taint(node) => {
            LifecycleDecision::ChangeTaint(TaintChange::RemoveShutdown)
        }
        Reading::Ready => LifecycleDecision::Nothing,
        Reading::Exists { shut_down } => {
            match shutdown_verdict(node, &Ok::<_, provider::Error>(shut_down)) {
                Some(change) => LifecycleDecision::ChangeTaint(change),
                None => LifecycleDecision::Nothing,
            }
        }
        Reading::Gone => match brake.unwrap_or(Verdict::ConfirmNextPass) {
            Verdict::Delete => LifecycleDecision::DeleteNode,
            Verdict::ConfirmNextPass => LifecycleDecision::ConfirmDeletion,
            Verdict::Held { gone, nodes } => LifecycleDecision::HoldDeletion {
                gone,
                nodes,
                max_share,
            },
        },
    }
}

impl LifecycleDecision {
    /// The Normal event on the Node the controller deletes.
    pub fn deleting_message(name: &str) -> String {
        format!("Deleting node {name} because it does not exist in the cloud provider")
    }

    /// The Warning this decision records on `name`, if any.
    pub fn warning(&self, name: &str) -> Option<Warning> {
        match self {
            Self::HoldDeletion {
                gone,
                nodes,
                max_share,
            } => Some(Warning::new(
                REASON_DELETION_HELD,
                brake::held_message(name, *gone, *nodes, *max_share),
            )),
            _ => None,
        }
    }

    /// What `plan` prints for this decision on the Node `name`.
    pub fn planned(&self, name: &str) -> Planned {
        let gone = |to: &str| {
            Planned::one(
                Change::new(Verb::Delete, "node").values(None, Some(to.to_owned())),
                Write::kube("delete", "nodes", name),
            )
        };
        let taint = |verb| {
            Planned::one(
                Change::new(
                    verb,
                    format!("taint {TAINT_SHUTDOWN}:{TAINT_EFFECT_NO_SCHEDULE}"),
                ),
                Write::kube("patch", "nodes", name),
            )
        };
        match self {
            Self::Nothing => Planned::default(),
            Self::ChangeTaint(TaintChange::AddShutdown) => taint(Verb::Add),
            Self::ChangeTaint(TaintChange::RemoveShutdown) => taint(Verb::Remove),
            Self::DeleteNode => gone("its instance no longer exists in the cloud"),
            Self::ConfirmDeletion => gone(
                "its instance no longer exists in the cloud (deleted once a pass a period later confirms it)",
            ),
            Self::HoldDeletion { .. } => {
                self.warning(name).map(Planned::warning).unwrap_or_default()
            }
        }
    }

    /// Whether the Node goes (now or after the confirming pass).
    pub fn deletes(&self) -> bool {
        matches!(self, Self::DeleteNode | Self::ConfirmDeletion)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::test_support::taint;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};

    fn node(ready: Option<&str>, taints: Vec<Taint>) -> Node {
        Node {
            spec: Some(NodeSpec {
                taints: Some(taints),
                ..NodeSpec::default()
            }),
            status: Some(NodeStatus {
                conditions: ready.map(|status| {
                    vec![NodeCondition {
                        type_: "Ready".into(),
                        status: status.into(),
                        ..NodeCondition::default()
                    }]
                }),
                ..NodeStatus::default()
            }),
            ..Node::default()
        }
    }

    #[test]
    fn ready_status_table() {
        assert_eq!(ready_status(&node(Some("True"), vec![])), ReadyStatus::True);
        assert_eq!(
            ready_status(&node(Some("False"), vec![])),
            ReadyStatus::False
        );
        assert_eq!(
            ready_status(&node(Some("Unknown"), vec![])),
            ReadyStatus::Unknown
        );
        assert_eq!(ready_status(&node(None, vec![])), ReadyStatus::Unknown);
        assert_eq!(ready_status(&Node::default()), ReadyStatus::Unknown);
    }

    #[test]
    fn first_step_table() {
        let shutdown = shutdown_taint();
        let cases = [
            (node(Some("True"), vec![]), FirstStep::Nothing),
            (
                node(Some("True"), vec![shutdown.clone()]),
                FirstStep::RemoveShutdownTaint,
            ),
            // Same key, other effect: not ours.
            (
                node(Some("True"), vec![taint(TAINT_SHUTDOWN, "NoExecute")]),
                FirstStep::Nothing,
            ),
            (
                node(Some("False"), vec![shutdown.clone()]),
                FirstStep::CheckExistence,
            ),
            (node(Some("Unknown"), vec![]), FirstStep::CheckExistence),
            (node(None, vec![]), FirstStep::CheckExistence),
        ];
        for (n, want) in cases {
            assert_eq!(first_step(&n), want, "{:?}", n.status);
        }
    }

    #[test]
    fn shutdown_verdict_table() {
        let plain = node(Some("False"), vec![]);
        let tainted = node(Some("False"), vec![shutdown_taint()]);
        assert_eq!(
            shutdown_verdict(&plain, &Ok(true)),
            Some(TaintChange::AddShutdown)
        );
        assert_eq!(shutdown_verdict(&tainted, &Ok(true)), None);
        // Running again but still not Ready: the taint stays until Ready.
        assert_eq!(shutdown_verdict(&tainted, &Ok(false)), None);
        assert_eq!(shutdown_verdict(&plain, &Ok(false)), None);
        assert_eq!(
            shutdown_verdict(&plain, &Err(provider::Error::api_msg("x"))),
            None
        );
    }

    #[test]
    fn taint_changes_keep_other_taints() {
        let other = taint("dedicated", "NoSchedule");
        let n = node(Some("False"), vec![other.clone()]);
        assert_eq!(
            apply_taint_change(&n, TaintChange::AddShutdown),
            Some(vec![other.clone(), shutdown_taint()])
        );
        assert_eq!(apply_taint_change(&n, TaintChange::RemoveShutdown), None);
        let t = node(Some("True"), vec![shutdown_taint(), other.clone()]);
        assert_eq!(apply_taint_change(&t, TaintChange::AddShutdown), None);
        assert_eq!(
            apply_taint_change(&t, TaintChange::RemoveShutdown),
            Some(vec![other])
        );
    }

    #[test]
    fn decide_table() {
        let shutdown = shutdown_taint();
        let ready = node(Some("True"), vec![]);
        let ready_tainted = node(Some("True"), vec![shutdown.clone()]);
        let down = node(Some("False"), vec![]);
        let down_tainted = node(Some("False"), vec![shutdown]);
        let held = Verdict::Held { gone: 3, nodes: 4 };
        let cases = [
            (&ready, Reading::Ready, None, LifecycleDecision::Nothing),
            (
                &ready_tainted,
                Reading::Ready,
                None,
                LifecycleDecision::ChangeTaint(TaintChange::RemoveShutdown),
            ),
            (
                &down,
                Reading::Exists { shut_down: true },
                None,
                LifecycleDecision::ChangeTaint(TaintChange::AddShutdown),
            ),
            (
                &down_tainted,
                Reading::Exists { shut_down: true },
                None,
                LifecycleDecision::Nothing,
            ),
            // Running again but not Ready yet: the taint stays until Ready.
            (
                &down_tainted,
                Reading::Exists { shut_down: false },
                None,
                LifecycleDecision::Nothing,
            ),
            // No brake memory: a first report, confirmed a pass later.
            (
                &down,
                Reading::Gone,
                None,
                LifecycleDecision::ConfirmDeletion,
            ),
            (
                &down,
                Reading::Gone,
                Some(Verdict::ConfirmNextPass),
                LifecycleDecision::ConfirmDeletion,
            ),
            (
                &down,
                Reading::Gone,
                Some(Verdict::Delete),
                LifecycleDecision::DeleteNode,
            ),
            (
                &down,
                Reading::Gone,
                Some(held),
                LifecycleDecision::HoldDeletion {
                    gone: 3,
                    nodes: 4,
                    max_share: brake::DEFAULT_MAX_SHARE,
                },
            ),
        ];
        for (n, reading, verdict, want) in cases {
            assert_eq!(
                decide(n, reading, verdict, brake::DEFAULT_MAX_SHARE),
                want,
                "{reading:?} {verdict:?}"
            );
        }
    }

    #[test]
    fn plan_prints_what_apply_does() {
        let planned = LifecycleDecision::DeleteNode.planned("n1");
        assert_eq!(planned.writes, [Write::kube("delete", "nodes", "n1")]);
        assert_eq!(planned.changes[0].verb, Verb::Delete);
        let confirm = LifecycleDecision::ConfirmDeletion.planned("n1");
        assert_eq!(confirm.writes, planned.writes);
        assert!(
            confirm.changes[0]
                .to
                .as_deref()
                .is_some_and(|to| to.contains("confirms")),
            "{confirm:?}"
        );
        let taint = LifecycleDecision::ChangeTaint(TaintChange::AddShutdown).planned("n1");
        assert_eq!(taint.writes, [Write::kube("patch", "nodes", "n1")]);
        let held = LifecycleDecision::HoldDeletion {
            gone: 3,
            nodes: 4,
            max_share: 0.5,
        };
        let planned = held.planned("n1");
        assert!(planned.changes.is_empty() && planned.writes.is_empty());
        assert_eq!(
            planned.warnings,
            held.warning("n1").into_iter().collect::<Vec<_>>()
        );
        assert_eq!(planned.warnings[0].reason, REASON_DELETION_HELD);
        assert!(planned.warnings[0].message.contains("3 of the 4"));
        assert!(LifecycleDecision::Nothing.planned("n1") == Planned::default());
    }
}

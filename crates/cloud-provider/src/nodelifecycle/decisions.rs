//! Pure decisions of the lifecycle controller.

use k8s_openapi::api::core::v1::{Node, Taint};

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

/// Verdict on the existence answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExistenceVerdict {
    /// The cloud confirmed the instance is gone (`Ok(false)`): delete the Node.
    DeleteNode,
    /// The instance exists: check whether it is shut down.
    CheckShutdown,
    /// The cloud failed to answer: leave the Node untouched.
    LeaveUntouched,
}

/// Only `Ok(false)` deletes; every `Err`, whatever its kind, leaves the Node alone.
pub fn existence_verdict(answer: &Result<bool, provider::Error>) -> ExistenceVerdict {
    match answer {
        Ok(false) => ExistenceVerdict::DeleteNode,
        Ok(true) => ExistenceVerdict::CheckShutdown,
        Err(_) => ExistenceVerdict::LeaveUntouched,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::test_support::taint;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};

    // Deliberate repetition: each module's test Node builder sets only the fields its
    // decisions read (here the Ready condition and taints; the route tests' the pod CIDR and
    // an address), so they look alike without being the same Node.
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
    fn only_a_confirmed_absence_deletes() {
        assert_eq!(existence_verdict(&Ok(false)), ExistenceVerdict::DeleteNode);
        assert_eq!(
            existence_verdict(&Ok(true)),
            ExistenceVerdict::CheckShutdown
        );
        for err in [
            provider::Error::instance_not_found(),
            provider::Error::api_msg("timeout"),
            provider::Error::not_implemented(),
            provider::Error::other("?"),
        ] {
            assert_eq!(
                existence_verdict(&Err(err)),
                ExistenceVerdict::LeaveUntouched
            );
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
}

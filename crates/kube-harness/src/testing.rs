//! Small helpers that integration tests of every crate share.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeSpec, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The taint a kubelet with `--cloud-provider=external` registers its Node with.
pub const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// A Node as a kubelet with `--cloud-provider=external` registers it: the name and the
/// `node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule` taint, nothing else (its
/// status, e.g. the Hostname address, is written afterwards through the status subresource).
pub fn kubelet_node(name: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            taints: Some(vec![Taint {
                key: UNINITIALIZED_TAINT.to_owned(),
                value: Some("true".to_owned()),
                effect: "NoSchedule".to_owned(),
                time_added: None,
            }]),
            ..NodeSpec::default()
        }),
        status: None,
    }
}

/// A Node's `Ready` condition as a kubelet (or the node lifecycle controller) writes it, both
/// timestamps now (whole seconds, as the API serialises them), as JSON for a status patch:
/// `("True", "KubeletReady")`, `("False", "KubeletNotReady")`, `("Unknown", "NodeStatusUnknown")`.
pub fn ready_condition(status: &str, reason: &str) -> serde_json::Value {
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    serde_json::json!({
        "type": "Ready", "status": status, "reason": reason,
        "lastHeartbeatTime": now, "lastTransitionTime": now,
    })
}

/// Poll `check` every 50 ms until it returns `Some`, and return that value.
///
/// # Panics
/// After `timeout`, naming `what`: this is a test assertion.
#[allow(clippy::panic)]
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The Node's taints (empty when it has none).
pub fn taints(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
}

/// Whether the Node has a taint with this key.
pub fn has_taint(node: &Node, key: &str) -> bool {
    taints(node).iter().any(|t| t.key == key)
}

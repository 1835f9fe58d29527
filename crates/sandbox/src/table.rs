//! A readable table of Nodes: providerID, labels, addresses, taints.

use k8s_openapi::api::core::v1::Node;

use kube_harness::UNINITIALIZED_TAINT as UNINITIALIZED;

/// Has a providerID and no uninitialized taint.
pub fn initialized(node: &Node) -> bool {
    let spec = node.spec.as_ref();
    let has_id = spec
        .and_then(|s| s.provider_id.as_deref())
        .is_some_and(|id| !id.is_empty());
    let tainted = spec
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == UNINITIALIZED));
    has_id && !tainted
}

/// One block per Node.
pub fn render(nodes: &[Node]) -> String {
    let mut out = String::new();
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or("?");
        let spec = node.spec.clone().unwrap_or_default();
        let label = |key: &str| {
            node.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(key))
                .cloned()
                .unwrap_or_else(|| "-".to_owned())
        };
        let addresses = node
            .status
            .as_ref()
            .and_then(|s| s.addresses.clone())
            .unwrap_or_default()
            .iter()
            .map(|a| format!("{}={}", a.type_, a.address))
            .collect::<Vec<_>>()
            .join(", ");
        let taints = spec
            .taints
            .unwrap_or_default()
            .iter()
            .map(|t| format!("{}:{}", t.key, t.effect))
            .collect::<Vec<_>>();
        out.push_str(&format!(
            "{name}\n  providerID     {}\n  instance-type  {}\n  region / zone  {} / {}\n  provided-by    {}\n  addresses      {}\n  taints         {}\n",
            spec.provider_id.unwrap_or_else(|| "-".into()),
            label("node.kubernetes.io/instance-type"),
            label("topology.kubernetes.io/region"),
            label("topology.kubernetes.io/zone"),
            label("instance.hetzner.cloud/provided-by"),
            if addresses.is_empty() { "-".to_owned() } else { addresses },
            if taints.is_empty() { "none".to_owned() } else { taints.join(", ") },
        ));
    }
    out
}

/// `(destination, gateway)` of every route of the named network in a simulator state dump.
pub fn network_routes(state: &serde_json::Value, network: &str) -> Vec<(String, String)> {
    state["networks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|n| n["name"] == network)
        .flat_map(|n| n["routes"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| {
            Some((
                r["destination"].as_str()?.to_owned(),
                r["gateway"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

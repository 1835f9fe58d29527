//! A stand-in for the kubelets of the sandbox's servers (the pod CIDRs come from the real
//! kube-controller-manager's node IPAM, as in a cluster).
//!
//! Registration is what a kubelet with `--cloud-provider=external` does on first start: a Node
//! with the `node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule` taint and only a
//! Hostname address. Then, every two seconds, the `Ready` condition follows the server's state
//! in the simulator: `True` while it runs, `Unknown` otherwise (a stopped kubelet posts
//! nothing, and Kubernetes marks the Node Unknown). It also does the one thing of
//! kube-controller-manager the sandbox needs: the apiserver's admission adds the
//! `node.kubernetes.io/not-ready:NoSchedule` taint to new Nodes, and it is removed once the Node
//! is Ready (and added back when it is not).

use std::collections::BTreeMap;
use std::time::Duration;

use hcloud_sim::AdminClient;
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

/// Keep the named Nodes registered and their readiness in line with the simulator, forever.
pub async fn run(client: kube::Client, admin: AdminClient, names: Vec<String>) {
    let nodes: Api<Node> = Api::all(client);
    loop {
        let servers = server_statuses(&admin).await;
        let mut names = names.clone();
        // Servers created later through the admin API join the cluster too.
        names.extend(
            servers
                .keys()
                .filter(|n| !names.contains(n))
                .cloned()
                .collect::<Vec<_>>(),
        );
        for name in &names {
            let running = servers.get(name).is_some_and(|s| s == "running");
            if let Err(err) = sync(&nodes, name, running).await {
                tracing::warn!(node = %name, error = %err, "kubelet stand-in");
            }
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// Every server's state by name: the cloud servers' `status` and the dedicated servers' power
/// state (`running` while powered on), so both kinds run a kubelet stand-in.
async fn server_statuses(admin: &AdminClient) -> BTreeMap<String, String> {
    let mut statuses = BTreeMap::new();
    if let Ok(state) = admin.state().await {
        statuses.extend(
            state["servers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| {
                    Some((
                        s["name"].as_str()?.to_owned(),
                        s["status"].as_str()?.to_owned(),
                    ))
                }),
        );
    }
    if let Ok(dedicated) = admin.robot_servers().await {
        statuses.extend(dedicated.iter().filter_map(|s| {
            Some((
                s["server_name"].as_str()?.to_owned(),
                s["operating_status"].as_str()?.to_owned(),
            ))
        }));
    }
    statuses
}

async fn sync(nodes: &Api<Node>, name: &str, running: bool) -> Result<(), kube::Error> {
    let exists = nodes.get_opt(name).await?.is_some();
    if !exists {
        if !running {
            return Ok(());
        }
        register(nodes, name).await?;
    }
    let mut condition = if running {
        kube_harness::ready_condition("True", "KubeletReady")
    } else {
        kube_harness::ready_condition("Unknown", "NodeStatusUnknown")
    };
    condition["message"] = json!(format!(
        "sandbox kubelet stand-in: server {}",
        if running { "running" } else { "not running" }
    ));
    let mut patch = json!({"status": {"conditions": [condition]}});
    if !exists {
        patch["status"]["addresses"] = json!([{"type": "Hostname", "address": name}]);
    }
    // A strategic merge patch, as a kubelet sends: conditions merge by type, so the CCM's
    // NetworkUnavailable stays (a JSON merge patch would replace the whole list).
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    sync_not_ready_taint(nodes, name, running).await
}

const NOT_READY: &str = "node.kubernetes.io/not-ready";

/// Keep `node.kubernetes.io/not-ready:NoSchedule` in line with readiness, with the Node's
/// resourceVersion as a precondition (another writer wins; the next round retries).
async fn sync_not_ready_taint(
    nodes: &Api<Node>,
    name: &str,
    ready: bool,
) -> Result<(), kube::Error> {
    let Some(node) = nodes.get_opt(name).await? else {
        return Ok(());
    };
    let mut taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
    let has = taints.iter().any(|t| t.key == NOT_READY);
    if ready != has {
        return Ok(());
    }
    if ready {
        taints.retain(|t| t.key != NOT_READY);
    } else {
        taints.push(Taint {
            key: NOT_READY.to_owned(),
            value: None,
            effect: "NoSchedule".to_owned(),
            time_added: None,
        });
    }
    let patch = json!({
        "metadata": {"resourceVersion": node.metadata.resource_version},
        "spec": {"taints": taints},
    });
    match nodes
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(err) => Err(err),
    }
}

async fn register(nodes: &Api<Node>, name: &str) -> Result<(), kube::Error> {
    let mut node = kube_harness::kubelet_node(name);
    node.metadata.labels = Some(BTreeMap::from([
        ("kubernetes.io/hostname".to_owned(), name.to_owned()),
        ("kubernetes.io/os".to_owned(), "linux".to_owned()),
    ]));
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(err) => Err(err),
    }
}

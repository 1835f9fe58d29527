use std::collections::BTreeMap;
use std::time::Duration;

use cloud_provider::node::{CONTROLLER, NodeController, NodeControllerConfig};
use cloud_provider::provider::InstanceMetadata;
use cloud_provider::runtime::workqueue::Backoff;
use cloud_provider::well_known::*;
use k8s_openapi::api::core::v1::Taint;

use crate::Env;
use crate::support::*;

const WAIT: Duration = Duration::from_secs(20);

fn config() -> NodeControllerConfig {
    NodeControllerConfig {
        node_status_update_frequency: Duration::from_millis(300),
        backoff: Backoff {
            base: Duration::from_millis(100),
            max: Duration::from_millis(400),
        },
        ..NodeControllerConfig::default()
    }
}

fn start_controller(env: &Env) {
    let controller = NodeController::new(
        env.client.clone(),
        env.cache.clone(),
        env.fake.clone(),
        env.metrics.clone(),
        config(),
    );
    tokio::spawn(controller.run(env.shutdown.clone()));
}

fn metadata(id: &str, addresses: Vec<k8s_openapi::api::core::v1::NodeAddress>) -> InstanceMetadata {
    InstanceMetadata {
        provider_id: id.into(),
        instance_type: "cx22".into(),
        node_addresses: addresses,
        zone: "fsn1-dc14".into(),
        region: "fsn1".into(),
        additional_labels: BTreeMap::from([
            (
                "instance.example.com/provided-by".to_owned(),
                "cloud".to_owned(),
            ),
            ("team".to_owned(), "cloud-value".to_owned()),
            ("node.kubernetes.io/sneaky".to_owned(), "x".to_owned()),
        ]),
        warnings: Vec::new(),
    }
}

async fn wait_initialized(env: &Env, name: &str) -> k8s_openapi::api::core::v1::Node {
    eventually("node initialized", WAIT, || async {
        get_node(&env.client, name)
            .await
            .filter(|n| !has_taint(n, TAINT_UNINITIALIZED))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initializes_tainted_nodes_and_reports_synced() {
    let env = Env::start().await;
    let fresh = &env.name("fresh-node");
    let known = &env.name("known-node");
    env.fake.set_metadata(
        fresh,
        Answer::Ok(Some(metadata(
            "cloud://11",
            vec![
                addr("InternalIP", "10.0.0.11"),
                addr("ExternalIP", "203.0.113.11"),
            ],
        ))),
    );
    // The cloud leaves the providerID empty: the node's own is used and kept.
    env.fake.set_metadata(
        known,
        Answer::Ok(Some(metadata("", vec![addr("ExternalIP", "203.0.113.12")]))),
    );
    let other_taint = Taint {
        key: "dedicated".into(),
        value: Some("infra".into()),
        effect: "NoSchedule".into(),
        ..Taint::default()
    };
    let created = NodeBuilder::kubelet(fresh)
        .taints(vec![uninitialized_taint(), other_taint.clone()])
        .label("team", "mine")
        .create(&env)
        .await;
    NodeBuilder::kubelet(known)
        .provider_id("cloud://12")
        .create(&env)
        .await;
    start_controller(&env);

    let node = wait_initialized(&env, fresh).await;
    let spec = node.spec.clone().unwrap();
    assert_eq!(spec.provider_id.as_deref(), Some("cloud://11"));
    // Only the uninitialized taint goes; others (ours, and the apiserver's not-ready one) stay.
    assert!(taints(&node).contains(&other_taint));
    assert!(has_taint(&node, "node.kubernetes.io/not-ready"));
    for (key, value) in [
        (LABEL_INSTANCE_TYPE, "cx22"),
        (LABEL_INSTANCE_TYPE_BETA, "cx22"),
        (LABEL_ZONE, "fsn1-dc14"),
        (LABEL_ZONE_BETA, "fsn1-dc14"),
        (LABEL_REGION, "fsn1"),
        (LABEL_REGION_BETA, "fsn1"),
        ("instance.example.com/provided-by", "cloud"),
        // Never overwritten.
        ("team", "mine"),
    ] {
        assert_eq!(label(&node, key), Some(value), "{key}");
    }
    assert_eq!(label(&node, "node.kubernetes.io/sneaky"), None);

    let node = eventually("addresses written", WAIT, || async {
        get_node(&env.client, fresh)
            .await
            .filter(|n| addresses(n).len() == 3)
    })
    .await;
    assert_eq!(
        addresses(&node),
        vec![
            addr("InternalIP", "10.0.0.11"),
            addr("ExternalIP", "203.0.113.11"),
            addr("Hostname", fresh),
        ]
    );

    let synced = eventually("Synced event", WAIT, || async {
        events_with_reason(&env.client, fresh, "Synced").await.pop()
    })
    .await;
    assert_eq!(synced.type_.as_deref(), Some("Normal"));
    assert_eq!(synced.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(synced.involved_object.kind.as_deref(), Some("Node"));
    assert_eq!(synced.involved_object.uid, created.metadata.uid);
    assert_eq!(synced.involved_object.namespace, None);
    assert_eq!(
        synced.source.and_then(|s| s.component).as_deref(),
        Some("cloud-node-controller")
    );

    let node = wait_initialized(&env, known).await;
    assert_eq!(
        node.spec.and_then(|s| s.provider_id).as_deref(),
        Some("cloud://12")
    );
    let asked = env.fake.calls(Call::Metadata, known);
    assert!(!asked.is_empty());
    assert_eq!(asked[0].provider_id.as_deref(), Some("cloud://12"));
    // Counted when a sync returns, which is after its writes became visible.
    eventually("two counted node syncs", WAIT, || async {
        (env.metrics.reconcile_count(CONTROLLER) >= 2).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_errors_keep_the_node_tainted_until_the_cloud_answers() {
    let env = Env::start().await;
    let name = &env.name("flaky-node");
    let silent = &env.name("silent-node");
    env.fake
        .set_metadata(name, Answer::Err("cloud API unavailable".into()));
    // No metadata ("nothing to do now"): stays tainted without an error.
    env.fake.set_metadata(silent, Answer::Ok(None));
    NodeBuilder::kubelet(name).create(&env).await;
    let silent_node = NodeBuilder::kubelet(silent).create(&env).await;
    env.wait_cached(&silent_node).await;
    start_controller(&env);

    let warning = eventually("failure event", WAIT, || async {
        events_with_reason(&env.client, name, "InstanceLookupFailed")
            .await
            .pop()
    })
    .await;
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    assert!(
        warning
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("cloud API unavailable"),
        "{:?}",
        warning.message
    );
    // Retried with backoff, and each failure leaves the node as it was.
    eventually("several attempts", WAIT, || async {
        (env.fake.calls(Call::Metadata, name).len() >= 3).then_some(())
    })
    .await;
    let node = get_node(&env.client, name).await.unwrap();
    assert!(has_taint(&node, TAINT_UNINITIALIZED));
    assert_eq!(node.spec.and_then(|s| s.provider_id), None);
    assert!(env.metrics.error_count(CONTROLLER, "transient") >= 3);

    env.fake.set_metadata(
        name,
        Answer::Ok(Some(metadata(
            "cloud://21",
            vec![addr("InternalIP", "10.0.0.21")],
        ))),
    );
    let node = wait_initialized(&env, name).await;
    assert_eq!(
        node.spec.and_then(|s| s.provider_id).as_deref(),
        Some("cloud://21")
    );

    let silent_node = get_node(&env.client, silent).await.unwrap();
    assert!(has_taint(&silent_node, TAINT_UNINITIALIZED));
    assert!(
        events_with_reason(&env.client, silent, "Synced")
            .await
            .is_empty()
    );
    // Nil metadata is not retried by backoff: one call per change of the node.
    assert_eq!(env.fake.calls(Call::Metadata, silent).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provided_node_ip_must_match_a_cloud_address() {
    let env = Env::start().await;
    let matching = &env.name("ip-match");
    let mismatching = &env.name("ip-mismatch");
    let cloud = vec![
        addr("InternalIP", "10.0.0.31"),
        addr("InternalIP", "10.0.0.32"),
        addr("ExternalIP", "203.0.113.31"),
    ];
    env.fake.set_metadata(
        matching,
        Answer::Ok(Some(metadata("cloud://31", cloud.clone()))),
    );
    env.fake.set_metadata(
        mismatching,
        Answer::Ok(Some(metadata("cloud://32", cloud.clone()))),
    );
    NodeBuilder::kubelet(matching)
        .annotation(ANNOTATION_PROVIDED_NODE_IP, "10.0.0.32")
        .addresses(vec![
            addr("InternalIP", "10.0.0.32"),
            addr("Hostname", matching),
        ])
        .create(&env)
        .await;
    NodeBuilder::kubelet(mismatching)
        .annotation(ANNOTATION_PROVIDED_NODE_IP, "192.0.2.1")
        .create(&env)
        .await;
    start_controller(&env);

    wait_initialized(&env, matching).await;
    let node = eventually("filtered addresses", WAIT, || async {
        get_node(&env.client, matching)
            .await
            .filter(|n| addresses(n).len() == 3)
    })
    .await;
    assert_eq!(
        addresses(&node),
        vec![
            addr("InternalIP", "10.0.0.32"),
            addr("ExternalIP", "203.0.113.31"),
            addr("Hostname", matching),
        ]
    );

    let warning = eventually("mismatch event", WAIT, || async {
        events_with_reason(&env.client, mismatching, "SyncFailed")
            .await
            .pop()
    })
    .await;
    assert!(
        warning
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("192.0.2.1"),
        "{:?}",
        warning.message
    );
    let node = get_node(&env.client, mismatching).await.unwrap();
    assert!(has_taint(&node, TAINT_UNINITIALIZED));
    assert_eq!(addresses(&node), vec![addr("Hostname", mismatching)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn periodic_refresh_replaces_addresses_but_never_clears_them() {
    let env = Env::start().await;
    let name = &env.name("running-node");
    let beta = &env.name("beta-node");
    env.fake.set_metadata(
        name,
        Answer::Ok(Some(metadata(
            "cloud://41",
            vec![addr("InternalIP", "10.0.0.41")],
        ))),
    );
    NodeBuilder::kubelet(name)
        .untainted()
        .provider_id("cloud://41")
        .addresses(vec![
            addr("InternalIP", "10.0.0.40"),
            addr("InternalIP", "10.0.0.39"),
            addr("Hostname", name),
        ])
        .create(&env)
        .await;
    NodeBuilder::kubelet(beta)
        .untainted()
        .label(LABEL_ZONE_BETA, "nbg1-dc3")
        .label(LABEL_REGION_BETA, "nbg1")
        .label(LABEL_REGION, "stale")
        .create(&env)
        .await;
    start_controller(&env);

    // The whole list is replaced, not merged by type.
    let node = eventually("refreshed addresses", WAIT, || async {
        get_node(&env.client, name).await.filter(|n| {
            addresses(n) == vec![addr("InternalIP", "10.0.0.41"), addr("Hostname", name)]
        })
    })
    .await;
    assert!(!has_taint(&node, TAINT_UNINITIALIZED));

    env.fake.set_metadata(
        name,
        Answer::Ok(Some(metadata(
            "cloud://41",
            vec![
                addr("InternalIP", "10.0.0.42"),
                addr("ExternalIP", "203.0.113.42"),
            ],
        ))),
    );
    eventually("second refresh", WAIT, || async {
        get_node(&env.client, name).await.filter(|n| {
            addresses(n)
                == vec![
                    addr("InternalIP", "10.0.0.42"),
                    addr("ExternalIP", "203.0.113.42"),
                    addr("Hostname", name),
                ]
        })
    })
    .await;

    env.fake
        .set_metadata(name, Answer::Ok(Some(metadata("cloud://41", vec![]))));
    let calls = env.fake.calls(Call::Metadata, name).len();
    eventually("more refresh passes", WAIT, || async {
        (env.fake.calls(Call::Metadata, name).len() >= calls + 3).then_some(())
    })
    .await;
    let node = get_node(&env.client, name).await.unwrap();
    assert_eq!(addresses(&node).len(), 3, "{:?}", addresses(&node));

    // Label reconciliation: beta labels are the source of truth for their GA twins.
    let node = eventually("GA labels", WAIT, || async {
        get_node(&env.client, beta)
            .await
            .filter(|n| label(n, LABEL_ZONE) == Some("nbg1-dc3"))
    })
    .await;
    assert_eq!(label(&node, LABEL_REGION), Some("nbg1"));
}

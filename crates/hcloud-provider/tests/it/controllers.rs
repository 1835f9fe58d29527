//! End to end: the cloud node and node-lifecycle controllers with the real Hetzner provider,
//! a real kube-apiserver and the Hetzner simulator. The tests share one control plane; each
//! has its own simulator, and its controllers watch only its own Nodes (labelled and named with
//! the test's id, see `support::Env`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::time::Duration;

use hcloud_provider::{AddressFamily, CacheConfig, NetworkRef, ProviderSettings};
use hcloud_sim::{Fault, NetworkSeed, ServerSeed};
use k8s_openapi::api::core::v1::Node;
use support::*;

/// Controller label of the node lifecycle controller in the reconcile metrics.
const LIFECYCLE: &str = cloud_provider::nodelifecycle::CONTROLLER;

fn uid(node: &Node) -> String {
    node.metadata.uid.clone().unwrap()
}

fn component(event: &k8s_openapi::api::core::v1::Event) -> Option<&str> {
    event.source.as_ref()?.component.as_deref()
}

/// Assert that each Node still exists as the same object (deletion is final, so a Node that
/// still has its UID was never deleted in between).
async fn assert_still_there(env: &Env, nodes: &[&Node], during: &str) {
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap();
        let current = env.node(name).await;
        assert_eq!(
            current.as_ref().map(uid),
            Some(uid(node)),
            "node {name} must not be deleted {during}"
        );
    }
}

/// 1. A kubelet-registered, tainted Node named like a server is initialized from that server:
/// providerID, type/region/zone labels (GA and beta), the provenance label, addresses, taint
/// removed (other taints kept), and a `Synced` event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tainted_node_is_initialized_from_the_server_with_its_name() {
    let mut env = Env::start().await;
    let worker_1 = &*env.name("worker-1");
    let server = env
        .server(
            ServerSeed::new(worker_1)
                .server_type("cpx22")
                .location("nbg1"),
        )
        .await;
    env.start_controllers(Setup::default()).await;
    let created = KubeletNode::new(worker_1)
        .taint("example.com/dedicated", "infra", "NoSchedule")
        .create(&env)
        .await;

    let node = env.initialized(worker_1).await;
    assert_eq!(provider_id(&node), Some(server.provider_id().as_str()));
    for (key, value) in [
        ("node.kubernetes.io/instance-type", "cpx22"),
        ("beta.kubernetes.io/instance-type", "cpx22"),
        ("topology.kubernetes.io/region", "nbg1"),
        ("failure-domain.beta.kubernetes.io/region", "nbg1"),
        ("topology.kubernetes.io/zone", "nbg1-dc3"),
        ("failure-domain.beta.kubernetes.io/zone", "nbg1-dc3"),
        ("instance.hetzner.cloud/provided-by", "cloud"),
    ] {
        assert_eq!(label(&node, key), Some(value), "label {key}");
    }
    // Other taints stay (the apiserver's TaintNodesByCondition admission adds `not-ready`).
    assert!(!has_taint(&node, UNINITIALIZED));
    assert!(has_taint(&node, "example.com/dedicated"));

    let expected = pairs(&[("Hostname", worker_1), ("ExternalIP", &server.ipv4())]);
    eventually("cloud addresses", WAIT, || async {
        let node = env.node(worker_1).await?;
        (addresses(&node) == expected).then_some(())
    })
    .await;

    let synced = eventually("a Synced event", WAIT, || async {
        env.events_with_reason(worker_1, "Synced")
            .await
            .into_iter()
            .next()
    })
    .await;
    assert_eq!(synced.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(synced.type_.as_deref(), Some("Normal"));
    assert_eq!(synced.involved_object.kind.as_deref(), Some("Node"));
    assert_eq!(synced.involved_object.uid, created.metadata.uid);
    assert_eq!(component(&synced), Some("cloud-node-controller"));
    assert!(
        env.events(worker_1)
            .await
            .iter()
            .all(|e| e.type_.as_deref() == Some("Normal")),
        "no warnings for a Node that matches its server"
    );
}

/// 2. A Node that already has a providerID is looked up by that ID, not by its name (which
/// matches no server).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_with_provider_id_is_initialized_from_that_server() {
    let mut env = Env::start().await;
    let cloud_name_7 = &*env.name("cloud-name-7");
    let other_server = &*env.name("other-server");
    let k8s_name_7 = &*env.name("k8s-name-7");
    // The Node's name matches no server, and another server exists besides the Node's.
    let server = env
        .server(
            ServerSeed::new(cloud_name_7)
                .server_type("cax11")
                .location("hel1"),
        )
        .await;
    env.server(ServerSeed::new(other_server).server_type("cx23"))
        .await;
    env.start_controllers(Setup::default()).await;
    KubeletNode::new(k8s_name_7)
        .provider_id(&server.provider_id())
        .create(&env)
        .await;

    let node = env.initialized(k8s_name_7).await;
    assert_eq!(provider_id(&node), Some(server.provider_id().as_str()));
    assert_eq!(
        label(&node, "node.kubernetes.io/instance-type"),
        Some("cax11")
    );
    assert_eq!(label(&node, "topology.kubernetes.io/region"), Some("hel1"));
    assert_eq!(
        label(&node, "topology.kubernetes.io/zone"),
        Some("hel1-dc2")
    );
    // The cloud reports the server name as Hostname, so the kubelet's is not kept.
    let expected = pairs(&[("Hostname", cloud_name_7), ("ExternalIP", &server.ipv4())]);
    eventually("cloud addresses", WAIT, || async {
        let node = env.node(k8s_name_7).await?;
        (addresses(&node) == expected).then_some(())
    })
    .await;
}

/// 3. No server for the Node: it stays tainted with a Warning event naming the cause
/// (`NoMatchingServer`: no server of its name, and no InternalIP to find one by); once
/// the server exists, the Node is initialized without any change to the Node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_server_keeps_the_node_tainted_until_the_server_appears() {
    let mut env = Env::start().await;
    let unrelated = &*env.name("unrelated");
    let late_node = &*env.name("late-node");
    env.server(ServerSeed::new(unrelated)).await;
    let running = env.start_controllers(Setup::default()).await;
    let observed = &running.observed;
    // Ready, so that the lifecycle controller leaves it alone: a NotReady Node whose server
    // does not exist is deleted (as upstream), which is test 4's subject.
    KubeletNode::new(late_node).ready("True").create(&env).await;

    let warning = eventually("a Warning about the missing server", WAIT, || async {
        env.events(late_node)
            .await
            .into_iter()
            .find(|e| e.type_.as_deref() == Some("Warning"))
    })
    .await;
    // The provider's Warning saying why: no server has its name, and it reports no InternalIP
    // a server could be found by.
    assert_eq!(warning.reason.as_deref(), Some("NoMatchingServer"));
    let message = warning.message.clone().unwrap_or_default();
    assert!(message.contains("no InternalIP"), "{message}");
    assert!(message.contains(late_node), "{message}");
    assert_eq!(component(&warning), Some("cloud-node-controller"));

    // Several retries later (the controller asked the cloud about this Node again), still
    // tainted and without providerID.
    let lookups = observed.calls(Call::Metadata, late_node).len();
    eventually("several more lookups of late-node", WAIT, || async {
        (observed.calls(Call::Metadata, late_node).len() >= lookups + 3).then_some(())
    })
    .await;
    let node = env.node(late_node).await.unwrap();
    assert!(has_taint(&node, UNINITIALIZED));
    assert_eq!(provider_id(&node), None);
    assert!(env.events_with_reason(late_node, "Synced").await.is_empty());

    let server = env.server(ServerSeed::new(late_node)).await;
    let node = env.initialized(late_node).await;
    assert_eq!(provider_id(&node), Some(server.provider_id().as_str()));
    eventually("a Synced event after recovery", WAIT, || async {
        let synced = env.events_with_reason(late_node, "Synced").await;
        (!synced.is_empty()).then_some(())
    })
    .await;
}

/// 4. A NotReady Node (Ready False, or Unknown) whose server was deleted is deleted with a
/// `DeletingNode` event; a Ready Node whose server was deleted is never checked, so it stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_of_a_deleted_server_is_deleted_only_when_not_ready() {
    let mut env = Env::start().await;
    let doomed_false = &*env.name("doomed-false");
    let doomed_unknown = &*env.name("doomed-unknown");
    let steady_ready = &*env.name("steady-ready");
    let mut servers = Vec::new();
    for name in [doomed_false, doomed_unknown, steady_ready] {
        servers.push(env.server(ServerSeed::new(name)).await);
    }
    // The listing is short-lived so that a deleted server shows up as deleted quickly, and
    // the deletion brake is off: all servers go at once here.
    let mut setup = Setup::default().max_age(Duration::from_secs(1));
    setup.lifecycle.deletion_max_share = 1.0;
    let running = env.start_controllers(setup).await;
    let observed = &running.observed;
    let mut nodes = Vec::new();
    for server in &servers {
        KubeletNode::new(server.name())
            .ready("True")
            .create(&env)
            .await;
    }
    for server in &servers {
        nodes.push(env.initialized(server.name()).await);
    }
    env.set_ready(doomed_false, "False").await;
    env.set_ready(doomed_unknown, "Unknown").await;
    // NotReady alone, with the server still there, deletes nothing: checked several times
    // (the existence checks are observed), never deleted.
    for name in [doomed_false, doomed_unknown] {
        let from = observed.calls(Call::Exists, name).len();
        eventually(
            &format!("several existence checks of {name}"),
            WAIT,
            || async { (observed.calls(Call::Exists, name).len() >= from + 3).then_some(()) },
        )
        .await;
    }
    assert_still_there(
        &env,
        &nodes.iter().collect::<Vec<_>>(),
        "while servers exist",
    )
    .await;

    for server in &servers {
        env.sim.admin().delete_server(server.id()).await.unwrap();
    }
    env.deleted(doomed_false).await;
    env.deleted(doomed_unknown).await;
    for (name, doomed) in [(doomed_false, &nodes[0]), (doomed_unknown, &nodes[1])] {
        let deleting = env.wait_events(name, "DeletingNode").await;
        assert_eq!(deleting.len(), 1, "{deleting:?}");
        assert_eq!(deleting[0].type_.as_deref(), Some("Normal"));
        assert_eq!(deleting[0].involved_object.uid, doomed.metadata.uid);
        assert_eq!(
            component(&deleting[0]),
            Some("cloud-node-lifecycle-controller")
        );
    }
    // Many more periods: the Ready Node stays. It costs no cloud call, so the lifecycle
    // controller's reconcile count (the only Node left) shows that the periods went by.
    let reconciled = running.metrics.reconcile_count(LIFECYCLE);
    eventually("many more lifecycle periods", WAIT, || async {
        (running.metrics.reconcile_count(LIFECYCLE) >= reconciled + 10).then_some(())
    })
    .await;
    assert_still_there(&env, &[&nodes[2]], "while Ready").await;
    assert!(
        env.events_with_reason(steady_ready, "DeletingNode")
            .await
            .is_empty()
    );
}

/// 5. A NotReady Node whose server is off gets the shutdown taint; powering the server on
/// does not remove it while the Node is NotReady, Ready does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn powered_off_server_taints_its_not_ready_node_until_ready_again() {
    let mut env = Env::start().await;
    let sleepy = &*env.name("sleepy");
    let server = env.server(ServerSeed::new(sleepy)).await;
    let running = env
        .start_controllers(Setup::default().max_age(Duration::from_secs(1)))
        .await;
    let observed = &running.observed;
    KubeletNode::new(sleepy).ready("True").create(&env).await;
    let created = env.initialized(sleepy).await;

    env.sim
        .admin()
        .set_server_status(server.id(), "off")
        .await
        .unwrap();
    // Ready nodes are not checked: no taint while the kubelet still reports Ready. The
    // lifecycle controller went over the Node (the only one) for several periods meanwhile.
    let reconciled = running.metrics.reconcile_count(LIFECYCLE);
    eventually("several lifecycle periods over sleepy", WAIT, || async {
        (running.metrics.reconcile_count(LIFECYCLE) >= reconciled + 5).then_some(())
    })
    .await;
    assert!(!has_taint(&env.node(sleepy).await.unwrap(), SHUTDOWN));

    env.set_ready(sleepy, "False").await;
    let tainted = eventually("the shutdown taint", WAIT, || async {
        env.node(sleepy).await.filter(|n| has_taint(n, SHUTDOWN))
    })
    .await;
    let taint = taints(&tainted)
        .into_iter()
        .find(|t| t.key == SHUTDOWN)
        .unwrap();
    assert_eq!(taint.effect, "NoSchedule");
    assert_eq!(taint.value.as_deref().unwrap_or_default(), "");
    assert_eq!(uid(&tainted), uid(&created), "a stopped server is not gone");

    env.sim
        .admin()
        .set_server_status(server.id(), "running")
        .await
        .unwrap();
    // The controller saw the server running (a shutdown check answered "not shut down") and
    // checked once more after that, so it acted on that answer before the check below.
    let from = observed.calls(Call::Shutdown, sleepy).len();
    eventually("a check that saw the server running", WAIT, || async {
        let answers: Vec<_> = observed.calls(Call::Shutdown, sleepy)[from..]
            .iter()
            .map(|o| o.answer.clone())
            .collect();
        let seen = answers.iter().position(|a| *a == Ok(false))?;
        (answers.len() > seen + 1).then_some(())
    })
    .await;
    assert!(
        has_taint(&env.node(sleepy).await.unwrap(), SHUTDOWN),
        "only Ready=True removes the shutdown taint"
    );

    env.set_ready(sleepy, "True").await;
    eventually("the shutdown taint removed", WAIT, || async {
        env.node(sleepy).await.filter(|n| !has_taint(n, SHUTDOWN))
    })
    .await;
}

/// 6. A sustained outage (503 answers, then requests that time out) over many monitor
/// periods deletes no Node, neither those whose servers exist nor those whose servers do not;
/// once the cloud answers again, the Nodes without servers are deleted and the others stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cloud_outage_deletes_no_node() {
    let mut env = Env::start().await;
    let alive_1 = &*env.name("alive-1");
    let alive_2 = &*env.name("alive-2");
    let ghost = &*env.name("ghost");
    let ghost_by_name = &*env.name("ghost-by-name");
    let alive = [
        env.server(ServerSeed::new(alive_1)).await,
        env.server(ServerSeed::new(alive_2)).await,
    ];
    let deleted_server = env.server(ServerSeed::new(ghost)).await;
    env.sim
        .admin()
        .delete_server(deleted_server.id())
        .await
        .unwrap();
    let setup = Setup {
        request_timeout: Duration::from_millis(150),
        ..Setup::default().max_age(Duration::from_millis(500))
    };
    let running = env.start_controllers(setup).await;
    let observed = &running.observed;
    let mut nodes = Vec::new();
    for server in &alive {
        KubeletNode::new(server.name())
            .ready("True")
            .create(&env)
            .await;
    }
    for server in &alive {
        nodes.push(env.initialized(server.name()).await);
    }

    let admin = env.sim.admin();
    admin
        .inject_fault(
            Fault::new("*")
                .status(503)
                .code("unavailable")
                .count(1_000_000),
        )
        .await
        .unwrap();
    env.set_ready(alive_1, "False").await;
    env.set_ready(alive_2, "Unknown").await;
    // Nodes whose servers do not exist: by providerID (server deleted) and by name.
    nodes.push(
        KubeletNode::new(ghost)
            .provider_id(&deleted_server.provider_id())
            .untainted()
            .ready("False")
            .create(&env)
            .await,
    );
    nodes.push(KubeletNode::new(ghost_by_name).create(&env).await);
    let all: Vec<&Node> = nodes.iter().collect();
    let names = [alive_1, alive_2, ghost, ghost_by_name];
    let checks = |name: &str| observed.calls(Call::Exists, name);

    // (phase, fault, duration in quarter seconds, failed checks expected per Node). Timeouts
    // are slow: each lookup waits for the request timeout twice (one retry), and lookups queue
    // behind each other on the provider's cache, so a Node is checked less often.
    let phases: [(&str, Fault, u32, usize); 2] = [
        (
            "a 503 outage",
            Fault::new("*")
                .status(503)
                .code("unavailable")
                .count(1_000_000),
            16,
            3,
        ),
        (
            "requests that time out",
            Fault::new("*")
                .latency(Duration::from_secs(3))
                .count(1_000_000),
            40,
            2,
        ),
    ];
    for (phase, fault, quarter_seconds, min_failed) in phases {
        // At once: a check between clearing and adding would get the cloud's real answer
        // ("no such server") and rightly delete the Nodes without servers mid-test.
        admin.replace_faults(&[fault]).await.unwrap();
        let before: Vec<usize> = names.iter().map(|n| checks(n).len()).collect();
        for _ in 0..quarter_seconds {
            tokio::time::sleep(Duration::from_millis(250)).await;
            assert_still_there(&env, &all, &format!("during {phase}")).await;
        }
        // Every Node was really checked during the phase, and the checks failed (a live
        // server may still be answered from a listing younger than the max age): the Nodes
        // survived failed checks, not an idle controller. `Ok(false)`, the only answer that
        // deletes, never came.
        for (name, from) in names.iter().zip(&before) {
            let answers: Vec<_> = checks(name)[*from..]
                .iter()
                .map(|o| o.answer.clone())
                .collect();
            let failed = answers.iter().filter(|a| a.is_err()).count();
            assert!(failed >= min_failed, "{phase}: {name}: {answers:?}");
            assert!(
                !answers.contains(&Ok(false)),
                "{phase}: {name}: {answers:?}"
            );
        }
    }
    for name in [ghost, ghost_by_name] {
        assert!(
            env.events_with_reason(name, "DeletingNode")
                .await
                .is_empty(),
            "{name}"
        );
        let lookup_failures = env.events_with_reason(name, "InstanceLookupFailed").await;
        assert!(
            lookup_failures
                .iter()
                .any(|e| component(e) == Some("cloud-node-lifecycle-controller")),
            "{name}: {lookup_failures:?}"
        );
    }

    admin.clear_faults().await.unwrap();
    env.deleted(ghost).await;
    // Without a providerID and with no server of its name or InternalIP, the Node may be no
    // cloud server at all: it is never deleted, and the Warning says why.
    eventually("the reason ghost-by-name is kept", WAIT, || async {
        env.events_with_reason(ghost_by_name, "InstanceLookupFailed")
            .await
            .into_iter()
            .find(|e| {
                e.message
                    .as_deref()
                    .is_some_and(|m| m.contains("never deleted"))
            })
    })
    .await;
    assert_still_there(&env, &all[3..], "without a providerID").await;
    // The Nodes whose servers exist are confirmed again, and stay.
    let before: Vec<usize> = names[..2].iter().map(|n| checks(n).len()).collect();
    eventually("fresh answers for the live servers", WAIT, || async {
        names[..2]
            .iter()
            .zip(&before)
            .all(|(name, from)| checks(name)[*from..].iter().any(|o| o.answer == Ok(true)))
            .then_some(())
    })
    .await;
    assert_still_there(&env, &all[..2], "after the outage").await;
}

/// 7. A NotReady Node whose server was created after the provider's last listing is not
/// deleted: a miss in the cached listing is never read as "the server is gone".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_of_a_server_newer_than_the_cache_is_not_deleted() {
    let mut env = Env::start().await;
    let early = &*env.name("early");
    let fresh = &*env.name("fresh");
    env.server(ServerSeed::new(early)).await;
    // Production cache settings.
    let setup = Setup {
        settings: ProviderSettings {
            zone_label_enabled: true,
            cache: CacheConfig::default(),
            ..ProviderSettings::default()
        },
        ..Setup::default()
    };
    let running = env.start_controllers(setup).await;
    KubeletNode::new(early).ready("True").create(&env).await;
    env.initialized(early).await;
    let cache = running.provider.hcloud_instances().cache();
    assert!(cache.listing_age().await.is_some(), "the listing is filled");

    let server = env.server(ServerSeed::new(fresh)).await;
    let fresh_node = KubeletNode::new(fresh).ready("False").create(&env).await;
    // The lifecycle controller checks the NotReady Node every period.
    eventually("three existence checks of the fresh node", WAIT, || async {
        let checks = running.observed.calls(Call::Exists, fresh);
        assert!(
            checks.iter().all(|c| c.answer == Ok(true)),
            "the server exists: {checks:?}"
        );
        assert_still_there(&env, &[&fresh_node], "because its server exists").await;
        (checks.len() >= 3).then_some(())
    })
    .await;
    assert!(
        env.events_with_reason(fresh, "DeletingNode")
            .await
            .is_empty()
    );
    // And it gets initialized from its server.
    let node = env.initialized(fresh).await;
    assert_eq!(provider_id(&node), Some(server.provider_id().as_str()));
}

/// 8. The address list for each `HCLOUD_INSTANCES_ADDRESS_FAMILY`, and the InternalIP from
/// the network named by `HCLOUD_NETWORK`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn addresses_follow_the_address_family_and_the_network() {
    let mut env = Env::start().await;
    let addr_v4 = &*env.name("addr-v4");
    let addr_v6 = &*env.name("addr-v6");
    let addr_dual = &*env.name("addr-dual");
    let addr_net = &*env.name("addr-net");
    let network = env
        .sim
        .admin()
        .create_network(NetworkSeed::new("k8s", "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central"))
        .await
        .unwrap();
    let other = env
        .sim
        .admin()
        .create_network(
            NetworkSeed::new("other", "10.1.0.0/16").subnet("10.1.0.0/24", "eu-central"),
        )
        .await
        .unwrap();
    let server = |name: &str| ServerSeed::new(name).network(network).network(other);
    let v4 = env.server(server(addr_v4)).await;
    let v6 = env.server(server(addr_v6)).await;
    let dual = env.server(server(addr_dual)).await;
    let net = env.server(server(addr_net)).await;

    let cases = [
        (
            AddressFamily::Ipv4,
            None,
            &v4,
            vec![
                ("Hostname", v4.name().to_owned()),
                ("ExternalIP", v4.ipv4()),
            ],
        ),
        (
            AddressFamily::Ipv6,
            None,
            &v6,
            vec![
                ("Hostname", v6.name().to_owned()),
                ("ExternalIP", v6.ipv6()),
            ],
        ),
        (
            AddressFamily::DualStack,
            None,
            &dual,
            vec![
                ("Hostname", dual.name().to_owned()),
                ("ExternalIP", dual.ipv4()),
                ("ExternalIP", dual.ipv6()),
            ],
        ),
        (
            AddressFamily::Ipv4,
            Some("k8s"),
            &net,
            vec![
                ("Hostname", net.name().to_owned()),
                ("ExternalIP", net.ipv4()),
                ("InternalIP", net.private_ip(network)),
            ],
        ),
    ];
    // One controller generation per setting, each on its own Node.
    for (family, network_name, server, expected) in cases {
        let mut setup = Setup::default();
        setup.settings.address_family = family;
        setup.settings.network = network_name.map(|n| NetworkRef::Name(n.to_owned()));
        let running = env.start_controllers(setup).await;
        KubeletNode::new(server.name()).create(&env).await;
        let expected: Vec<(String, String)> = expected
            .into_iter()
            .map(|(t, a)| (t.to_owned(), a))
            .collect();
        let name = server.name();
        eventually(
            &format!("{family} {network_name:?} addresses"),
            WAIT,
            || async {
                let node = env.node(name).await.filter(is_initialized)?;
                (addresses(&node) == expected).then_some(())
            },
        )
        .await;
        // Stable across periodic address refreshes: two more lookups of the Node, so the
        // refresh pass that began after the check above has finished (passes run one after
        // the other), writes included.
        let refreshes = running.observed.calls(Call::Metadata, name).len();
        eventually("two more address refreshes", WAIT, || async {
            (running.observed.calls(Call::Metadata, name).len() >= refreshes + 2).then_some(())
        })
        .await;
        assert_eq!(
            addresses(&env.node(name).await.unwrap()),
            expected,
            "{family} {network_name:?}"
        );
        env.stop_controllers().await;
        env.nodes().delete(name, &Default::default()).await.unwrap();
    }
}

/// 9. `alpha.kubernetes.io/provided-node-ip`: an IP the server has (its private IP) comes
/// first; an IP the server does not have keeps the Node tainted, with a Warning event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provided_node_ip_selects_the_address_or_blocks_initialization() {
    let mut env = Env::start().await;
    let pinned = &*env.name("pinned");
    let mismatched = &*env.name("mismatched");
    let network = env
        .sim
        .admin()
        .create_network(NetworkSeed::new("k8s", "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central"))
        .await
        .unwrap();
    let pinned_server = env.server(ServerSeed::new(pinned).network(network)).await;
    env.server(ServerSeed::new(mismatched).network(network))
        .await;
    let mut setup = Setup::default();
    setup.settings.network = Some(NetworkRef::Name("k8s".into()));
    let running = env.start_controllers(setup).await;
    let observed = &running.observed;

    let private = pinned_server.private_ip(network);
    KubeletNode::new(pinned)
        .node_ip(&private)
        .create(&env)
        .await;
    KubeletNode::new(mismatched)
        .node_ip("10.0.99.99")
        .create(&env)
        .await;

    let expected = pairs(&[
        ("InternalIP", &private),
        ("Hostname", pinned),
        ("ExternalIP", &pinned_server.ipv4()),
    ]);
    eventually("the provided node IP first", WAIT, || async {
        let node = env.node(pinned).await.filter(is_initialized)?;
        (addresses(&node) == expected).then_some(())
    })
    .await;

    let warning = eventually("a Warning about the node IP", WAIT, || async {
        env.events(mismatched)
            .await
            .into_iter()
            .find(|e| e.type_.as_deref() == Some("Warning"))
    })
    .await;
    let message = warning.message.clone().unwrap_or_default();
    assert!(message.contains("10.0.99.99"), "{message}");
    // Later on nothing has changed: the Node stays tainted. Progress first: the failed sync
    // of this Node was counted (a user error, so it waits for the Node to change), and the
    // controller went on working (two more address refreshes of the other Node).
    eventually("the failed sync of mismatched counted", WAIT, || async {
        let failed = running
            .metrics
            .error_count(cloud_provider::node::CONTROLLER, "provided_node_ip");
        (failed >= 1).then_some(())
    })
    .await;
    let refreshes = observed.calls(Call::Metadata, pinned).len();
    eventually("two more address refreshes of pinned", WAIT, || async {
        (observed.calls(Call::Metadata, pinned).len() >= refreshes + 2).then_some(())
    })
    .await;
    let node = env.node(mismatched).await.unwrap();
    assert!(has_taint(&node, UNINITIALIZED));
    assert!(
        env.events_with_reason(mismatched, "Synced")
            .await
            .is_empty()
    );
}

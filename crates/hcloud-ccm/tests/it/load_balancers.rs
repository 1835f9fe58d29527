//! The service controller through the real binary: a Service of type LoadBalancer gets a
//! Hetzner load balancer (labelled with the Service UID, one service per port to the NodePort,
//! the Node's server as target) and the load balancer's address in its status; deleting the
//! Service deletes the load balancer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::ccm;

use std::time::Duration;

use ccm::{TOKEN, spawn_ccm};
use hcloud_sim::{NetworkSeed, ServerSeed, SimConfig, Simulator};
use k8s_openapi::api::core::v1::{Node, NodeSpec, Service, ServicePort, ServiceSpec};
use kube::api::{DeleteParams, ObjectMeta};
use kube_harness::eventually;

use crate::support::scope::Scope;

#[tokio::test]
async fn a_load_balancer_service_gets_a_hetzner_load_balancer() {
    let scope = Scope::new("lb").await;
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    let name = scope.name("web-1");
    let server = sim
        .admin()
        .create_server(ServerSeed::new(&name))
        .await
        .unwrap();
    let server_id = server["id"].as_i64().unwrap();

    let access = scope.admin_access("ccm").await;
    let _ccm = spawn_ccm(
        &access.kubeconfig,
        &sim,
        &[("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1")],
        &[&scope.lease_flag()],
    );

    scope
        .create_node(Node {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some(format!("hcloud://{server_id}")),
                ..NodeSpec::default()
            }),
            status: None,
        })
        .await;

    let services = scope.services();
    let service = Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: 80,
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    };
    let created = scope.create_service(service).await;
    let uid = created.metadata.uid.clone().unwrap();

    let admin_api = sim.admin();
    let lb = eventually("the load balancer", Duration::from_secs(40), || async {
        let state = admin_api.state().await.unwrap();
        state["load_balancers"]
            .as_array()
            .and_then(|lbs| lbs.first().cloned())
            .filter(|lb| !lb["targets"].as_array().is_none_or(|t| t.is_empty()))
    })
    .await;
    assert_eq!(lb["labels"]["hcloud-ccm/service-uid"], uid.as_str());
    let expected_name: String = std::iter::once('a')
        .chain(uid.chars().filter(|c| *c != '-'))
        .take(32)
        .collect();
    assert_eq!(lb["name"], expected_name.as_str());
    assert_eq!(lb["services"][0]["listen_port"], 80);
    // The node port is the one the apiserver picked.
    let node_port = created.spec.as_ref().unwrap().ports.as_ref().unwrap()[0].node_port;
    assert!(node_port.is_some(), "{created:?}");
    assert_eq!(lb["services"][0]["destination_port"], node_port.unwrap());
    assert_eq!(lb["targets"][0]["server"]["id"], server_id);

    let ingress = ingress(&services, "web").await;
    // IPs are assigned when the create action finishes; read the load balancer again.
    let state = admin_api.state().await.unwrap();
    let public_ip = state["load_balancers"][0]["public_net"]["ipv4"]["ip"]
        .as_str()
        .map(str::to_owned);
    assert!(public_ip.is_some(), "{state}");
    let reported: Vec<Option<String>> = ingress.iter().map(|i| i.ip.clone()).collect();
    assert!(
        reported.contains(&public_ip),
        "{reported:?} vs {public_ip:?}"
    );

    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the Service and its load balancer gone",
        Duration::from_secs(40),
        || async {
            let gone = services.get_opt("web").await.unwrap().is_none();
            let state = admin_api.state().await.unwrap();
            let lbs_left = state["load_balancers"].as_array().map_or(0, Vec::len);
            (gone && lbs_left == 0).then_some(())
        },
    )
    .await;
}

/// The status ingress of the Service `name`, once it has one.
async fn ingress(
    services: &kube::Api<Service>,
    name: &str,
) -> Vec<k8s_openapi::api::core::v1::LoadBalancerIngress> {
    eventually("status ingress", Duration::from_secs(40), || async {
        services
            .get(name)
            .await
            .unwrap()
            .status
            .and_then(|s| s.load_balancer)
            .and_then(|lb| lb.ingress)
            .filter(|i| !i.is_empty())
    })
    .await
}

/// The Warning events with `reason` on the Service `name` of `setup`'s scope, once there is
/// one.
async fn warnings(
    setup: &crate::load_balancer_races::Setup,
    name: &str,
    reason: &str,
) -> Vec<k8s_openapi::api::core::v1::Event> {
    eventually(reason, Duration::from_secs(40), || async {
        let found =
            crate::support::events(&setup.admin, setup.scope.namespace(), name, reason).await;
        Some(found).filter(|f| !f.is_empty())
    })
    .await
}

fn message(events: &[k8s_openapi::api::core::v1::Event]) -> String {
    events
        .iter()
        .map(|e| {
            assert_eq!(e.type_.as_deref(), Some("Warning"), "{e:?}");
            e.message.clone().unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn ignored_source_ranges_a_typo_and_a_location_change_get_warnings_not_failures() {
    let setup = crate::load_balancer_races::Setup::start(1, &[]).await;
    setup.add_node(0).await;
    let service: Service = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "web",
            "annotations": {
                "load-balancer.hetzner.cloud/health-check-intervall": "5s",
            },
        },
        "spec": {
            "type": "LoadBalancer",
            "loadBalancerSourceRanges": ["203.0.113.0/24"],
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
        },
    }))
    .unwrap();
    setup.scope.create_service(service).await;

    // The load balancer is made and the status written: a Warning is no failed sync.
    let services = setup.scope.services();
    ingress(&services, "web").await;
    let ranges = message(&warnings(&setup, "web", "LoadBalancerSourceRangesIgnored").await);
    assert!(
        ranges.starts_with("spec.loadBalancerSourceRanges is ignored: Hetzner Cloud load balancers have no access control list"),
        "{ranges}"
    );
    assert!(ranges.contains("Hetzner Cloud Firewall"), "{ranges}");
    let typo = message(&warnings(&setup, "web", "UnknownAnnotation").await);
    assert!(
        typo.contains("load-balancer.hetzner.cloud/health-check-intervall is not one this CCM reads and is ignored; the closest known key is load-balancer.hetzner.cloud/health-check-interval"),
        "{typo}"
    );
    let failed = crate::support::events(
        &setup.admin,
        setup.scope.namespace(),
        "web",
        "SyncLoadBalancerFailed",
    )
    .await;
    assert!(failed.is_empty(), "{failed:?}");

    // Asking for another location later moves nothing: a Warning says how to move it.
    let lb = setup.load_balancers().await.remove(0);
    let here = lb["location"]["name"].as_str().unwrap().to_owned();
    assert_eq!(here, "fsn1");
    services
        .patch(
            "web",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({
                "metadata": {"annotations": {"load-balancer.hetzner.cloud/location": "nbg1"}},
            })),
        )
        .await
        .unwrap();
    let moved = message(&warnings(&setup, "web", "LoadBalancerNotMoved").await);
    assert!(
        moved.contains("load-balancer.hetzner.cloud/location: load balancer")
            && moved.contains("stays in fsn1, not nbg1")
            && moved.contains("delete and re-create the Service"),
        "{moved}"
    );
    let after = setup.load_balancers().await;
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(after[0]["id"], lb["id"]);
    assert_eq!(after[0]["location"]["name"], "fsn1");
}

/// A Service named `name` asking for the load balancer `lb_name`, with `annotations` beside.
fn named_service(name: &str, lb_name: &str, annotations: &[(&str, &str)]) -> Service {
    let mut all: std::collections::BTreeMap<String, String> = annotations
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    all.insert("load-balancer.hetzner.cloud/name".into(), lb_name.into());
    Service {
        metadata: ObjectMeta {
            name: Some(name.into()),
            annotations: Some(all),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: 80,
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

#[tokio::test]
async fn a_re_created_service_adopts_its_load_balancer_and_a_live_services_one_is_refused() {
    let setup = crate::load_balancer_races::Setup::start(1, &[]).await;
    setup.add_node(0).await;
    let services = setup.scope.services();
    let lb_named = |name: &'static str| {
        let setup = &setup;
        move || async move {
            setup
                .load_balancers()
                .await
                .into_iter()
                .find(|lb| lb["name"] == name)
        }
    };

    // A Service whose load balancer outlives it: delete protection keeps it, labelled with
    // the deleted Service's UID.
    let protected = [("load-balancer.hetzner.cloud/protection-delete", "true")];
    let first = setup
        .scope
        .create_service(named_service("web", "kept", &protected))
        .await;
    let old_uid = first.metadata.uid.clone().unwrap();
    let lb = eventually(
        "the protected load balancer",
        Duration::from_secs(40),
        || async {
            lb_named("kept")()
                .await
                .filter(|lb| lb["protection"]["delete"] == true)
        },
    )
    .await;
    assert_eq!(lb["labels"]["hcloud-ccm/service-uid"], old_uid.as_str());
    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the Service gone", Duration::from_secs(40), || async {
        services
            .get_opt("web")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    assert_eq!(
        lb_named("kept")().await.unwrap()["labels"]["hcloud-ccm/service-uid"],
        old_uid.as_str(),
        "kept with the old label"
    );

    // Re-created with the same name annotation: the load balancer is adopted and relabelled.
    let again = setup
        .scope
        .create_service(named_service("web", "kept", &protected))
        .await;
    let new_uid = again.metadata.uid.clone().unwrap();
    assert_ne!(new_uid, old_uid);
    let adopted = eventually(
        "the load balancer adopted",
        Duration::from_secs(40),
        || async {
            lb_named("kept")()
                .await
                .filter(|lb| lb["labels"]["hcloud-ccm/service-uid"] == new_uid.as_str())
        },
    )
    .await;
    assert_eq!(
        adopted["id"], lb["id"],
        "the same load balancer, not a new one"
    );
    ingress(&services, "web").await;
    assert_eq!(setup.load_balancers().await.len(), 1);

    // A second Service asking for the live Service's load balancer is refused, and it stays
    // the live Service's.
    setup
        .scope
        .create_service(named_service("intruder", "kept", &[]))
        .await;
    let refused = message(&warnings(&setup, "intruder", "LoadBalancerOwnedByOtherService").await);
    assert!(
        refused.contains(&format!("belongs to the Service with UID {new_uid}"))
            && refused.contains("which exists in this cluster"),
        "{refused}"
    );
    let still = lb_named("kept")().await.unwrap();
    assert_eq!(still["labels"]["hcloud-ccm/service-uid"], new_uid.as_str());
    assert_eq!(setup.load_balancers().await.len(), 1);
}

/// Servers without a public IPv4: one in the load balancer's network becomes a target over
/// it, one in no network is left out with a Warning on its Node, and the load balancer is made
/// with the others (the official CCM fails the whole target update instead).
#[tokio::test]
async fn servers_without_a_public_ipv4_are_reached_over_the_network_or_left_out_with_a_warning() {
    let scope = Scope::new("lb-nov4").await;
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    let admin = sim.admin();
    let network_name = scope.name("net");
    let network = admin
        .create_network(
            NetworkSeed::new(&network_name, "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central"),
        )
        .await
        .unwrap();
    let mut ids = std::collections::BTreeMap::new();
    for (suffix, public_ipv4, in_network) in [
        ("public", true, true),
        ("private", false, true),
        ("isolated", false, false),
    ] {
        let id = ccm::create_server(
            &sim,
            &scope.name(suffix),
            public_ipv4,
            in_network.then_some(network),
        )
        .await;
        ids.insert(suffix, id);
    }

    let access = scope.admin_access("ccm").await;
    let _ccm = spawn_ccm(
        &access.kubeconfig,
        &sim,
        &[
            ("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1"),
            ("HCLOUD_NETWORK", &network_name),
            ("HCLOUD_NETWORK_ROUTES_ENABLED", "false"),
            ("HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK", "true"),
        ],
        &[&scope.lease_flag()],
    );
    // Nodes as kubelets register them; their initialisation reads their servers (the server
    // cache then knows which have a public IPv4, and the load balancer asks nothing more).
    let nodes = scope.nodes();
    for suffix in ids.keys() {
        let name = scope.name(suffix);
        scope.register_node(&name, None).await;
        eventually(
            &format!("Node {name} initialised"),
            Duration::from_secs(40),
            || async {
                let node = nodes.get(&name).await.unwrap();
                (!kube_harness::has_taint(&node, kube_harness::UNINITIALIZED_TAINT)).then_some(())
            },
        )
        .await;
    }

    scope.create_service(ccm::lb_service("web", &[])).await;
    let services = scope.services();
    ingress(&services, "web").await;
    let state = admin.state().await.unwrap();
    let lb = &state["load_balancers"][0];
    let targets: Vec<(i64, bool)> = lb["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["server"]["id"].as_i64().unwrap(),
                t["use_private_ip"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    let mut want = vec![(ids["public"], false), (ids["private"], true)];
    want.sort_unstable();
    let mut got = targets.clone();
    got.sort_unstable();
    assert_eq!(got, want, "{lb:#}");
    assert_eq!(
        lb["private_net"][0]["network"], network,
        "attached to the network: {lb:#}"
    );

    let isolated = scope.name("isolated");
    let warned = eventually(
        "the Warning on the isolated Node",
        Duration::from_secs(40),
        || async {
            let found = crate::support::events(
                &scope.admin,
                "default",
                &isolated,
                "ServerWithoutPublicIPv4",
            )
            .await;
            Some(found).filter(|f| !f.is_empty())
        },
    )
    .await;
    let text = message(&warned);
    assert!(
        text.contains("has no public IPv4 and is not attached to the load balancer's network"),
        "{text}"
    );
    let failed = crate::support::events(
        &scope.admin,
        scope.namespace(),
        "web",
        "SyncLoadBalancerFailed",
    )
    .await;
    assert!(failed.is_empty(), "{failed:?}");
}

/// Graceful drain, both opt-ins: a cordoned Node leaves the load balancer and comes back when
/// uncordoned, and a Service asking for kube-proxy's health check gets it on every port.
#[tokio::test]
async fn a_cordoned_node_leaves_the_load_balancer_and_kube_proxy_checks_the_targets() {
    let setup = crate::load_balancer_races::Setup::start(
        2,
        &["--hcloud-load-balancers-exclude-cordoned-nodes=true"],
    )
    .await;
    setup.add_node(0).await;
    setup.add_node(1).await;
    setup
        .scope
        .create_service(ccm::lb_service(
            "web",
            &[("health-check-kube-proxy", "true")],
        ))
        .await;
    let targets = || async {
        setup
            .load_balancers()
            .await
            .first()
            .map(|lb| lb["targets"].as_array().map_or(0, Vec::len))
    };
    eventually("both Nodes targets", Duration::from_secs(40), || async {
        (targets().await == Some(2)).then_some(())
    })
    .await;
    let lb = setup.load_balancers().await.remove(0);
    let check = &lb["services"][0]["health_check"];
    assert_eq!(check["protocol"], "http", "{lb:#}");
    assert_eq!(check["port"], 10256, "{lb:#}");
    assert_eq!(check["http"]["path"], "/healthz", "{lb:#}");

    let nodes = setup.scope.nodes();
    let node = setup.scope.name("node-0");
    let cordon = |on: bool| {
        let nodes = nodes.clone();
        let node = node.clone();
        async move {
            nodes
                .patch(
                    &node,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(serde_json::json!({"spec": {"unschedulable": on}})),
                )
                .await
                .unwrap();
        }
    };
    cordon(true).await;
    eventually(
        "the cordoned Node gone from the targets",
        Duration::from_secs(40),
        || async { (targets().await == Some(1)).then_some(()) },
    )
    .await;
    cordon(false).await;
    eventually(
        "the uncordoned Node back",
        Duration::from_secs(40),
        || async { (targets().await == Some(2)).then_some(()) },
    )
    .await;
}

/// The certificate IDs the services of every load balancer in the simulator's `state` carry.
fn carried_certificates(state: &serde_json::Value) -> Vec<i64> {
    state["load_balancers"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|lb| lb["services"].as_array().cloned().unwrap_or_default())
        .flat_map(|s| {
            s["http"]["certificates"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|id| id.as_i64())
        .collect()
}

/// The domains of a Service's managed certificate edited through the apiserver: a second
/// certificate for the new domains is issued and carried, and the first one is deleted once
/// no service carries it (the official CCM keeps serving the first one).
#[tokio::test]
async fn edited_managed_certificate_domains_are_served_by_a_new_certificate() {
    let setup = crate::load_balancer_races::Setup::start(1, &[]).await;
    setup.add_node(0).await;
    let managed = |domains: &str| {
        ccm::lb_service(
            "shop",
            &[
                ("protocol", "https"),
                ("certificate-type", "managed"),
                ("http-managed-certificate-domains", domains),
            ],
        )
    };
    setup.scope.create_service(managed("a.example.com")).await;
    let admin = setup.sim.admin();
    // (certificate IDs the load balancer's services carry, every certificate's domains)
    let seen = || async {
        let state = admin.state().await.unwrap();
        let carried = carried_certificates(&state);
        let certificates: Vec<(i64, Vec<String>)> = state["certificates"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let mut domains: Vec<String> = c["domain_names"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|d| d.as_str().map(str::to_owned))
                    .collect();
                domains.sort();
                (c["id"].as_i64().unwrap_or_default(), domains)
            })
            .collect();
        (carried, certificates)
    };
    let first = eventually(
        "the first certificate carried",
        Duration::from_secs(40),
        || async {
            let (carried, certificates) = seen().await;
            match (carried.as_slice(), certificates.as_slice()) {
                ([id], [(cert, domains)]) if id == cert && domains == &["a.example.com"] => {
                    Some(*id)
                }
                _ => None,
            }
        },
    )
    .await;

    setup
        .scope
        .services()
        .patch(
            "shop",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"metadata": {"annotations": {
                "load-balancer.hetzner.cloud/http-managed-certificate-domains": "a.example.com,b.example.com",
            }}})),
        )
        .await
        .unwrap();
    eventually(
        "the new certificate carried, the old one gone",
        Duration::from_secs(40),
        || async {
            let (carried, certificates) = seen().await;
            match (carried.as_slice(), certificates.as_slice()) {
                ([id], [(cert, domains)])
                    if id == cert
                        && *id != first
                        && domains == &["a.example.com", "b.example.com"] =>
                {
                    Some(())
                }
                _ => None,
            }
        },
    )
    .await;
}

/// A Service naming a `kubernetes.io/tls` Secret of its namespace: the Secret is uploaded as a
/// certificate (labelled with the Secret) that the https service carries; the Secret renewed
/// through the apiserver (as cert-manager renews it), the new content is uploaded and carried,
/// and the old upload is deleted once no service carries it.
#[tokio::test]
async fn a_tls_secret_is_served_and_its_renewal_swapped_in() {
    let setup = crate::load_balancer_races::Setup::start(1, &[]).await;
    setup.add_node(0).await;
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(setup.admin.clone(), setup.scope.namespace());
    secrets
        .create(
            &kube::api::PostParams::default(),
            &crate::support::tls_secret("shop-tls", "shop.example.com"),
        )
        .await
        .unwrap();
    setup
        .scope
        .create_service(ccm::lb_service(
            "shop",
            &[
                ("protocol", "https"),
                ("http-certificate-secret", "shop-tls"),
            ],
        ))
        .await;
    let admin = setup.sim.admin();
    // (certificate IDs the load balancer's services carry, every certificate's ID and its
    // Secret label)
    let seen = || async {
        let state = admin.state().await.unwrap();
        let carried = carried_certificates(&state);
        let certificates: Vec<(i64, String)> = state["certificates"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                (
                    c["id"].as_i64().unwrap_or_default(),
                    c["labels"]["hcloud-ccm/tls-secret"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                )
            })
            .collect();
        (carried, certificates)
    };
    let first = eventually(
        "the Secret's certificate carried",
        Duration::from_secs(40),
        || async {
            match seen().await {
                (carried, certificates)
                    if carried.len() == 1
                        && certificates == [(carried[0], "shop-tls".to_owned())] =>
                {
                    Some(carried[0])
                }
                _ => None,
            }
        },
    )
    .await;

    let renewed = crate::support::tls_secret("shop-tls", "shop.example.com");
    secrets
        .patch(
            "shop-tls",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({ "data": renewed.data })),
        )
        .await
        .unwrap();
    eventually(
        "the renewal carried, the old upload gone",
        Duration::from_secs(40),
        || async {
            match seen().await {
                (carried, certificates)
                    if carried.len() == 1
                        && carried[0] != first
                        && certificates == [(carried[0], "shop-tls".to_owned())] =>
                {
                    Some(())
                }
                _ => None,
            }
        },
    )
    .await;
}

/// Services sharing one load balancer through the apiserver: the second adds its port to the
/// first one's load balancer; a third asking for a port the first holds gets a Warning naming
/// the port and that Service, and nothing changes; deleting the first removes only its port,
/// and the load balancer goes with the last owner.
#[tokio::test]
async fn services_share_a_load_balancer_and_it_goes_with_the_last_one() {
    let setup = crate::load_balancer_races::Setup::start(1, &[]).await;
    setup.add_node(0).await;
    let on_port = |name: &str, port: i32| {
        let mut service = ccm::lb_service(name, &[("shared-load-balancer", "shop-lb")]);
        if let Some(ports) = service.spec.as_mut().and_then(|s| s.ports.as_mut()) {
            ports[0].port = port;
        }
        service
    };
    let admin = setup.sim.admin();
    // (name, listen ports) of every load balancer
    let load_balancers = || async {
        let state = admin.state().await.unwrap();
        state["load_balancers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|lb| {
                let mut ports: Vec<i64> = lb["services"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s["listen_port"].as_i64())
                    .collect();
                ports.sort_unstable();
                (lb["name"].as_str().unwrap_or_default().to_owned(), ports)
            })
            .collect::<Vec<_>>()
    };
    let services = setup.scope.services();
    setup.scope.create_service(on_port("web", 80)).await;
    ingress(&services, "web").await;
    setup.scope.create_service(on_port("api", 443)).await;
    let api = ingress(&services, "api").await;
    assert_eq!(api, ingress(&services, "web").await, "one load balancer");
    assert_eq!(
        load_balancers().await,
        [("shop-lb".to_owned(), vec![80, 443])]
    );

    setup.scope.create_service(on_port("clash", 80)).await;
    let refused = warnings(&setup, "clash", "SyncLoadBalancerFailed").await;
    let said = message(&refused);
    assert!(
        said.contains(&format!(
            "port 80 is the Service {}/web",
            setup.scope.namespace()
        )),
        "{said}"
    );
    assert_eq!(
        load_balancers().await,
        [("shop-lb".to_owned(), vec![80, 443])]
    );
    services
        .delete("clash", &DeleteParams::default())
        .await
        .unwrap();

    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually("web's port gone", Duration::from_secs(40), || async {
        (load_balancers().await == [("shop-lb".to_owned(), vec![443])]).then_some(())
    })
    .await;
    services
        .delete("api", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the load balancer gone with its last owner",
        Duration::from_secs(40),
        || async { load_balancers().await.is_empty().then_some(()) },
    )
    .await;
}

//! The service controller under stress, through the real binary against the control plane and
//! the Hetzner simulator: Node changes racing slow ensures, a burst of Service deletions, and a
//! load balancer that stays `locked` for a while. Every request is counted at the simulator.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::ccm;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::time::{Duration, Instant};

use ccm::{BIN, TOKEN};
use hcloud_sim::{Fault, ServerSeed, SimConfig, Simulator};
use k8s_openapi::api::core::v1::{Node, NodeSpec, Service, ServicePort, ServiceSpec};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams};
use kube_harness::eventually;
use serde_json::{Value, json};

use crate::support::scope::{Access, Scope};

const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";
const EXCLUDE_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

pub(crate) struct Setup {
    pub(crate) scope: Scope,
    pub(crate) admin: kube::Client,
    pub(crate) sim: Simulator,
    servers: Vec<i64>,
    _access: Access,
    _ccm: tokio::process::Child,
}

impl Setup {
    /// A scope of the shared control plane, a simulator with `servers` servers and the binary
    /// running with `args` (load balancers in fsn1, no metrics port, no secure port).
    pub(crate) async fn start(servers: usize, args: &[&str]) -> Setup {
        let scope = Scope::new("races").await;
        let admin = scope.admin.clone();
        let sim = Simulator::start(SimConfig::default().token(TOKEN))
            .await
            .unwrap();
        let mut ids = Vec::new();
        for i in 0..servers {
            let server = sim
                .admin()
                .create_server(ServerSeed::new(scope.name(&format!("node-{i}"))))
                .await
                .unwrap();
            ids.push(server["id"].as_i64().unwrap());
        }
        let access = scope.admin_access("ccm").await;
        let ccm = tokio::process::Command::new(BIN)
            .env_clear()
            .env("HCLOUD_TOKEN", TOKEN)
            .env("HCLOUD_ENDPOINT", sim.base_url())
            .env("HCLOUD_METRICS_ENABLED", "false")
            .env("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1")
            .arg("--cloud-provider=hcloud")
            .arg(format!("--kubeconfig={}", access.kubeconfig.display()))
            .arg(scope.lease_flag())
            .arg("--secure-port=0")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        Setup {
            scope,
            admin,
            sim,
            servers: ids,
            _access: access,
            _ccm: ccm,
        }
    }

    fn nodes(&self) -> Api<Node> {
        self.scope.nodes()
    }

    fn services(&self) -> Api<Service> {
        self.scope.services()
    }

    /// The name of the Node of server `i`: `<scope>-node-<i>`, as the server's.
    fn node(&self, i: usize) -> String {
        self.scope.name(&format!("node-{i}"))
    }

    /// Node `<scope>-node-<i>` on server `i`.
    pub(crate) async fn add_node(&self, i: usize) {
        let node = Node {
            metadata: ObjectMeta {
                name: Some(self.node(i)),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some(format!("hcloud://{}", self.servers[i])),
                ..NodeSpec::default()
            }),
            status: None,
        };
        self.scope.create_node(node).await;
    }

    async fn add_service(&self, name: &str) {
        let service = Service {
            metadata: ObjectMeta {
                name: Some(name.into()),
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
        self.scope.create_service(service).await;
    }

    pub(crate) async fn load_balancers(&self) -> Vec<Value> {
        let state = self.sim.admin().state().await.unwrap();
        state["load_balancers"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Server IDs of the scope's eligible Nodes, as the apiserver has them now.
    async fn eligible_servers(&self) -> BTreeSet<i64> {
        self.nodes()
            .list(&self.scope.list_params())
            .await
            .unwrap()
            .items
            .iter()
            .filter(|n| n.metadata.deletion_timestamp.is_none())
            .filter(|n| {
                !n.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(EXCLUDE_LABEL))
            })
            .filter_map(|n| {
                n.spec
                    .as_ref()?
                    .provider_id
                    .as_deref()?
                    .strip_prefix("hcloud://")
            })
            .map(|id| id.parse().unwrap())
            .collect()
    }

    /// Services of the namespace that have an ingress address.
    async fn services_with_ingress(&self) -> usize {
        self.services()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .filter(|s| {
                s.status
                    .as_ref()
                    .and_then(|s| s.load_balancer.as_ref())
                    .and_then(|lb| lb.ingress.as_ref())
                    .is_some_and(|i| !i.is_empty())
            })
            .count()
    }
}

fn target_servers(lb: &Value) -> BTreeSet<i64> {
    lb["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["server"]["id"].as_i64())
        .collect()
}

fn add_target_requests(counts: &BTreeMap<String, u64>) -> u64 {
    counts
        .iter()
        .filter(|(key, _)| key.starts_with("POST ") && key.ends_with("/actions/add_target"))
        .map(|(_, n)| n)
        .sum()
}

#[tokio::test]
async fn node_changes_racing_slow_ensures_end_with_every_target_set_equal_to_the_eligible_nodes() {
    let setup = Setup::start(6, &["--concurrent-service-syncs=3"]).await;
    for i in 0..3 {
        setup.add_node(i).await;
    }
    // Every load balancer request and action is slow, so ensures and target updates overlap
    // with the Node changes below.
    setup
        .sim
        .admin()
        .inject_fault(
            Fault::new("/load_balancers*")
                .latency(Duration::from_millis(400))
                .count(150),
        )
        .await
        .unwrap();
    for i in 0..4 {
        setup.add_service(&format!("web-{i}")).await;
    }
    eventually(
        "the first load balancer exists",
        Duration::from_secs(60),
        || async { (!setup.load_balancers().await.is_empty()).then_some(()) },
    )
    .await;

    // While the other ensures still run: two Nodes come, one goes, one is excluded, one comes
    // and goes again.
    setup.add_node(3).await;
    setup.add_node(4).await;
    setup
        .nodes()
        .delete(&setup.node(0), &DeleteParams::default())
        .await
        .unwrap();
    setup
        .nodes()
        .patch(
            &setup.node(1),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {EXCLUDE_LABEL: "true"}}})),
        )
        .await
        .unwrap();
    setup.add_node(5).await;
    setup
        .nodes()
        .delete(&setup.node(5), &DeleteParams::default())
        .await
        .unwrap();

    let eligible = setup.eligible_servers().await;
    let expected: BTreeSet<i64> = [2, 3, 4].iter().map(|&i| setup.servers[i]).collect();
    assert_eq!(eligible, expected);
    let lbs = eventually(
        "every load balancer targets exactly the eligible nodes",
        Duration::from_secs(120),
        || async {
            let lbs = setup.load_balancers().await;
            (lbs.len() == 4 && lbs.iter().all(|lb| target_servers(lb) == expected)).then_some(lbs)
        },
    )
    .await;
    for lb in &lbs {
        assert!(lb["labels"]["hcloud-ccm/service-uid"].is_string(), "{lb}");
    }
    eventually(
        "every Service has its address",
        Duration::from_secs(60),
        || async { (setup.services_with_ingress().await == 4).then_some(()) },
    )
    .await;
    // Settled: the latest target update is the one that stays.
    setup.sim.admin().clear_faults().await.unwrap();
    for lb in setup.load_balancers().await {
        assert_eq!(target_servers(&lb), expected, "{lb}");
    }
}

/// A create that failed after the API made the load balancer (its answer lost on the way
/// back, its action failed, the read after it failed), then the Service is deleted at once:
/// the load balancer is found by its label and deleted before the Service lets go of it.
#[tokio::test]
async fn a_service_deleted_right_after_a_failed_create_leaves_no_load_balancer() {
    let setup = Setup::start(1, &[]).await;
    setup.add_node(0).await;
    let faults = [
        (
            "lost answer",
            Fault::new("/load_balancers").method("POST").lose_reply(),
        ),
        (
            "failed action",
            Fault::new("/load_balancers").method("POST").fail_action(),
        ),
        (
            "failed read",
            Fault::new("/load_balancers/{id}").method("GET").status(503),
        ),
    ];
    for (i, (what, fault)) in faults.into_iter().enumerate() {
        let name = format!("failed-{i}");
        setup.sim.admin().reset_request_counts().await.unwrap();
        setup.sim.admin().inject_fault(fault).await.unwrap();
        setup.add_service(&name).await;
        let uid = setup
            .services()
            .get(&name)
            .await
            .unwrap()
            .metadata
            .uid
            .unwrap();
        // The API made the load balancer and the fault was used up on it.
        eventually(what, Duration::from_secs(30), || async {
            let made = setup
                .load_balancers()
                .await
                .iter()
                .any(|lb| lb["labels"]["hcloud-ccm/service-uid"] == uid.as_str());
            let used = setup.sim.admin().faults().await.unwrap().is_empty();
            (made && used).then_some(())
        })
        .await;
        setup
            .services()
            .delete(&name, &DeleteParams::default())
            .await
            .unwrap();
        eventually("the Service is gone", Duration::from_secs(60), || async {
            setup
                .services()
                .get_opt(&name)
                .await
                .unwrap()
                .is_none()
                .then_some(())
        })
        .await;
        let left: Vec<Value> = setup
            .load_balancers()
            .await
            .into_iter()
            .filter(|lb| lb["labels"]["hcloud-ccm/service-uid"] == uid.as_str())
            .collect();
        assert!(
            left.is_empty(),
            "{what}: the load balancer leaked: {left:#?}"
        );
    }
}

/// An HTTPS Service names a certificate that is uploaded only after the sync has failed and
/// been retried twice. The sync is retried with growing delays (one Warning for the one reason,
/// not one per retry) and ends with the HTTPS service on the load balancer, without anyone
/// touching the Service.
#[tokio::test]
async fn a_certificate_uploaded_after_its_service_ends_on_the_load_balancer() {
    let setup = Setup::start(1, &[]).await;
    setup.add_node(0).await;
    let service: Service = serde_json::from_value(json!({
        "metadata": {
            "name": "secure",
            "annotations": {
                "load-balancer.hetzner.cloud/protocol": "https",
                "load-balancer.hetzner.cloud/http-certificates": "shop-cert",
            },
        },
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP"}],
        },
    }))
    .unwrap();
    let created = setup.scope.create_service(service).await;
    let failures = || async {
        let events: Api<k8s_openapi::api::core::v1::Event> =
            Api::namespaced(setup.admin.clone(), setup.scope.namespace());
        events
            .list(&ListParams::default().fields("involvedObject.name=secure"))
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("SyncLoadBalancerFailed"))
            .collect::<Vec<_>>()
    };
    eventually(
        "the sync fails on the missing certificate",
        Duration::from_secs(30),
        || async { (!failures().await.is_empty()).then_some(()) },
    )
    .await;
    // Retried twice with the certificate still missing (each attempt looks it up).
    eventually(
        "two retries of the sync",
        Duration::from_secs(60),
        || async {
            let counts = setup.sim.admin().request_counts().await.unwrap();
            (counts.get("GET /certificates").copied().unwrap_or(0) >= 3).then_some(())
        },
    )
    .await;
    let cert = setup
        .sim
        .admin()
        .create_certificate(hcloud_sim::CertificateSeed::uploaded("shop-cert"))
        .await
        .unwrap();
    let cert_id = cert["id"].as_i64().unwrap();
    let lb = eventually(
        "the HTTPS service with the certificate",
        Duration::from_secs(120),
        || async {
            let lbs = setup.load_balancers().await;
            lbs.into_iter().find(|lb| {
                lb["services"].as_array().is_some_and(|services| {
                    services.iter().any(|s| {
                        s["protocol"] == "https"
                            && s["listen_port"] == 443
                            && s["http"]["certificates"]
                                .as_array()
                                .is_some_and(|c| c.iter().any(|id| id.as_i64() == Some(cert_id)))
                    })
                })
            })
        },
    )
    .await;
    assert_eq!(
        lb["labels"]["hcloud-ccm/service-uid"],
        created.metadata.uid.clone().unwrap().as_str()
    );
    // The Service was never changed by anyone but the controller's status and finalizer.
    let now = setup.services().get("secure").await.unwrap();
    assert_eq!(now.metadata.generation, created.metadata.generation);
    assert_eq!(now.metadata.annotations, created.metadata.annotations);
    let failures = failures().await;
    assert_eq!(
        failures.len(),
        1,
        "one Warning for one reason: {failures:#?}"
    );
    assert_eq!(
        failures[0].count,
        Some(1),
        "not one per retry: {failures:#?}"
    );
    assert!(
        failures[0]
            .message
            .as_deref()
            .is_some_and(|m| m.contains("shop-cert")),
        "{failures:#?}"
    );
}

/// 120 load balancers are three pages of a listing: deleting their Services at once shifts
/// the pages under any listing made meanwhile. None may be left behind.
#[tokio::test]
async fn a_hundred_and_twenty_service_deletions_leave_no_finalizer_and_no_load_balancer() {
    const SERVICES: usize = 120;
    let setup = Setup::start(1, &["--concurrent-service-syncs=10"]).await;
    setup.add_node(0).await;
    let names: Vec<String> = (0..SERVICES).map(|i| format!("svc-{i}")).collect();
    futures::future::join_all(names.iter().map(|name| setup.add_service(name))).await;
    eventually(
        "a load balancer and an address for every Service",
        Duration::from_secs(300),
        || async {
            let lbs = setup.load_balancers().await.len();
            (lbs == SERVICES && setup.services_with_ingress().await == SERVICES).then_some(())
        },
    )
    .await;
    let with_finalizer = setup
        .services()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|s| {
            s.metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| f.iter().any(|f| f == FINALIZER))
        })
        .count();
    assert_eq!(with_finalizer, SERVICES);

    let services = setup.services();
    let params = DeleteParams::default();
    let deletions =
        futures::future::join_all(names.iter().map(|name| services.delete(name, &params))).await;
    for deleted in deletions {
        deleted.unwrap();
    }
    eventually(
        "every Service and every load balancer gone",
        Duration::from_secs(300),
        || async {
            let left = setup
                .services()
                .list(&ListParams::default())
                .await
                .unwrap()
                .items;
            let lbs = setup.load_balancers().await.len();
            (left.is_empty() && lbs == 0).then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn a_locked_load_balancer_is_retried_with_growing_delays() {
    let setup = Setup::start(2, &[]).await;
    setup.add_node(0).await;
    setup.add_service("web").await;
    let first = setup.servers[0];
    eventually(
        "the load balancer with its target",
        Duration::from_secs(60),
        || async {
            let lbs = setup.load_balancers().await;
            (lbs.len() == 1 && target_servers(&lbs[0]) == BTreeSet::from([first])).then_some(())
        },
    )
    .await;
    eventually(
        "the Service has its address",
        Duration::from_secs(60),
        || async { (setup.services_with_ingress().await == 1).then_some(()) },
    )
    .await;

    // The load balancer is busy with someone else's action for the next three attempts.
    setup.sim.admin().reset_request_counts().await.unwrap();
    setup
        .sim
        .admin()
        .inject_fault(
            Fault::new("/load_balancers/{id}/actions/add_target")
                .method("POST")
                .code("locked")
                .count(3),
        )
        .await
        .unwrap();
    setup.add_node(1).await;
    let both = BTreeSet::from([first, setup.servers[1]]);

    // Record when each add_target request reached the simulator.
    let mut seen = 0;
    let mut times = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(150);
    loop {
        let counts = setup.sim.admin().request_counts().await.unwrap();
        let now = add_target_requests(&counts);
        while seen < now {
            times.push(Instant::now());
            seen += 1;
        }
        let lbs = setup.load_balancers().await;
        if lbs.len() == 1 && target_servers(&lbs[0]) == both {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the second target was not added: {counts:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(times.len(), 4, "three locked attempts and one that works");
    let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
    // At least the 5 s minimum retry delay, then growing (the per-Service backoff doubles).
    assert!(gaps[0] >= Duration::from_millis(4500), "{gaps:?}");
    assert!(
        gaps[1] > gaps[0] + Duration::from_secs(2) && gaps[2] > gaps[1] + Duration::from_secs(2),
        "{gaps:?}"
    );
    let counts = setup.sim.admin().request_counts().await.unwrap();
    assert_eq!(add_target_requests(&counts), 4, "{counts:?}");
    assert!(
        !counts.keys().any(|k| k == "POST /load_balancers"),
        "no second load balancer: {counts:?}"
    );
}

/// The `MaxTargetsReached` Warnings on the Nodes of `scope`, by Node name.
async fn max_targets_warnings(scope: &Scope) -> BTreeSet<String> {
    let prefix = scope.name("");
    Api::<k8s_openapi::api::core::v1::Event>::namespaced(scope.admin.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("MaxTargetsReached"))
        .filter_map(|e| e.involved_object.name)
        .filter(|name| name.starts_with(&prefix))
        .collect()
}

/// A load balancer at its type's target cap (lb11 lowered to 2 targets): the targets that fit
/// are set, the Node left out gets `MaxTargetsReached`, and once the Service asks for a larger
/// type the load balancer changes type and takes the Node it left out.
#[tokio::test]
async fn a_load_balancer_at_its_target_cap_keeps_what_fits_and_recovers_with_a_larger_type() {
    let setup = Setup::start(3, &[]).await;
    setup
        .sim
        .admin()
        .set_limits(&hcloud_sim::LimitsSeed::default().max_targets("lb11", 2))
        .await
        .unwrap();
    for i in 0..3 {
        setup.add_node(i).await;
    }
    setup.add_service("web").await;
    let lb = eventually(
        "a load balancer with the two targets that fit",
        Duration::from_secs(60),
        || async {
            let lbs = setup.load_balancers().await;
            lbs.into_iter().find(|lb| target_servers(lb).len() == 2)
        },
    )
    .await;
    assert_eq!(lb["load_balancer_type"]["name"], "lb11");
    let warned = eventually(
        "MaxTargetsReached on the Node left out",
        Duration::from_secs(30),
        || async {
            let warned = max_targets_warnings(&setup.scope).await;
            (!warned.is_empty()).then_some(warned)
        },
    )
    .await;
    let all: BTreeSet<i64> = setup.servers.iter().copied().collect();
    let left_out: Vec<usize> = (0..3)
        .filter(|i| !target_servers(&lb).contains(&setup.servers[*i]))
        .collect();
    assert_eq!(left_out.len(), 1);
    assert_eq!(warned, BTreeSet::from([setup.node(left_out[0])]), "{lb}");
    eventually("the Service's address", Duration::from_secs(30), || async {
        (setup.services_with_ingress().await == 1).then_some(())
    })
    .await;

    setup
        .services()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "load-balancer.hetzner.cloud/type": "lb21"
            }}})),
        )
        .await
        .unwrap();
    let lb = eventually(
        "an lb21 with every Node",
        Duration::from_secs(60),
        || async {
            let lbs = setup.load_balancers().await;
            lbs.into_iter()
                .find(|lb| lb["load_balancer_type"]["name"] == "lb21" && target_servers(lb) == all)
        },
    )
    .await;
    assert_eq!(setup.load_balancers().await.len(), 1, "{lb}");
}

/// Beyond the official CCM through the binary (sharing [`Setup`]): the local health check,
/// labels and delete protection.
mod beyond_official;

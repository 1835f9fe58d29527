//! Proves the kube 5 client stack works against the harness's kube-apiserver for
//! everything the CCM does: watch Nodes, patch labels and `status.addresses`, renew a Lease,
//! publish Events, and move Service finalizers through `services/status`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    Event, EventSource, Node, NodeAddress, ObjectReference, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube_harness::{
    ControlPlane, UNINITIALIZED_TAINT, ensure_namespace, kubelet_node, unique_name,
};
use serde_json::json;

async fn admin() -> kube::Client {
    ControlPlane::shared()
        .expect("control plane")
        .client()
        .await
        .expect("client")
}

#[tokio::test]
async fn node_with_uninitialized_taint_is_watched_and_patched() {
    let client = admin().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let name = unique_name("smoke-node");

    let selector = format!("metadata.name={name}");
    let mut stream = watcher(nodes.clone(), watcher::Config::default().fields(&selector))
        .applied_objects()
        .boxed();

    nodes
        .create(&PostParams::default(), &kubelet_node(&name))
        .await
        .unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(20), stream.try_next())
        .await
        .expect("watch event in time")
        .expect("watch ok")
        .expect("an object");
    let taints = seen.spec.unwrap().taints.unwrap();
    assert_eq!(taints[0].key, UNINITIALIZED_TAINT);

    // Labels: JSON merge patch on the object.
    let labels = json!({"metadata": {"labels": {"node.kubernetes.io/instance-type": "cx22"}}});
    nodes
        .patch(&name, &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .unwrap();

    // Addresses: through the status subresource. A JSON merge patch replaces the list whole.
    let first = json!({"status": {"addresses": [
        {"type": "Hostname", "address": name},
        {"type": "InternalIP", "address": "10.0.0.2"},
        {"type": "InternalIP", "address": "10.0.0.3"},
    ]}});
    nodes
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&first))
        .await
        .unwrap();
    let second = json!({"status": {"addresses": [
        {"type": "Hostname", "address": name},
        {"type": "ExternalIP", "address": "203.0.113.7"},
    ]}});
    let patched = nodes
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&second))
        .await
        .unwrap();
    let addresses = patched.status.unwrap().addresses.unwrap();
    assert_eq!(
        addresses,
        vec![
            NodeAddress {
                type_: "Hostname".into(),
                address: name.clone()
            },
            NodeAddress {
                type_: "ExternalIP".into(),
                address: "203.0.113.7".into()
            },
        ],
        "a merge patch must replace the address list, not merge it by type"
    );

    let updated = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let node = stream.try_next().await.unwrap().unwrap();
            if node
                .status
                .as_ref()
                .and_then(|s| s.addresses.as_ref())
                .map(Vec::len)
                == Some(2)
            {
                return node;
            }
        }
    })
    .await
    .expect("the watcher sees the status update");
    assert_eq!(
        updated.metadata.labels.unwrap()["node.kubernetes.io/instance-type"],
        "cx22"
    );
    nodes.delete(&name, &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn lease_can_be_created_and_renewed_with_a_precondition() {
    let client = admin().await;
    let namespace = unique_name("smoke-lease");
    ensure_namespace(&client, &namespace).await.unwrap();
    let leases: Api<Lease> = Api::namespaced(client, &namespace);
    let now = || MicroTime(k8s_openapi::jiff::Timestamp::now());
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some("cloud-controller-manager".into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("a".into()),
            lease_duration_seconds: Some(15),
            acquire_time: Some(now()),
            renew_time: Some(now()),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        }),
    };
    let created = leases.create(&PostParams::default(), &lease).await.unwrap();
    let stale_version = created.metadata.resource_version.clone();

    let mut renewed = created.clone();
    renewed.spec.as_mut().unwrap().renew_time = Some(now());
    let renewed = leases
        .replace("cloud-controller-manager", &PostParams::default(), &renewed)
        .await
        .unwrap();
    assert_ne!(renewed.metadata.resource_version, stale_version);

    // A second writer holding the old resourceVersion loses: this fences renewals.
    let mut rival = created;
    rival.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let err = leases
        .replace("cloud-controller-manager", &PostParams::default(), &rival)
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409),
        "{err:?}"
    );
}

fn event_about(reference: ObjectReference, namespace: &str, reason: &str) -> Event {
    Event {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}.", reference.name.clone().unwrap_or_default())),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        involved_object: reference,
        reason: Some(reason.to_owned()),
        message: Some("smoke test".to_owned()),
        type_: Some("Normal".to_owned()),
        source: Some(EventSource {
            component: Some("cloud-node-controller".into()),
            host: None,
        }),
        first_timestamp: Some(Time(k8s_openapi::jiff::Timestamp::now())),
        last_timestamp: Some(Time(k8s_openapi::jiff::Timestamp::now())),
        count: Some(1),
        ..Event::default()
    }
}

/// The CCM records Node events as core/v1 Events in namespace `default`, like the Go recorder.
/// kube-runtime's `Recorder` (events.k8s.io/v1, Node events in `default`) is refused (422).
#[tokio::test]
async fn node_and_service_events_are_accepted_through_core_v1() {
    let client = admin().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let name = unique_name("smoke-event-node");
    let node = nodes
        .create(&PostParams::default(), &kubelet_node(&name))
        .await
        .unwrap();

    let node_ref = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(name.clone()),
        uid: node.metadata.uid.clone(),
        ..ObjectReference::default()
    };
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let created = events
        .create(
            &PostParams::default(),
            &event_about(node_ref.clone(), "default", "Synced"),
        )
        .await
        .unwrap();
    assert_eq!(created.involved_object.kind.as_deref(), Some("Node"));

    // The same Node event through events.k8s.io/v1 in `default`, as kube-runtime's Recorder
    // would file it, is rejected: a cluster-scoped object's event must not be namespaced there.
    let raw = json!({
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"generateName": "smoke.", "namespace": "default"},
        "eventTime": k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
        "reportingController": "hcloud-ccm",
        "reportingInstance": "hcloud-ccm-test",
        "action": "Sync",
        "reason": "Synced",
        "type": "Normal",
        "regarding": {"apiVersion": "v1", "kind": "Node", "name": name},
    });
    let request = http::Request::post("/apis/events.k8s.io/v1/namespaces/default/events")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&raw).unwrap())
        .unwrap();
    let err = client.request_text(request).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 422),
        "{err:?}"
    );

    // A Service event goes to the Service's namespace.
    let namespace = unique_name("smoke-event-svc");
    ensure_namespace(&client, &namespace).await.unwrap();
    let service_ref = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Service".into()),
        name: Some("web".into()),
        namespace: Some(namespace.clone()),
        ..ObjectReference::default()
    };
    let svc_events: Api<Event> = Api::namespaced(client.clone(), &namespace);
    svc_events
        .create(
            &PostParams::default(),
            &event_about(service_ref, &namespace, "EnsuringLoadBalancer"),
        )
        .await
        .unwrap();
    let listed = svc_events.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(
        listed.items[0].reason.as_deref(),
        Some("EnsuringLoadBalancer")
    );
    nodes.delete(&name, &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn service_finalizer_moves_through_the_status_subresource() {
    const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";
    let client = admin().await;
    let namespace = unique_name("smoke-svc");
    ensure_namespace(&client, &namespace).await.unwrap();
    let services: Api<Service> = Api::namespaced(client, &namespace);
    let service = Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(vec![ServicePort {
                port: 80,
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    };
    services
        .create(&PostParams::default(), &service)
        .await
        .unwrap();

    let add = json!({"metadata": {"finalizers": [FINALIZER]}});
    let with = services
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&add))
        .await
        .unwrap();
    assert_eq!(with.metadata.finalizers, Some(vec![FINALIZER.to_owned()]));

    let ingress = json!({"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.10"}]}}});
    let with_status = services
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&ingress))
        .await
        .unwrap();
    let ip = with_status
        .status
        .unwrap()
        .load_balancer
        .unwrap()
        .ingress
        .unwrap()[0]
        .ip
        .clone();
    assert_eq!(ip.as_deref(), Some("203.0.113.10"));

    // With the finalizer, deletion only marks the Service.
    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    let marked = services.get("web").await.unwrap();
    assert!(marked.metadata.deletion_timestamp.is_some());

    let remove = json!({"metadata": {"finalizers": null}});
    services
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&remove))
        .await
        .unwrap();
    let gone = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if services.get_opt("web").await.unwrap().is_none() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(
        gone.is_ok(),
        "the Service is deleted once the finalizer is removed"
    );
}

#[tokio::test]
async fn service_account_clients_have_only_their_rbac_permissions() {
    let plane = ControlPlane::shared().unwrap();
    let admin = plane.client().await.unwrap();
    let namespace = unique_name("smoke-sa");
    let account = plane
        .service_account_client(&namespace, "reader")
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(account.clone());

    let denied = nodes.list(&ListParams::default()).await.unwrap_err();
    assert!(
        matches!(denied, kube::Error::Api(ref s) if s.code == 403),
        "{denied:?}"
    );

    let role_name = unique_name("node-reader");
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": role_name},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}],
    });
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": role_name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
    });
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(admin.clone());
    roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(role).unwrap(),
        )
        .await
        .unwrap();
    let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = Api::all(admin);
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(binding).unwrap(),
        )
        .await
        .unwrap();

    // RBAC caches refresh quickly but not instantly.
    let allowed = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if nodes.list(&ListParams::default()).await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(
        allowed.is_ok(),
        "the bound ClusterRole lets the account list nodes"
    );
    // ...and nothing more.
    let delete = nodes
        .delete("does-not-matter", &DeleteParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(delete, kube::Error::Api(ref s) if s.code == 403),
        "{delete:?}"
    );
}

#[tokio::test]
async fn a_private_control_plane_is_removed_on_drop() {
    let plane = ControlPlane::start().await.unwrap();
    let dir = plane.data_dir().to_path_buf();
    let client = plane.client().await.unwrap();
    let nodes: Api<Node> = Api::all(client);
    nodes.list(&ListParams::default()).await.unwrap();
    assert!(dir.exists());
    drop(plane);
    assert!(!dir.exists(), "the supervisor removes the data directory");
    assert!(
        nodes.list(&ListParams::default()).await.is_err(),
        "the apiserver is gone"
    );
}

/// Runs only when spawned by `no_orphans_survive_an_aborting_test_process`: starts the shared
/// control plane, reports its data directory and apiserver pid, then aborts without unwinding.
#[test]
#[ignore = "helper process for no_orphans_survive_an_aborting_test_process"]
fn helper_start_then_abort() {
    let Ok(report) = std::env::var("KUBE_HARNESS_ABORT_REPORT") else {
        return;
    };
    let plane = ControlPlane::shared().unwrap();
    let dir = plane.data_dir();
    let pid = std::fs::read_to_string(dir.join("kube-apiserver.pid")).unwrap();
    std::fs::write(report, format!("{}\n{}", dir.display(), pid.trim())).unwrap();
    std::process::abort();
}

#[test]
fn no_orphans_survive_an_aborting_test_process() {
    let report = std::env::temp_dir().join(unique_name("abort-report"));
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "helper_start_then_abort",
            "--ignored",
            "--nocapture",
        ])
        .env("KUBE_HARNESS_ABORT_REPORT", &report)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "the helper aborts");
    let text = std::fs::read_to_string(&report).expect("the helper reported its control plane");
    std::fs::remove_file(&report).ok();
    let (dir, pid) = text.split_once('\n').unwrap();

    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while std::time::Instant::now() < deadline
        && (std::path::Path::new(dir).exists()
            || std::path::Path::new(&format!("/proc/{pid}")).exists())
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "kube-apiserver {pid} was killed"
    );
    assert!(!std::path::Path::new(dir).exists(), "{dir} was removed");
}

#[tokio::test]
async fn writes_are_audited_with_their_user() {
    let plane = ControlPlane::shared().unwrap();
    let namespace = unique_name("smoke-audit");
    let account = plane
        .service_account_client(&namespace, "writer")
        .await
        .unwrap();
    let services: Api<Service> = Api::namespaced(account, &namespace);
    let denied = services
        .create(&PostParams::default(), &Service::default())
        .await
        .unwrap_err();
    assert!(
        matches!(denied, kube::Error::Api(ref s) if s.code == 403 || s.code == 422),
        "{denied:?}"
    );

    let user = format!("system:serviceaccount:{namespace}:writer");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let events = plane.audit_events();
        let mine: Vec<_> = events
            .iter()
            .filter(|e| e["user"]["username"] == user.as_str())
            .collect();
        if let Some(event) = mine.first() {
            assert_eq!(event["verb"], "create");
            assert_eq!(event["objectRef"]["resource"], "services");
            assert!(event["stageTimestamp"].is_string());
            // The admin's namespace creation is audited too; reads are not.
            assert!(
                events
                    .iter()
                    .any(|e| e["objectRef"]["resource"] == "namespaces"
                        && e["objectRef"]["name"] == namespace.as_str())
            );
            assert!(
                events
                    .iter()
                    .all(|e| e["verb"] != "get" && e["verb"] != "list")
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no audit event for {user}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What a process behind a [`ScopedEndpoint`] sees of a shared control plane: lists and watches
/// of Nodes and Services hold only the objects with the scope's label; reads by name and
/// writes pass, with the upstream client's identity in the audit log.
#[tokio::test]
async fn a_scoped_endpoint_shows_only_the_nodes_and_services_of_its_scope() {
    let plane = ControlPlane::shared().unwrap();
    let admin = plane.client().await.unwrap();
    let scope = unique_name("scope");
    let selector = format!("harness-scope={scope}");
    let namespace = unique_name("smoke-scope");
    ensure_namespace(&admin, &namespace).await.unwrap();
    let endpoint = kube_harness::ScopedEndpoint::start(admin.clone(), &selector)
        .await
        .unwrap();
    let scoped = endpoint.client().await.unwrap();

    // Two Nodes: one in the scope, one outside.
    let nodes: Api<Node> = Api::all(admin.clone());
    let inside = unique_name("scoped-in");
    let outside = unique_name("scoped-out");
    let mut node = kubelet_node(&inside);
    node.metadata.labels = Some([("harness-scope".to_owned(), scope.clone())].into());
    nodes.create(&PostParams::default(), &node).await.unwrap();
    nodes
        .create(&PostParams::default(), &kubelet_node(&outside))
        .await
        .unwrap();

    let scoped_nodes: Api<Node> = Api::all(scoped.clone());
    let listed: Vec<String> = scoped_nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert_eq!(listed, vec![inside.clone()]);
    // A label selector of the caller's own is kept, and narrowed by the scope.
    let narrowed = scoped_nodes
        .list(&ListParams::default().labels("harness-scope"))
        .await
        .unwrap();
    assert_eq!(narrowed.items.len(), 1);
    // A read by name is not filtered.
    assert!(scoped_nodes.get_opt(&outside).await.unwrap().is_some());

    // A watch starts with the scope's Nodes only, and sees a Node that enters the scope.
    let mut stream = watcher(scoped_nodes.clone(), watcher::Config::default()).boxed();
    let mut initial = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(20), stream.try_next())
            .await
            .expect("watch event in time")
            .unwrap()
            .expect("a watch event");
        match event {
            watcher::Event::InitApply(node) => initial.extend(node.metadata.name),
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(initial, vec![inside.clone()]);
    let label = json!({ "metadata": { "labels": { "harness-scope": scope.clone() } } });
    nodes
        .patch(&outside, &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    let entered = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if let watcher::Event::Apply(node) = stream.try_next().await.unwrap().unwrap()
                && node.metadata.name.as_deref() == Some(outside.as_str())
            {
                return node;
            }
        }
    })
    .await
    .expect("the Node that entered the scope is watched");
    assert_eq!(entered.metadata.name.as_deref(), Some(outside.as_str()));

    // Services: the same for every namespace and for one.
    let services: Api<Service> = Api::namespaced(admin.clone(), &namespace);
    for (name, labelled) in [("in", true), ("out", false)] {
        let mut service = Service {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(ServiceSpec {
                ports: Some(vec![ServicePort {
                    port: 80,
                    ..ServicePort::default()
                }]),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        };
        if labelled {
            service.metadata.labels = Some([("harness-scope".to_owned(), scope.clone())].into());
        }
        services
            .create(&PostParams::default(), &service)
            .await
            .unwrap();
    }
    for api in [
        Api::<Service>::all(scoped.clone()),
        Api::<Service>::namespaced(scoped.clone(), &namespace),
    ] {
        let names: Vec<String> = api
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|s| s.metadata.name)
            .collect();
        assert_eq!(names, vec!["in".to_owned()]);
    }

    // A write through an endpoint is made as its upstream client: a ServiceAccount without
    // rights on Nodes is refused, and the refusal is audited with its name.
    let account = plane
        .service_account_client(&namespace, "scoped")
        .await
        .unwrap();
    let as_account = kube_harness::ScopedEndpoint::start(account, &selector)
        .await
        .unwrap();
    let denied = Api::<Node>::all(as_account.client().await.unwrap())
        .patch(&inside, &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap_err();
    assert!(
        matches!(denied, kube::Error::Api(ref s) if s.code == 403),
        "{denied:?}"
    );
    let user = format!("system:serviceaccount:{namespace}:scoped");
    kube_harness::eventually(
        "the refused patch audited as the ServiceAccount",
        Duration::from_secs(10),
        || async {
            plane
                .audit_events()
                .iter()
                .any(|e| {
                    e["user"]["username"] == user.as_str()
                        && e["verb"] == "patch"
                        && e["objectRef"]["name"] == inside.as_str()
                })
                .then_some(())
        },
    )
    .await;
}

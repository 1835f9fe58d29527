//! A Service whose ports are all UDP (or SCTP) gets no load balancer, end to end: the service
//! controller (as the binary runs it, on a namespace of the shared apiserver) and the Hetzner
//! provider against the simulator. Hetzner load balancers carry TCP only, so one would be
//! billed and serve nothing: the Service gets one `UnsupportedProtocolConfigured` Warning
//! naming its ports, no load balancer and no addresses in its status, and a load balancer it
//! had is deleted, as for a Service that stops being of type LoadBalancer.

use cloud_provider::runtime::workqueue::Backoff;
use cloud_provider::{Metrics, NodeCache, ServiceController, ServiceControllerConfig, WatchScope};
use hcloud_provider::load_balancers::reasons;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::Selector;
use kube_harness::{ControlPlane, ensure_namespace, eventually, unique_name};
use serde_json::{Value, json};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::*;
use crate::support::{WAIT, events_with_reason};

/// The label of the test's Nodes (none: the load balancers get no targets) and Services.
const SCOPE_LABEL: &str = "udp-only.test/scope";

/// The service controller running with the provider's load balancers on a namespace of its
/// own; stopped when dropped.
struct Controller {
    kube: kube::Client,
    namespace: String,
    _stop: DropGuard,
}

impl Controller {
    /// The service controller on a new namespace, with `env`'s load balancers writing their
    /// Warnings to the apiserver (as once the provider is initialized). Retries are quick
    /// (from 100 ms), so that a retry loop would show within the test's waits.
    async fn start(env: &Env) -> Self {
        let kube = ControlPlane::shared().unwrap().client().await.unwrap();
        let namespace = unique_name("udp");
        ensure_namespace(&kube, &namespace).await.unwrap();
        let scope = WatchScope::all()
            .in_namespace(namespace.clone())
            .with_labels(Selector::from_iter([(
                SCOPE_LABEL.to_owned(),
                namespace.clone(),
            )]));
        let stop = CancellationToken::new();
        let lbs = env.lbs_recording(&kube, false).await;
        let nodes = NodeCache::spawn_scoped(kube.clone(), stop.clone(), &scope);
        let controller = ServiceController::new(
            kube.clone(),
            nodes,
            Arc::new(lbs),
            Metrics::new(),
            ServiceControllerConfig {
                cluster_name: CLUSTER.into(),
                backoff: Backoff {
                    base: Duration::from_millis(100),
                    max: Duration::from_secs(1),
                },
                scope,
                ..ServiceControllerConfig::default()
            },
        );
        tokio::spawn(controller.run(stop.clone()));
        Self {
            kube,
            namespace,
            _stop: stop.drop_guard(),
        }
    }

    fn services(&self) -> Api<Service> {
        Api::namespaced(self.kube.clone(), &self.namespace)
    }

    /// A Service of type LoadBalancer named `name` with `ports`, as the apiserver creates it.
    async fn create(&self, name: &str, ports: Value) -> Service {
        let svc: Service = serde_json::from_value(json!({
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": { SCOPE_LABEL: self.namespace },
            },
            "spec": { "type": "LoadBalancer", "ports": ports },
        }))
        .unwrap();
        self.services()
            .create(&PostParams::default(), &svc)
            .await
            .unwrap()
    }

    async fn get(&self, name: &str) -> Option<Service> {
        self.services().get_opt(name).await.unwrap()
    }

    /// The events about the Service `name` with `reason`.
    async fn events(&self, name: &str, reason: &str) -> Vec<Event> {
        events_with_reason(&self.kube, &self.namespace, name, reason).await
    }

    /// Deletes the Service `name` and waits until it is gone.
    async fn delete(&self, name: &str) {
        self.services()
            .delete(name, &Default::default())
            .await
            .unwrap();
        eventually("the Service gone", WAIT, || async {
            self.get(name).await.is_none().then_some(())
        })
        .await;
    }

    /// The Warnings `UnsupportedProtocolConfigured` about the Service `name`, once there is one
    /// whose message contains `naming`.
    async fn wait_warning(&self, name: &str, naming: &str) -> Vec<Event> {
        eventually(
            "the UnsupportedProtocolConfigured Warning",
            WAIT,
            || async {
                let found = self
                    .events(name, reasons::UNSUPPORTED_PROTOCOL_CONFIGURED)
                    .await;
                found
                    .iter()
                    .any(|e| e.message.as_deref().unwrap_or_default().contains(naming))
                    .then_some(found)
            },
        )
        .await
    }
}

/// The addresses in the Service's status.
fn status_addresses(svc: &Service) -> Vec<String> {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .map(ingress)
        .unwrap_or_default()
}

#[tokio::test]
async fn a_udp_only_service_gets_a_warning_and_no_load_balancer() {
    let env = Env::start().await;
    let controller = Controller::start(&env).await;
    let name = "dns";
    controller
        .create(
            name,
            json!([
                { "name": "dns", "port": 53, "protocol": "UDP" },
                { "name": "diameter", "port": 3868, "protocol": "SCTP" },
            ]),
        )
        .await;

    // The Warning names every port and says that no load balancer is made.
    let warned = controller
        .wait_warning(name, "no load balancer is made")
        .await;
    assert_eq!(warned.len(), 1, "{warned:#?}");
    let event = &warned[0];
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.involved_object.kind.as_deref(), Some("Service"));
    let message = event.message.as_deref().unwrap_or_default();
    assert!(
        message.contains("carry TCP only")
            && message.contains("port dns (53) is UDP, port diameter (3868) is SCTP"),
        "{message}"
    );

    // The sync succeeded (no error, so no retry), and made no load balancer.
    eventually("the EnsuredLoadBalancer event", WAIT, || async {
        (!controller
            .events(name, "EnsuredLoadBalancer")
            .await
            .is_empty())
        .then_some(())
    })
    .await;
    assert_eq!(env.all().await, Vec::new(), "no load balancer");
    let counts = env.counts().await;
    assert!(
        !counts.contains_key("POST /load_balancers"),
        "nothing created: {counts:?}"
    );
    let svc = controller.get(name).await.unwrap();
    assert_eq!(status_addresses(&svc), Vec::<String>::new(), "{svc:#?}");

    // Settled: well past the first retry delays, still one Warning (written once, not once
    // per retry) and no failed sync.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let warned = controller
        .events(name, reasons::UNSUPPORTED_PROTOCOL_CONFIGURED)
        .await;
    assert_eq!(warned.len(), 1, "{warned:#?}");
    assert_eq!(warned[0].count, Some(1), "{warned:#?}");
    let failed = controller.events(name, "SyncLoadBalancerFailed").await;
    assert!(failed.is_empty(), "{failed:#?}");
    assert_eq!(env.all().await, Vec::new());

    // Deleted: released at once (no load balancer to delete, the finalizer goes).
    controller.delete(name).await;
}

#[tokio::test]
async fn a_service_changed_from_tcp_to_udp_loses_its_load_balancer_and_addresses() {
    let env = Env::start().await;
    let controller = Controller::start(&env).await;
    let name = "web";
    let svc = controller
        .create(
            name,
            json!([{ "name": "web", "port": 80, "protocol": "TCP" }]),
        )
        .await;

    // Served: a load balancer with the TCP port, its addresses in the status.
    let addresses = eventually("the ingress", WAIT, || async {
        let svc = controller.get(name).await?;
        let addresses = status_addresses(&svc);
        (!addresses.is_empty()).then_some(addresses)
    })
    .await;
    let lbs = env.labelled(&svc).await;
    assert_eq!(lbs.len(), 1, "{lbs:#?}");
    assert_eq!(lbs[0].public_net.ipv4.ip.as_ref(), Some(&addresses[0]));
    assert_eq!(
        lbs[0]
            .services
            .iter()
            .map(|s| s.listen_port)
            .collect::<Vec<_>>(),
        [80]
    );

    // Its only port becomes UDP.
    controller
        .services()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({
                "spec": { "ports": [{ "name": "dns", "port": 53, "protocol": "UDP" }] }
            })),
        )
        .await
        .unwrap();
    controller.wait_warning(name, "port dns (53) is UDP").await;
    // The status is cleared once the load balancer is gone.
    eventually("the status cleared", WAIT, || async {
        let svc = controller.get(name).await?;
        status_addresses(&svc).is_empty().then_some(())
    })
    .await;
    assert_eq!(env.labelled(&svc).await, Vec::new(), "deleted");
    assert_eq!(env.all().await, Vec::new());
    let counts = env.counts().await;
    assert_eq!(
        counts.get("DELETE /load_balancers/{id}"),
        Some(&1),
        "{counts:?}"
    );
    let failed = controller.events(name, "SyncLoadBalancerFailed").await;
    assert!(failed.is_empty(), "{failed:#?}");

    // Deleted: released at once.
    controller.delete(name).await;
}

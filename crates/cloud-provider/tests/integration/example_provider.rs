//! The `memory_cloud` example (its provider and its wiring, compiled in here) against the test
//! apiserver: what a provider built on the framework gets from the four controllers.

#[path = "../../examples/memory_cloud/cloud.rs"]
mod cloud;
#[path = "../../examples/memory_cloud/controllers.rs"]
mod controllers;

use std::sync::Arc;
use std::time::Duration;

use cloud::{Instance, MemoryCloud, PROVIDER_ID_PREFIX};
use cloud_provider::well_known::{
    LABEL_INSTANCE_TYPE, LABEL_REGION, LABEL_ZONE, TAINT_SHUTDOWN, TAINT_UNINITIALIZED,
};
use controllers::{AllMetrics, Settings};
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use kube::Api;
use kube::api::PostParams;
use prometheus_client::registry::Registry;

use crate::support::*;
use crate::{Env, SCOPE_LABEL};

const WAIT: Duration = Duration::from_secs(30);

/// Its own cluster name: the routes of the example's cloud belong to this test alone.
const CLUSTER: &str = "memory-example";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_provider_initialises_nodes_balances_routes_and_deletes_gone_nodes() {
    let env = Env::start().await;
    let cloud = MemoryCloud::default();
    let web = env.name("web");
    let gone = env.name("gone");
    cloud.add_instance(Instance::new(&web, [10, 0, 0, 2].into()));
    cloud.add_instance(Instance::new(&gone, [10, 0, 0, 3].into()));
    NodeBuilder::kubelet(&web)
        .ready("True")
        .pod_cidrs(&["10.244.1.0/24"])
        .create(&env)
        .await;
    // NotReady: the lifecycle controller checks only NotReady Nodes against the cloud.
    NodeBuilder::kubelet(&gone)
        .ready("False")
        .pod_cidrs(&["10.244.2.0/24"])
        .create(&env)
        .await;
    let services = Api::<Service>::namespaced(env.client.clone(), env.namespace());
    let mut service = Service::default();
    service.metadata.name = Some("web".into());
    service.metadata.labels = Some([(SCOPE_LABEL.to_owned(), env.id.clone())].into());
    service.spec = Some(ServiceSpec {
        type_: Some("LoadBalancer".into()),
        ports: Some(vec![ServicePort {
            port: 80,
            ..ServicePort::default()
        }]),
        ..ServiceSpec::default()
    });
    let service = services
        .create(&PostParams::default(), &service)
        .await
        .unwrap();

    let settings = Settings {
        cluster_name: CLUSTER.to_owned(),
        // Short periods: a Node whose instance is gone is deleted when a check a period after
        // the first confirms it; the route pass runs every period.
        node_monitor_period: Duration::from_millis(200),
        route_reconciliation_period: Duration::from_millis(200),
        provider_id_prefix: Some(PROVIDER_ID_PREFIX.to_owned()),
        services: env.scope.clone(),
        ..Settings::default()
    };
    let metrics = AllMetrics::default();
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let running = tokio::spawn(controllers::run_controllers(
        env.client.clone(),
        env.cache.clone(),
        Arc::new(cloud.clone()),
        settings,
        metrics.clone(),
        env.shutdown.clone(),
    ));

    // Node controller: providerID, topology and type labels, the instance's addresses; the
    // uninitialized taint goes (the addresses follow in a status write of their own).
    let initialised = |name: String| {
        let client = env.client.clone();
        async move {
            eventually(&format!("{name} initialised"), WAIT, || async {
                get_node(&client, &name).await.filter(|node| {
                    !has_taint(node, TAINT_UNINITIALIZED)
                        && addresses(node).iter().any(|a| a.type_ == "InternalIP")
                })
            })
            .await
        }
    };
    let node = initialised(web.clone()).await;
    let instance = cloud
        .list_instances()
        .into_iter()
        .find(|instance| instance.name == web)
        .unwrap();
    let spec = node.spec.clone().unwrap_or_default();
    assert_eq!(spec.provider_id, Some(format!("memory://{web}")));
    assert_eq!(label(&node, LABEL_ZONE), Some(instance.zone.as_str()));
    assert_eq!(label(&node, LABEL_REGION), Some(instance.region.as_str()));
    assert_eq!(
        label(&node, LABEL_INSTANCE_TYPE),
        Some(instance.instance_type.as_str())
    );
    assert_eq!(
        addresses(&node),
        vec![addr("InternalIP", "10.0.0.2"), addr("Hostname", &web)]
    );
    initialised(gone.clone()).await;

    // Service controller: the cloud's ingress address in the Service's status, both Nodes
    // as targets.
    let status = eventually("load balancer ingress", WAIT, || async {
        services
            .get_status("web")
            .await
            .unwrap()
            .status?
            .load_balancer?
            .ingress
            .filter(|ingress| !ingress.is_empty())
    })
    .await;
    assert_eq!(status[0].ip.as_deref(), Some("203.0.113.1"));
    let balancers = cloud.list_load_balancers();
    assert_eq!(balancers.len(), 1, "{balancers:?}");
    let balancer = &balancers[0];
    assert_eq!(
        balancer.name,
        cloud_provider::provider::default_load_balancer_name(&service)
    );
    let node_port = services
        .get("web")
        .await
        .unwrap()
        .spec
        .unwrap()
        .ports
        .unwrap()[0]
        .node_port;
    assert_eq!(balancer.ports, vec![(80, node_port.unwrap())]);
    assert_eq!(
        eventually("both Nodes targeted", WAIT, || async {
            let targets = cloud.list_load_balancers().first()?.targets.clone();
            (targets.len() == 2).then_some(targets)
        })
        .await,
        {
            let mut both = vec![web.clone(), gone.clone()];
            both.sort();
            both
        }
    );

    // Route controller: a route per pod CIDR, then NetworkUnavailable False.
    let network_available = |name: String| {
        let client = env.client.clone();
        async move {
            eventually(&format!("{name} network available"), WAIT, || async {
                let node = get_node(&client, &name).await?;
                let condition = node
                    .status?
                    .conditions?
                    .into_iter()
                    .find(|c| c.type_ == "NetworkUnavailable")?;
                (condition.status == "False").then_some(condition)
            })
            .await
        }
    };
    let condition = network_available(web.clone()).await;
    assert_eq!(condition.reason.as_deref(), Some("RouteCreated"));
    network_available(gone.clone()).await;
    let routes = cloud.list_routes_of(CLUSTER);
    let route_of = |cidr: &str| {
        routes
            .iter()
            .find(|r| r.destination_cidr.to_string() == cidr)
            .map(|r| {
                (
                    r.target_node.clone(),
                    r.target_provider_id.clone(),
                    r.blackhole,
                )
            })
    };
    assert_eq!(
        route_of("10.244.1.0/24"),
        Some((web.clone(), format!("memory://{web}"), false))
    );
    assert_eq!(
        route_of("10.244.2.0/24"),
        Some((gone.clone(), format!("memory://{gone}"), false))
    );

    // Node lifecycle controller: the instance is shut down, its NotReady Node gets the
    // shutdown taint; the instance is deleted, so is its Node (a check a period after the
    // first confirms it); then the load balancer and the routes follow.
    assert!(cloud.set_shut_down(&gone, true));
    eventually("shutdown taint", WAIT, || async {
        get_node(&env.client, &gone)
            .await
            .filter(|node| has_taint(node, TAINT_SHUTDOWN))
    })
    .await;
    assert!(cloud.delete_instance(&gone));
    eventually("gone Node deleted", WAIT, || async {
        get_node(&env.client, &gone).await.is_none().then_some(())
    })
    .await;
    eventually("load balancer without the gone Node", WAIT, || async {
        (cloud.list_load_balancers().first()?.targets == vec![web.clone()]).then_some(())
    })
    .await;
    eventually("route of the gone Node deleted", WAIT, || async {
        let destinations: Vec<String> = cloud
            .list_routes_of(CLUSTER)
            .iter()
            .map(|r| r.destination_cidr.to_string())
            .collect();
        (destinations == ["10.244.1.0/24"]).then_some(())
    })
    .await;
    assert!(get_node(&env.client, &web).await.is_some());
    assert!(
        metrics
            .controllers
            .reconcile_count(cloud_provider::node::CONTROLLER)
            >= 2
    );

    // The controllers end when asked to, without an error.
    env.shutdown.cancel();
    running.await.unwrap().unwrap();
}

//! Networks and routes against the simulator.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code

use crate::common;

use hcloud_api::{Error, ErrorCode, ListParams, Route, SubnetType};
use hcloud_sim::NetworkSeed;

use common::{count, setup};

async fn network(sim: &hcloud_sim::Simulator, name: &str) -> i64 {
    sim.admin()
        .create_network(
            NetworkSeed::new(name, "10.0.0.0/16")
                .subnet("10.0.1.0/24", "eu-central")
                .label("cluster", name),
        )
        .await
        .expect("network")
}

#[tokio::test]
async fn get_and_list_networks() {
    let (sim, client) = setup().await;
    let id = network(&sim, "k8s").await;
    network(&sim, "other").await;

    let net = client.networks().get(id).await.expect("get");
    assert_eq!(net.name, "k8s");
    assert_eq!(net.ip_range, "10.0.0.0/16");
    assert_eq!(net.subnets.len(), 1);
    assert_eq!(net.subnets[0].kind, SubnetType::Cloud);
    assert_eq!(net.subnets[0].ip_range.as_deref(), Some("10.0.1.0/24"));
    assert!(net.routes.is_empty());

    let by_name = client
        .networks()
        .list_all(&ListParams::name("k8s"))
        .await
        .expect("by name");
    assert_eq!(by_name.iter().map(|n| n.id).collect::<Vec<_>>(), vec![id]);
    let by_label = client
        .networks()
        .list(&ListParams::label_selector("cluster=other"))
        .await
        .expect("by label");
    assert_eq!(by_label.items.len(), 1);
    assert_eq!(by_label.items[0].name, "other");
    assert_eq!(
        client
            .networks()
            .get_by_name("k8s")
            .await
            .expect("by name")
            .map(|n| n.id),
        Some(id)
    );

    let err = client.networks().get(424_242).await.expect_err("missing");
    assert!(err.is_not_found());
}

#[tokio::test]
async fn add_and_delete_route() {
    let (sim, client) = setup().await;
    let id = network(&sim, "k8s").await;
    let route = Route::new("10.244.1.0/24", "10.0.1.5");

    let action = client.networks().add_route(id, &route).await.expect("add");
    assert_eq!(action.command, "add_route");
    client.actions().wait(&action).await.expect("wait");
    let net = client.networks().get(id).await.expect("get");
    assert_eq!(net.routes, vec![route.clone()]);

    let action = client
        .networks()
        .delete_route(id, &route)
        .await
        .expect("delete");
    assert_eq!(action.command, "delete_route");
    client.actions().wait(&action).await.expect("wait");
    assert!(
        client
            .networks()
            .get(id)
            .await
            .expect("get")
            .routes
            .is_empty()
    );

    // Deleting a route that does not exist is a not-found API error.
    let err = client
        .networks()
        .delete_route(id, &route)
        .await
        .expect_err("gone");
    assert!(err.is_not_found(), "{err}");
}

#[tokio::test]
async fn invalid_route_reports_field_details() {
    let (sim, client) = setup().await;
    let id = network(&sim, "k8s").await;
    let err = client
        .networks()
        .add_route(id, &Route::new("8.8.8.0/24", "10.0.0.1"))
        .await
        .expect_err("invalid");
    let Error::Api(api) = &err else {
        panic!("expected an API error, got {err:?}");
    };
    assert_eq!(api.status, 422);
    assert_eq!(api.code, ErrorCode::InvalidInput);
    let names: Vec<&str> = api.details.fields.iter().map(|f| f.name.as_str()).collect();
    assert!(names.contains(&"destination"), "{names:?}");
    assert!(names.contains(&"gateway"), "{names:?}");
    assert!(api.details.fields.iter().all(|f| !f.messages.is_empty()));
    // Not retried: one request only.
    assert_eq!(
        count(&sim, "POST /networks/{id}/actions/add_route").await,
        1
    );
}

#[tokio::test]
async fn conflicting_network_change_is_retried() {
    let sim = common::start_sim().await;
    // Deterministic backoff (20, 40, 80 ms) that outlasts the 40 ms action.
    let client = hcloud_api::Client::new(common::config_for(&sim).with_retry(
        hcloud_api::RetryConfig {
            max_tries: 5,
            base: std::time::Duration::from_millis(20),
            cap: std::time::Duration::from_millis(80),
            jitter: false,
        },
    ))
    .expect("client");
    sim.admin()
        .set_action_delay(std::time::Duration::from_millis(40))
        .await
        .expect("delay");
    let id = network(&sim, "k8s").await;
    let first = client
        .networks()
        .add_route(id, &Route::new("10.244.1.0/24", "10.0.1.5"))
        .await
        .expect("first");
    // The network is busy with the first action: the API answers 409 conflict, which the
    // client retries with backoff until the first action finished.
    let second = client
        .networks()
        .add_route(id, &Route::new("10.244.2.0/24", "10.0.1.6"))
        .await
        .expect("second after retries");
    assert!(count(&sim, "POST /networks/{id}/actions/add_route").await >= 3);
    client
        .actions()
        .wait_all(&[first, second])
        .await
        .expect("both done");
    assert_eq!(
        client.networks().get(id).await.expect("get").routes.len(),
        2
    );
}

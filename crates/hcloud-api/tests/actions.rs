//! Actions and the batched waiter against the simulator.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code

mod common;

use std::time::{Duration, Instant};

use hcloud_api::{Action, ActionStatus, Client, Error, Route};
use hcloud_sim::{Fault, NetworkSeed, Simulator};

use common::{config_for, count, setup};

/// Creates `n` networks and starts one add_route action on each.
async fn start_actions(sim: &Simulator, client: &Client, n: usize) -> Vec<(i64, Action)> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let id = sim
            .admin()
            .create_network(
                NetworkSeed::new(format!("net-{i}"), "10.0.0.0/16")
                    .subnet("10.0.1.0/24", "eu-central"),
            )
            .await
            .expect("network");
        let action = client
            .networks()
            .add_route(id, &Route::new("10.244.0.0/24", "10.0.1.2"))
            .await
            .expect("add_route");
        out.push((id, action));
    }
    out
}

#[tokio::test]
async fn get_and_list_actions_in_batches_of_25() {
    let (sim, client) = setup().await;
    let started = start_actions(&sim, &client, 30).await;
    let ids: Vec<i64> = started.iter().map(|(_, a)| a.id).collect();

    let one = client.actions().get(ids[0]).await.expect("get");
    assert_eq!(one.id, ids[0]);
    assert_eq!(one.command, "add_route");
    assert_eq!(one.resources[0].kind, "network");
    assert!(
        client
            .actions()
            .get(9_999_999)
            .await
            .expect_err("missing")
            .is_not_found()
    );

    sim.admin().reset_request_counts().await.expect("reset");
    let listed = client.actions().list(&ids).await.expect("list");
    let mut got: Vec<i64> = listed.iter().map(|a| a.id).collect();
    got.sort_unstable();
    assert_eq!(got, ids);
    assert_eq!(count(&sim, "GET /actions").await, 2, "30 ids: 25 + 5");
}

#[tokio::test]
async fn wait_all_waits_for_every_action() {
    let sim = common::start_sim().await;
    sim.admin()
        .set_action_delay(Duration::from_millis(300))
        .await
        .expect("delay");
    let client = Client::new(config_for(&sim).with_poll_interval(Duration::from_millis(50)))
        .expect("client");
    let started = start_actions(&sim, &client, 30).await;
    let actions: Vec<Action> = started.iter().map(|(_, a)| a.clone()).collect();
    assert!(actions.iter().all(|a| a.status == ActionStatus::Running));

    sim.admin().reset_request_counts().await.expect("reset");
    let start = Instant::now();
    client
        .actions()
        .wait_all(&actions)
        .await
        .expect("all succeed");
    assert!(start.elapsed() >= Duration::from_millis(50));
    // Every action is done and its effect visible.
    let done = client
        .actions()
        .list(&actions.iter().map(|a| a.id).collect::<Vec<_>>())
        .await
        .expect("list");
    assert!(done.iter().all(|a| a.status == ActionStatus::Success));
    for (net, _) in &started {
        assert_eq!(
            client.networks().get(*net).await.expect("net").routes.len(),
            1
        );
    }
    // Polled in batches: never one request per action per round, and no per-ID gets.
    let polls = count(&sim, "GET /actions").await;
    assert!(polls >= 2, "{polls}");
    assert_eq!(count(&sim, "GET /actions/{id}").await, 0);
    assert!(polls <= 2 * 12, "{polls} polls for 30 actions over ~300 ms");
}

#[tokio::test]
async fn wait_all_accepts_ids_and_finished_actions() {
    let (sim, client) = setup().await;
    let started = start_actions(&sim, &client, 3).await;
    let ids: Vec<i64> = started.iter().map(|(_, a)| a.id).collect();
    client.actions().wait_all(&ids).await.expect("by id");
    // Already finished actions need no request.
    let finished = client.actions().list(&ids).await.expect("list");
    sim.admin().reset_request_counts().await.expect("reset");
    client
        .actions()
        .wait_all(&finished)
        .await
        .expect("finished");
    client.actions().wait(&finished[0]).await.expect("one");
    client
        .actions()
        .wait_all::<i64>(&[])
        .await
        .expect("nothing");
    assert_eq!(count(&sim, "GET /actions").await, 0);
}

#[tokio::test]
async fn failed_action_returns_its_code_and_message() {
    let (sim, client) = setup().await;
    let good = start_actions(&sim, &client, 2).await;
    let net = sim
        .admin()
        .create_network(NetworkSeed::new("bad", "10.0.0.0/16").subnet("10.0.1.0/24", "eu-central"))
        .await
        .expect("network");
    sim.admin()
        .inject_fault(
            Fault::new("/networks/{id}/actions/add_route")
                .code("route_exploded")
                .fail_action(),
        )
        .await
        .expect("fault");
    let bad = client
        .networks()
        .add_route(net, &Route::new("10.244.0.0/24", "10.0.1.2"))
        .await
        .expect("accepted");
    let mut all: Vec<Action> = good.into_iter().map(|(_, a)| a).collect();
    all.push(bad.clone());
    let err = client
        .actions()
        .wait_all(&all)
        .await
        .expect_err("one fails");
    let Error::Action(failed) = &err else {
        panic!("expected an action error, got {err:?}");
    };
    assert_eq!(failed.id, bad.id);
    assert_eq!(failed.command, "add_route");
    assert_eq!(failed.code, "route_exploded");
    assert!(!failed.message.is_empty());
    assert!(!err.is_not_found());
    assert_eq!(err.kind(), "action");

    // The single waiter reports the same; an already failed action fails without polling.
    let err = client.actions().wait(&bad).await.expect_err("fails");
    assert!(matches!(err, Error::Action(ref a) if a.code == "route_exploded"));
    let seen = client.actions().get(bad.id).await.expect("get");
    assert_eq!(seen.status, ActionStatus::Error);
    sim.admin().reset_request_counts().await.expect("reset");
    assert!(matches!(
        client.actions().wait(&seen).await,
        Err(Error::Action(_))
    ));
    assert_eq!(count(&sim, "GET /actions").await, 0);
}

#[tokio::test]
async fn unknown_action_id_fails_instead_of_waiting_forever() {
    let (sim, client) = setup().await;
    let started = start_actions(&sim, &client, 1).await;
    let err = client
        .actions()
        .wait_all(&[started[0].1.id, 77_777_777])
        .await
        .expect_err("missing");
    assert!(matches!(err, Error::Action(ref a) if a.id == 77_777_777 && a.code == "not_found"));
}

//! Actions and the batched waiter against the simulator.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code

use crate::common;

use std::time::{Duration, Instant};

use hcloud_api::{Action, ActionRef, ActionStatus, Client, Error, Route};
use hcloud_sim::{Fault, NetworkSeed, Simulator};
use tokio::task::JoinSet;

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
async fn get_and_list_actions_in_batches_of_50() {
    let (sim, client) = setup().await;
    let started = start_actions(&sim, &client, 60).await;
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
    assert_eq!(count(&sim, "GET /actions").await, 2, "60 ids: 50 + 10");
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

/// A running action (an `add_route`) that will fail with code `route_exploded`.
async fn start_failing_action(sim: &Simulator, client: &Client) -> Action {
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
    client
        .networks()
        .add_route(net, &Route::new("10.244.0.0/24", "10.0.1.2"))
        .await
        .expect("accepted")
}

#[tokio::test]
async fn failed_action_returns_its_code_and_message() {
    let (sim, client) = setup().await;
    let good = start_actions(&sim, &client, 2).await;
    let bad = start_failing_action(&sim, &client).await;
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

/// Starts one `wait_all` per entry of `waits`, each in its own task on its own clone of
/// `client`; the results come back in the order of `waits`.
async fn wait_concurrently<A>(client: &Client, waits: Vec<Vec<A>>) -> Vec<Result<(), Error>>
where
    A: ActionRef + Send + Sync + 'static,
{
    let mut tasks = JoinSet::new();
    for (i, actions) in waits.into_iter().enumerate() {
        let client = client.clone();
        tasks.spawn(async move { (i, client.actions().wait_all(&actions).await) });
    }
    let mut results: Vec<Option<Result<(), Error>>> = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let (i, result) = joined.expect("waiter task");
        if results.len() <= i {
            results.resize_with(i + 1, || None);
        }
        results[i] = Some(result);
    }
    results.into_iter().map(|r| r.expect("a result")).collect()
}

/// Most rounds that can have reached the simulator in `elapsed` since counting began:
/// those that started in that time (at least one interval apart), plus one that may have
/// been in flight.
fn max_rounds(elapsed: Duration, interval: Duration) -> u64 {
    (elapsed.as_millis() / interval.as_millis()) as u64 + 2
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_waiters_share_the_polls() {
    let sim = common::start_sim().await;
    sim.admin()
        .set_action_delay(Duration::from_millis(800))
        .await
        .expect("delay");
    let interval = Duration::from_millis(50);
    let client = Client::new(config_for(&sim).with_poll_interval(interval)).expect("client");
    let started = start_actions(&sim, &client, 60).await;
    let waits: Vec<Vec<Action>> = started.iter().map(|(_, a)| vec![a.clone()]).collect();
    assert!(waits.iter().all(|w| w[0].status == ActionStatus::Running));

    let start = Instant::now();
    sim.admin().reset_request_counts().await.expect("reset");
    let results = wait_concurrently(&client, waits).await;
    let elapsed = start.elapsed();
    assert_eq!(results.len(), 60);
    for result in &results {
        assert!(result.is_ok(), "{result:?}");
    }
    let polls = count(&sim, "GET /actions").await;
    let rounds = max_rounds(elapsed, interval);
    // 60 pending IDs need 3 requests per round; one request per waiter would need 60.
    assert!(
        polls <= 3 * rounds,
        "{polls} polls in {elapsed:?}: more than 3 per round"
    );
    assert!(polls >= 3, "{polls}: 60 IDs take at least 3 requests");
    assert_eq!(count(&sim, "GET /actions/{id}").await, 0);
    // Every action finished, and nothing polls any more.
    let done = client
        .actions()
        .list(&started.iter().map(|(_, a)| a.id).collect::<Vec<_>>())
        .await
        .expect("list");
    assert!(done.iter().all(|a| a.status == ActionStatus::Success));
    // The polls are made by the waits; with none left, nothing polls.
    assert_eq!(client.action_waits(), 0, "{client:?}");
}

#[tokio::test]
async fn a_waiter_dropped_by_its_timeout_leaves_the_others_alone() {
    let sim = common::start_sim().await;
    let interval = Duration::from_millis(50);
    let client = Client::new(config_for(&sim).with_poll_interval(interval)).expect("client");
    sim.admin()
        .set_action_delay(Duration::from_secs(3600))
        .await
        .expect("delay");
    let net = sim
        .admin()
        .create_network(
            NetworkSeed::new("endless", "10.0.0.0/16").subnet("10.0.1.0/24", "eu-central"),
        )
        .await
        .expect("network");
    let endless = client
        .networks()
        .add_route(net, &Route::new("10.244.0.0/24", "10.0.1.2"))
        .await
        .expect("add_route");
    sim.admin()
        .set_action_delay(Duration::from_millis(1200))
        .await
        .expect("delay");
    // With the endless action, 26 IDs: two requests per round; without it, one.
    let others: Vec<Vec<Action>> = start_actions(&sim, &client, 25)
        .await
        .into_iter()
        .map(|(_, a)| vec![a])
        .collect();

    // The endless waiter joins first, so it runs the rounds until its timeout drops it.
    let impatient = {
        let client = client.clone();
        tokio::spawn(async move {
            tokio::time::timeout(Duration::from_millis(250), client.actions().wait(&endless)).await
        })
    };
    tokio::time::sleep(Duration::from_millis(5)).await;
    let patient = {
        let client = client.clone();
        tokio::spawn(async move { wait_concurrently(&client, others).await })
    };
    assert!(
        impatient.await.expect("task").is_err(),
        "the endless action cannot finish"
    );
    let dropped = Instant::now();
    sim.admin().reset_request_counts().await.expect("reset");
    let results = patient.await.expect("task");
    let elapsed = dropped.elapsed();
    for result in &results {
        assert!(result.is_ok(), "{result:?}");
    }
    // One request per round from now on: the endless action is no longer asked for.
    let polls = count(&sim, "GET /actions").await;
    let rounds = max_rounds(elapsed, interval);
    assert!(
        polls <= rounds,
        "{polls} polls in {elapsed:?} after the drop: the dropped ID is still polled"
    );
    assert!(
        polls >= 5,
        "{polls}: the others still ran for several rounds"
    );
    // The polls are made by the waits; with none left, nothing polls.
    assert_eq!(client.action_waits(), 0, "{client:?}");
}

#[tokio::test]
async fn a_failing_action_fails_only_its_own_waiter() {
    let (sim, client) = setup().await;
    let good = start_actions(&sim, &client, 3).await;
    let bad = start_failing_action(&sim, &client).await;
    let mut waits: Vec<Vec<Action>> = good.into_iter().map(|(_, a)| vec![a]).collect();
    waits.insert(1, vec![bad.clone()]);

    let results = wait_concurrently(&client, waits).await;
    for (i, result) in results.iter().enumerate() {
        if i == 1 {
            assert!(
                matches!(result, Err(Error::Action(e)) if e.id == bad.id && e.code == "route_exploded"),
                "{result:?}"
            );
        } else {
            assert!(result.is_ok(), "waiter {i}: {result:?}");
        }
    }
}

#[tokio::test]
async fn an_unknown_id_fails_only_its_own_waiter() {
    let (sim, client) = setup().await;
    let started = start_actions(&sim, &client, 3).await;
    let ids: Vec<i64> = started.iter().map(|(_, a)| a.id).collect();
    let waits = vec![
        vec![ids[0]],
        vec![77_777_777],
        vec![ids[1], ids[2]],
        vec![ids[2], 77_777_778],
    ];
    let results = wait_concurrently(&client, waits).await;
    assert!(results[0].is_ok(), "{:?}", results[0]);
    assert!(results[2].is_ok(), "{:?}", results[2]);
    for (i, id) in [(1, 77_777_777), (3, 77_777_778)] {
        assert!(
            matches!(&results[i], Err(Error::Action(e)) if e.id == id && e.code == "not_found"),
            "waiter {i}: {:?}",
            results[i]
        );
    }
}

#[tokio::test]
async fn a_failed_poll_fails_its_waiters_and_polling_goes_on() {
    let (sim, client) = setup().await;
    let started = start_actions(&sim, &client, 3).await;
    let waits: Vec<Vec<Action>> = started.iter().map(|(_, a)| vec![a.clone()]).collect();
    // Enough failures for every round the three waiters could be spread over.
    sim.admin()
        .inject_fault(Fault::new("/actions").method("GET").status(503).count(3))
        .await
        .expect("fault");
    let results = wait_concurrently(&client, waits.clone()).await;
    for result in &results {
        let err = result.as_ref().expect_err("the poll failed");
        assert_eq!(err.status(), Some(503), "{err:?}");
    }
    sim.admin().clear_faults().await.expect("clear");
    let results = wait_concurrently(&client, waits).await;
    for result in &results {
        assert!(result.is_ok(), "{result:?}");
    }
}

use std::time::Duration;

use cloud_provider::nodelifecycle::{
    CONTROLLER, NodeLifecycleController, NodeLifecycleControllerConfig,
};
use cloud_provider::well_known::TAINT_SHUTDOWN;

use crate::Env;
use crate::support::*;

const WAIT: Duration = Duration::from_secs(20);
const PERIOD: Duration = Duration::from_millis(200);

fn start_controller(env: &Env) {
    let controller = NodeLifecycleController::new(
        env.client.clone(),
        env.cache.clone(),
        env.fake.clone(),
        env.metrics.clone(),
        NodeLifecycleControllerConfig {
            node_monitor_period: PERIOD,
            ..NodeLifecycleControllerConfig::default()
        },
    );
    tokio::spawn(controller.run(env.shutdown.clone()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_a_node_only_when_the_cloud_confirms_the_instance_is_gone() {
    let env = Env::start().await;
    let gone = &env.name("gone-node");
    let erring = &env.name("erring-node");
    let not_found_err = &env.name("not-found-err-node");
    let ready = &env.name("ready-node");
    env.fake.set_exists(gone, Answer::Ok(false));
    env.fake
        .set_exists(erring, Answer::Err("503 from the cloud".into()));
    env.fake.set_exists(not_found_err, Answer::NotFound);
    env.fake.set_exists(ready, Answer::Ok(false));
    let gone_node = NodeBuilder::kubelet(gone).ready("False").create(&env).await;
    NodeBuilder::kubelet(erring)
        .untainted()
        .ready("Unknown")
        .create(&env)
        .await;
    // A missing Ready condition counts as Unknown; an InstanceNotFound *error* still is an
    // error, not a confirmation.
    NodeBuilder::kubelet(not_found_err).create(&env).await;
    let ready_node = NodeBuilder::kubelet(ready)
        .untainted()
        .ready("True")
        .create(&env)
        .await;
    env.wait_cached(&ready_node).await;
    start_controller(&env);

    eventually("node deleted", WAIT, || async {
        get_node(&env.client, gone).await.is_none().then_some(())
    })
    .await;
    let deleting = wait_events(&env.client, gone, "DeletingNode").await;
    assert_eq!(deleting.len(), 1, "{deleting:?}");
    assert_eq!(deleting[0].type_.as_deref(), Some("Normal"));
    assert_eq!(deleting[0].involved_object.uid, gone_node.metadata.uid);
    assert_eq!(
        deleting[0]
            .source
            .as_ref()
            .and_then(|s| s.component.as_deref()),
        Some("cloud-node-lifecycle-controller")
    );

    // Many periods of errors: the node stays, with a Warning carrying the cause.
    eventually("ten failed checks", WAIT, || async {
        (env.fake.calls(Call::Exists, erring).len() >= 10).then_some(())
    })
    .await;
    assert!(get_node(&env.client, erring).await.is_some());
    let warnings = events_with_reason(&env.client, erring, "InstanceLookupFailed").await;
    assert_eq!(
        warnings.len(),
        1,
        "one Warning for one failure: {warnings:?}"
    );
    assert_eq!(warnings[0].type_.as_deref(), Some("Warning"));
    assert!(
        warnings[0]
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("503 from the cloud")
    );
    assert_eq!(
        warnings[0].count,
        Some(1),
        "not one per failed check: {warnings:?}"
    );
    assert!(env.metrics.error_count(CONTROLLER, "transient") >= 10);
    // Each failed check is a retry of the runtime, counted by category.
    assert!(
        env.metrics
            .retry_count(CONTROLLER, cloud_provider::Category::Transient)
            >= 9
    );

    assert!(get_node(&env.client, not_found_err).await.is_some());
    assert!(!env.fake.calls(Call::Exists, not_found_err).is_empty());

    // Ready nodes are never asked, even though the fake would say "gone".
    assert!(env.fake.calls(Call::Exists, ready).is_empty());
    assert!(get_node(&env.client, ready).await.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_taint_is_added_when_off_and_removed_when_ready() {
    let env = Env::start().await;
    let name = &env.name("stopped-node");
    let failing = &env.name("shutdown-error-node");
    env.fake.set_shutdown(name, Answer::Ok(true));
    env.fake
        .set_shutdown(failing, Answer::Err("shutdown lookup failed".into()));
    NodeBuilder::kubelet(name)
        .untainted()
        .ready("Unknown")
        .create(&env)
        .await;
    NodeBuilder::kubelet(failing)
        .untainted()
        .ready("False")
        .create(&env)
        .await;
    start_controller(&env);

    let node = eventually("shutdown taint", WAIT, || async {
        get_node(&env.client, name)
            .await
            .filter(|n| has_taint(n, TAINT_SHUTDOWN))
    })
    .await;
    let taint = taints(&node)
        .into_iter()
        .find(|t| t.key == TAINT_SHUTDOWN)
        .unwrap();
    assert_eq!(taint.effect, "NoSchedule");
    assert_eq!(taint.value, None);

    // Running again but not yet Ready: the taint stays.
    env.fake.set_shutdown(name, Answer::Ok(false));
    let calls = env.fake.calls(Call::Shutdown, name).len();
    eventually("more checks", WAIT, || async {
        (env.fake.calls(Call::Shutdown, name).len() >= calls + 3).then_some(())
    })
    .await;
    assert!(has_taint(
        &get_node(&env.client, name).await.unwrap(),
        TAINT_SHUTDOWN
    ));

    set_ready(&env.client, name, "True").await;
    eventually("taint removed", WAIT, || async {
        get_node(&env.client, name)
            .await
            .filter(|n| !has_taint(n, TAINT_SHUTDOWN))
    })
    .await;
    let exists_calls = env.fake.calls(Call::Exists, name).len();
    // Progress before the check: the controller went on checking the NotReady Node beside it
    // for several more periods.
    let failing_checks = env.fake.calls(Call::Shutdown, failing).len();
    eventually("more periods of checks", WAIT, || async {
        (env.fake.calls(Call::Shutdown, failing).len() >= failing_checks + 4).then_some(())
    })
    .await;
    assert_eq!(env.fake.calls(Call::Exists, name).len(), exists_calls);

    // A failing shutdown check changes nothing and is reported.
    let warning = eventually("shutdown failure event", WAIT, || async {
        events_with_reason(&env.client, failing, "InstanceLookupFailed")
            .await
            .pop()
    })
    .await;
    assert!(
        warning
            .message
            .unwrap_or_default()
            .contains("shutdown lookup failed")
    );
    let node = get_node(&env.client, failing).await.unwrap();
    assert!(!has_taint(&node, TAINT_SHUTDOWN));
}

/// The cloud suddenly reports most Nodes gone (a token of another project, an API fault): the
/// brake keeps them all, with a Warning on each and the metric, and deletes the one that is
/// still reported gone once the others are seen again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deletion_brake_keeps_nodes_when_most_are_reported_gone_at_once() {
    let env = Env::start().await;
    let names = ["brake-a", "brake-b", "brake-c", "brake-d"].map(|n| env.name(n));
    for (i, name) in names.iter().enumerate() {
        env.fake.set_exists(name, Answer::Ok(i == 3));
        let node = NodeBuilder::kubelet(name)
            .untainted()
            .provider_id(&format!("fake://{i}"))
            .ready("False")
            .create(&env)
            .await;
        // Every Node cached before the first pass: a pass that saw only some of them judged
        // "2 of 3" once, a second Warning beside the "3 of 4" one (a loaded machine).
        env.wait_cached(&node).await;
    }
    start_controller(&env);
    // Three of four reported gone, for several passes: none is deleted.
    eventually("a Warning on every Node reported gone", WAIT, || async {
        let mut warned = 0;
        for name in &names[..3] {
            warned += usize::from(
                !events_with_reason(&env.client, name, "NodeDeletionHeld")
                    .await
                    .is_empty(),
            );
        }
        (warned == 3).then_some(())
    })
    .await;
    eventually("three more passes", WAIT, || async {
        (env.fake.calls(Call::Exists, &names[0]).len() >= 6).then_some(())
    })
    .await;
    for name in &names {
        assert!(
            get_node(&env.client, name).await.is_some(),
            "{name} deleted"
        );
    }
    assert_eq!(env.metrics.node_deletions_held(), 3);
    let held = events_with_reason(&env.client, &names[0], "NodeDeletionHeld").await;
    assert_eq!(
        held[0].count,
        Some(1),
        "one Warning, not one per pass: {held:?}"
    );
    assert!(
        held[0]
            .message
            .as_deref()
            .is_some_and(|m| m.contains("3 of the 4")),
        "{held:?}"
    );
    // Two of them are seen again: one of four is few enough, and it goes.
    env.fake.set_exists(&names[1], Answer::Ok(true));
    env.fake.set_exists(&names[2], Answer::Ok(true));
    eventually("the Node still reported gone is deleted", WAIT, || async {
        get_node(&env.client, &names[0])
            .await
            .is_none()
            .then_some(())
    })
    .await;
    for name in &names[1..] {
        assert!(
            get_node(&env.client, name).await.is_some(),
            "{name} deleted"
        );
    }
    eventually("nothing is held", WAIT, || async {
        (env.metrics.node_deletions_held() == 0).then_some(())
    })
    .await;
}

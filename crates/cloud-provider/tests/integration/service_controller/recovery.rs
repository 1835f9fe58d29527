//! A backoff grown during an outage does not outlast it: a Service whose last failure was
//! transient is retried as soon as the provider reports a recovery of its API, and a Node change
//! reaches the load balancer of a Service that is backing off. Backoffs here are ten minutes,
//! far beyond [`WAIT`]: a retry seen within it came from the recovery or the Node change.

use tokio::sync::watch;

use super::*;

/// A backoff no test waits out.
fn slow_config() -> ServiceControllerConfig {
    ServiceControllerConfig {
        backoff: Backoff {
            base: Duration::from_secs(600),
            max: Duration::from_secs(3600),
        },
        ..test_config()
    }
}

/// Run the controller with `recoveries` as the provider's recovery signal.
fn start_recovering(env: &Env, lb: &Arc<FakeLb>, recoveries: watch::Receiver<u64>) {
    let controller = ServiceController::new(
        env.client.clone(),
        env.cache.clone(),
        lb.clone(),
        env.metrics.clone(),
        ServiceControllerConfig {
            scope: env.scope.clone(),
            ..slow_config()
        },
    )
    .with_recoveries(Some(recoveries));
    tokio::spawn(controller.run(env.shutdown.clone()));
}

#[tokio::test]
async fn a_recovery_retries_a_transiently_failed_service_at_once_not_a_rejected_one() {
    let env = Env::start().await;
    let lb = FakeLb::new(&env);
    {
        let mut state = lb.state();
        state
            .ensure_errors
            .push_back(provider::Error::api_msg("503 unavailable"));
        state
            .ensure_errors
            .push_back(provider::Error::rejected("certificate not found"));
    }
    let (recovered, recoveries) = watch::channel(0);
    start_recovering(&env, &lb, recoveries);
    create_service(&env, "outage", "LoadBalancer").await;
    eventually("the first ensure failed", WAIT, || async {
        (lb.ensures("outage").len() == 1 && env.metrics.error_count("service", "transient") == 1)
            .then_some(())
    })
    .await;
    create_service(&env, "refused", "LoadBalancer").await;
    eventually("the refused Service failed too", WAIT, || async {
        (lb.ensures("refused").len() == 1).then_some(())
    })
    .await;
    wait_reason(&env, "refused", "SyncLoadBalancerFailed").await;

    recovered.send_modify(|n| *n += 1);
    let ips = wait_ingress(&env, "outage").await;
    assert_eq!(ips, ["203.0.113.1"]);
    assert_eq!(lb.ensures("outage").len(), 2);
    // Progress first: the expedited retry is done; the refused Service waits out its backoff.
    wait_reason(&env, "outage", "EnsuredLoadBalancer").await;
    assert_eq!(lb.ensures("refused").len(), 1, "{:?}", lb.calls());
}

#[tokio::test]
async fn a_node_change_reaches_the_load_balancer_of_a_service_that_backs_off() {
    let env = Env::start().await;
    let n1 = &*env.name("n1");
    let n2 = &*env.name("n2");
    let n3 = &*env.name("n3");
    let n1_node = node(&env, n1).await;
    env.wait_cached(&n1_node).await;
    let lb = FakeLb::new(&env);
    // No recovery is ever reported: only the Node change may bring the Service forward.
    let (_recovered, recoveries) = watch::channel(0);
    start_recovering(&env, &lb, recoveries);
    create_service(&env, "web", "LoadBalancer").await;
    wait_ingress(&env, "web").await;

    // The target update for n2 fails: the Service backs off for ten minutes.
    lb.state()
        .update_errors
        .push_back(provider::Error::api_msg("502 bad gateway"));
    node(&env, n2).await;
    wait_reason(&env, "web", "UpdateLoadBalancerFailed").await;
    assert_eq!(lb.updates("web"), [strings(&[n1, n2])]);

    // n3 joins: the full sync runs now, with every Node.
    node(&env, n3).await;
    eventually("a sync with n1, n2 and n3", WAIT, || async {
        lb.ensures("web")
            .last()
            .is_some_and(|last| *last == [n1, n2, n3])
            .then_some(())
    })
    .await;
    assert_eq!(lb.ensures("web").len(), 2, "{:?}", lb.calls());
}

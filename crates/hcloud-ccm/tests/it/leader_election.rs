//! Leader election against a real kube-apiserver.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code

use std::time::{Duration, Instant};

use hcloud_ccm::leader::{LeaderElectionConfig, LeaderElector, LeaderHandle, LeaderState};
use hcloud_sim::{SimConfig, Simulator};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams, PostParams};
use kube_harness::{eventually, unique_name};
use tokio_util::sync::CancellationToken;

use crate::support::ccm;
use crate::support::scope::Scope;

const NAMESPACE: &str = "kube-system";

fn config(
    lease: &str,
    identity: &str,
    lease_secs: u64,
    renew_ms: u64,
    retry_ms: u64,
) -> LeaderElectionConfig {
    LeaderElectionConfig {
        lease_name: lease.to_owned(),
        lease_namespace: NAMESPACE.to_owned(),
        identity: identity.to_owned(),
        lease_duration: Duration::from_secs(lease_secs),
        renew_deadline: Duration::from_millis(renew_ms),
        retry_period: Duration::from_millis(retry_ms),
    }
}

async fn client() -> kube::Client {
    crate::support::plane().client().await.expect("client")
}

async fn lease(client: &kube::Client, name: &str) -> Lease {
    Api::<Lease>::namespaced(client.clone(), NAMESPACE)
        .get(name)
        .await
        .expect("lease")
}

fn holder(lease: &Lease) -> Option<String> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .filter(|h| !h.is_empty())
}

fn transitions(lease: &Lease) -> i32 {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.lease_transitions)
        .unwrap_or(0)
}

/// Waits until one of the handles leads; returns its index.
async fn first_leader(handles: &[&LeaderHandle], within: Duration) -> usize {
    let deadline = Instant::now() + within;
    loop {
        let leading: Vec<usize> = handles
            .iter()
            .enumerate()
            .filter(|(_, h)| h.state() == LeaderState::Leading)
            .map(|(i, _)| i)
            .collect();
        assert!(leading.len() <= 1, "two leaders at once");
        if let [i] = leading.as_slice() {
            return *i;
        }
        assert!(Instant::now() < deadline, "no leader within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `handle` follows `holder`: it has read the lease and seen it held by `holder`.
async fn wait_following(handle: &LeaderHandle, holder: &str, within: Duration) {
    let want = LeaderState::Following {
        holder: Some(holder.to_owned()),
    };
    let deadline = Instant::now() + within;
    while handle.state() != want {
        assert!(
            Instant::now() < deadline,
            "not following {holder} within {within:?}: {:?}",
            handle.state()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The lease's renewTime.
fn renew_time(lease: Lease) -> Option<k8s_openapi::jiff::Timestamp> {
    lease.spec.and_then(|s| s.renew_time).map(|t| t.0)
}

/// Waits until the lease's renewTime has moved forward `times` times (its holder renewed).
async fn wait_renewals(client: &kube::Client, name: &str, times: usize, within: Duration) {
    let deadline = Instant::now() + within;
    let mut last = renew_time(lease(client, name).await);
    let mut seen = 0;
    while seen < times {
        assert!(
            Instant::now() < deadline,
            "{seen} of {times} renewals within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = renew_time(lease(client, name).await);
        if now > last {
            seen += 1;
            last = now;
        }
    }
}

#[tokio::test]
async fn two_candidates_exactly_one_leads() {
    let client = client().await;
    let name = unique_name("lease");
    let shutdown = CancellationToken::new();
    let a = LeaderElector::new(client.clone(), config(&name, "a", 3, 2000, 400)).spawn(&shutdown);
    let b = LeaderElector::new(client.clone(), config(&name, "b", 3, 2000, 400)).spawn(&shutdown);
    let leader = first_leader(&[&a, &b], Duration::from_secs(10)).await;
    let (winner, loser, winner_id) = if leader == 0 {
        (&a, &b, "a")
    } else {
        (&b, &a, "b")
    };

    // For several lease durations: the leader keeps renewing (seen in the lease), the other
    // keeps following.
    let mut last = renew_time(lease(&client, &name).await);
    let mut renewals = 0;
    let until = Instant::now() + Duration::from_secs(7);
    while Instant::now() < until {
        assert_eq!(winner.state(), LeaderState::Leading);
        assert_ne!(loser.state(), LeaderState::Leading);
        let now = renew_time(lease(&client, &name).await);
        if now > last {
            renewals += 1;
            last = now;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(renewals >= 3, "{renewals} renewals in 7 s");
    assert_eq!(
        loser.state(),
        LeaderState::Following {
            holder: Some(winner_id.to_owned())
        }
    );
    let l = lease(&client, &name).await;
    assert_eq!(holder(&l).as_deref(), Some(winner_id));
    assert_eq!(transitions(&l), 0);
    let spec = l.spec.clone().unwrap();
    assert_eq!(spec.lease_duration_seconds, Some(3));
    // Renewals move renewTime forward.
    wait_renewals(&client, &name, 1, Duration::from_secs(10)).await;
    let renewed = lease(&client, &name).await.spec.unwrap().renew_time;
    assert!(renewed.unwrap().0 > spec.renew_time.unwrap().0);
    assert!(winner.acquired().await.is_ok());

    shutdown.cancel();
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn standby_takes_over_after_the_leader_dies() {
    let client = client().await;
    let name = unique_name("lease");
    let shutdown = CancellationToken::new();
    let lease_secs = 3;
    let retry = Duration::from_millis(400);
    let a = LeaderElector::new(client.clone(), config(&name, "a", lease_secs, 2000, 400))
        .spawn(&shutdown);
    first_leader(&[&a], Duration::from_secs(10)).await;
    let b = LeaderElector::new(client.clone(), config(&name, "b", lease_secs, 2000, 400))
        .spawn(&shutdown);
    // Let b observe a renewing for a while: b has seen the lease held by a, and a renewed it
    // twice since.
    wait_following(&b, "a", Duration::from_secs(10)).await;
    wait_renewals(&client, &name, 2, Duration::from_secs(10)).await;
    assert_eq!(
        b.state(),
        LeaderState::Following {
            holder: Some("a".into())
        }
    );

    // Kill a without releasing, as a crash would.
    let killed_at = Instant::now();
    a.abort();
    first_leader(&[&b], Duration::from_secs(15)).await;
    let took = killed_at.elapsed();
    let bound = Duration::from_secs(lease_secs) + retry * 3 + Duration::from_secs(1);
    assert!(
        took <= bound,
        "takeover took {took:?}, expected at most {bound:?}"
    );
    // ... but not before the lease could have expired.
    assert!(
        took >= Duration::from_secs(lease_secs) - retry * 2,
        "took over too early: {took:?}"
    );

    let l = lease(&client, &name).await;
    assert_eq!(holder(&l).as_deref(), Some("b"));
    assert_eq!(transitions(&l), 1);
    shutdown.cancel();
    b.stop().await;
}

#[tokio::test]
async fn release_on_shutdown_hands_over_at_once() {
    let client = client().await;
    let name = unique_name("lease");
    let shutdown = CancellationToken::new();
    // A long lease: without the release, b would wait 30 s.
    let a =
        LeaderElector::new(client.clone(), config(&name, "a", 30, 10_000, 300)).spawn(&shutdown);
    first_leader(&[&a], Duration::from_secs(10)).await;
    let b =
        LeaderElector::new(client.clone(), config(&name, "b", 30, 10_000, 300)).spawn(&shutdown);
    wait_following(&b, "a", Duration::from_secs(10)).await;
    assert_eq!(
        b.state(),
        LeaderState::Following {
            holder: Some("a".into())
        }
    );

    let mut a_state = a.subscribe();
    let stopped_at = Instant::now();
    a.stop().await;
    assert_eq!(*a_state.borrow_and_update(), LeaderState::Stopped);
    first_leader(&[&b], Duration::from_secs(5)).await;
    assert!(
        stopped_at.elapsed() < Duration::from_secs(3),
        "{:?}",
        stopped_at.elapsed()
    );
    let l = lease(&client, &name).await;
    assert_eq!(holder(&l).as_deref(), Some("b"));
    assert_eq!(transitions(&l), 1);
    shutdown.cancel();
    b.stop().await;
    // b released too: the lease is free.
    assert_eq!(holder(&lease(&client, &name).await), None);
}

#[tokio::test]
async fn leader_notices_when_the_lease_is_taken_away() {
    let client = client().await;
    let name = unique_name("lease");
    let shutdown = CancellationToken::new();
    let a = LeaderElector::new(client.clone(), config(&name, "a", 3, 2000, 300)).spawn(&shutdown);
    assert_eq!(a.acquired().await, Ok(()));

    // Someone else overwrites the lease (as a candidate with a badly skewed clock would).
    let api = Api::<Lease>::namespaced(client.clone(), NAMESPACE);
    let mut l = api.get(&name).await.unwrap();
    let spec = l.spec.as_mut().unwrap();
    spec.holder_identity = Some("intruder".into());
    spec.renew_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
        k8s_openapi::jiff::Timestamp::now(),
    ));
    api.replace(&name, &PostParams::default(), &l)
        .await
        .unwrap();

    let state = tokio::time::timeout(Duration::from_secs(5), a.lost())
        .await
        .expect("loss noticed");
    assert_eq!(state, LeaderState::Lost);
    assert_eq!(a.state(), LeaderState::Lost);
    assert_eq!(
        holder(&lease(&client, &name).await).as_deref(),
        Some("intruder")
    );
    a.stop().await;
    shutdown.cancel();
}

#[tokio::test]
async fn shutdown_token_stops_a_standby_without_touching_the_lease() {
    let client = client().await;
    let name = unique_name("lease");
    let shutdown = CancellationToken::new();
    let a = LeaderElector::new(client.clone(), config(&name, "a", 30, 10_000, 300))
        .spawn(&CancellationToken::new());
    assert_eq!(a.acquired().await, Ok(()));
    let b =
        LeaderElector::new(client.clone(), config(&name, "b", 30, 10_000, 300)).spawn(&shutdown);
    // b has read the lease (and seen it held by a) before it is stopped.
    wait_following(&b, "a", Duration::from_secs(10)).await;
    shutdown.cancel();
    assert_eq!(b.acquired().await, Err(LeaderState::Stopped));
    assert_eq!(holder(&lease(&client, &name).await).as_deref(), Some("a"));
    a.stop().await;
}

#[tokio::test]
async fn concurrent_writes_to_the_lease_do_not_end_leadership() {
    let client = client().await;
    let name = unique_name("lease");
    let shutdown = CancellationToken::new();
    // Renewals every 50 ms, 2 s to get one through.
    let a = LeaderElector::new(client.clone(), config(&name, "a", 3, 2000, 50)).spawn(&shutdown);
    assert_eq!(a.acquired().await, Ok(()));

    // Another writer keeps changing the Lease (its annotations, never the holder), so many of
    // our read-then-replace renewals lose the optimistic-concurrency race with a 409.
    let api = Api::<Lease>::namespaced(client.clone(), NAMESPACE);
    let mut writes = 0u32;
    let mut renewed_during = std::collections::BTreeSet::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(4) {
        let patch =
            serde_json::json!({"metadata": {"annotations": {"touched": writes.to_string()}}});
        api.patch(
            &name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
        writes += 1;
        let l = lease(&client, &name).await;
        if let Some(t) = l.spec.and_then(|s| s.renew_time) {
            renewed_during.insert(t.0.to_string());
        }
        assert_eq!(
            a.state(),
            LeaderState::Leading,
            "after {writes} foreign writes"
        );
    }
    assert!(writes > 20, "{writes}");
    assert!(
        renewed_during.len() > 5,
        "renewals went on: {renewed_during:?}"
    );
    assert_eq!(holder(&lease(&client, &name).await).as_deref(), Some("a"));
    a.stop().await;
    shutdown.cancel();
}

/// The binary's Events on its Lease (`kube-system`, involved object the Lease `name`).
async fn lease_events(client: &kube::Client, name: &str) -> Vec<Event> {
    let params = ListParams::default().fields(&format!(
        "involvedObject.kind=Lease,involvedObject.name={name},involvedObject.namespace={NAMESPACE}"
    ));
    Api::<Event>::namespaced(client.clone(), NAMESPACE)
        .list(&params)
        .await
        .expect("events")
        .items
}

/// As client-go's `LeaseLock.RecordEvent` with the manager's recorder: winning the Lease
/// records one `Normal` `LeaderElection` Event `<identity> became leader` on it; renewals
/// record nothing (neither a new Event nor a higher count).
#[tokio::test]
async fn the_binary_records_one_became_leader_event_per_acquisition() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let scope = Scope::new("leader-event").await;
    let sim = Simulator::start(SimConfig::default().token(ccm::TOKEN))
        .await
        .unwrap();
    let access = scope.admin_access("ccm").await;
    let name = scope.lease().to_owned();
    let ccm = ccm::spawn_ccm(
        &access.kubeconfig,
        &sim,
        &[("HCLOUD_LOAD_BALANCERS_ENABLED", "false")],
        &[
            &scope.lease_flag(),
            "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline=3s",
            "--leader-elect-retry-period=300ms",
            "--controllers=cloud-node",
        ],
    );
    let client = scope.admin.clone();
    let leases = Api::<Lease>::namespaced(client.clone(), NAMESPACE);
    let identity = eventually("the binary to lead", Duration::from_secs(20), || async {
        leases
            .get_opt(&name)
            .await
            .unwrap()
            .as_ref()
            .and_then(holder)
    })
    .await;
    // At least two renewals before looking: none of them may add an Event.
    wait_renewals(&client, &name, 2, Duration::from_secs(10)).await;
    let events = eventually(
        "the LeaderElection Event",
        Duration::from_secs(10),
        || async { Some(lease_events(&client, &name).await).filter(|e| !e.is_empty()) },
    )
    .await;
    let l = lease(&client, &name).await;
    assert_eq!(events.len(), 1, "{events:#?}");
    let event = &events[0];
    assert_eq!(event.type_.as_deref(), Some("Normal"));
    assert_eq!(event.reason.as_deref(), Some("LeaderElection"));
    assert_eq!(
        event.message.as_deref(),
        Some(format!("{identity} became leader").as_str())
    );
    assert_eq!(event.count.unwrap_or(1), 1);
    assert_eq!(event.metadata.namespace.as_deref(), Some(NAMESPACE));
    let object = &event.involved_object;
    assert_eq!(object.kind.as_deref(), Some("Lease"));
    assert_eq!(
        object.api_version.as_deref(),
        Some("coordination.k8s.io/v1")
    );
    assert_eq!(object.namespace.as_deref(), Some(NAMESPACE));
    assert_eq!(object.name.as_deref(), Some(name.as_str()));
    assert_eq!(object.uid, l.metadata.uid);
    assert_eq!(
        event.source.as_ref().and_then(|s| s.component.as_deref()),
        Some("cloud-controller-manager")
    );

    // Still the one Event, not counted again, after more renewals.
    wait_renewals(&client, &name, 2, Duration::from_secs(10)).await;
    assert_eq!(holder(&lease(&client, &name).await), Some(identity));
    let again = lease_events(&client, &name).await;
    assert_eq!(again.len(), 1, "{again:#?}");
    assert_eq!(again[0].count.unwrap_or(1), 1, "{again:#?}");
    assert_eq!(again[0].metadata.name, event.metadata.name);
    drop(ccm);
}

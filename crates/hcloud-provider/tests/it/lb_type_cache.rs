//! The load balancer type cache against the simulator: one listing answers lookups by name and
//! ID, unknown names re-list only after a while, failures are errors, and the official metric.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use hcloud_api::{Client, ClientConfig, RetryConfig, Token};
use hcloud_provider::{CacheConfig, HcloudProvider, LoadBalancerTypeCache, ProviderSettings};
use hcloud_sim::{Fault, SimConfig, Simulator};
use prometheus_client::registry::Registry;

fn client(sim: &Simulator) -> Client {
    let mut config = ClientConfig::new(Token::new(sim.token())).with_endpoint(sim.base_url());
    config.retry = RetryConfig {
        max_tries: 1,
        base: Duration::from_millis(5),
        cap: Duration::from_millis(10),
        jitter: false,
    };
    Client::new(config).unwrap()
}

/// A simulator, and a cache over it with the default settings changed by `configure`.
async fn started(configure: impl FnOnce(&mut CacheConfig)) -> (Simulator, LoadBalancerTypeCache) {
    let mut config = CacheConfig::default();
    configure(&mut config);
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let cache = LoadBalancerTypeCache::with_config(client(&sim), &config);
    (sim, cache)
}

async fn listings(sim: &Simulator) -> u64 {
    sim.admin()
        .request_counts()
        .await
        .unwrap()
        .get("GET /load_balancer_types")
        .copied()
        .unwrap_or(0)
}

#[tokio::test]
async fn one_listing_answers_lookups_by_name_and_id_within_the_max_age() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let cache = LoadBalancerTypeCache::new(client(&sim));

    let lb11 = cache.get("lb11").await.unwrap().expect("lb11 exists");
    assert_eq!(lb11.name, "lb11");
    let by_id = cache
        .get(&lb11.id.to_string())
        .await
        .unwrap()
        .expect("found by ID");
    assert_eq!(by_id.name, "lb11");
    assert_eq!(cache.get("lb21").await.unwrap().unwrap().name, "lb21");
    // Unknown within the first minute of a listing: answered from it.
    assert!(cache.get("lb99").await.unwrap().is_none());

    assert_eq!(listings(&sim).await, 1);
    assert_eq!(cache.requests("miss"), 1);
    assert_eq!(cache.requests("hit"), 3);
}

#[tokio::test]
async fn an_expired_listing_is_read_again_and_unknown_names_after_a_minute_only() {
    let (sim, cache) = started(|c| c.lb_type_max_age = Duration::from_millis(50)).await;
    assert!(cache.get("lb11").await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert!(cache.get("lb11").await.unwrap().is_some());
    assert_eq!(listings(&sim).await, 2);
    assert_eq!(cache.requests("miss"), 2);
}

#[tokio::test]
async fn an_unknown_name_reads_the_list_again_once_it_is_older_than_the_unknown_type_refresh() {
    let (sim, cache) = started(|c| c.unknown_lb_type_refresh = Duration::from_millis(100)).await;
    assert!(cache.get("lb99").await.unwrap().is_none());
    assert!(cache.get("lb99").await.unwrap().is_none());
    assert_eq!(
        listings(&sim).await,
        1,
        "a young list answers for unknown names"
    );
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert!(cache.get("lb99").await.unwrap().is_none());
    assert_eq!(listings(&sim).await, 2, "an older one is read again");
    // Known names are answered from the list for its max age (an hour), whatever its age.
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert!(cache.get("lb11").await.unwrap().is_some());
    assert_eq!(listings(&sim).await, 2);
    assert_eq!((cache.requests("miss"), cache.requests("hit")), (2, 2));
}

#[tokio::test]
async fn a_failed_listing_is_an_error_not_an_unknown_type() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    sim.admin()
        .inject_fault(Fault::new("/load_balancer_types").status(503))
        .await
        .unwrap();
    let cache = LoadBalancerTypeCache::new(client(&sim));
    assert!(cache.get("lb11").await.is_err());
    // The next lookup tries again and succeeds.
    assert!(cache.get("lb11").await.unwrap().is_some());
}

#[tokio::test]
async fn the_provider_registers_the_official_metric() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let provider = HcloudProvider::new(client(&sim), ProviderSettings::default())
        .await
        .unwrap();
    provider.lb_type_cache().get("lb11").await.unwrap();
    provider.lb_type_cache().get("lb11").await.unwrap();
    let mut registry = Registry::default();
    provider.register_metrics(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for line in [
        "cloud_controller_manager_load_balancer_type_cache_requests_total{subsystem=\"load_balancer\",mode=\"all\",result=\"miss\"} 1",
        "cloud_controller_manager_load_balancer_type_cache_requests_total{subsystem=\"load_balancer\",mode=\"all\",result=\"hit\"} 1",
        "cloud_controller_manager_operations_total{op=\"hcloud/newCloud\"} 1",
    ] {
        assert!(text.contains(line), "{line} missing in\n{text}");
    }
}

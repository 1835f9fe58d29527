//! Waiting for the API's bucket and the rate-limit metrics.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code

use crate::common;

use std::time::{Duration, Instant};

use hcloud_api::Client;
use hcloud_sim::{Fault, SimConfig, Simulator};
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

use common::{config_for, count};

#[tokio::test]
async fn empty_api_bucket_is_waited_for_instead_of_hammered() {
    // 10 requests, refilled 10 per second; `RateLimit-Reset` is at most a second away.
    let sim = Simulator::start(SimConfig::default().rate_limit_bucket(10, 10.0))
        .await
        .expect("sim");
    let mut config = config_for(&sim);
    // A single try: any 429 would fail the test. No reserve: the bucket is drained.
    config.retry.max_tries = 1;
    config.rate_limit_reserve = 0;
    let client = Client::new(config).expect("client");
    let start = Instant::now();
    for i in 0..16 {
        client
            .locations()
            .get(1)
            .await
            .unwrap_or_else(|e| panic!("request {i}: {e}"));
    }
    let elapsed = start.elapsed();
    assert_eq!(
        count(&sim, "GET /locations/{id}").await,
        16,
        "no extra tries"
    );
    // The first 10 go at once; the rest are paced to the bucket's refill.
    assert!(elapsed >= Duration::from_millis(500), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(8), "{elapsed:?}");
    // The client went at the bucket's pace, token by token, not waiting for it to fill: the
    // last answer leaves it near empty (0, or the token or two that refilled while a loaded
    // machine delayed the last request; it failed once on a loaded machine with 1).
    let remaining = client
        .rate_limit_remaining()
        .expect("RateLimit-Remaining read");
    assert!(remaining <= 2, "{remaining}");
}

#[tokio::test]
async fn rate_limited_answers_are_retried_after_the_bucket_refills() {
    // A 429 for an exhausted bucket: capacity 1, refilled 2 per second.
    let sim = Simulator::start(SimConfig::default().rate_limit_bucket(1, 2.0))
        .await
        .expect("sim");
    let client = Client::new(config_for(&sim)).expect("client");
    let other = Client::new(config_for(&sim)).expect("second client");
    // Another client drains the bucket behind our client's back.
    other.locations().get(1).await.expect("first");
    let start = Instant::now();
    client
        .locations()
        .get(1)
        .await
        .expect("retried until refilled");
    assert!(
        start.elapsed() >= Duration::from_millis(200),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn plenty_of_api_budget_is_spent_without_pacing() {
    // The API's default bucket (3600, 1/s): a busy burst of 400 requests leaves thousands, so
    // nothing waits (a fixed client budget of 3000/h with a burst of 100 would have spread
    // the last 300 over six minutes).
    let sim = Simulator::start(SimConfig::default()).await.expect("sim");
    let client = Client::new(config_for(&sim)).expect("client");
    let start = Instant::now();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                for _ in 0..50 {
                    client.locations().get(1).await.expect("request");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(count(&sim, "GET /locations/{id}").await, 400);
    assert!(!client.rate_limit_reserving());
    let remaining = client.rate_limit_remaining().expect("reported");
    assert!((3100..3600).contains(&remaining), "{remaining}");
}

#[tokio::test]
async fn the_reserve_is_kept_for_other_tools() {
    // A bucket of 60, refilled 10 per second: at most half (30) is reserved. The client spends
    // the first 30 at once, then paces itself to about half the refill rate, so the bucket
    // never drops far below the reserve.
    let sim = Simulator::start(SimConfig::default().rate_limit_bucket(60, 10.0))
        .await
        .expect("sim");
    let mut config = config_for(&sim);
    config.retry.max_tries = 1;
    let client = Client::new(config).expect("client");
    let start = Instant::now();
    let mut lowest = u64::MAX;
    for i in 0..40 {
        client
            .locations()
            .get(1)
            .await
            .unwrap_or_else(|e| panic!("request {i}: {e}"));
        lowest = lowest.min(client.rate_limit_remaining().expect("reported"));
    }
    let elapsed = start.elapsed();
    assert!(client.rate_limit_reserving(), "at the reserve");
    assert!(elapsed >= Duration::from_millis(1000), "paced: {elapsed:?}");
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    assert!(lowest >= 20, "the reserve was spent: {lowest} left");

    // Without a reserve the same requests go at once (the bucket holds them all).
    let sim = Simulator::start(SimConfig::default().rate_limit_bucket(60, 10.0))
        .await
        .expect("sim");
    let client = Client::new(config_for(&sim).with_rate_limit_reserve(0)).expect("client");
    let start = Instant::now();
    for _ in 0..40 {
        client.locations().get(1).await.expect("request");
    }
    assert!(!client.rate_limit_reserving());
    assert!(
        start.elapsed() < Duration::from_millis(900),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn metrics_use_official_names_and_route_templates() {
    let sim = Simulator::start(SimConfig::default()).await.expect("sim");
    let client = Client::new(config_for(&sim)).expect("client");
    let mut registry = Registry::default();
    client.register_metrics(&mut registry);

    client.locations().get(1).await.expect("location");
    let err = client.servers().get(987_654).await.expect_err("missing");
    assert!(err.is_not_found());
    sim.admin()
        .inject_fault(Fault::new("/locations/{id}").code("bad_gateway"))
        .await
        .expect("fault");
    client.locations().get(2).await.expect("after retry");

    let mut text = String::new();
    encode(&mut text, &registry).expect("encode");
    for line in [
        "hcloud_api_requests_total{code=\"200\",method=\"get\",api_endpoint=\"/locations/-\"} 2",
        "hcloud_api_requests_total{code=\"502\",method=\"get\",api_endpoint=\"/locations/-\"} 1",
        "hcloud_api_requests_total{code=\"404\",method=\"get\",api_endpoint=\"/servers/-\"} 1",
        "hcloud_api_in_flight_requests 0",
        "hcloud_api_request_duration_seconds_count{method=\"get\"} 4",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    assert!(!text.contains("987654"), "raw IDs must not become labels");
    assert!(client.metrics().rate_limit_remaining() > 3000);
    assert!(
        text.contains("# TYPE hcloud_api_rate_limit_remaining gauge"),
        "{text}"
    );
    assert_eq!(
        client
            .metrics()
            .requests_total("200", "GET", "/locations/-"),
        2
    );
}

//! Shared helpers of the simulator tests.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code
#![allow(dead_code)]

use std::time::Duration;

use hcloud_api::{Client, ClientConfig, RetryConfig, Token};
use hcloud_sim::{SimConfig, Simulator};

/// Retries with tiny delays, so retry tests stay fast.
pub fn fast_retry() -> RetryConfig {
    RetryConfig {
        max_tries: 5,
        base: Duration::from_millis(5),
        cap: Duration::from_millis(40),
        jitter: true,
    }
}

/// A config for the simulator: fast retries, fast polling.
pub fn config_for(sim: &Simulator) -> ClientConfig {
    ClientConfig::new(Token::new(sim.token()))
        .with_endpoint(sim.base_url())
        .with_retry(fast_retry())
        .with_poll_interval(Duration::from_millis(20))
        .with_request_timeout(Duration::from_secs(10))
}

/// A simulator without rate limit and with short actions.
pub async fn start_sim() -> Simulator {
    Simulator::start(
        SimConfig::default()
            .rate_limit_off()
            .action_delay(Duration::from_millis(60)),
    )
    .await
    .expect("simulator")
}

/// A simulator and a client for it.
pub async fn setup() -> (Simulator, Client) {
    let sim = start_sim().await;
    let client = Client::new(config_for(&sim)).expect("client");
    (sim, client)
}

/// Requests the simulator counted for "METHOD /route/{id}/template".
pub async fn count(sim: &Simulator, key: &str) -> u64 {
    let counts = sim.admin().request_counts().await.expect("counts");
    counts.get(key).copied().unwrap_or(0)
}

//! The Hetzner instances implementation against the simulator: lookups, metadata, the shared
//! cache's request cost, and that cloud failures are never read as "server gone".

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use cloud_provider::CloudProvider as _;
use hcloud_api::{Client, ClientConfig, RetryConfig, Token};
use hcloud_provider::{
    AddressFamily, CacheConfig, CacheMode, HcloudProvider, NetworkRef, PROVIDED_BY_LABEL,
    ProviderSettings,
};
use hcloud_sim::{Fault, NetworkSeed, ServerSeed, SimConfig, Simulator};
use k8s_openapi::api::core::v1::{Node, NodeSpec};

fn client(sim: &Simulator) -> Client {
    let mut config = ClientConfig::new(Token::new(sim.token())).with_endpoint(sim.base_url());
    config.retry = RetryConfig {
        max_tries: 2,
        base: Duration::from_millis(5),
        cap: Duration::from_millis(10),
        jitter: false,
    };
    config.request_timeout = Duration::from_secs(2);
    Client::new(config).unwrap()
}

fn node(name: &str, provider_id: Option<&str>) -> Node {
    Node {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            provider_id: provider_id.map(str::to_owned),
            ..NodeSpec::default()
        }),
        status: None,
    }
}

fn settings() -> ProviderSettings {
    ProviderSettings {
        zone_label_enabled: true,
        ..ProviderSettings::default()
    }
}

async fn provider(sim: &Simulator, settings: ProviderSettings) -> HcloudProvider {
    HcloudProvider::new(client(sim), settings).await.unwrap()
}

async fn seed(sim: &Simulator, seed: ServerSeed) -> i64 {
    sim.admin().create_server(seed).await.unwrap()["id"]
        .as_i64()
        .unwrap()
}

#[tokio::test]
async fn metadata_by_provider_id_and_by_name() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let network = sim
        .admin()
        .create_network(NetworkSeed::new("k8s", "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central"))
        .await
        .unwrap();
    let id = seed(
        &sim,
        ServerSeed {
            server_type: "cpx22".into(),
            location: "nbg1".into(),
            networks: vec![network.into()],
            ..ServerSeed::new("worker-1")
        },
    )
    .await;
    let p = provider(
        &sim,
        ProviderSettings {
            network: Some(NetworkRef::Name("k8s".into())),
            address_family: AddressFamily::DualStack,
            ..settings()
        },
    )
    .await;
    assert_eq!(p.network_id(), Some(network));
    let instances = p.instances().unwrap();

    let by_name = instances
        .instance_metadata(&node("worker-1", None))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(by_name.provider_id, format!("hcloud://{id}"));
    assert_eq!(by_name.instance_type, "cpx22");
    assert_eq!(by_name.region, "nbg1");
    assert_eq!(by_name.zone, "nbg1-dc3");
    assert_eq!(by_name.additional_labels[PROVIDED_BY_LABEL], "cloud");
    let types: Vec<&str> = by_name
        .node_addresses
        .iter()
        .map(|a| a.type_.as_str())
        .collect();
    assert_eq!(
        types,
        ["Hostname", "ExternalIP", "ExternalIP", "InternalIP"]
    );
    assert!(by_name.node_addresses[3].address.starts_with("10.0.0."));
    assert!(by_name.node_addresses[2].address.ends_with("::1"));

    // A Node named differently but carrying the providerID is found by ID (with a Warning
    // that the names differ).
    let by_id = instances
        .instance_metadata(&node("renamed", Some(&format!("hcloud://{id}"))))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(by_id.warnings.len(), 1, "{:?}", by_id.warnings);
    assert_eq!(
        cloud_provider::InstanceMetadata {
            warnings: Vec::new(),
            ..by_id
        },
        by_name
    );
}

#[tokio::test]
async fn unknown_network_is_a_startup_error_naming_the_variable() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let err = HcloudProvider::new(
        client(&sim),
        ProviderSettings {
            network: Some(NetworkRef::Name("nope".into())),
            ..settings()
        },
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("HCLOUD_NETWORK") && err.contains("nope"),
        "{err}"
    );
}

#[tokio::test]
async fn a_burst_of_lookups_costs_one_listing() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    for i in 0..40 {
        seed(&sim, ServerSeed::new(format!("burst-{i}"))).await;
    }
    let p = provider(&sim, settings()).await;
    let instances = p.instances().unwrap();
    sim.admin().reset_request_counts().await.unwrap();

    let lookups = (0..40).map(|i| {
        let instances = instances.clone();
        async move {
            instances
                .instance_metadata(&node(&format!("burst-{i}"), None))
                .await
        }
    });
    let results = futures::future::join_all(lookups).await;
    assert!(results.iter().all(|r| matches!(r, Ok(Some(_)))));
    // And the same again, e.g. the periodic address refresh: answered from the cache.
    for i in 0..40 {
        instances
            .instance_metadata(&node(&format!("burst-{i}"), None))
            .await
            .unwrap();
    }
    let counts = sim.admin().request_counts().await.unwrap();
    assert_eq!(counts.get("GET /servers"), Some(&1), "{counts:?}");
    assert_eq!(counts.values().sum::<u64>(), 1, "{counts:?}");
}

/// The minimum refresh interval of the tests below (2 s in production): a listing younger
/// than this answers misses, and one direct read is made per interval.
const MIN_REFRESH: Duration = Duration::from_millis(500);

/// A moment longer than [`MIN_REFRESH`].
const PAST_MIN_REFRESH: Duration = Duration::from_millis(550);

/// Once the listing is older than the minimum refresh interval ([`MIN_REFRESH`]), servers
/// `new-{i}` appear and their Nodes are looked up one after another (announced first when
/// `announce`); the requests that took.
async fn servers_join(
    sim: &Simulator,
    instances: &dyn cloud_provider::Instances,
    range: std::ops::RangeInclusive<usize>,
    announce: bool,
) -> std::collections::BTreeMap<String, u64> {
    tokio::time::sleep(PAST_MIN_REFRESH).await;
    for i in range.clone() {
        seed(sim, ServerSeed::new(format!("new-{i}"))).await;
    }
    sim.admin().reset_request_counts().await.unwrap();
    if announce {
        instances.expect_lookups(range.clone().count());
    }
    for i in range {
        let found = instances
            .instance_metadata(&node(&format!("new-{i}"), None))
            .await
            .unwrap();
        assert!(found.is_some(), "new-{i}");
    }
    sim.admin().request_counts().await.unwrap()
}

/// A simulator with 120 servers `old-{i}` (three pages), and a provider with `cache` whose
/// listing was just made (by one lookup).
async fn listed_three_pages(cache: CacheConfig) -> (Simulator, HcloudProvider) {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    for i in 0..120 {
        seed(&sim, ServerSeed::new(format!("old-{i}"))).await;
    }
    let p = provider(
        &sim,
        ProviderSettings {
            cache,
            ..settings()
        },
    )
    .await;
    p.instances()
        .unwrap()
        .instance_metadata(&node("old-0", None))
        .await
        .unwrap();
    (sim, p)
}

#[tokio::test]
async fn one_new_server_in_a_large_listing_is_read_directly_a_burst_lists() {
    let (sim, p) = listed_three_pages(CacheConfig {
        miss_ttl: Duration::ZERO,
        min_refresh_interval: MIN_REFRESH,
        ..CacheConfig::default()
    })
    .await;
    let instances = p.instances().unwrap();
    // The listing must be older than the minimum refresh interval for a miss to ask again.
    tokio::time::sleep(PAST_MIN_REFRESH).await;

    // One Node joins: its server is read by name, not all three pages again.
    seed(&sim, ServerSeed::new("new-0")).await;
    sim.admin().reset_request_counts().await.unwrap();
    let found = instances
        .instance_metadata(&node("new-0", None))
        .await
        .unwrap();
    assert!(found.is_some());
    let counts = sim.admin().request_counts().await.unwrap();
    assert_eq!(counts.values().sum::<u64>(), 1, "{counts:?}");
    // Found again without a request.
    instances
        .instance_metadata(&node("new-0", None))
        .await
        .unwrap();
    assert_eq!(
        sim.admin()
            .request_counts()
            .await
            .unwrap()
            .values()
            .sum::<u64>(),
        1
    );

    // Many join at once: a few direct reads at most, then one listing answers the rest.
    let counts = servers_join(&sim, instances.as_ref(), 1..=10, false).await;
    let total: u64 = counts.values().sum();
    // Not 10 direct reads: one, then the 3 pages of a listing answer the rest.
    assert!(total <= 4, "{counts:?}");

    // A caller that announces several lookups (the periodic address refresh) gets the
    // listing at once: its 3 pages, without the one direct read before them.
    let counts = servers_join(&sim, instances.as_ref(), 11..=13, true).await;
    assert_eq!(counts.values().sum::<u64>(), 3, "{counts:?}");
}

/// A joining Node's server is read once, for its initialisation; the route's gateway lookup a
/// moment later finds that read even when the listing has aged past the max age meanwhile,
/// instead of listing every server. A change seen by the status check after the read makes
/// it as outdated as the listing.
#[tokio::test]
async fn a_direct_read_answers_while_it_is_younger_than_the_max_age() {
    let max_age = Duration::from_millis(1500);
    let (sim, p) = listed_three_pages(CacheConfig {
        max_age,
        status_period: Duration::from_millis(100),
        miss_ttl: Duration::ZERO,
        min_refresh_interval: MIN_REFRESH,
        ..CacheConfig::default()
    })
    .await;
    let instances = p.instances().unwrap();
    let listed = std::time::Instant::now();
    // A NotReady Node with its providerID (answered from the listing, no request).
    let old = instances
        .instance_metadata(&node("old-1", None))
        .await
        .unwrap()
        .unwrap()
        .provider_id;
    // The first status check only learns which servers run.
    let checked = node("old-1", Some(&old));
    instances.instance_shutdown(&checked).await.unwrap();
    tokio::time::sleep(PAST_MIN_REFRESH).await;
    let id = seed(&sim, ServerSeed::new("new-0")).await;
    sim.admin().reset_request_counts().await.unwrap();
    let joined = node("new-0", None);
    assert!(
        instances
            .instance_metadata(&joined)
            .await
            .unwrap()
            .is_some()
    );
    let read = std::time::Instant::now();

    // The listing is past its max age, the direct read is not: it answers alone.
    tokio::time::sleep(max_age.saturating_sub(listed.elapsed()) + Duration::from_millis(200)).await;
    assert!(listed.elapsed() > max_age && read.elapsed() < max_age);
    let found = instances.instance_metadata(&joined).await.unwrap().unwrap();
    assert_eq!(found.provider_id, format!("hcloud://{id}"));
    let counts = sim.admin().request_counts().await.unwrap();
    assert_eq!(counts.values().sum::<u64>(), 1, "{counts:?}");

    // Another server starts; the status check (of a NotReady Node) sees it after the read.
    // Its own lookup is a direct read once the window of one per minimum refresh interval is
    // open again, so the listing stays as it is, outdated.
    seed(&sim, ServerSeed::new("new-1")).await;
    tokio::time::sleep(PAST_MIN_REFRESH.saturating_sub(read.elapsed())).await;
    instances.instance_shutdown(&checked).await.unwrap();
    sim.admin().reset_request_counts().await.unwrap();
    assert!(
        instances
            .instance_metadata(&joined)
            .await
            .unwrap()
            .is_some()
    );
    // Asked again: its one server, not a listing of all three pages, although another direct
    // read just used the window of one per minimum refresh interval.
    let counts = sim.admin().request_counts().await.unwrap();
    assert_eq!(counts.values().sum::<u64>(), 1, "asked again: {counts:?}");
}

#[tokio::test]
async fn a_missing_server_is_remembered_instead_of_relisting() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    seed(&sim, ServerSeed::new("present")).await;
    let p = provider(&sim, settings()).await;
    let instances = p.instances().unwrap();
    sim.admin().reset_request_counts().await.unwrap();

    for _ in 0..10 {
        let err = instances
            .instance_metadata(&node("absent", None))
            .await
            .unwrap_err();
        assert!(err.is_instance_not_found(), "{err}");
    }
    let counts = sim.admin().request_counts().await.unwrap();
    assert_eq!(counts.get("GET /servers"), Some(&1), "{counts:?}");
}

#[tokio::test]
async fn a_server_created_after_the_listing_is_found_once_the_miss_expires() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let p = provider(
        &sim,
        ProviderSettings {
            cache: CacheConfig {
                miss_ttl: Duration::from_millis(100),
                min_refresh_interval: MIN_REFRESH,
                ..CacheConfig::default()
            },
            ..settings()
        },
    )
    .await;
    let instances = p.instances().unwrap();
    assert!(
        instances
            .instance_metadata(&node("late", None))
            .await
            .unwrap_err()
            .is_instance_not_found()
    );
    seed(&sim, ServerSeed::new("late")).await;
    // Within the minimum refresh interval the miss stands; after it, a refresh finds it.
    tokio::time::sleep(PAST_MIN_REFRESH).await;
    let found = instances
        .instance_metadata(&node("late", None))
        .await
        .unwrap();
    assert!(found.is_some());
}

#[tokio::test]
async fn existence_is_confirmed_directly_never_from_a_stale_miss() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let kept = seed(&sim, ServerSeed::new("kept")).await;
    let doomed = seed(&sim, ServerSeed::new("doomed")).await;
    let p = provider(&sim, settings()).await;
    let instances = p.instances().unwrap();
    let kept_node = node("kept", Some(&format!("hcloud://{kept}")));
    let doomed_node = node("doomed", Some(&format!("hcloud://{doomed}")));

    // Fill the cache, then create a server the listing does not know.
    instances.instance_metadata(&kept_node).await.unwrap();
    let young = seed(&sim, ServerSeed::new("young")).await;
    let young_node = node("young", Some(&format!("hcloud://{young}")));
    assert!(instances.instance_exists(&young_node).await.unwrap());
    // Without a providerID: found by its name among the servers known (the read above).
    assert!(
        instances
            .instance_exists(&node("young", None))
            .await
            .unwrap()
    );

    sim.admin().delete_server(doomed).await.unwrap();
    // The cached listing still has the server; a deletion shows up at the latest after the
    // cache's max age. A direct check (cache off) sees it at once.
    let direct = provider(
        &sim,
        ProviderSettings {
            cache: CacheConfig {
                mode: CacheMode::Off,
                ..CacheConfig::default()
            },
            ..settings()
        },
    )
    .await;
    let direct = direct.instances().unwrap();
    // Deletion through the simulator completes after its action delay.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while direct.instance_exists(&doomed_node).await.unwrap() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "server was never deleted"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A Node without providerID is never reported gone: it may be no cloud server at all.
    assert!(direct.instance_exists(&node("doomed", None)).await.is_err());
    assert!(direct.instance_exists(&kept_node).await.unwrap());
}

#[tokio::test]
async fn cloud_failures_are_errors_not_absence() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let p = provider(
        &sim,
        ProviderSettings {
            cache: CacheConfig {
                mode: CacheMode::Off,
                ..CacheConfig::default()
            },
            ..settings()
        },
    )
    .await;
    let instances = p.instances().unwrap();
    let missing = node("gone", Some("hcloud://987654"));
    for (status, code) in [
        (503, "unavailable"),
        (500, "server_error"),
        (401, "unauthorized"),
        (429, "rate_limit_exceeded"),
    ] {
        sim.admin()
            .inject_fault(Fault::new("*").status(status).code(code).count(10))
            .await
            .unwrap();
        let result = instances.instance_exists(&missing).await;
        assert!(
            result
                .as_ref()
                .is_err_and(|e| e.category() == cloud_provider::Category::Transient),
            "{status}: {result:?}"
        );
        sim.admin().clear_faults().await.unwrap();
    }
    sim.admin()
        .inject_fault(Fault::new("*").latency(Duration::from_secs(5)).count(10))
        .await
        .unwrap();
    let result = instances.instance_exists(&missing).await;
    assert!(
        result
            .as_ref()
            .is_err_and(|e| e.category() == cloud_provider::Category::Transient),
        "timeout: {result:?}"
    );
    sim.admin().clear_faults().await.unwrap();
    // Without faults, the API says the server does not exist.
    assert!(!instances.instance_exists(&missing).await.unwrap());
}

#[tokio::test]
async fn robot_and_foreign_provider_ids_are_errors_never_absence() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let p = provider(&sim, settings()).await;
    let instances = p.instances().unwrap();
    for id in ["hrobot://123", "hcloud://bm-123"] {
        let err = instances
            .instance_exists(&node("dedicated", Some(id)))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("Robot"), "{err}");
        assert!(
            instances
                .instance_metadata(&node("dedicated", Some(id)))
                .await
                .is_err()
        );
    }
    let err = instances
        .instance_exists(&node("elsewhere", Some("aws:///i-1")))
        .await
        .unwrap_err();
    assert!(
        (err.user_reason() == Some("InvalidConfiguration")
            && err.to_string().contains("aws:///i-1")),
        "{err}"
    );
    let counts = sim.admin().request_counts().await.unwrap();
    assert_eq!(
        counts.values().sum::<u64>(),
        0,
        "no API call for unusable providerIDs"
    );
}

#[tokio::test]
async fn shutdown_follows_the_server_status() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let id = seed(
        &sim,
        ServerSeed {
            status: "off".into(),
            ..ServerSeed::new("sleepy")
        },
    )
    .await;
    let p = provider(
        &sim,
        ProviderSettings {
            cache: CacheConfig {
                mode: CacheMode::Off,
                ..CacheConfig::default()
            },
            ..settings()
        },
    )
    .await;
    let instances = p.instances().unwrap();
    let n = node("sleepy", Some(&format!("hcloud://{id}")));
    assert!(instances.instance_shutdown(&n).await.unwrap());
    sim.admin().set_server_status(id, "running").await.unwrap();
    assert!(!instances.instance_shutdown(&n).await.unwrap());
}

#[tokio::test]
async fn lookups_queued_behind_a_failed_listing_share_its_failure() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    for i in 0..5 {
        seed(&sim, ServerSeed::new(format!("outage-{i}"))).await;
    }
    let p = provider(&sim, settings()).await;
    let instances = p.instances().unwrap();
    sim.admin().reset_request_counts().await.unwrap();
    sim.admin()
        .inject_fault(
            Fault::new("/servers")
                .method("GET")
                .status(503)
                .code("unavailable")
                .latency(Duration::from_millis(200))
                .count(100),
        )
        .await
        .unwrap();

    let lookups = (0..20).map(|i| {
        let instances = instances.clone();
        async move {
            instances
                .instance_metadata(&node(&format!("outage-{}", i % 5), None))
                .await
        }
    });
    let results = futures::future::join_all(lookups).await;
    for result in &results {
        assert!(
            result
                .as_ref()
                .is_err_and(|e| e.category() == cloud_provider::Category::Transient),
            "{result:?}"
        );
    }
    let counts = sim.admin().request_counts().await.unwrap();
    assert_eq!(counts.get("GET /servers"), Some(&1), "{counts:?}");

    // Once the API answers again, the next lookup lists again and succeeds.
    sim.admin().clear_faults().await.unwrap();
    assert!(
        instances
            .instance_metadata(&node("outage-0", None))
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn lifecycle_checks_accept_an_older_listing_than_metadata_lookups() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let id = seed(&sim, ServerSeed::new("steady")).await;
    let p = provider(
        &sim,
        ProviderSettings {
            cache: CacheConfig {
                max_age: Duration::from_millis(200),
                status_max_age: Duration::from_secs(30),
                ..CacheConfig::default()
            },
            ..settings()
        },
    )
    .await;
    let instances = p.instances().unwrap();
    let n = node("steady", Some(&format!("hcloud://{id}")));
    sim.admin().reset_request_counts().await.unwrap();
    instances.instance_metadata(&n).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Past the max age: the lifecycle controller's checks still use the listing, plus the
    // status check (one count of the running servers, one listing of the others). The first
    // status check has nothing to compare with but the listing, which shows the same
    // servers: it stays...
    for _ in 0..10 {
        assert!(instances.instance_exists(&n).await.unwrap());
        assert!(!instances.instance_shutdown(&n).await.unwrap());
    }
    let counts = sim.admin().request_counts().await.unwrap();
    assert_eq!(counts.values().sum::<u64>(), 3, "{counts:?}");
    // ...while metadata (initialization, address refresh) lists again.
    tokio::time::sleep(Duration::from_millis(300)).await;
    instances.instance_metadata(&n).await.unwrap();
    let counts = sim.admin().request_counts().await.unwrap();
    assert_eq!(counts.get("GET /servers"), Some(&4), "{counts:?}");
}

#[tokio::test]
async fn operation_metrics_use_the_official_names() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let id = seed(&sim, ServerSeed::new("metered")).await;
    let p = provider(&sim, settings()).await;
    let mut registry = prometheus_client::registry::Registry::default();
    p.register_metrics(&mut registry);
    let instances = p.instances().unwrap();
    let n = node("metered", Some(&format!("hcloud://{id}")));
    instances.instance_metadata(&n).await.unwrap();
    instances.instance_exists(&n).await.unwrap();
    instances.instance_shutdown(&n).await.unwrap();
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for op in ["InstanceMetadata", "InstanceExists", "InstanceShutdown"] {
        let line = format!(
            "cloud_controller_manager_operations_total{{op=\"hcloud/instancesv2.{op}\"}} 1"
        );
        assert!(text.contains(&line), "{line} missing in:\n{text}");
    }
    // Metadata listed (a miss); the status check asked the API (a miss) and found the
    // listing showing the same servers; existence was answered from that listing, shutdown
    // from the status check and the listing (three hits).
    for line in [
        "cloud_controller_manager_server_cache_requests_total{subsystem=\"instances_v2\",mode=\"all\",result=\"miss\"} 2",
        "cloud_controller_manager_server_cache_requests_total{subsystem=\"instances_v2\",mode=\"all\",result=\"hit\"} 3",
    ] {
        assert!(text.contains(line), "{line} missing in:\n{text}");
    }
    assert!(!text.contains("subsystem=\"none\""), "{text}");
}

#[tokio::test]
async fn a_node_without_provider_id_named_unlike_its_server_is_kept_while_a_server_has_its_ip() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let network = sim
        .admin()
        .create_network(NetworkSeed::new("k8s", "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central"))
        .await
        .unwrap();
    let server = sim
        .admin()
        .create_server(ServerSeed {
            networks: vec![network.into()],
            ..ServerSeed::new("srv-x")
        })
        .await
        .unwrap();
    let private_ip = server["private_net"][0]["ip"].as_str().unwrap().to_owned();
    let p = provider(&sim, settings()).await;
    let instances = p.instances().unwrap();
    let with_address = |name: &str, ip: &str| {
        let mut n = node(name, None);
        n.status = Some(k8s_openapi::api::core::v1::NodeStatus {
            addresses: Some(vec![k8s_openapi::api::core::v1::NodeAddress {
                type_: "InternalIP".into(),
                address: ip.into(),
            }]),
            ..Default::default()
        });
        n
    };
    assert!(
        instances
            .instance_exists(&with_address("node-x", &private_ip))
            .await
            .unwrap()
    );
    // No server by name nor by address, or no address at all: maybe no cloud server at all
    // (dedicated, on-premises, another cloud), so never reported gone (the official CCM would
    // delete it), and answered from the shared listing without a request per check.
    sim.admin().reset_request_counts().await.unwrap();
    for _ in 0..10 {
        for ghost in [with_address("ghost", "203.0.113.50"), node("ghost", None)] {
            let err = instances.instance_exists(&ghost).await.unwrap_err();
            assert!(err.to_string().contains("never deleted"), "{err}");
            assert_eq!(err.category(), cloud_provider::Category::Rejected);
            // Its shutdown check does not find it either, and says so.
            assert!(
                instances
                    .instance_shutdown(&ghost)
                    .await
                    .unwrap_err()
                    .is_instance_not_found()
            );
        }
    }
    let counts = sim.admin().request_counts().await.unwrap();
    assert!(counts.is_empty(), "a request per check: {counts:?}");
    // A Node found by its address is shut down with its server.
    sim.admin()
        .set_server_status(server["id"].as_i64().unwrap(), "off")
        .await
        .unwrap();
    let off = provider(&sim, settings()).await;
    assert!(
        off.instances()
            .unwrap()
            .instance_shutdown(&with_address("node-x", &private_ip))
            .await
            .unwrap()
    );
    // The same rule as the Node's initialisation: only a private IP identifies the server.
    // A Node whose address is the server's public IPv4 is not that server's, neither for its
    // existence (never deleted) nor for its shutdown (not reported shut down with it).
    let public_ip = server["public_net"]["ipv4"]["ip"]
        .as_str()
        .unwrap()
        .to_owned();
    let by_public = with_address("node-y", &public_ip);
    let instances = off.instances().unwrap();
    let err = instances.instance_exists(&by_public).await.unwrap_err();
    assert!(err.to_string().contains("never deleted"), "{err}");
    assert!(
        instances
            .instance_shutdown(&by_public)
            .await
            .unwrap_err()
            .is_instance_not_found()
    );
}

/// Settings whose status check runs every `period` and whose listings otherwise last long.
fn status_settings(period: Duration) -> ProviderSettings {
    ProviderSettings {
        cache: CacheConfig {
            status_period: period,
            status_max_age: Duration::from_secs(300),
            ..CacheConfig::default()
        },
        ..settings()
    }
}

#[tokio::test]
async fn a_powered_off_server_is_reported_shut_down_within_the_status_period() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let id = seed(&sim, ServerSeed::new("sleepy")).await;
    let other = seed(&sim, ServerSeed::new("awake")).await;
    let p = provider(&sim, status_settings(Duration::from_millis(300))).await;
    let instances = p.instances().unwrap();
    let n = node("sleepy", Some(&format!("hcloud://{id}")));
    let awake = node("awake", Some(&format!("hcloud://{other}")));
    assert!(instances.instance_exists(&n).await.unwrap());
    assert!(!instances.instance_shutdown(&n).await.unwrap());

    sim.admin().set_server_status(id, "off").await.unwrap();
    let started = std::time::Instant::now();
    loop {
        if instances.instance_shutdown(&n).await.unwrap() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "shutdown not noticed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!instances.instance_shutdown(&awake).await.unwrap());
    assert!(
        instances.instance_exists(&n).await.unwrap(),
        "off is not gone"
    );
}

#[tokio::test]
async fn a_power_off_hidden_by_a_new_server_in_the_same_period_is_noticed() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let id = seed(&sim, ServerSeed::new("sleepy")).await;
    let p = provider(&sim, status_settings(Duration::from_millis(300))).await;
    let instances = p.instances().unwrap();
    let n = node("sleepy", Some(&format!("hcloud://{id}")));
    assert!(!instances.instance_shutdown(&n).await.unwrap());

    // Within one status period one server powers off and a new one starts: the number of
    // running servers stays the same, the newest running server changes.
    sim.admin().set_server_status(id, "off").await.unwrap();
    seed(&sim, ServerSeed::new("newcomer")).await;
    let started = std::time::Instant::now();
    while !instances.instance_shutdown(&n).await.unwrap() {
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "the power-off was hidden by the new server"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn many_not_ready_nodes_cost_two_requests_per_status_period() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let mut nodes = Vec::new();
    for i in 0..60 {
        let name = format!("nr-{i}");
        let id = seed(&sim, ServerSeed::new(&name)).await;
        nodes.push(node(&name, Some(&format!("hcloud://{id}"))));
    }
    let period = Duration::from_millis(400);
    let p = provider(&sim, status_settings(period)).await;
    let instances = p.instances().unwrap();
    // Warm up: the listing, the first count and listing of servers not running.
    for n in &nodes {
        assert!(instances.instance_exists(n).await.unwrap());
    }
    sim.admin().reset_request_counts().await.unwrap();
    // Five monitor periods of the lifecycle controller, nothing changes.
    for _ in 0..5 {
        for n in &nodes {
            assert!(instances.instance_exists(n).await.unwrap());
            assert!(!instances.instance_shutdown(n).await.unwrap());
        }
        tokio::time::sleep(period).await;
    }
    let counts = sim.admin().request_counts().await.unwrap();
    let total: u64 = counts.values().sum();
    // Per status period, the count of the running servers and the one page of servers not
    // running; nothing else.
    assert!((8..=12).contains(&total), "{counts:?}");
    assert_eq!(counts.keys().collect::<Vec<_>>(), vec!["GET /servers"]);
}

#[tokio::test]
async fn a_deleted_server_is_confirmed_gone_within_the_status_period() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let id = seed(&sim, ServerSeed::new("doomed")).await;
    seed(&sim, ServerSeed::new("keeper")).await;
    let p = provider(&sim, status_settings(Duration::from_millis(300))).await;
    let instances = p.instances().unwrap();
    let n = node("doomed", Some(&format!("hcloud://{id}")));
    assert!(instances.instance_exists(&n).await.unwrap());

    sim.admin().delete_server(id).await.unwrap();
    sim.admin().reset_request_counts().await.unwrap();
    let started = std::time::Instant::now();
    loop {
        if !instances.instance_exists(&n).await.unwrap() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "deletion not noticed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Gone only on the API's own answer for the one server.
    let counts = sim.admin().request_counts().await.unwrap();
    assert_eq!(counts.get("GET /servers/{id}"), Some(&1), "{counts:?}");
}

#[tokio::test]
async fn a_slow_listing_is_shared_and_blocks_no_reader_of_the_last_snapshot() {
    use hcloud_provider::ServerKey;
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let id = seed(&sim, ServerSeed::new("slowpoke")).await;
    let p = provider(
        &sim,
        ProviderSettings {
            cache: CacheConfig {
                max_age: Duration::from_millis(100),
                ..CacheConfig::default()
            },
            ..settings()
        },
    )
    .await;
    let cache = p.hcloud_instances().cache().clone();
    assert!(cache.get(&ServerKey::Id(id)).await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(150)).await;
    sim.admin()
        .inject_fault(
            hcloud_sim::Fault::new("/servers")
                .method("GET")
                .latency(Duration::from_millis(1500)),
        )
        .await
        .unwrap();
    sim.admin().reset_request_counts().await.unwrap();

    // Twenty lookups that need a fresh listing share one.
    let lookups: Vec<_> = (0..20)
        .map(|_| {
            let cache = cache.clone();
            tokio::spawn(async move { cache.get(&ServerKey::Id(id)).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Meanwhile a reader that accepts older data is answered from the last snapshot at once.
    let started = std::time::Instant::now();
    let snapshot = cache.all_servers_for_status().await.unwrap();
    assert!(started.elapsed() < Duration::from_millis(500));
    assert_eq!(snapshot.servers.len(), 1);
    assert!(
        snapshot.age >= Duration::from_millis(150),
        "{:?}",
        snapshot.age
    );
    for lookup in lookups {
        assert!(lookup.await.unwrap().unwrap().is_some());
    }
    let counts = sim.admin().request_counts().await.unwrap();
    assert_eq!(counts.get("GET /servers"), Some(&1), "{counts:?}");
}

/// Within one status period a NotReady Node's server is deleted and another server is powered
/// on: the number of running servers stays the same, the set of servers not running changes.
#[tokio::test]
async fn a_deletion_hidden_by_a_power_on_in_the_same_period_is_noticed() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let doomed = seed(&sim, ServerSeed::new("doomed")).await;
    let sleepy = seed(&sim, ServerSeed::new("sleepy")).await;
    sim.admin().set_server_status(sleepy, "off").await.unwrap();
    let p = provider(&sim, status_settings(Duration::from_millis(300))).await;
    let instances = p.instances().unwrap();
    let n = node("doomed", Some(&format!("hcloud://{doomed}")));
    assert!(instances.instance_exists(&n).await.unwrap());

    sim.admin().delete_server(doomed).await.unwrap();
    sim.admin()
        .set_server_status(sleepy, "running")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    while instances.instance_exists(&n).await.unwrap() {
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "the deletion was hidden by the power-on"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A listing that started before the status check saw a change does not make the cache
/// current again when it finishes: the deleted server is confirmed gone at once, not after
/// the status max age.
#[tokio::test]
async fn a_listing_older_than_a_change_leaves_the_cache_outdated() {
    use hcloud_provider::ServerKey;
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let mut ids = Vec::new();
    for i in 0..60 {
        ids.push(seed(&sim, ServerSeed::new(format!("srv-{i:02}"))).await);
    }
    let p = provider(&sim, status_settings(Duration::from_millis(100))).await;
    let cache = p.hcloud_instances().cache().clone();
    cache.status_check().await.unwrap();
    // A listing whose second page is held back.
    sim.admin()
        .replace_faults(&[
            hcloud_sim::Fault::new("/servers").method("GET"),
            hcloud_sim::Fault::new("/servers")
                .method("GET")
                .latency(Duration::from_millis(1500)),
        ])
        .await
        .unwrap();
    let listing = {
        let cache = cache.clone();
        tokio::spawn(async move { cache.all_servers().await })
    };
    while !sim.admin().faults().await.unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Server 0 (on page 1, already read) is deleted and another one created: the pages
    // still agree about the total, so the listing cannot tell; the status check sees it.
    sim.admin().delete_server(ids[0]).await.unwrap();
    seed(&sim, ServerSeed::new("newcomer")).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    cache.status_check().await.unwrap();
    listing.await.unwrap().unwrap();
    assert!(
        !cache.confirm_exists(&ServerKey::Id(ids[0])).await.unwrap(),
        "the deleted server is answered from a listing older than its deletion"
    );
}

/// A burst's listing made after its servers were created: the lifecycle controller's first
/// status check (there is none before it to compare with) sees the servers the listing shows
/// and leaves the listing current, so the burst costs one listing. A server created after the
/// listing is seen by the next check, which makes the listing outdated.
#[tokio::test]
async fn a_first_status_check_that_sees_what_the_listing_shows_keeps_it() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    for i in 0..60 {
        seed(&sim, ServerSeed::new(format!("srv-{i:02}"))).await;
    }
    let sleepy = seed(&sim, ServerSeed::new("sleepy")).await;
    sim.admin().set_server_status(sleepy, "off").await.unwrap();
    // A status period long enough for the listing and the first check to fall in one under
    // any load (the check keeps only a listing younger than a period).
    let period = Duration::from_secs(2);
    let p = provider(&sim, status_settings(period)).await;
    let cache = p.hcloud_instances().cache().clone();
    assert_eq!(cache.all_servers().await.unwrap().servers.len(), 61);
    cache.status_check().await.unwrap();
    sim.admin().reset_request_counts().await.unwrap();
    cache.all_servers().await.unwrap();
    let counts = sim.admin().request_counts().await.unwrap();
    assert_eq!(counts.values().sum::<u64>(), 0, "listed again: {counts:?}");

    seed(&sim, ServerSeed::new("newcomer")).await;
    tokio::time::sleep(period + Duration::from_millis(50)).await;
    cache.status_check().await.unwrap();
    sim.admin().reset_request_counts().await.unwrap();
    assert_eq!(cache.all_servers().await.unwrap().servers.len(), 62);
    let counts = sim.admin().request_counts().await.unwrap();
    assert_eq!(counts.get("GET /servers"), Some(&2), "{counts:?}");
}

/// A burst of Nodes joining, as `hcloud-ccm-bench` makes it: the first Node's initialisation
/// starts the listing of all servers, and the lifecycle controller's first check of that Node
/// (the status check, then its existence) runs while the listing is under way; the other
/// Nodes arrive over about a second, each initialised and checked. The servers existed
/// before the listing, so the check sees what the listing shows once it lands: the burst
/// costs one listing (4 pages) and one status check (2 requests), not a second listing.
#[tokio::test]
async fn a_status_check_during_a_bursts_listing_leaves_it_current() {
    const NODES: usize = 200;
    let names: Vec<String> = (0..NODES).map(|i| format!("burst-{i}")).collect();
    let seed = hcloud_sim::SeedFile {
        servers: names.iter().map(ServerSeed::new).collect(),
        ..hcloud_sim::SeedFile::default()
    };
    let sim = Simulator::start(SimConfig::default().seed(seed))
        .await
        .unwrap();
    let p = provider(&sim, settings()).await;
    let instances = p.instances().unwrap();
    // Each request takes a while, as on the real API: the four pages take about 100 ms.
    sim.admin()
        .inject_fault(
            Fault::new("*")
                .latency(Duration::from_millis(20))
                .count(u32::MAX),
        )
        .await
        .unwrap();
    sim.admin().reset_request_counts().await.unwrap();
    let nodes: Vec<Node> = names.iter().map(|name| node(name, None)).collect();

    let initialise = |n: Node| {
        let instances = instances.clone();
        tokio::spawn(async move { instances.instance_metadata(&n).await })
    };
    let mut initialised = vec![initialise(nodes[0].clone())];
    // The listing is under way once its first page was asked for.
    while sim.admin().request_counts().await.unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // The lifecycle controller's one worker checks each Node as it appears.
    let lifecycle = {
        let instances = instances.clone();
        let nodes = nodes.clone();
        tokio::spawn(async move {
            let mut answers = Vec::new();
            for n in &nodes {
                answers.push(instances.instance_exists(n).await);
                answers.push(instances.instance_shutdown(n).await.map(|off| !off));
            }
            answers
        })
    };
    for group in nodes[1..].chunks(20) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        initialised.extend(group.iter().cloned().map(initialise));
    }
    for (i, lookup) in initialised.into_iter().enumerate() {
        let metadata = lookup.await.unwrap().unwrap();
        assert!(metadata.is_some(), "burst-{i}");
    }
    for answer in lifecycle.await.unwrap() {
        assert!(answer.unwrap(), "every server exists and runs");
    }
    let counts = sim.admin().request_counts().await.unwrap();
    assert_eq!(counts.get("GET /servers"), Some(&6), "{counts:?}");
    assert_eq!(counts.values().sum::<u64>(), 6, "{counts:?}");
}

/// A Node without a providerID that registered after the last listing (a Node of a burst,
/// which the lifecycle controller checks before the listing made for its initialisation):
/// that listing may predate its server and does not decide; a listing made since does. A
/// Node that is no cloud server is reported after that one listing, and checked again
/// without a request.
#[tokio::test]
async fn a_node_newer_than_the_listing_is_looked_for_in_a_newer_one() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    seed(&sim, ServerSeed::new("old")).await;
    let p = provider(&sim, settings()).await;
    let instances = p.instances().unwrap();
    // The lifecycle check of a Node: the status check and the listing.
    assert!(instances.instance_exists(&node("old", None)).await.unwrap());
    let registered = |name: &str| {
        let mut n = node(name, None);
        n.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        ));
        n
    };

    seed(&sim, ServerSeed::new("joining")).await;
    sim.admin().reset_request_counts().await.unwrap();
    let joining = registered("joining");
    assert!(instances.instance_exists(&joining).await.unwrap());
    assert!(!instances.instance_shutdown(&joining).await.unwrap());
    let counts = sim.admin().request_counts().await.unwrap();
    assert_eq!(
        counts.get("GET /servers"),
        Some(&1),
        "one listing: {counts:?}"
    );

    let on_premises = registered("on-premises");
    sim.admin().reset_request_counts().await.unwrap();
    for _ in 0..3 {
        let err = instances.instance_exists(&on_premises).await.unwrap_err();
        assert!(err.to_string().contains("never deleted"), "{err}");
    }
    let counts = sim.admin().request_counts().await.unwrap();
    assert_eq!(
        counts.get("GET /servers"),
        Some(&1),
        "one listing: {counts:?}"
    );
    // A Node older than the listing is answered from it, as before.
    let err = instances
        .instance_exists(&node("elsewhere", None))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("never deleted"), "{err}");
    let counts = sim.admin().request_counts().await.unwrap();
    assert_eq!(counts.values().sum::<u64>(), 1, "{counts:?}");
}

/// A start-up check that finds none of the cloud Nodes' servers (here: they were all deleted
/// at that moment) holds deletions; a Node whose server the token then sees (one the CCM
/// initialises) ends the mismatch, so Node deletions and load balancer creations resume.
#[tokio::test]
async fn a_mismatch_ends_when_a_nodes_server_is_seen() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let provider = provider(&sim, settings()).await;
    let instances = provider.hcloud_instances();
    // A server of the project that no Node names yet.
    seed(&sim, ServerSeed::new("joined")).await;
    let gone = node("gone", Some("hcloud://999999"));
    let check = instances.check_project(&[gone]).await.unwrap();
    assert!(
        matches!(check, hcloud_provider::ProjectCheck::Mismatch { nodes: 1 }),
        "{check:?}"
    );
    assert!(instances.project().holds_deletions());

    // Its Node registers; initialising it finds the server through the token.
    let metadata = provider
        .instances()
        .unwrap()
        .instance_metadata(&node("joined", None))
        .await
        .unwrap();
    assert!(metadata.is_some());
    assert!(!instances.project().holds_deletions());
}

#[tokio::test]
async fn the_provider_reports_a_recovery_of_the_api() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let id = seed(&sim, ServerSeed::new("node-1")).await;
    let p = provider(
        &sim,
        ProviderSettings {
            cache: CacheConfig {
                mode: CacheMode::Off,
                ..CacheConfig::default()
            },
            ..settings()
        },
    )
    .await;
    let mut recoveries = p.recoveries().expect("the provider reports recoveries");
    let instances = p.instances().unwrap();
    let known = node("node-1", Some(&format!("hcloud://{id}")));
    sim.admin()
        .inject_fault(Fault::new("*").status(503).code("unavailable").count(1))
        .await
        .unwrap();
    assert!(instances.instance_exists(&known).await.is_err());
    assert!(!recoveries.has_changed().unwrap(), "no success yet");
    assert!(instances.instance_exists(&known).await.unwrap());
    assert_eq!(*recoveries.borrow_and_update(), 1);
}

/// `node` without a providerID reporting `ips` as its InternalIPs.
fn with_internal_ips(name: &str, ips: &[&str]) -> Node {
    let mut n = node(name, None);
    n.status = Some(k8s_openapi::api::core::v1::NodeStatus {
        addresses: Some(
            ips.iter()
                .map(|ip| k8s_openapi::api::core::v1::NodeAddress {
                    type_: "InternalIP".into(),
                    address: (*ip).into(),
                })
                .collect(),
        ),
        ..Default::default()
    });
    n
}

#[tokio::test]
async fn metadata_trusts_the_provider_id_and_finds_a_nameless_node_by_its_internal_ip() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let network = sim
        .admin()
        .create_network(NetworkSeed::new("k8s", "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central"))
        .await
        .unwrap();
    let mut ips = Vec::new();
    let mut ids = Vec::new();
    for name in ["srv-a", "srv-b"] {
        let server = sim
            .admin()
            .create_server(ServerSeed {
                networks: vec![network.into()],
                ..ServerSeed::new(name)
            })
            .await
            .unwrap();
        ips.push(server["private_net"][0]["ip"].as_str().unwrap().to_owned());
        ids.push(server["id"].as_i64().unwrap());
    }
    let p = provider(&sim, settings()).await;
    let instances = p.instances().unwrap();

    // The providerID the kubelet set names the server, whatever the Node's name: a Warning
    // that names both names, not a failure.
    let kubelet_set = node("worker-1", Some(&format!("hcloud://{}", ids[0])));
    let m = instances
        .instance_metadata(&kubelet_set)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.provider_id, format!("hcloud://{}", ids[0]));
    assert_eq!(m.warnings.len(), 1, "{:?}", m.warnings);
    assert_eq!(m.warnings[0].reason, "NodeNameMismatch");
    assert!(
        m.warnings[0].message.contains(r#""worker-1""#)
            && m.warnings[0].message.contains(r#""srv-a""#),
        "{}",
        m.warnings[0].message
    );
    let named = node("srv-a", Some(&format!("hcloud://{}", ids[0])));
    let m = instances.instance_metadata(&named).await.unwrap().unwrap();
    assert!(m.warnings.is_empty(), "{:?}", m.warnings);

    // Without a providerID: by name, else by the one server whose private IP is an InternalIP.
    sim.admin().reset_request_counts().await.unwrap();
    let m = instances
        .instance_metadata(&with_internal_ips("worker-2", &[&ips[1]]))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.provider_id, format!("hcloud://{}", ids[1]));
    assert!(m.warnings.is_empty(), "{:?}", m.warnings);
    // No server with the IP, or InternalIPs of two servers: not found, with the Warning that
    // says why (the IP, the servers).
    let err = instances
        .instance_metadata(&with_internal_ips("worker-3", &["10.0.0.250"]))
        .await
        .unwrap_err();
    assert!(err.is_instance_not_found(), "{err}");
    let warning = err.warning().cloned().unwrap();
    assert_eq!(warning.reason, "NoMatchingServer");
    assert!(
        warning.message.contains("10.0.0.250"),
        "{}",
        warning.message
    );
    let err = instances
        .instance_metadata(&with_internal_ips("worker-4", &[&ips[0], &ips[1]]))
        .await
        .unwrap_err();
    assert!(err.is_instance_not_found(), "{err}");
    let warning = err.warning().cloned().unwrap();
    assert_eq!(warning.reason, "SeveralMatchingServers");
    for needed in [ips[0].as_str(), ips[1].as_str(), r#""srv-a""#, r#""srv-b""#] {
        assert!(
            warning.message.contains(needed),
            "{needed}: {}",
            warning.message
        );
    }
    // Retried lookups are answered from the listing: no request per Node or per retry.
    let before = sim.admin().request_counts().await.unwrap();
    for _ in 0..5 {
        for (name, ips) in [("worker-3", &["10.0.0.250"][..]), ("worker-2", &[&ips[1]])] {
            let _ = instances
                .instance_metadata(&with_internal_ips(name, ips))
                .await;
        }
    }
    assert_eq!(sim.admin().request_counts().await.unwrap(), before);
}

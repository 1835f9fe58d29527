//! Hetzner Cloud: `HCLOUD_TOKEN`, endpoint, network, instances, the server cache and the
//! plain-HTTP metrics endpoint.

use std::path::PathBuf;
use std::time::Duration;

use hcloud_provider::{AddressFamily, CacheMode};

use super::args::HCLOUD;
use super::checker::{Checker, boolean, duration, parsed, path, requests_per_hour, text, url};
use super::setting::{Form, Spec, settings};
use super::{HcloudSettings, ListenAddress, Secret};

settings! {
    SETTINGS, HCLOUD;
    /// File holding the API token, used when HCLOUD_TOKEN is unset; read again when it changes
    /// (a mounted Secret) or the API refuses the token, a new token used once it sees the
    /// cluster's servers. The token itself is read from the environment variable HCLOUD_TOKEN
    /// only (no flag; a change needs a restart).
    pub(super) TOKEN_FILE: PathBuf =
        Spec::env("hcloud-token-file", "HCLOUD_TOKEN_FILE", "PATH").form(Form::Path).parse(path);
    /// API endpoint [default: <https://api.hetzner.cloud/v1>].
    pub(super) ENDPOINT: String =
        Spec::env("hcloud-endpoint", "HCLOUD_ENDPOINT", "URL").parse(url);
    /// Log every API request and response in full, the token redacted (trace level for the
    /// API client).
    pub(super) DEBUG: bool =
        Spec::env("hcloud-debug", "HCLOUD_DEBUG", "BOOL").default("false").parse(boolean);
    /// Private network (name or ID) whose IP becomes each node's InternalIP; enables routes.
    pub(super) NETWORK: String =
        Spec::env("hcloud-network", "HCLOUD_NETWORK", "NAME_OR_ID").parse(text);
    /// Skip the check that the CCM's own server is attached to HCLOUD_NETWORK.
    pub(super) NETWORK_DISABLE_ATTACHED_CHECK: bool = Spec::env(
        "hcloud-network-disable-attached-check",
        "HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK",
        "BOOL",
    )
    .default("false")
    .parse(boolean);
    /// Hetzner metadata service asked for the attached-network check (this project's variable,
    /// for tests and unusual setups).
    pub(super) METADATA_ENDPOINT: String =
        Spec::env("hcloud-metadata-endpoint", "HCLOUD_METADATA_ENDPOINT", "URL")
            .default("http://169.254.169.254/hetzner/v1/metadata")
            .parse(|v| url(v.trim_end_matches('/')));
    /// Whether routes are programmed in HCLOUD_NETWORK (only when it is set).
    pub(super) NETWORK_ROUTES_ENABLED: bool =
        Spec::env("hcloud-network-routes-enabled", "HCLOUD_NETWORK_ROUTES_ENABLED", "BOOL")
            .default("true")
            .parse(boolean);
    /// Node address family: ipv4, ipv6 or dualstack.
    pub(super) INSTANCES_ADDRESS_FAMILY: AddressFamily =
        Spec::env("hcloud-instances-address-family", "HCLOUD_INSTANCES_ADDRESS_FAMILY", "FAMILY")
            .default("ipv4")
            .parse(parsed);
    /// Whether the zone label uses the legacy datacenter names (nbg1-dc3, …).
    pub(super) INSTANCES_ZONE_LABEL_ENABLED: bool = Spec::env(
        "hcloud-instances-zone-label-enabled",
        "HCLOUD_INSTANCES_ZONE_LABEL_ENABLED",
        "BOOL",
    )
    .default("true")
    .parse(boolean);
    /// Server cache mode: all, one or off (experimental upstream).
    pub(super) SERVER_CACHE_MODE: CacheMode =
        Spec::env("hcloud-server-cache-mode", "HCLOUD_SERVER_CACHE_MODE", "MODE")
            .default("all")
            .parse(parsed);
    /// Maximum age of cached servers (experimental upstream).
    pub(super) SERVER_CACHE_MAX_AGE: Duration =
        Spec::env("hcloud-server-cache-max-age", "HCLOUD_SERVER_CACHE_MAX_AGE", "DURATION")
            .default("10s")
            .parse(duration);
    /// Requests per hour of the API's budget kept for other tools (CSI driver, autoscaler,
    /// people): spend freely while the API reports more remaining, pace to the refill rate
    /// once it reports this few; 0 paces only at an empty budget (this project's variable).
    pub(super) RATE_LIMIT_RESERVE: u32 =
        Spec::env("hcloud-rate-limit-reserve", "HCLOUD_RATE_LIMIT_RESERVE", "REQUESTS")
            .default("600")
            .parse(requests_per_hour);
    /// Deletion brake: when one pass of the lifecycle controller would delete more than this
    /// percentage of the Nodes with an hcloud:// providerID (and at least 2 Nodes), it deletes
    /// none until fewer are reported gone; 100 turns the brake off (this project's variable).
    pub(super) NODE_DELETION_MAX_PERCENT: u8 = Spec::env(
        "hcloud-node-deletion-max-percent",
        "HCLOUD_NODE_DELETION_MAX_PERCENT",
        "PERCENT",
    )
    .default("50")
    .parse(percent);
    /// Whether /metrics is served on plain HTTP at HCLOUD_METRICS_ADDRESS.
    pub(super) METRICS_ENABLED: bool =
        Spec::env("hcloud-metrics-enabled", "HCLOUD_METRICS_ENABLED", "BOOL")
            .default("true")
            .parse(boolean);
    /// Listen address of the plain-HTTP metrics endpoint.
    pub(super) METRICS_ADDRESS: ListenAddress =
        Spec::env("hcloud-metrics-address", "HCLOUD_METRICS_ADDRESS", "ADDRESS")
            .default(":8233")
            .parse(parsed);
}

fn percent(value: &str) -> Result<u8, String> {
    match value.trim().trim_end_matches('%').parse() {
        Ok(percent @ 0..=100) => Ok(percent),
        _ => Err(format!("{value:?} is not a percentage from 0 to 100")),
    }
}

/// The Hetzner Cloud settings of the binary, and the provider's instance and cache settings
/// (network, address family, zone label, routes switch, server cache) in `provider`.
pub(super) fn check_hcloud(
    c: &mut Checker<'_>,
    token: Option<&Secret>,
    provider: &mut hcloud_provider::ProviderSettings,
) -> HcloudSettings {
    let token_file = c.optional(&TOKEN_FILE);
    let reloaded_from = super::checker::file_in_use(token, token_file.as_deref());
    let token = c.secret_with_file("HCLOUD_TOKEN", token, token_file.as_deref());
    let token = match token {
        Some(token) => {
            if token.expose().len() != 64 {
                c.warn(format!(
                    "HCLOUD_TOKEN has {} characters, Hetzner Cloud tokens have 64; proceeding \
                     anyway",
                    token.expose().len()
                ));
            }
            token
        }
        None => {
            if !c.problems.iter().any(|p| p.setting == "HCLOUD_TOKEN_FILE") {
                c.problem(
                    "HCLOUD_TOKEN",
                    "required: set HCLOUD_TOKEN or HCLOUD_TOKEN_FILE to a Hetzner Cloud API \
                     token",
                );
            }
            Secret::default()
        }
    };
    let endpoint = c.optional(&ENDPOINT);
    let debug = c.value(&DEBUG);
    let network = c.optional(&NETWORK);
    let network_attached_check = !c.value(&NETWORK_DISABLE_ATTACHED_CHECK);
    let metadata_endpoint = c.value(&METADATA_ENDPOINT);
    provider.network = network.as_deref().map(hcloud_provider::NetworkRef::parse);
    provider.routes_enabled = c.value(&NETWORK_ROUTES_ENABLED) && network.is_some();
    provider.address_family = c.value(&INSTANCES_ADDRESS_FAMILY);
    provider.zone_label_enabled = c.value(&INSTANCES_ZONE_LABEL_ENABLED);
    provider.cache.mode = c.value(&SERVER_CACHE_MODE);
    provider.cache.max_age = c.value(&SERVER_CACHE_MAX_AGE);
    HcloudSettings {
        token_file: reloaded_from.filter(|_| !token.is_empty()),
        token,
        endpoint,
        debug,
        network,
        network_attached_check,
        metadata_endpoint,
        rate_limit_reserve: c.value(&RATE_LIMIT_RESERVE),
        node_deletion_max_percent: c.value(&NODE_DELETION_MAX_PERCENT),
    }
}

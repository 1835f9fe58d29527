//! Hetzner Cloud: `HCLOUD_TOKEN`, endpoint, network, instances and the server cache.
//!
//! Deliberate repetition: `check_hcloud` reads each `HCLOUD_*` variable with one `Checker`
//! call of the same form (the variable's name, its raw value, its default). Every call names a
//! different variable with its own result type and default, so each stays a statement of its
//! own rather than a row of a table that would have to erase those types.

use super::checker::{Checker, check_url, non_empty, or_default};
use super::{AddressFamily, Args, HcloudSettings, Secret, ServerCacheMode, defaults};

impl Args {
    pub(super) fn check_hcloud(&self, c: &mut Checker) -> HcloudSettings {
        let token = c.secret_with_file(
            "HCLOUD_TOKEN",
            self.hcloud_token.as_ref(),
            self.hcloud_token_file.as_deref(),
        );
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
        let endpoint = non_empty(self.hcloud_endpoint.as_deref()).map(str::to_owned);
        if let Some(url) = &endpoint {
            check_url(c, "HCLOUD_ENDPOINT", url);
        }
        let debug = c.env_bool("HCLOUD_DEBUG", &self.hcloud_debug, defaults::HCLOUD_DEBUG);
        let network = non_empty(self.hcloud_network.as_deref()).map(str::to_owned);
        let disable_attached_check = c.env_bool(
            "HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK",
            &self.hcloud_network_disable_attached_check,
            defaults::HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK,
        );
        let metadata_endpoint = or_default(
            &self.hcloud_metadata_endpoint,
            defaults::HCLOUD_METADATA_ENDPOINT,
        )
        .trim_end_matches('/')
        .to_owned();
        check_url(c, "HCLOUD_METADATA_ENDPOINT", &metadata_endpoint);
        let routes_enabled = c.env_bool(
            "HCLOUD_NETWORK_ROUTES_ENABLED",
            &self.hcloud_network_routes_enabled,
            defaults::HCLOUD_NETWORK_ROUTES_ENABLED,
        );
        let address_family: AddressFamily = c.env_parsed(
            "HCLOUD_INSTANCES_ADDRESS_FAMILY",
            &self.hcloud_instances_address_family,
            defaults::HCLOUD_INSTANCES_ADDRESS_FAMILY,
        );
        let zone_label_enabled = c.env_bool(
            "HCLOUD_INSTANCES_ZONE_LABEL_ENABLED",
            &self.hcloud_instances_zone_label_enabled,
            defaults::HCLOUD_INSTANCES_ZONE_LABEL_ENABLED,
        );
        let server_cache_mode: ServerCacheMode = c.env_parsed(
            "HCLOUD_SERVER_CACHE_MODE",
            &self.hcloud_server_cache_mode,
            defaults::HCLOUD_SERVER_CACHE_MODE,
        );
        let server_cache_max_age = c.env_duration(
            "HCLOUD_SERVER_CACHE_MAX_AGE",
            &self.hcloud_server_cache_max_age,
            defaults::HCLOUD_SERVER_CACHE_MAX_AGE,
        );
        let reserve = or_default(
            &self.hcloud_rate_limit_reserve,
            defaults::HCLOUD_RATE_LIMIT_RESERVE,
        );
        let rate_limit_reserve = reserve.trim().parse::<u32>().unwrap_or_else(|err| {
            c.problem(
                "HCLOUD_RATE_LIMIT_RESERVE",
                format!("{reserve:?} is not a number of requests per hour ({err})"),
            );
            0
        });
        let max_percent = or_default(
            &self.hcloud_node_deletion_max_percent,
            defaults::HCLOUD_NODE_DELETION_MAX_PERCENT,
        );
        let node_deletion_max_percent = match max_percent.trim().trim_end_matches('%').parse() {
            Ok(percent @ 0..=100) => percent,
            _ => {
                c.problem(
                    "HCLOUD_NODE_DELETION_MAX_PERCENT",
                    format!("{max_percent:?} is not a percentage from 0 to 100"),
                );
                50
            }
        };
        HcloudSettings {
            token,
            node_deletion_max_percent,
            rate_limit_reserve,
            endpoint,
            debug,
            routes_enabled: network.is_some() && routes_enabled,
            network,
            network_attached_check: !disable_attached_check,
            metadata_endpoint,
            cluster_cidrs: Vec::new(),
            address_family,
            zone_label_enabled,
            server_cache_mode,
            server_cache_max_age,
        }
    }
}

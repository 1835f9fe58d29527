//! Robot dedicated servers: `ROBOT_*`.

use std::time::Duration;

use super::checker::{Checker, check_url, non_empty, or_default};
use super::{Args, RobotSettings, defaults};

impl Args {
    pub(super) fn check_robot(&self, c: &mut Checker, routes_enabled: bool) -> RobotSettings {
        // Deliberate repetition: one Checker call per `ROBOT_*` variable, as in the other
        // areas; each names its own variable, default and result type.
        let enabled = c.env_bool(
            "ROBOT_ENABLED",
            &self.robot_enabled,
            defaults::ROBOT_ENABLED,
        );
        let user = c.secret_with_file(
            "ROBOT_USER",
            self.robot_user.as_ref(),
            self.robot_user_file.as_deref(),
        );
        let password = c.secret_with_file(
            "ROBOT_PASSWORD",
            self.robot_password.as_ref(),
            self.robot_password_file.as_deref(),
        );
        let cache_text = or_default(&self.robot_cache_timeout, defaults::ROBOT_CACHE_TIMEOUT);
        // The official CCM accepts a negative timeout: the list is then stale at once and asked
        // for on every lookup. A zero (also `-0s`) means the default.
        let magnitude_text = cache_text.strip_prefix('-').filter(|m| !m.is_empty());
        let magnitude = c.duration("ROBOT_CACHE_TIMEOUT", magnitude_text.unwrap_or(cache_text));
        let cache_timeout = if magnitude.is_zero() {
            Duration::from_secs(300)
        } else if magnitude_text.is_some() {
            Duration::ZERO
        } else {
            magnitude
        };
        let endpoint = non_empty(self.robot_endpoint.as_deref()).map(str::to_owned);
        if let Some(url) = &endpoint {
            check_url(c, "ROBOT_ENDPOINT", url);
        }
        let rate_limit_wait_time = c.env_duration(
            "ROBOT_RATE_LIMIT_WAIT_TIME",
            &self.robot_rate_limit_wait_time,
            defaults::ROBOT_RATE_LIMIT_WAIT_TIME,
        );
        let forward_internal_ips = c.env_bool(
            "ROBOT_FORWARD_INTERNAL_IPS",
            &self.robot_forward_internal_ips,
            defaults::ROBOT_FORWARD_INTERNAL_IPS,
        );
        if enabled {
            if user.is_some() != password.is_some() {
                c.problem(
                    "ROBOT_USER/ROBOT_PASSWORD",
                    "both must be provided, or neither (partial Robot credentials)",
                );
            }
            if routes_enabled {
                c.problem(
                    "ROBOT_ENABLED/HCLOUD_NETWORK_ROUTES_ENABLED",
                    "routes are not supported together with Robot; set \
                     HCLOUD_NETWORK_ROUTES_ENABLED=false",
                );
            }
        } else if user.is_some() || password.is_some() {
            c.warn("Robot credentials are set but ROBOT_ENABLED is false; they are not used");
        }
        RobotSettings {
            enabled,
            user,
            password,
            endpoint,
            cache_timeout,
            rate_limit_wait_time,
            forward_internal_ips: enabled && forward_internal_ips,
        }
    }
}

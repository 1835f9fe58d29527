//! Robot dedicated servers: `ROBOT_*`, read into the provider's [`RobotSettings`] and cache
//! age, and the client's credentials and endpoint ([`RobotClientSettings`]).

use std::path::PathBuf;
use std::time::Duration;

use hcloud_provider::RobotSettings;

use super::args::ROBOT;
use super::checker::{Checker, boolean, duration, path, requests_per_hour, url};
use super::setting::{Form, Spec, settings};
use super::{RobotClientSettings, Secret};

settings! {
    SETTINGS, ROBOT;
    /// Enable support for Robot dedicated servers.
    pub(super) ENABLED: bool =
        Spec::env("robot-enabled", "ROBOT_ENABLED", "BOOL").default("false").parse(boolean);
    /// File holding the Robot user, used when ROBOT_USER is unset; read again with
    /// ROBOT_PASSWORD_FILE when either changes or Robot refuses them. The user itself is read
    /// from the environment variable ROBOT_USER only (no flag; a change needs a restart).
    pub(super) USER_FILE: PathBuf =
        Spec::env("robot-user-file", "ROBOT_USER_FILE", "PATH").form(Form::Path).parse(path);
    /// File holding the Robot password, used when ROBOT_PASSWORD is unset; read again with
    /// ROBOT_USER_FILE when either changes or Robot refuses them. The password itself is read
    /// from the environment variable ROBOT_PASSWORD only (no flag; a change needs a restart).
    pub(super) PASSWORD_FILE: PathBuf =
        Spec::env("robot-password-file", "ROBOT_PASSWORD_FILE", "PATH")
            .form(Form::Path)
            .parse(path);
    /// How long Robot server data is cached.
    pub(super) CACHE_TIMEOUT: Duration =
        Spec::env("robot-cache-timeout", "ROBOT_CACHE_TIMEOUT", "DURATION")
            .default("5m")
            .parse(cache_timeout);
    /// How long to wait after hitting the Robot rate limit (0 = fail at once).
    pub(super) RATE_LIMIT_WAIT_TIME: Duration =
        Spec::env("robot-rate-limit-wait-time", "ROBOT_RATE_LIMIT_WAIT_TIME", "DURATION")
            .default("0s")
            .parse(duration);
    /// How long the power state of a dedicated server (`GET /reset/N`) is reused by the
    /// shutdown checks of its NotReady Node before it is read again, or longer while more
    /// servers share ROBOT_POWER_STATE_READS_PER_HOUR (0 = every check and no budget, as the
    /// official CCM). Beyond the official CCM: Robot allows few requests an hour.
    pub(super) POWER_STATE_CACHE_TIMEOUT: Duration = Spec::env(
        "robot-power-state-cache-timeout",
        "ROBOT_POWER_STATE_CACHE_TIMEOUT",
        "DURATION",
    )
    .default("1m")
    .parse(duration);
    /// Power-state reads an hour for all dedicated servers together: while more servers are
    /// NotReady than ROBOT_POWER_STATE_CACHE_TIMEOUT allows within it, each one's power state
    /// is reused longer (0 = no budget). Default: half of Robot's 200 an hour for that
    /// endpoint. Beyond the official CCM.
    pub(super) POWER_STATE_READS_PER_HOUR: u32 = Spec::env(
        "robot-power-state-reads-per-hour",
        "ROBOT_POWER_STATE_READS_PER_HOUR",
        "REQUESTS",
    )
    .default("100")
    .parse(requests_per_hour);
    /// The Robot webservice (default: the real one). Beyond the official CCM: for a test
    /// webservice or a proxy.
    pub(super) ENDPOINT: String = Spec::env("robot-endpoint", "ROBOT_ENDPOINT", "URL").parse(url);
    /// Keep InternalIPs that the kubelet set (--node-ip) on Robot nodes.
    pub(super) FORWARD_INTERNAL_IPS: bool =
        Spec::env("robot-forward-internal-ips", "ROBOT_FORWARD_INTERNAL_IPS", "BOOL")
            .default("true")
            .parse(boolean);
    /// Give a dedicated Node without a providerID the legacy hcloud://bm-<server number>
    /// instead of hrobot://<server number> (Cluster API's Hetzner provider expects it; a
    /// providerID a Node has is never rewritten). Beyond the official CCM, where it was
    /// proposed under this name.
    pub(super) USE_LEGACY_PROVIDER_ID: bool =
        Spec::env("robot-use-legacy-provider-id", "ROBOT_USE_LEGACY_PROVIDER_ID", "BOOL")
            .default("false")
            .parse(boolean);
}

/// The official CCM accepts a negative timeout: the list is then stale at once and asked for
/// on every lookup. A zero (also `-0s`) means the default, 5 minutes.
fn cache_timeout(value: &str) -> Result<Duration, String> {
    let magnitude_text = value.strip_prefix('-').filter(|m| !m.is_empty());
    let magnitude = duration(magnitude_text.unwrap_or(value))?;
    Ok(if magnitude.is_zero() {
        Duration::from_secs(300)
    } else if magnitude_text.is_some() {
        Duration::ZERO
    } else {
        magnitude
    })
}

/// The Robot settings: the provider's (with the cache age in `robot_max_age`) and the
/// client's. Routes may be on too (the official CCM refuses that): the route controller then
/// routes the cloud Nodes only.
pub(super) fn check_robot(
    c: &mut Checker<'_>,
    (user, password): (Option<&Secret>, Option<&Secret>),
    robot_max_age: &mut Duration,
) -> (RobotSettings, RobotClientSettings) {
    let enabled = c.value(&ENABLED);
    let user_file = c.optional(&USER_FILE);
    let password_file = c.optional(&PASSWORD_FILE);
    let files = super::checker::file_in_use(user, user_file.as_deref()).zip(
        super::checker::file_in_use(password, password_file.as_deref()),
    );
    let user = c.secret_with_file("ROBOT_USER", user, user_file.as_deref());
    let password = c.secret_with_file("ROBOT_PASSWORD", password, password_file.as_deref());
    *robot_max_age = c.value(&CACHE_TIMEOUT);
    let endpoint = c.optional(&ENDPOINT);
    let rate_limit_wait_time = c.value(&RATE_LIMIT_WAIT_TIME);
    let power_state_max_age = c.value(&POWER_STATE_CACHE_TIMEOUT);
    let power_state_reads_per_hour = c.value(&POWER_STATE_READS_PER_HOUR);
    let forward_internal_ips = c.value(&FORWARD_INTERNAL_IPS);
    let legacy_provider_id = c.value(&USE_LEGACY_PROVIDER_ID);
    if enabled {
        if user.is_some() != password.is_some() {
            c.problem(
                "ROBOT_USER/ROBOT_PASSWORD",
                "both must be provided, or neither (partial Robot credentials)",
            );
        }
    } else if user.is_some() || password.is_some() {
        c.warn("Robot credentials are set but ROBOT_ENABLED is false; they are not used");
    }
    (
        RobotSettings {
            enabled,
            forward_internal_ips: enabled && forward_internal_ips,
            rate_limit_wait_time,
            power_state_max_age,
            power_state_reads_per_hour,
            legacy_provider_id,
        },
        RobotClientSettings {
            files: files.filter(|_| enabled && user.is_some() && password.is_some()),
            user,
            password,
            endpoint,
        },
    )
}

//! Leader election: `--leader-elect*`, `--enable-leader-migration`.

use std::path::PathBuf;
use std::time::Duration;

use super::args::LEADER;
use super::checker::{Checker, boolean, path, positive_duration, text};
use super::setting::{Form, Spec, settings};
use super::{GoDuration, LeaderElectionSettings};

/// client-go's leader election `JitterFactor`: a candidate waits between one and
/// `1 + JitterFactor` retry periods between its attempts, and the renew deadline must exceed
/// `JitterFactor` retry periods.
pub(crate) const LEADER_ELECTION_JITTER: f64 = 1.2;

settings! {
    SETTINGS, LEADER;
    /// Whether to elect a leader before running controllers (needed with several replicas).
    pub(super) LEADER_ELECT: bool =
        Spec::flag("leader-elect", "BOOL").default("true").form(Form::Switch).parse(boolean);
    /// How long a standby waits after the last renewal before taking the lease over.
    pub(super) LEASE_DURATION: Duration = Spec::flag("leader-elect-lease-duration", "DURATION")
        .default("15s")
        .parse(positive_duration);
    /// How long the leader keeps trying to renew before giving up leadership.
    pub(super) RENEW_DEADLINE: Duration = Spec::flag("leader-elect-renew-deadline", "DURATION")
        .default("10s")
        .parse(positive_duration);
    /// Pause between attempts to acquire or renew the lease.
    pub(super) RETRY_PERIOD: Duration = Spec::flag("leader-elect-retry-period", "DURATION")
        .default("2s")
        .parse(positive_duration);
    /// Lock object type; only `leases` is supported.
    pub(super) RESOURCE_LOCK: () = Spec::flag("leader-elect-resource-lock", "TYPE")
        .default("leases")
        .parse(leases);
    /// Name of the Lease.
    pub(super) RESOURCE_NAME: String = Spec::flag("leader-elect-resource-name", "NAME")
        .default("cloud-controller-manager")
        .parse(text);
    /// Namespace of the Lease.
    pub(super) RESOURCE_NAMESPACE: String =
        Spec::flag("leader-elect-resource-namespace", "NAMESPACE")
            .default("kube-system")
            .parse(text);
    /// Leader migration from kube-controller-manager (not supported; must stay false).
    pub(super) ENABLE_LEADER_MIGRATION: () = Spec::flag("enable-leader-migration", "BOOL")
        .default("false")
        .form(Form::Switch)
        .parse(no_migration);
    /// Leader migration configuration file (not supported).
    pub(super) LEADER_MIGRATION_CONFIG: PathBuf = Spec::flag("leader-migration-config", "PATH")
        .form(Form::Path)
        .parse(path);
}

fn leases(value: &str) -> Result<(), String> {
    if value == "leases" {
        Ok(())
    } else {
        Err(format!("{value:?} is not supported; only \"leases\" is"))
    }
}

fn no_migration(value: &str) -> Result<(), String> {
    if boolean(value)? {
        Err("leader migration is not supported".to_owned())
    } else {
        Ok(())
    }
}

pub(super) fn check_leader_election(c: &mut Checker<'_>) -> LeaderElectionSettings {
    let enabled = c.value(&LEADER_ELECT);
    let lease_duration = c.value(&LEASE_DURATION);
    let renew_deadline = c.value(&RENEW_DEADLINE);
    let retry_period = c.value(&RETRY_PERIOD);
    let lease_name = c.value(&RESOURCE_NAME);
    let lease_namespace = c.value(&RESOURCE_NAMESPACE);
    if enabled {
        if !lease_duration.is_zero()
            && !renew_deadline.is_zero()
            && lease_duration <= renew_deadline
        {
            c.problem(
                "--leader-elect-lease-duration/--leader-elect-renew-deadline",
                format!(
                    "the lease duration ({}) must be greater than the renew deadline ({})",
                    GoDuration(lease_duration),
                    GoDuration(renew_deadline)
                ),
            );
        }
        if !renew_deadline.is_zero()
            && !retry_period.is_zero()
            && renew_deadline.as_secs_f64() <= retry_period.as_secs_f64() * LEADER_ELECTION_JITTER
        {
            c.problem(
                "--leader-elect-renew-deadline/--leader-elect-retry-period",
                format!(
                    "the renew deadline ({}) must be greater than 1.2 × the retry period ({})",
                    GoDuration(renew_deadline),
                    GoDuration(retry_period)
                ),
            );
        }
        for (setting, value) in [
            (&RESOURCE_NAME, &lease_name),
            (&RESOURCE_NAMESPACE, &lease_namespace),
        ] {
            if value.is_empty() {
                c.problem(&setting.spec.name(), "must not be empty");
            }
        }
    }
    c.value(&RESOURCE_LOCK);
    c.value(&ENABLE_LEADER_MIGRATION);
    if c.raw(&LEADER_MIGRATION_CONFIG).is_some() {
        c.problem(
            &LEADER_MIGRATION_CONFIG.spec.name(),
            "leader migration is not supported",
        );
    }
    LeaderElectionSettings {
        enabled,
        lease_duration,
        renew_deadline,
        retry_period,
        lease_name,
        lease_namespace,
    }
}

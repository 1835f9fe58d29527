//! Leader election: `--leader-elect*`, `--enable-leader-migration`.

use super::checker::Checker;
use super::{Args, GoDuration, LeaderElectionSettings};

/// client-go's leader election `JitterFactor`: a candidate waits between one and
/// `1 + JitterFactor` retry periods between its attempts, and the renew deadline must exceed
/// `JitterFactor` retry periods.
pub(crate) const LEADER_ELECTION_JITTER: f64 = 1.2;

impl Args {
    pub(super) fn check_leader_election(&self, c: &mut Checker) -> LeaderElectionSettings {
        // Deliberate repetition: one Checker call per `--leader-elect-*` flag, in the form
        // every area uses; each names its own flag.
        let enabled = c.bool("--leader-elect", &self.leader_elect);
        let lease_duration = c.positive_duration(
            "--leader-elect-lease-duration",
            &self.leader_elect_lease_duration,
        );
        let renew_deadline = c.positive_duration(
            "--leader-elect-renew-deadline",
            &self.leader_elect_renew_deadline,
        );
        let retry_period = c.positive_duration(
            "--leader-elect-retry-period",
            &self.leader_elect_retry_period,
        );
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
                && renew_deadline.as_secs_f64()
                    <= retry_period.as_secs_f64() * LEADER_ELECTION_JITTER
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
            if self.leader_elect_resource_name.is_empty() {
                c.problem("--leader-elect-resource-name", "must not be empty");
            }
            if self.leader_elect_resource_namespace.is_empty() {
                c.problem("--leader-elect-resource-namespace", "must not be empty");
            }
        }
        if self.leader_elect_resource_lock != "leases" {
            c.problem(
                "--leader-elect-resource-lock",
                format!(
                    "{:?} is not supported; only \"leases\" is",
                    self.leader_elect_resource_lock
                ),
            );
        }
        if c.bool("--enable-leader-migration", &self.enable_leader_migration) {
            c.problem(
                "--enable-leader-migration",
                "leader migration is not supported",
            );
        }
        if self.leader_migration_config.is_some() {
            c.problem(
                "--leader-migration-config",
                "leader migration is not supported",
            );
        }
        LeaderElectionSettings {
            enabled,
            lease_duration,
            renew_deadline,
            retry_period,
            lease_name: self.leader_elect_resource_name.clone(),
            lease_namespace: self.leader_elect_resource_namespace.clone(),
        }
    }
}

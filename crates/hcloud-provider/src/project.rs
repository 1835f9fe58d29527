//! Whether the API token belongs to the cluster's project.
//!
//! A token of another project (a bad rotation, a copy from another cluster) passes every
//! start-up check: any valid token may list locations. It then answers "not found" for every
//! server and every load balancer of the cluster, so each NotReady Node would be deleted and
//! each LoadBalancer Service would get a new, empty load balancer in the other project, with
//! its status rewritten. The provider compares the Nodes with the servers the token sees once
//! at start ([`crate::HcloudInstances::check_project`]); this guard carries the answer to the
//! capabilities that would act on a wrong "not found": Node deletions and load balancer
//! creations wait while the check runs and are refused while the token sees none of the
//! cluster's servers.

use std::time::Duration;

use tokio::sync::watch;

/// What is known about the token's project.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProjectState {
    /// Never checked (a provider used without `initialize`, as in tests): nothing is held.
    Unchecked,
    /// The check is under way: deletions and creations wait.
    Checking,
    /// The token sees the cluster's servers (or the cluster has none yet).
    Confirmed,
    /// The token sees none of the cluster's servers.
    Mismatch,
}

/// How long a load balancer creation waits for a check under way before it is retried.
const CREATION_WAIT: Duration = Duration::from_secs(30);

/// The shared answer of the project check. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ProjectGuard {
    state: watch::Sender<ProjectState>,
}

impl Default for ProjectGuard {
    fn default() -> Self {
        Self {
            state: watch::Sender::new(ProjectState::Unchecked),
        }
    }
}

impl ProjectGuard {
    /// The state now.
    pub fn state(&self) -> ProjectState {
        *self.state.borrow()
    }

    /// Set the state.
    pub fn set(&self, state: ProjectState) {
        self.state.send_replace(state);
    }

    /// A server of the cluster was seen through the token: it is the cluster's project.
    /// Whether that ends a mismatch.
    pub fn confirm(&self) -> bool {
        // Called on every instance lookup that finds a server: changes (and wakes waiters)
        // only when the state is not confirmed yet.
        let mut was = ProjectState::Confirmed;
        self.state.send_if_modified(|state| {
            was = *state;
            *state = ProjectState::Confirmed;
            was != ProjectState::Confirmed
        });
        was == ProjectState::Mismatch
    }

    /// The check found none of the cluster's servers: a mismatch, unless a lookup confirmed the
    /// project while the check ran (its listing may predate that server). Whether the
    /// mismatch stands.
    pub fn mismatch_unless_confirmed(&self) -> bool {
        self.state.send_if_modified(|state| {
            if *state == ProjectState::Confirmed {
                return false;
            }
            *state = ProjectState::Mismatch;
            true
        })
    }

    /// Whether a "not found" must not delete anything now.
    pub fn holds_deletions(&self) -> bool {
        matches!(
            self.state(),
            ProjectState::Checking | ProjectState::Mismatch
        )
    }

    /// Whether something may be created in the project now: waits (bounded) for a check under
    /// way; `Err` with the reason while the project is not the cluster's.
    pub async fn allows_creation(&self) -> Result<(), String> {
        let mut state = self.state.subscribe();
        let settled = tokio::time::timeout(
            CREATION_WAIT,
            state.wait_for(|s| *s != ProjectState::Checking),
        )
        .await;
        match settled {
            Ok(Ok(state)) if *state == ProjectState::Mismatch => Err(
                "the API token sees none of the cluster's servers (see the CloudProjectMismatch event): nothing is created in its project"
                    .to_owned(),
            ),
            Ok(_) => Ok(()),
            Err(_) => Err(
                "the API token's project is still being compared with the cluster's Nodes"
                    .to_owned(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_seen_while_the_check_ran_outweighs_its_listing() {
        let guard = ProjectGuard::default();
        guard.set(ProjectState::Checking);
        // A Node initialised while the check's listing was under way saw its server.
        guard.confirm();
        assert!(!guard.mismatch_unless_confirmed());
        assert_eq!(guard.state(), ProjectState::Confirmed);
        // Without such a sighting the check's answer stands.
        guard.set(ProjectState::Checking);
        assert!(guard.mismatch_unless_confirmed());
        assert_eq!(guard.state(), ProjectState::Mismatch);
    }

    #[tokio::test(start_paused = true)]
    async fn creations_wait_for_the_check_and_are_refused_on_a_mismatch() {
        let guard = ProjectGuard::default();
        assert!(guard.allows_creation().await.is_ok(), "unchecked");
        assert!(!guard.holds_deletions());
        guard.set(ProjectState::Checking);
        assert!(guard.holds_deletions());
        let waiting = {
            let guard = guard.clone();
            tokio::spawn(async move { guard.allows_creation().await })
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished(), "waits while the check runs");
        guard.set(ProjectState::Mismatch);
        assert!(waiting.await.unwrap().is_err());
        assert!(guard.holds_deletions());
        assert!(guard.confirm(), "a seen server ends the mismatch");
        assert!(guard.allows_creation().await.is_ok());
        assert!(!guard.holds_deletions());
        // A check that never ends does not block creations forever.
        guard.set(ProjectState::Checking);
        let started = tokio::time::Instant::now();
        assert!(guard.allows_creation().await.is_err());
        assert_eq!(started.elapsed(), CREATION_WAIT);
    }
}

//! Why a service sync failed, and what the runtime does about it.

use std::time::Duration;

use crate::provider::{self, Category};
use crate::runtime::reconcile::{ReconcileError, kube_category};

/// Why a service sync failed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceSyncError {
    /// `GetLoadBalancer` failed before a cleanup.
    #[error("failed to check if load balancer exists before cleanup")]
    GetLoadBalancer(#[source] provider::Error),
    /// `EnsureLoadBalancerDeleted` failed.
    #[error("failed to delete load balancer")]
    DeleteLoadBalancer(#[source] provider::Error),
    /// `EnsureLoadBalancer` failed.
    #[error("failed to ensure load balancer")]
    EnsureLoadBalancer(#[source] provider::Error),
    /// `UpdateLoadBalancer` (the node-driven target update) failed.
    #[error("failed to update load balancer hosts")]
    UpdateLoadBalancer(#[source] provider::Error),
    /// The finalizer could not be added.
    #[error("failed to add load balancer cleanup finalizer")]
    AddFinalizer(#[source] kube::Error),
    /// The finalizer could not be removed.
    #[error("failed to remove load balancer cleanup finalizer")]
    RemoveFinalizer(#[source] kube::Error),
    /// `status.loadBalancer` could not be written.
    #[error("failed to update load balancer status")]
    UpdateStatus(#[source] kube::Error),
}

impl ServiceSyncError {
    fn provider(&self) -> Option<&provider::Error> {
        match self {
            Self::GetLoadBalancer(err)
            | Self::DeleteLoadBalancer(err)
            | Self::EnsureLoadBalancer(err)
            | Self::UpdateLoadBalancer(err) => Some(err),
            Self::AddFinalizer(_) | Self::RemoveFinalizer(_) | Self::UpdateStatus(_) => None,
        }
    }

    fn kube(&self) -> Option<&kube::Error> {
        match self {
            Self::AddFinalizer(err) | Self::RemoveFinalizer(err) | Self::UpdateStatus(err) => {
                Some(err)
            }
            _ => None,
        }
    }

    /// The Warning reason of this failure: a user error's own reason (e.g.
    /// `InvalidConfiguration`), else upstream's generic ones.
    pub fn event_reason(&self) -> &str {
        if let Some(reason) = self.user_reason() {
            return reason;
        }
        match self {
            Self::DeleteLoadBalancer(_) => "DeleteLoadBalancerFailed",
            Self::UpdateLoadBalancer(_) => "UpdateLoadBalancerFailed",
            _ => "SyncLoadBalancerFailed",
        }
    }
}

impl ReconcileError for ServiceSyncError {
    fn category(&self) -> Category {
        match (self.provider(), self.kube()) {
            (Some(err), _) => err.category(),
            (None, Some(err)) => kube_category(err),
            (None, None) => Category::Transient,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        self.provider().and_then(provider::Error::retry_after)
    }

    fn metric_label(&self) -> &'static str {
        self.provider()
            .map_or("kube_api", provider::Error::metric_label)
    }

    fn user_reason(&self) -> Option<&str> {
        self.provider()
            .filter(|err| err.category() == Category::User)
            .and_then(provider::Error::user_reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::error_chain;

    #[test]
    fn the_provider_decides_the_category_without_downcasting() {
        let locked = ServiceSyncError::EnsureLoadBalancer(provider::Error::retry(
            "locked",
            Duration::from_secs(7),
        ));
        assert_eq!(locked.category(), Category::Transient);
        assert_eq!(locked.retry_after(), Some(Duration::from_secs(7)));
        assert_eq!(locked.event_reason(), "SyncLoadBalancerFailed");

        let bad = ServiceSyncError::EnsureLoadBalancer(provider::Error::user(
            "InvalidConfiguration",
            "annotation load-balancer.hetzner.cloud/location: \"mars\" is not a location",
        ));
        assert_eq!(bad.category(), Category::User);
        assert_eq!(bad.event_reason(), "InvalidConfiguration");
        assert_eq!(bad.metric_label(), "user");

        let plain = ServiceSyncError::EnsureLoadBalancer(provider::Error::api_msg("503"));
        assert_eq!(plain.retry_after(), None);
        assert_eq!(plain.category(), Category::Transient);
        assert_eq!(
            error_chain(&plain),
            "failed to ensure load balancer: cloud API call failed: 503"
        );
        let update = ServiceSyncError::UpdateLoadBalancer(provider::Error::api_msg("503"));
        assert_eq!(update.event_reason(), "UpdateLoadBalancerFailed");
    }
}

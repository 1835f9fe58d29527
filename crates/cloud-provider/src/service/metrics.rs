//! The service controller's own metrics, under the upstream names.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

fn latency_histogram() -> Histogram {
    // 1 s … ~4.5 h, as upstream's buckets.
    Histogram::new(exponential_buckets(1.0, 2.0, 15))
}

/// The service controller's own metrics (upstream names). Cheap to clone.
#[derive(Clone, Debug)]
pub struct ServiceMetrics {
    pub(super) loadbalancer_syncs: Counter,
    pub(super) nodesync_errors: Counter,
    pub(super) nodesync_latency: Histogram,
    pub(super) update_host_latency: Histogram,
}

impl Default for ServiceMetrics {
    fn default() -> Self {
        Self {
            loadbalancer_syncs: Counter::default(),
            nodesync_errors: Counter::default(),
            nodesync_latency: latency_histogram(),
            update_host_latency: latency_histogram(),
        }
    }
}

impl ServiceMetrics {
    /// Fresh, unregistered metrics.
    pub fn new() -> Self {
        Self::default()
    }

    /// Register `service_controller_loadbalancer_sync_total`,
    /// `service_controller_nodesync_error_total`, `service_controller_nodesync_latency_seconds`
    /// and `service_controller_update_loadbalancer_host_latency_seconds`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "service_controller_loadbalancer_sync",
            "A metric counting the amount of times any load balancer has been configured, as an effect of service/node changes on the cluster",
            self.loadbalancer_syncs.clone(),
        );
        registry.register(
            "service_controller_nodesync_error",
            "A metric counting the amount of times any load balancer has been configured and errored, as an effect of node changes on the cluster",
            self.nodesync_errors.clone(),
        );
        registry.register(
            "service_controller_nodesync_latency_seconds",
            "A metric measuring the latency for nodesync which updates loadbalancer hosts on cluster node updates",
            self.nodesync_latency.clone(),
        );
        registry.register(
            "service_controller_update_loadbalancer_host_latency_seconds",
            "A metric measuring the latency for updating each load balancer hosts",
            self.update_host_latency.clone(),
        );
    }

    /// Load balancer configurations (ensure and backend updates) counted so far.
    pub fn loadbalancer_sync_count(&self) -> u64 {
        self.loadbalancer_syncs.get()
    }

    /// Failed node-driven backend updates counted so far.
    pub fn nodesync_error_count(&self) -> u64 {
        self.nodesync_errors.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{assert_exposes, exposition};

    #[test]
    fn metrics_have_upstream_names() {
        let metrics = ServiceMetrics::new();
        metrics.loadbalancer_syncs.inc();
        metrics.nodesync_errors.inc();
        metrics.nodesync_latency.observe(0.5);
        metrics.update_host_latency.observe(0.5);
        let text = exposition(|registry| metrics.register(registry));
        assert_exposes(
            &text,
            &[
                "service_controller_loadbalancer_sync_total 1",
                "service_controller_nodesync_error_total 1",
                "service_controller_nodesync_latency_seconds_count 1",
                "service_controller_update_loadbalancer_host_latency_seconds_count 1",
            ],
        );
        assert_eq!(metrics.loadbalancer_sync_count(), 1);
        assert_eq!(metrics.nodesync_error_count(), 1);
    }
}

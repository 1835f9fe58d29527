//! Controller metrics (prometheus-client, no global registry).

use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Label set `{controller}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    /// Controller name, e.g. `cloud-node`.
    pub controller: String,
}

/// Label set `{controller, category}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RetryLabels {
    /// Controller name.
    pub controller: String,
    /// The error category (`transient`, `conflict`, `not_found`).
    pub category: String,
}

/// Label set `{controller, error}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// Controller name.
    pub controller: String,
    /// The error's `metric_label()`.
    pub error: String,
}

fn duration_histogram() -> Histogram {
    // 1 ms … ~65 s
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

fn delay_histogram() -> Histogram {
    // 0.1 s … ~27 min
    Histogram::new(exponential_buckets(0.1, 2.0, 15))
}

/// All metrics of this crate. Cheap to clone (handles share their values).
#[derive(Clone, Debug)]
pub struct Metrics {
    reconciles: Family<ControllerLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    retries: Family<RetryLabels, Counter>,
    durations: Family<ControllerLabels, Histogram, fn() -> Histogram>,
    taint_removal_delay: Histogram,
    initial_sync_delay: Histogram,
    deleted_nodes: Counter,
    held_deletions: Gauge,
    workqueues: crate::runtime::workqueue::WorkQueueMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            reconciles: Family::default(),
            errors: Family::default(),
            retries: Family::default(),
            durations: Family::new_with_constructor(duration_histogram),
            taint_removal_delay: delay_histogram(),
            initial_sync_delay: delay_histogram(),
            deleted_nodes: Counter::default(),
            held_deletions: Gauge::default(),
            workqueues: crate::runtime::workqueue::WorkQueueMetrics::default(),
        }
    }
}

impl Metrics {
    /// Fresh, unregistered metrics.
    pub fn new() -> Self {
        Self::default()
    }

    /// Register every metric into `registry`.
    pub fn register(&self, registry: &mut Registry) {
        self.workqueues.register(registry);
        registry.register(
            "cloud_controller_reconcile",
            "Reconciliations run, by controller",
            self.reconciles.clone(),
        );
        registry.register(
            "cloud_controller_reconcile_errors",
            "Failed reconciliations, by controller and error kind",
            self.errors.clone(),
        );
        registry.register(
            "cloud_controller_retries",
            "Keys queued again after a failed reconciliation, by controller and error category",
            self.retries.clone(),
        );
        registry.register(
            "cloud_controller_reconcile_duration_seconds",
            "Duration of reconciliations, by controller",
            self.durations.clone(),
        );
        registry.register(
            "node_controller_cloud_provider_taint_removal_delay_seconds",
            "Seconds from Node creation until the cloud node controller removed the uninitialized taint",
            self.taint_removal_delay.clone(),
        );
        registry.register(
            "node_controller_initial_node_sync_delay_seconds",
            "Seconds from Node creation until the cloud node controller first synced it",
            self.initial_sync_delay.clone(),
        );
        registry.register(
            "cloud_node_lifecycle_controller_deleted_nodes",
            "Nodes deleted because their cloud instance no longer exists",
            self.deleted_nodes.clone(),
        );
        registry.register(
            "cloud_node_lifecycle_controller_held_deletions",
            "Nodes whose instance the cloud reports gone but which are kept because too many are reported gone at once",
            self.held_deletions.clone(),
        );
    }

    /// The client-go work-queue series of the controllers' queues.
    pub fn workqueues(&self) -> &crate::runtime::workqueue::WorkQueueMetrics {
        &self.workqueues
    }

    /// Start timing one reconciliation of `controller`; counted and observed when dropped.
    pub fn reconcile_timer(&self, controller: &str) -> ReconcileTimer {
        ReconcileTimer {
            metrics: self.clone(),
            labels: ControllerLabels {
                controller: controller.to_owned(),
            },
            start: Instant::now(),
        }
    }

    /// Count one failed reconciliation.
    pub fn record_error(&self, controller: &str, metric_label: &str) {
        self.errors
            .get_or_create(&ErrorLabels {
                controller: controller.to_owned(),
                error: metric_label.to_owned(),
            })
            .inc();
    }

    /// Count one retry queued after a failure of `category`.
    pub fn record_retry(&self, controller: &str, category: crate::provider::Category) {
        self.retries
            .get_or_create(&RetryLabels {
                controller: controller.to_owned(),
                category: category.as_str().to_owned(),
            })
            .inc();
    }

    /// Retries counted so far for `controller` and `category`.
    pub fn retry_count(&self, controller: &str, category: crate::provider::Category) -> u64 {
        self.retries
            .get_or_create(&RetryLabels {
                controller: controller.to_owned(),
                category: category.as_str().to_owned(),
            })
            .get()
    }

    /// Observe the delay between Node creation and taint removal.
    pub fn observe_taint_removal_delay(&self, seconds: f64) {
        self.taint_removal_delay.observe(seconds);
    }

    /// Observe the delay between Node creation and its first successful sync.
    pub fn observe_initial_sync_delay(&self, seconds: f64) {
        self.initial_sync_delay.observe(seconds);
    }

    /// Count one Node deleted by the lifecycle controller.
    pub fn record_node_deleted(&self) {
        self.deleted_nodes.inc();
    }

    /// Set how many Node deletions the deletion brake holds now.
    pub fn set_node_deletions_held(&self, nodes: usize) {
        self.held_deletions
            .set(i64::try_from(nodes).unwrap_or(i64::MAX));
    }

    /// How many Node deletions the deletion brake holds now.
    pub fn node_deletions_held(&self) -> i64 {
        self.held_deletions.get()
    }

    /// Reconciliations counted so far for `controller`.
    pub fn reconcile_count(&self, controller: &str) -> u64 {
        self.reconciles
            .get_or_create(&ControllerLabels {
                controller: controller.to_owned(),
            })
            .get()
    }

    /// Errors counted so far for `controller` and `metric_label`.
    pub fn error_count(&self, controller: &str, metric_label: &str) -> u64 {
        self.errors
            .get_or_create(&ErrorLabels {
                controller: controller.to_owned(),
                error: metric_label.to_owned(),
            })
            .get()
    }
}

/// Drop guard of [`Metrics::reconcile_timer`].
#[derive(Debug)]
pub struct ReconcileTimer {
    metrics: Metrics,
    labels: ControllerLabels,
    start: Instant,
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        self.metrics.reconciles.get_or_create(&self.labels).inc();
        self.metrics
            .durations
            .get_or_create(&self.labels)
            .observe(self.start.elapsed().as_secs_f64());
    }
}

/// The text exposition of a fresh registry after `register` filled it: what a scrape of the
/// metrics it registers reads.
#[cfg(test)]
pub(crate) fn exposition(register: impl FnOnce(&mut Registry)) -> String {
    let mut registry = Registry::default();
    register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry)
        .expect("writing to a String cannot fail");
    text
}

/// Assert that the exposition `text` holds each of `lines` (a series and its value).
#[cfg(test)]
pub(crate) fn assert_exposes(text: &str, lines: &[&str]) {
    for line in lines {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_metrics_are_exposed_with_upstream_names() {
        let metrics = Metrics::new();
        drop(metrics.reconcile_timer("cloud-node"));
        metrics.record_error("cloud-node", "transient");
        metrics.record_retry("cloud-node", crate::provider::Category::Transient);
        metrics.observe_taint_removal_delay(1.5);
        metrics.observe_initial_sync_delay(2.5);

        let text = exposition(|registry| metrics.register(registry));
        assert_exposes(
            &text,
            &[
                "cloud_controller_reconcile_total{controller=\"cloud-node\"} 1",
                "cloud_controller_reconcile_errors_total{controller=\"cloud-node\",error=\"transient\"} 1",
                "cloud_controller_reconcile_duration_seconds_count{controller=\"cloud-node\"} 1",
                "cloud_controller_retries_total{controller=\"cloud-node\",category=\"transient\"} 1",
                "node_controller_cloud_provider_taint_removal_delay_seconds_count 1",
                "node_controller_initial_node_sync_delay_seconds_sum 2.5",
                "cloud_node_lifecycle_controller_deleted_nodes_total 0",
            ],
        );
        assert_eq!(metrics.reconcile_count("cloud-node"), 1);
        assert_eq!(metrics.error_count("cloud-node", "transient"), 1);
    }
}

//! The process-wide Prometheus registry, shared by everything that exports metrics.

use std::fmt;
use std::sync::Arc;

use parking_lot::RwLock;
use prometheus_client::registry::Registry;

/// Content type of the OpenMetrics text format produced by [`MetricsRegistry::encode`].
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A cloneable handle on one [`Registry`]. Register metrics at any time (also after the
/// endpoints started); every scrape encodes the current contents.
#[derive(Clone, Default)]
pub struct MetricsRegistry {
    registry: Arc<RwLock<Registry>>,
}

impl fmt::Debug for MetricsRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MetricsRegistry")
    }
}

impl MetricsRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        MetricsRegistry::default()
    }

    /// Runs `f` with mutable access, e.g. to register metrics or create a sub-registry.
    pub fn with<R>(&self, f: impl FnOnce(&mut Registry) -> R) -> R {
        let mut registry = self.registry.write();
        f(&mut registry)
    }

    /// Registers one metric.
    pub fn register(
        &self,
        name: impl Into<String>,
        help: impl Into<String>,
        metric: impl prometheus_client::registry::Metric,
    ) {
        self.with(|r| r.register(name, help, metric));
    }

    /// The OpenMetrics text of every registered metric.
    pub fn encode(&self) -> Result<String, fmt::Error> {
        let registry = self.registry.read();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry)?;
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::metrics::counter::Counter;

    use super::*;

    #[test]
    fn registered_metrics_are_encoded() {
        let registry = MetricsRegistry::new();
        let counter: Counter = Counter::default();
        registry.register("demo_events", "Demo events", counter.clone());
        counter.inc_by(3);
        let text = registry.encode().unwrap();
        assert!(text.contains("# HELP demo_events Demo events."), "{text}");
        assert!(text.contains("demo_events_total 3"), "{text}");
        assert!(text.ends_with("# EOF\n"));
    }
}

//! A cache of the load balancer types (`GET /load_balancer_types`), as the official CCM keeps
//! one: a snapshot of the whole list (see the freshness policy in [`crate::snapshot_cache`]),
//! fresh for [`CacheConfig::lb_type_max_age`] (one hour), answers every lookup by name or ID.
//!
//! Lookups are counted in
//! `cloud_controller_manager_load_balancer_type_cache_requests_total{subsystem,mode,result}`
//! with the official label values (`subsystem="load_balancer"`, `mode="all"`, `result` `hit`
//! when answered from the cached list or from a read another lookup made, `miss` when the list
//! was read for it or the read failed).
//!
//! A name missing from a fresh list re-reads the list only when that list is older than
//! [`CacheConfig::unknown_lb_type_refresh`] (a minute), so a Service that names a type that
//! does not exist does not cost a request on every retry.

use std::sync::Arc;
use std::time::Duration;

use hcloud_api::Client;
use hcloud_api::models::LoadBalancerType;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::config::CacheConfig;
use crate::server_cache::{CacheError, RESULT_HIT, RESULT_MISS, SUBSYSTEM_LOAD_BALANCER};
use crate::snapshot_cache::SnapshotCache;

/// The cache mode label (the official cache lists all types).
const MODE: &str = "all";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Labels {
    subsystem: &'static str,
    mode: &'static str,
    result: &'static str,
}

/// The load balancer type cache. Cheap to clone; clones share the list and the counters.
#[derive(Clone, Debug)]
pub struct LoadBalancerTypeCache {
    client: Client,
    max_age: Duration,
    unknown_refresh: Duration,
    types: SnapshotCache<Vec<Arc<LoadBalancerType>>, CacheError>,
    requests: Family<Labels, Counter>,
}

impl LoadBalancerTypeCache {
    /// A cache over `client` with the default ages (the official max age).
    pub fn new(client: Client) -> Self {
        Self::with_config(client, &CacheConfig::default())
    }

    /// A cache over `client` with the ages of `config` ([`CacheConfig::lb_type_max_age`],
    /// [`CacheConfig::unknown_lb_type_refresh`]).
    pub fn with_config(client: Client, config: &CacheConfig) -> Self {
        Self {
            client,
            max_age: config.lb_type_max_age,
            unknown_refresh: config.unknown_lb_type_refresh,
            types: SnapshotCache::default(),
            requests: Family::default(),
        }
    }

    /// Register the request counter into `registry`. Call once per registry.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "cloud_controller_manager_load_balancer_type_cache_requests",
            "Load balancer type lookups through the cache by subsystem, cache mode and result (hit: no API request)",
            self.requests.clone(),
        );
    }

    /// How often lookups ended with `result` (`hit` or `miss`); for tests.
    pub fn requests(&self, result: &'static str) -> u64 {
        self.requests
            .get(&Labels {
                subsystem: SUBSYSTEM_LOAD_BALANCER,
                mode: MODE,
                result,
            })
            .map_or(0, |counter| counter.get())
    }

    fn count(&self, result: &'static str) {
        self.requests
            .get_or_create(&Labels {
                subsystem: SUBSYSTEM_LOAD_BALANCER,
                mode: MODE,
                result,
            })
            .inc();
    }

    /// The type named `name_or_id` (e.g. `lb11`), or whose ID it is when no type has that
    /// name. `Ok(None)`: the API does not know it (as of a list at most
    /// [`CacheConfig::unknown_lb_type_refresh`] old).
    pub async fn get(&self, name_or_id: &str) -> Result<Option<Arc<LoadBalancerType>>, CacheError> {
        if let Some(types) = self.types.fresh(self.max_age) {
            let found = find(&types, name_or_id);
            if found.is_some() || types.age() < self.unknown_refresh {
                self.count(RESULT_HIT);
                return Ok(found);
            }
        }
        let client = self.client.clone();
        let read = self.types.refresh(|| async move {
            let types = client.load_balancer_types().list().await?;
            Ok::<_, CacheError>(types.into_iter().map(Arc::new).collect())
        });
        let started = read.started();
        let types = read.await;
        // A lookup that joined a read another one started is answered without a request of
        // its own, unless that read failed.
        self.count(if started || types.is_err() {
            RESULT_MISS
        } else {
            RESULT_HIT
        });
        Ok(find(&types?, name_or_id))
    }
}

/// By name first, then by ID.
fn find(types: &[Arc<LoadBalancerType>], name_or_id: &str) -> Option<Arc<LoadBalancerType>> {
    types
        .iter()
        .find(|t| t.name == name_or_id)
        .or_else(|| {
            let id = name_or_id.parse::<i64>().ok()?;
            types.iter().find(|t| t.id == id)
        })
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lb_type(id: i64, name: &str) -> Arc<LoadBalancerType> {
        Arc::new(LoadBalancerType {
            id,
            name: name.into(),
            ..LoadBalancerType::default()
        })
    }

    #[test]
    fn names_win_over_ids() {
        let types = vec![lb_type(1, "lb11"), lb_type(2, "1"), lb_type(3, "lb21")];
        assert_eq!(find(&types, "lb21").map(|t| t.id), Some(3));
        // "1" is a name here, so the type with ID 1 is not the answer.
        assert_eq!(find(&types, "1").map(|t| t.id), Some(2));
        assert_eq!(find(&types, "3").map(|t| t.id), Some(3));
        assert_eq!(find(&types, "lb31").map(|t| t.id), None);
        assert_eq!(find(&types, "9").map(|t| t.id), None);
    }
}

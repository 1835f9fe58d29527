//! The cluster's orphaned load balancers (with a cluster name only): listed for `plan`, deleted
//! only when asked (`hcloud-ccm delete-orphans`). See `cluster.rs`.

use std::collections::HashSet;

use cloud_provider::provider::Result;
use hcloud_api::api::params::ListParams;
use hcloud_api::models;

use super::HcloudLoadBalancers;
use super::cluster::{self, Orphan};
use crate::errors::categorize;

impl HcloudLoadBalancers {
    /// The cluster name (`HCLOUD_LOAD_BALANCERS_CLUSTER_NAME`), when set.
    pub fn cluster_name(&self) -> Option<&str> {
        self.settings.cluster_name.as_deref()
    }

    /// Every load balancer labelled with this cluster's name, as the API lists them now (one
    /// request by the cluster label). `None` without a cluster name: then nothing tells this
    /// cluster's load balancers from another's.
    pub async fn list_cluster(&self) -> Result<Option<Vec<models::LoadBalancer>>> {
        let Some(selector) = cluster::selector(self.cluster_name()) else {
            return Ok(None);
        };
        let lbs = self
            .client
            .load_balancers()
            .list_all(&ListParams::label_selector(selector.clone()))
            .await
            .map_err(|err| {
                categorize(
                    format!("listing the load balancers labelled {selector}"),
                    err,
                )
            })?;
        Ok(Some(lbs))
    }

    /// The load balancers labelled with this cluster's name whose Service UID label names
    /// none of `services` (the UIDs of every Service of the cluster), lowest ID first (see
    /// [`HcloudLoadBalancers::list_cluster`]; `None` without a cluster name).
    ///
    /// Before deleting, list the load balancers first and the Services after, and use
    /// [`cluster::orphans`]: a Service created meanwhile then cannot own a load balancer
    /// that looks orphaned.
    pub async fn orphans(&self, services: &HashSet<String>) -> Result<Option<Vec<Orphan>>> {
        let listed = self.list_cluster().await?;
        Ok(listed
            .zip(self.cluster_name())
            .map(|(lbs, name)| cluster::orphans(&lbs, name, services)))
    }

    /// Delete `orphan` and the managed certificates labelled with its Service UID (not
    /// another cluster's). Returns whether it is gone: `false` when it has delete protection (kept).
    pub async fn delete_orphan(&self, orphan: &Orphan) -> Result<bool> {
        let lb = &orphan.lb;
        if lb.protection.delete {
            tracing::info!(
                load_balancer = lb.name,
                id = lb.id,
                "keeping the orphaned load balancer: it has delete protection"
            );
            return Ok(false);
        }
        let key = format!(
            "(orphan of cluster {})",
            self.cluster_name().unwrap_or_default()
        );
        self.delete_one(&key, lb).await?;
        if let Some(uid) = &orphan.service_uid {
            let certificates: Vec<models::Certificate> = self
                .labelled_certificates(uid)
                .await?
                .into_iter()
                // Not another cluster's (see `labelled_certificates`); one made before the
                // cluster name was set has no cluster label but the orphan's UID.
                .filter(|c| c.kind == Some(models::CertificateType::Managed))
                .collect();
            self.delete_certificates(&key, &certificates).await?;
        }
        Ok(true)
    }
}

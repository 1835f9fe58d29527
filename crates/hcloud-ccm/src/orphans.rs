//! Orphaned load balancers of a named cluster (`HCLOUD_LOAD_BALANCERS_CLUSTER_NAME`): load
//! balancers labelled with the cluster's name whose Service no longer exists (deleted while no
//! CCM ran, or the finalizer removed by hand).
//!
//! `hcloud-ccm plan` lists them as warnings ([`plans`]); nothing deletes them except the
//! explicit command `hcloud-ccm delete-orphans` ([`run`]), which takes the controller manager's
//! flags and environment, lists the cluster's load balancers, then the Services, and deletes
//! the load balancers (and their managed certificates) no Service owns. A load balancer with
//! delete protection is kept. Without a cluster name there is nothing to tell this cluster's
//! load balancers from another's: plan lists none and the command refuses to run.

use std::collections::HashSet;
use std::ffi::OsString;
use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use cloud_provider::plan::{ObjectPlan, Warning};
use hcloud_provider::HcloudProvider;
use hcloud_provider::load_balancers::cluster::{self, Orphan};
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::ListParams;

use crate::config::Config;
use crate::{cloud, kube_client};

/// The first argument that selects the command.
pub const SUBCOMMAND: &str = "delete-orphans";

/// The event-like reason of an orphan in the plan.
pub const REASON: &str = "OrphanedLoadBalancer";

/// The section of `hcloud-ccm --help` about the command.
pub const HELP: &str = "\
Orphans: hcloud-ccm delete-orphans [OPTIONS]
  With HCLOUD_LOAD_BALANCERS_CLUSTER_NAME set, deletes the load balancers labelled with this \
cluster's name that no Service owns any more (and their managed certificates); `plan` lists them \
first. Load balancers with delete protection are kept. It takes the same flags and environment as \
the controller manager. Exit status: 0 done, 1 an error, 2 an invalid configuration or no cluster \
name.";

/// Whether the command line asks for this command (`hcloud-ccm delete-orphans …`).
pub fn requested(args: &[OsString]) -> bool {
    args.get(1).is_some_and(|a| a == SUBCOMMAND)
}

/// The UIDs of `services`.
pub fn uids(services: &[Arc<Service>]) -> HashSet<String> {
    services
        .iter()
        .filter_map(|s| s.metadata.uid.clone())
        .collect()
}

/// The plan entries of `found` (what [`HcloudLoadBalancers::orphans`] answered): one
/// `LoadBalancer` object per orphan, with a warning and no change (the controllers leave
/// orphans alone), or one error.
///
/// [`HcloudLoadBalancers::orphans`]: hcloud_provider::HcloudLoadBalancers::orphans
pub fn as_plans(found: cloud_provider::provider::Result<Option<Vec<Orphan>>>) -> Vec<ObjectPlan> {
    match found {
        Ok(orphans) => orphans
            .unwrap_or_default()
            .iter()
            .map(|orphan| ObjectPlan {
                kind: "LoadBalancer".to_owned(),
                name: format!("{:?} (ID {})", orphan.lb.name, orphan.lb.id),
                warnings: vec![Warning::new(
                    REASON,
                    format!(
                        "{}; `hcloud-ccm {SUBCOMMAND}` deletes it",
                        orphan.describe()
                    ),
                )],
                ..ObjectPlan::default()
            })
            .collect(),
        Err(err) => vec![ObjectPlan {
            kind: "LoadBalancer".to_owned(),
            name: "(orphans)".to_owned(),
            errors: vec![cloud_provider::events::error_chain(&err)],
            ..ObjectPlan::default()
        }],
    }
}

/// The plan entries of the cluster's orphans, given every Service of the cluster (none
/// without a cluster name or without load balancers).
pub async fn plans(provider: &HcloudProvider, services: &[Arc<Service>]) -> Vec<ObjectPlan> {
    match provider.hcloud_load_balancers() {
        Some(lbs) => as_plans(lbs.orphans(&uids(services)).await),
        None => Vec::new(),
    }
}

/// Run `hcloud-ccm delete-orphans`: delete the cluster's orphaned load balancers, printing
/// one line per load balancer.
pub async fn run(config: &Config) -> anyhow::Result<ExitCode> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(name) = config.load_balancers.cluster_name.clone() else {
        eprintln!(
            "{SUBCOMMAND}: HCLOUD_LOAD_BALANCERS_CLUSTER_NAME is not set: without a cluster name no load balancer can be told to be this cluster's"
        );
        return Ok(ExitCode::from(2));
    };
    let client = kube_client::build_client(&config.kube, SUBCOMMAND).await?;
    let provider = cloud::connect_once(config).await?;
    let lbs = provider
        .hcloud_load_balancers()
        .context("load balancers are disabled (HCLOUD_LOAD_BALANCERS_ENABLED=false)")?;
    // The load balancers first, then the Services: a Service created in between cannot own
    // a load balancer of this listing that looks orphaned.
    let listed = lbs
        .list_cluster()
        .await
        .map_err(|e| anyhow::anyhow!(cloud_provider::events::error_chain(&e)))?
        .unwrap_or_default();
    let services: Vec<Arc<Service>> = Api::<Service>::all(client)
        .list(&ListParams::default())
        .await
        .context("listing Services")?
        .items
        .into_iter()
        .map(Arc::new)
        .collect();
    let orphans = cluster::orphans(&listed, &name, &uids(&services));
    let mut report = String::new();
    if orphans.is_empty() {
        report.push_str(&format!(
            "No orphaned load balancers in cluster {name:?}.\n"
        ));
    }
    let mut failed = None;
    for orphan in &orphans {
        let what = format!("{:?} (ID {})", orphan.lb.name, orphan.lb.id);
        match lbs.delete_orphan(orphan).await {
            Ok(true) => report.push_str(&format!("deleted load balancer {what}\n")),
            Ok(false) => report.push_str(&format!(
                "kept load balancer {what}: it has delete protection\n"
            )),
            Err(e) => {
                failed = Some(format!(
                    "deleting load balancer {what}: {}",
                    cloud_provider::events::error_chain(&e)
                ));
                break;
            }
        }
    }
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(report.as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing the report")?;
    if let Some(failed) = failed {
        anyhow::bail!(failed);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcloud_api::models::LoadBalancer;

    #[test]
    fn orphans_are_warnings_of_their_own_objects_never_changes() {
        let orphan = Orphan {
            lb: LoadBalancer {
                id: 7,
                name: "web".into(),
                ..LoadBalancer::default()
            },
            service_uid: Some("gone".into()),
        };
        let plans = as_plans(Ok(Some(vec![orphan])));
        assert_eq!(plans.len(), 1);
        assert_eq!(
            (plans[0].kind.as_str(), plans[0].name.as_str()),
            ("LoadBalancer", "\"web\" (ID 7)")
        );
        assert!(plans[0].changes.is_empty() && plans[0].writes.is_empty());
        assert_eq!(plans[0].warnings[0].reason, REASON);
        assert!(
            plans[0].warnings[0].message.contains("delete-orphans"),
            "{:?}",
            plans[0].warnings
        );
        assert!(as_plans(Ok(None)).is_empty(), "no cluster name: no orphans");
        let failed = as_plans(Err(cloud_provider::Error::other("boom")));
        assert_eq!(failed[0].errors.len(), 1);
        let svc = |uid: Option<&str>| {
            let mut s = Service::default();
            s.metadata.uid = uid.map(str::to_owned);
            Arc::new(s)
        };
        assert_eq!(
            uids(&[svc(Some("a")), svc(None)]),
            HashSet::from(["a".to_owned()])
        );
        assert!(requested(&["hcloud-ccm".into(), SUBCOMMAND.into()]));
        assert!(!requested(&["hcloud-ccm".into(), "plan".into()]));
    }
}

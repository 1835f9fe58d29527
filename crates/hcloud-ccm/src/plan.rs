//! `hcloud-ccm plan`: what the controllers would change now, without changing anything.
//!
//! It takes the same flags and environment as the controller manager, reads the Nodes and
//! Services once, connects to the Hetzner API like a normal start (token check, network lookup)
//! and runs [`cloud_provider::plan::run`], which asks the provider only read-only questions
//! and feeds the answers to the controllers' own decision functions. It never writes to
//! Kubernetes or to the cloud, records no event and takes no lease.
//!
//! Output: a text plan (default) or JSON (`-o json`). Exit status ([`exit_status`]): 0 on
//! success, 1 on an error (including errors inside the plan, such as a Node whose server cannot
//! be looked up), 3 for an invalid command line or configuration; with `--detailed-exitcode` 0
//! means "nothing to change" and 2 "changes". [`HELP`] is its section of `hcloud-ccm --help`.

use std::ffi::OsString;
use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context as _;
use cloud_provider::plan::{ClusterPlan, PlannedControllers};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use kube::api::ListParams;

use crate::config::{Config, Controller};
use crate::{cloud, kube_client};

/// The first argument that selects the plan command.
pub const SUBCOMMAND: &str = "plan";

/// The plan command's exit statuses: distinct, so that a script can tell a typo from changes.
pub mod exit_status {
    /// The plan was written (with `--detailed-exitcode`: and there is nothing to change).
    pub const DONE: u8 = 0;
    /// The plan could not be made, or some object's plan has an error.
    pub const ERROR: u8 = 1;
    /// With `--detailed-exitcode`: the plan has changes.
    pub const CHANGES: u8 = 2;
    /// The command line or the configuration is invalid (the controller manager's 2).
    pub const INVALID_CONFIGURATION: u8 = 3;
}

/// The section of `hcloud-ccm --help` about the plan command.
pub const HELP: &str = "\
Plan: hcloud-ccm plan [-o text|json] [--detailed-exitcode] [OPTIONS]
  Shows what every controller would change now, with reads only: it lists the Nodes and Services \
once and asks the Hetzner Cloud API read-only questions; it writes nothing to Kubernetes or to the \
cloud, records no event and takes no lease. It takes the same flags and environment as the \
controller manager (the options above), so run it with your CCM's arguments; deploy/plan-job.yaml runs \
it in the cluster as a Job with a read-only ServiceAccount.
  -o, --output <text|json>  the plan for people (text, the default) or as JSON
      --detailed-exitcode   exit 2 when there are changes
  Exit status: 0 the plan was written (with --detailed-exitcode: nothing to change), 2 changes \
(with --detailed-exitcode only), 1 an error (the plan could not be made, or an object's plan has \
an error), 3 an invalid command line or configuration, each problem named.";

/// Output format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Output {
    /// For people.
    #[default]
    Text,
    /// For machines (`-o json`).
    Json,
}

/// The plan command's own flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanOptions {
    /// `-o text|json` / `--output=…`.
    pub output: Output,
    /// `--detailed-exitcode`: 0 nothing to do, 2 changes, 1 error.
    pub detailed_exitcode: bool,
}

impl PlanOptions {
    /// Take the plan command's own flags out of `args` (program name first, `plan` already
    /// removed); the rest are the controller manager's flags.
    pub fn extract(args: Vec<OsString>) -> Result<(Self, Vec<OsString>), String> {
        let mut options = Self::default();
        let mut rest = Vec::with_capacity(args.len());
        let mut iter = args.into_iter();
        let parse_output = |value: &str| match value {
            "json" => Ok(Output::Json),
            "text" => Ok(Output::Text),
            other => Err(format!(
                "--output: {other:?} is not one of text, json (plan)"
            )),
        };
        while let Some(arg) = iter.next() {
            let text = arg.to_string_lossy();
            if let Some(value) = text
                .strip_prefix("--output=")
                .or_else(|| text.strip_prefix("-o="))
            {
                options.output = parse_output(value)?;
            } else if text == "-o" || text == "--output" {
                let value = iter
                    .next()
                    .ok_or_else(|| "--output needs a value: text or json".to_owned())?;
                options.output = parse_output(&value.to_string_lossy())?;
            } else if let Some(value) = text.strip_prefix("-o") {
                options.output = parse_output(value)?;
            } else if text == "--detailed-exitcode" {
                options.detailed_exitcode = true;
            } else {
                rest.push(arg);
            }
        }
        Ok((options, rest))
    }

    /// The exit status for a finished plan.
    pub fn exit_code(&self, plan: &ClusterPlan) -> u8 {
        if plan.error_count() > 0 {
            exit_status::ERROR
        } else if self.detailed_exitcode && plan.change_count() > 0 {
            exit_status::CHANGES
        } else {
            exit_status::DONE
        }
    }
}

/// The exit status for a command line or configuration refused with `code` (the controller
/// manager's status): the plan command's own for "invalid", since its 2 means "changes"; 0 (for
/// `--help`) and any other status stay.
pub fn refused_status(code: u8) -> u8 {
    if code == 2 {
        exit_status::INVALID_CONFIGURATION
    } else {
        code
    }
}

/// Whether the command line asks for the plan command (`hcloud-ccm plan …`).
pub fn requested(args: &[OsString]) -> bool {
    args.get(1).is_some_and(|a| a == SUBCOMMAND)
}

/// Which controllers the configuration runs, and their settings.
pub fn planned_controllers(
    config: &Config,
    provider: &dyn cloud_provider::CloudProvider,
) -> PlannedControllers {
    let routes = config.controller_wanted(Controller::NodeRoute) && provider.routes().is_some();
    PlannedControllers {
        cluster_name: config.cluster_name.clone(),
        node: config.controller_wanted(Controller::CloudNode),
        node_lifecycle: config.controller_wanted(Controller::CloudNodeLifecycle),
        node_lifecycle_config: crate::controllers::lifecycle_config(config),
        service: config.controller_wanted(Controller::ServiceLb),
        load_balancer_class: crate::controllers::load_balancer_class(config),
        load_balancer_nodes: config.load_balancer_nodes,
        secrets: None,
        routes: routes.then(|| config.cluster_cidrs.clone()),
    }
}

/// Read the cluster and the cloud and compute the plan.
pub async fn compute(config: &Config) -> anyhow::Result<ClusterPlan> {
    let client = kube_client::build_client(&config.kube, "plan").await?;
    let provider = cloud::connect_once(config).await?;
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("listing Nodes")?;
    let services = Api::<Service>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("listing Services")?;
    let nodes: Vec<_> = nodes.items.into_iter().map(std::sync::Arc::new).collect();
    let services: Vec<_> = services
        .items
        .into_iter()
        .map(std::sync::Arc::new)
        .collect();
    let mut options = planned_controllers(config, provider.as_ref());
    if config.load_balancer_secrets {
        options.secrets = Some(std::sync::Arc::new(
            cloud_provider::secrets::ApiTlsSecrets::new(client.clone()),
        ));
    }
    let skipped: Vec<String> = Controller::ALL
        .into_iter()
        .filter_map(|controller| config.why_not_wanted(controller))
        .collect();
    let mut plan = cloud_provider::plan::run(provider.as_ref(), &nodes, &services, &options).await;
    plan.skipped.extend(skipped);
    // With a cluster name: the cluster's load balancers no Service owns (warnings only).
    if options.service {
        plan.objects
            .extend(crate::orphans::plans(&provider, &services).await);
    }
    Ok(plan)
}

/// Run the plan command: compute, print to standard output, and choose the exit status.
pub async fn run(config: &Config, options: PlanOptions) -> anyhow::Result<ExitCode> {
    // As the controller manager does: one process-wide rustls provider (an error only means
    // it was installed already).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let plan = compute(config).await?;
    let rendered = match options.output {
        Output::Text => plan.render_text(),
        Output::Json => {
            let mut json = serde_json::to_string_pretty(&plan).context("encoding the plan")?;
            json.push('\n');
            json
        }
    };
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(rendered.as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing the plan")?;
    Ok(ExitCode::from(options.exit_code(&plan)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cloud_provider::plan::{Change, ObjectPlan, Verb};

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn own_flags_are_taken_out_and_the_rest_kept_in_order() {
        let (options, rest) = PlanOptions::extract(os(&[
            "hcloud-ccm",
            "--cloud-provider=hcloud",
            "-o",
            "json",
            "--kubeconfig",
            "k",
            "--detailed-exitcode",
        ]))
        .unwrap_or_default();
        assert_eq!(
            options,
            PlanOptions {
                output: Output::Json,
                detailed_exitcode: true
            }
        );
        assert_eq!(
            rest,
            os(&["hcloud-ccm", "--cloud-provider=hcloud", "--kubeconfig", "k"])
        );
        for spelling in [
            &["--output=json"][..],
            &["-ojson"],
            &["-o=json"],
            &["--output", "json"],
        ] {
            let mut args = vec!["hcloud-ccm"];
            args.extend_from_slice(spelling);
            let (options, _) = PlanOptions::extract(os(&args)).unwrap_or_default();
            assert_eq!(options.output, Output::Json, "{spelling:?}");
        }
        assert!(PlanOptions::extract(os(&["x", "-o", "yaml"])).is_err());
        assert!(PlanOptions::extract(os(&["x", "-o"])).is_err());
    }

    #[test]
    fn the_subcommand_is_the_first_argument_only() {
        assert!(requested(&os(&["hcloud-ccm", "plan", "-o", "json"])));
        assert!(!requested(&os(&["hcloud-ccm", "--cluster-name", "plan"])));
        assert!(!requested(&os(&["hcloud-ccm"])));
    }

    #[test]
    fn exit_codes() {
        let empty = ClusterPlan::default();
        let mut changes = ClusterPlan::default();
        changes.objects.push(ObjectPlan {
            kind: "Node".into(),
            name: "n".into(),
            changes: vec![Change {
                verb: Verb::Add,
                target: "label x".into(),
                from: None,
                to: Some("y".into()),
            }],
            ..ObjectPlan::default()
        });
        let mut errors = changes.clone();
        errors.objects[0].errors.push("boom".into());
        let plain = PlanOptions::default();
        let detailed = PlanOptions {
            detailed_exitcode: true,
            ..PlanOptions::default()
        };
        assert_eq!(plain.exit_code(&empty), 0);
        assert_eq!(plain.exit_code(&changes), 0);
        assert_eq!(plain.exit_code(&errors), 1);
        assert_eq!(detailed.exit_code(&empty), 0);
        assert_eq!(detailed.exit_code(&changes), 2);
        assert_eq!(detailed.exit_code(&errors), 1);
        assert_eq!(refused_status(2), exit_status::INVALID_CONFIGURATION);
        assert_eq!(refused_status(0), 0, "--help");
        let distinct: std::collections::BTreeSet<u8> = [
            exit_status::DONE,
            exit_status::ERROR,
            exit_status::CHANGES,
            exit_status::INVALID_CONFIGURATION,
        ]
        .into();
        assert_eq!(distinct.len(), 4);
    }
}

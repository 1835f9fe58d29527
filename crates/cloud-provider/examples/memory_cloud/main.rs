//! A cloud controller manager for an in-memory cloud: the framework's four controllers (node,
//! node lifecycle, service, route) run for the provider of [`cloud`] against a real cluster.
//!
//! ```sh
//! cargo run -p cloud-provider --example memory_cloud -- \
//!     --kubeconfig ~/.kube/config --instance worker-1=10.0.0.2 --instance worker-2=10.0.0.3
//! ```
//!
//! Flags: `--kubeconfig PATH` (default: `$KUBECONFIG`, `~/.kube/config`, or the in-cluster
//! ServiceAccount), `--instance NAME=IPv4` (repeated: the instances the cloud starts with; a
//! Node is the instance of its name), `--cluster-name NAME` (default `kubernetes`),
//! `--cluster-cidr CIDR` (repeated; default `10.244.0.0/16`).
//!
//! Kubelets started with `--cloud-provider=external` register their Nodes with the
//! uninitialized taint; the node controller gives each the providerID, labels and addresses of
//! its instance and removes the taint. Services of type LoadBalancer get an address from
//! 203.0.113.0/24, pod CIDRs get routes. The cloud's console reads commands from stdin:
//! `add NAME IPv4`, `shutdown NAME`, `start NAME`, `delete NAME` (the lifecycle controller then
//! deletes the NotReady Node), `show` (instances, load balancers, routes) and `metrics`.
//!
//! It runs one replica and no leader election: with more replicas, run
//! [`controllers::run_controllers`] only while holding a lease.

mod cloud;
mod controllers;

use std::error::Error;
use std::io::BufRead;
use std::process::ExitCode;
use std::sync::Arc;

use cloud::{Instance, MemoryCloud};
use cloud_provider::NodeCache;
use controllers::{AllMetrics, Settings};
use kube::config::{KubeConfigOptions, Kubeconfig};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let mut message = err.to_string();
            let mut source = err.source();
            while let Some(cause) = source {
                message = format!("{message}: {cause}");
                source = cause.source();
            }
            eprintln!("memory_cloud: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let cloud = MemoryCloud::default();
    let mut settings = Settings {
        provider_id_prefix: Some(cloud::PROVIDER_ID_PREFIX.to_owned()),
        ..Settings::default()
    };
    let mut kubeconfig = None;
    let mut cluster_cidrs = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--kubeconfig" => kubeconfig = Some(value()?),
            "--instance" => cloud.add_instance(parse_instance(&value()?)?),
            "--cluster-name" => settings.cluster_name = value()?,
            "--cluster-cidr" => {
                let cidr = value()?;
                let parsed = cidr
                    .parse()
                    .map_err(|err| format!("--cluster-cidr {cidr:?}: {err}"))?;
                cluster_cidrs.push(parsed);
            }
            other => return Err(format!("unknown flag {other:?}").into()),
        }
    }
    if !cluster_cidrs.is_empty() {
        settings.cluster_cidrs = cluster_cidrs;
    }
    let config = match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(&path).map_err(|err| format!("{path}: {err}"))?;
            kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    let client = kube::Client::try_from(config)?;

    let shutdown = CancellationToken::new();
    // At process start: the shared Node cache and the metrics. A binary serves the registry
    // on /metrics; the console here prints it.
    let nodes = NodeCache::spawn(client.clone(), shutdown.clone());
    let metrics = AllMetrics::default();
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let (console_cloud, cluster) = (cloud.clone(), settings.cluster_name.clone());
    std::thread::spawn(move || console(&console_cloud, &cluster, &registry));
    let stop = shutdown.clone();
    tokio::spawn(async move {
        tokio::signal::ctrl_c().await.ok();
        stop.cancel();
    });
    controllers::run_controllers(client, nodes, Arc::new(cloud), settings, metrics, shutdown)
        .await?;
    Ok(())
}

/// `NAME=IPv4`.
fn parse_instance(value: &str) -> Result<Instance, String> {
    let (name, ip) = value
        .split_once('=')
        .ok_or(format!("--instance {value:?}: expected NAME=IPv4"))?;
    let ip = ip
        .parse()
        .map_err(|err| format!("--instance {value:?}: address {ip:?}: {err}"))?;
    Ok(Instance::new(name, ip))
}

/// The cloud's console on stdin, until it closes.
#[expect(clippy::print_stdout, reason = "the console answers on stdout")]
fn console(cloud: &MemoryCloud, cluster: &str, registry: &Registry) {
    for line in std::io::stdin().lock().lines().map_while(Result::ok) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let answer = match words.as_slice() {
            ["add", name, ip] => {
                parse_instance(&format!("{name}={ip}")).map(|instance| cloud.add_instance(instance))
            }
            ["shutdown", name] => found(cloud.set_shut_down(name, true), name),
            ["start", name] => found(cloud.set_shut_down(name, false), name),
            ["delete", name] => found(cloud.delete_instance(name), name),
            ["show"] => {
                println!("{:#?}", cloud.list_instances());
                println!("{:#?}", cloud.list_load_balancers());
                println!("{:#?}", cloud.list_routes_of(cluster));
                Ok(())
            }
            ["metrics"] => {
                let mut text = String::new();
                prometheus_client::encoding::text::encode(&mut text, registry)
                    .map(|()| println!("{text}"))
                    .map_err(|err| err.to_string())
            }
            [] => Ok(()),
            _ => Err(format!(
                "unknown command {line:?}: add NAME IPv4, shutdown NAME, start NAME, delete NAME, show, metrics"
            )),
        };
        if let Err(err) = answer {
            println!("error: {err}");
        }
    }
}

fn found(found: bool, name: &str) -> Result<(), String> {
    found.then_some(()).ok_or(format!("no instance {name:?}"))
}

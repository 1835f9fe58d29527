//! The local sandbox: a private Kubernetes control plane, the Hetzner Cloud simulator seeded
//! with a network and three servers, `hcloud-ccm` running against both, and three Nodes
//! registered the way kubelets with `--cloud-provider=external` register them, each with a pod
//! CIDR that the CCM's route controller turns into a route of the private network.
//!
//! A small kubelet stand-in keeps each Node's `Ready` condition in line with its server in the
//! simulator (running ⇒ Ready, otherwise Unknown) and re-registers a Node when a server of
//! that name runs again, so the whole node lifecycle can be tried from a terminal.

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod kubelet;
mod load_balancer;
mod table;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Parser;
use hcloud_sim::{NetworkSeed, RobotServerSeed, ServerSeed, SimConfig, Simulator};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use kube_harness::ControlPlane;

/// Servers of the sandbox: (name, server type, location).
const SERVERS: [(&str, &str, &str); 3] = [
    ("sandbox-worker-1", "cpx22", "fsn1"),
    ("sandbox-worker-2", "cpx32", "nbg1"),
    ("sandbox-worker-3", "cax21", "hel1"),
];
const NETWORK: &str = "sandbox";
/// The pods' address range: kube-controller-manager gives each Node a `/24` of it, and
/// hcloud-ccm routes each one in the network.
const CLUSTER_CIDR: &str = "10.244.0.0/16";
/// Where load balancers go when a Service names no location (HCLOUD_LOAD_BALANCERS_LOCATION).
const LOAD_BALANCER_LOCATION: &str = "fsn1";
const TOKEN: &str = "sandbox-token-00000000000000000000000000000000000000000000000000";

#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Exit after the Nodes are initialized and printed, instead of running until Ctrl-C.
    #[arg(long)]
    exit_after_demo: bool,
    /// Directory for the kubeconfig and the CCM's log.
    #[arg(long, default_value = "target/sandbox")]
    workdir: PathBuf,
    /// Address the simulator listens on.
    #[arg(long, default_value = "127.0.0.1:0")]
    sim_listen: std::net::SocketAddr,
    /// The hcloud-ccm binary (default: next to this one).
    #[arg(long)]
    ccm_binary: Option<PathBuf>,
    /// How long to wait for the Nodes to be initialized.
    #[arg(long, default_value = "120")]
    timeout_seconds: u64,
    /// Dedicated servers to put in the simulator's Robot account (`sandbox-dedicated-N`); each
    /// gets a Node, and hcloud-ccm runs with Robot on beside routes: the cloud Nodes get routes,
    /// the dedicated ones none (a `RouteNotSupported` Warning each: their pod traffic needs the
    /// CNI).
    #[arg(long, default_value = "0")]
    dedicated_servers: u32,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            // The control plane's readiness polling logs expected connection errors.
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,kube_client=off".into()),
        )
        .init();
    std::fs::create_dir_all(&args.workdir)
        .with_context(|| format!("creating {}", args.workdir.display()))?;
    let workdir = args.workdir.canonicalize()?;

    step(&format!(
        "starting etcd, kube-apiserver and kube-controller-manager (node IPAM) of Kubernetes {}",
        kube_harness::KUBERNETES_VERSION
    ));
    let plane = ControlPlane::start_with(&kube_harness::Options {
        node_ipam_cluster_cidr: Some(CLUSTER_CIDR.to_owned()),
        ..kube_harness::Options::default()
    })
    .await
    .context("starting the control plane")?;
    let kubeconfig = workdir.join("kubeconfig");
    plane.write_kubeconfig(&kubeconfig)?;
    let client = plane.client().await?;

    step("starting the Hetzner Cloud simulator");
    let sim = Simulator::start_on(SimConfig::default().token(TOKEN), args.sim_listen)
        .await
        .context("starting the simulator")?;
    let admin = sim.admin();
    let network = admin
        .create_network(
            NetworkSeed::new(NETWORK, "10.0.0.0/16").subnet("10.0.1.0/24", "eu-central"),
        )
        .await?;
    for (name, server_type, location) in SERVERS {
        admin
            .create_server(ServerSeed {
                server_type: server_type.into(),
                location: location.into(),
                networks: vec![network.into()],
                ..ServerSeed::new(name)
            })
            .await
            .with_context(|| format!("seeding server {name}"))?;
    }
    for i in 1..=args.dedicated_servers {
        let name = format!("sandbox-dedicated-{i}");
        let number = admin
            .add_robot_server(RobotServerSeed::new(&name).dc("HEL1-DC5"))
            .await
            .with_context(|| format!("seeding dedicated server {name}"))?;
        step(&format!("dedicated server {name} is Robot server {number}"));
    }

    step("starting hcloud-ccm");
    let ccm_binary = match args.ccm_binary {
        Some(path) => path,
        None => std::env::current_exe()?
            .parent()
            .context("locating the hcloud-ccm binary")?
            .join("hcloud-ccm"),
    };
    if !ccm_binary.is_file() {
        bail!(
            "{} not found: build it first (cargo build -p hcloud-ccm) or pass --ccm-binary",
            ccm_binary.display()
        );
    }
    let metrics_port = free_port()?;
    let log_path = workdir.join("hcloud-ccm.log");
    let log = std::fs::File::create(&log_path)?;
    let robot = args.dedicated_servers > 0;
    let ccm_args = [
        "--cloud-provider=hcloud".to_owned(),
        "--allow-untagged-cloud".to_owned(),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--secure-port=0".to_owned(),
        "--allocate-node-cidrs=true".to_owned(),
        format!("--cluster-cidr={CLUSTER_CIDR}"),
        "--route-reconciliation-period=2s".to_owned(),
    ];
    let mut ccm_env = vec![
        ("HCLOUD_TOKEN", TOKEN.to_owned()),
        ("HCLOUD_ENDPOINT", sim.base_url()),
        ("HCLOUD_NETWORK", NETWORK.to_owned()),
        // The sandbox runs on no Hetzner server: there is no metadata service to ask.
        ("HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK", "true".to_owned()),
        (
            "HCLOUD_LOAD_BALANCERS_LOCATION",
            LOAD_BALANCER_LOCATION.to_owned(),
        ),
        ("HCLOUD_LOAD_BALANCERS_TYPE", "lb11".to_owned()),
    ];
    if robot {
        ccm_env.extend([
            ("ROBOT_ENABLED", "true".to_owned()),
            ("ROBOT_USER", sim.robot_user().to_owned()),
            ("ROBOT_PASSWORD", sim.robot_password().to_owned()),
            ("ROBOT_ENDPOINT", sim.robot_url()),
        ]);
    }
    let mut ccm = tokio::process::Command::new(&ccm_binary)
        .args(&ccm_args)
        .envs(ccm_env.iter().map(|(k, v)| (*k, v)))
        .env(
            "HCLOUD_METRICS_ADDRESS",
            format!("127.0.0.1:{metrics_port}"),
        )
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", ccm_binary.display()))?;

    let mut names: Vec<String> = SERVERS.iter().map(|(n, _, _)| (*n).to_owned()).collect();
    names.extend((1..=args.dedicated_servers).map(|i| format!("sandbox-dedicated-{i}")));
    step(&format!(
        "registering {} Nodes like kubelets with --cloud-provider=external",
        names.len()
    ));
    let kubelets = tokio::spawn(kubelet::run(client.clone(), admin.clone(), names.clone()));

    step("waiting for hcloud-ccm to initialize them");
    let nodes: Api<Node> = Api::all(client.clone());
    let started = Instant::now();
    loop {
        if let Some(status) = ccm.try_wait()? {
            bail!(
                "hcloud-ccm exited with {status} before the Nodes were initialized; its log:\n{}",
                tail(&log_path)
            );
        }
        let listed = nodes.list(&ListParams::default()).await?.items;
        if names.iter().all(|name| {
            listed
                .iter()
                .any(|n| n.metadata.name.as_deref() == Some(name) && table::initialized(n))
        }) {
            break;
        }
        if started.elapsed() > Duration::from_secs(args.timeout_seconds) {
            bail!(
                "the Nodes were not initialized within {} s; hcloud-ccm's log:\n{}",
                args.timeout_seconds,
                tail(&log_path)
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    println!(
        "\nInitialized in {:.1} s:\n",
        started.elapsed().as_secs_f64()
    );
    println!(
        "{}",
        table::render(&nodes.list(&ListParams::default()).await?.items)
    );
    // Routes follow within a route reconciliation period, for the cloud servers only.
    let deadline = Instant::now() + Duration::from_secs(30);
    let routes = loop {
        let routes = table::network_routes(&admin.state().await?, NETWORK);
        if routes.len() >= SERVERS.len() || Instant::now() > deadline {
            break routes;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    println!("Routes of network {NETWORK:?} (pod CIDR -> node's private IP):");
    for (destination, gateway) in &routes {
        println!("  {destination:<16} -> {gateway}");
    }
    if robot {
        println!(
            "  (none for the dedicated Nodes: a network route leads to a cloud server only; each has a RouteNotSupported Warning saying its pod traffic needs the CNI)"
        );
    }
    step("creating Service default/web of type LoadBalancer");
    println!(
        "\n{}",
        load_balancer::demo(client.clone(), &admin, Duration::from_secs(60)).await?
    );

    let admin_url = sim.admin_url();
    // The exact `plan` of this sandbox: the CCM's own arguments and environment.
    let plan_command = format!(
        "{} {} plan {} --detailed-exitcode",
        ccm_env
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
        ccm_binary.display(),
        ccm_args.join(" "),
    );
    let kubectl = kube_harness::kubectl()
        .map(|path| path.display().to_string())
        .unwrap_or_else(|_| "kubectl".to_owned());
    println!(
        "\nTry it (kubectl {version} is {kubectl}):\n  export KUBECONFIG={kubeconfig}\n  alias kubectl={kubectl}\n  kubectl get nodes -o wide\n  kubectl get events -A\n  kubectl get service web -o wide\n\n\
         Your own Service gets a load balancer as it would in a cluster (no annotation needed: hcloud-ccm runs\n\
         with HCLOUD_LOAD_BALANCERS_LOCATION={LOAD_BALANCER_LOCATION} and _TYPE=lb11, as an operator's chart values set them):\n  \
         kubectl create deployment hello --image=nginx --port=80\n  \
         kubectl expose deployment hello --type=LoadBalancer --port=80\n  \
         kubectl get service hello -w\n\n\
         What hcloud-ccm would change now, with reads only (exit 0: nothing; 2: changes):\n  {plan_command}\n\n  \
         kubectl patch service web -p '{{\"spec\":{{\"externalTrafficPolicy\":\"Local\"}}}}'   # then the check is http <healthCheckNodePort>/healthz:\n  \
         curl -s {admin_url}/state | jq '.load_balancers[].services[].health_check'\n  curl -s http://127.0.0.1:{metrics_port}/metrics | grep hcloud_api_requests_total\n\n\
         Change the cloud through the simulator's admin API ({admin_url}):\n  \
         curl -s {admin_url}/state | jq '.servers[] | {{id, name, status}}'\n  \
         curl -s -X POST {admin_url}/servers/ID/status -H 'content-type: application/json' -d '{{\"status\":\"off\"}}'   # shutdown taint\n  \
         curl -s -X DELETE {admin_url}/servers/ID                                       # Node is deleted\n  \
         curl -s -X POST {admin_url}/servers -H 'content-type: application/json' -d '{{\"name\":\"sandbox-worker-4\",\"networks\":[\"{NETWORK}\"]}}'   # attached to the network, so its route can be made\n\n\
         Dedicated servers live in the simulator's Robot webservice ({robot_url}; with --dedicated-servers N, hcloud-ccm reads it):\n  \
         curl -s -u {robot_user}:{robot_password} {robot_url}/server | jq '.[].server | {{server_number, server_name, server_ip}}'\n  \
         curl -s -X POST {admin_url}/robot/servers -H 'content-type: application/json' -d '{{\"name\":\"sandbox-dedicated-9\"}}'   # adds one\n  \
         curl -s -X PUT {admin_url}/robot/servers/NUMBER/operating_status -H 'content-type: application/json' -d '{{\"operating_status\":\"shut off\"}}'   # powers it off: shutdown taint\n\n\
         The official hcloud CLI (if you have it) reads the simulator through two variables:\n  \
         export HCLOUD_ENDPOINT={api} HCLOUD_TOKEN={TOKEN}\n  \
         hcloud server list\n  \
         hcloud load-balancer list -o json\n\n\
         hcloud-ccm log: {log}\nHetzner API endpoint: {api} (token {TOKEN})\n",
        kubeconfig = kubeconfig.display(),
        version = kube_harness::KUBERNETES_VERSION,
        api = sim.base_url(),
        robot_url = sim.robot_url(),
        robot_user = sim.robot_user(),
        robot_password = sim.robot_password(),
        log = log_path.display(),
    );

    if args.exit_after_demo {
        step("demo done, stopping everything");
    } else {
        println!("Running until Ctrl-C.");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => step("Ctrl-C: stopping everything"),
            status = ccm.wait() => eprintln!("hcloud-ccm exited with {status:?}; stopping"),
        }
    }
    kubelets.abort();
    terminate(&mut ccm).await;
    drop(plane);
    sim.shutdown().await;
    Ok(())
}

fn step(message: &str) {
    eprintln!("==> {message}");
}

/// SIGTERM first (the CCM releases its lease), SIGKILL after 10 s.
async fn terminate(child: &mut tokio::process::Child) {
    if let Some(pid) = child.id() {
        let _ = tokio::process::Command::new("kill")
            .arg(pid.to_string())
            .status()
            .await;
        if tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .is_ok()
        {
            return;
        }
    }
    let _ = child.kill().await;
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn tail(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

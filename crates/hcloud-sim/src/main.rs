//! `hcloud-sim --listen ADDR --token TOKEN [--seed FILE] [--robot-user U --robot-password P]`:
//! a local Hetzner Cloud API, and the Robot webservice under `/robot`.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use hcloud_sim::{RateLimitConfig, RobotRateLimit, SeedFile, SimConfig, Simulator};

/// A local Hetzner Cloud API server with real semantics.
#[derive(Debug, Parser)]
#[command(name = "hcloud-sim", version)]
struct Args {
    /// Address to listen on.
    #[arg(long, env = "HCLOUD_SIM_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Bearer token the API accepts.
    #[arg(long, env = "HCLOUD_SIM_TOKEN", hide_env_values = true)]
    token: String,
    /// JSON seed file with networks and servers.
    #[arg(long)]
    seed: Option<std::path::PathBuf>,
    /// How long actions run, in milliseconds.
    #[arg(long, default_value_t = 500)]
    action_delay_ms: u64,
    /// Rate limit bucket size (0 turns rate limiting off).
    #[arg(long, default_value_t = 3600)]
    rate_limit: u32,
    /// Rate limit refill per second.
    #[arg(long, default_value_t = 1.0)]
    rate_limit_refill: f64,
    /// User the Robot webservice (`/robot`) accepts.
    #[arg(long, env = "HCLOUD_SIM_ROBOT_USER", default_value = "robot-user")]
    robot_user: String,
    /// Password the Robot webservice accepts.
    #[arg(
        long,
        env = "HCLOUD_SIM_ROBOT_PASSWORD",
        hide_env_values = true,
        default_value = "robot-password"
    )]
    robot_password: String,
    /// Robot requests allowed per endpoint and interval (0 turns the Robot limit off).
    #[arg(long, default_value_t = 200)]
    robot_rate_limit: u32,
    /// Length of the Robot limit's interval in seconds.
    #[arg(long, default_value_t = 3600, value_parser = clap::value_parser!(u64).range(1..))]
    robot_rate_limit_interval: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    let rate_limit = if args.rate_limit == 0 {
        RateLimitConfig::Off
    } else {
        RateLimitConfig::Bucket {
            capacity: args.rate_limit,
            refill_per_second: args.rate_limit_refill,
        }
    };
    let robot_rate_limit = (args.robot_rate_limit > 0).then_some(RobotRateLimit {
        max_request: args.robot_rate_limit,
        interval: args.robot_rate_limit_interval,
    });
    let mut config = SimConfig::default()
        .token(args.token)
        .action_delay(Duration::from_millis(args.action_delay_ms))
        .rate_limit(rate_limit)
        .robot_credentials(args.robot_user, args.robot_password)
        .robot_rate_limit(robot_rate_limit);
    if let Some(path) = &args.seed {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading seed file {}", path.display()))?;
        let seed: SeedFile = serde_json::from_str(&text)
            .with_context(|| format!("parsing seed file {}", path.display()))?;
        config = config.seed(seed);
    }
    let sim = Simulator::start_on(config, args.listen).await?;
    tracing::info!(
        endpoint = %sim.base_url(),
        robot = %sim.robot_url(),
        admin = %sim.admin_url(),
        "hcloud-sim listening"
    );
    tokio::signal::ctrl_c().await?;
    tracing::info!("shutting down");
    sim.shutdown().await;
    Ok(())
}

//! The `hcloud-ccm` replicas of a schedule: started with leader election against the shared
//! control plane and the fault proxy, killed with SIGKILL when the schedule says so, and
//! started again one second after they exit on their own (as a kubelet restarts a crashed
//! container), each exit counted with the reason its log gives.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::process::{Child, Command};

use crate::eventlog::EventLog;
use crate::invariants::CLUSTER_CIDR;
use crate::secrets;

/// How long a replica that exited on its own stays down.
const RESTART_DELAY: Duration = Duration::from_secs(1);

/// What every replica is started with, besides its own log and metrics port.
#[derive(Debug, Clone)]
pub struct CcmConfig {
    /// The binary.
    pub binary: PathBuf,
    /// Kubeconfig of the CCM's ServiceAccount.
    pub kubeconfig: PathBuf,
    /// `HCLOUD_ENDPOINT`: the fault proxy.
    pub endpoint: String,
    /// `HCLOUD_METADATA_ENDPOINT`: the simulator's metadata service, directly.
    pub metadata_endpoint: String,
    /// `-v`.
    pub verbosity: u8,
    /// `HCLOUD_DEBUG`.
    pub hcloud_debug: bool,
    /// Where the logs go.
    pub dir: PathBuf,
}

#[derive(Debug)]
struct Replica {
    child: Option<Child>,
    /// Starts so far (the log of start `n` is `ccm-<replica>-<n>.log`).
    starts: usize,
    log: Option<PathBuf>,
    metrics_port: u16,
    /// When to start it again after it exited on its own.
    restart_at: Option<Instant>,
    /// Killed by the schedule and not started again yet.
    held_down: bool,
}

/// The replicas of one schedule.
#[derive(Debug)]
pub struct Ccms {
    config: CcmConfig,
    replicas: Vec<Replica>,
    log: EventLog,
    /// Kills by the schedule.
    pub kills: u64,
    /// Exits the schedule did not cause, by reason.
    pub exits: BTreeMap<String, u64>,
}

impl Ccms {
    /// `count` replicas, none started yet.
    pub fn new(config: CcmConfig, count: usize, log: EventLog) -> Self {
        let replicas = (0..count)
            .map(|_| Replica {
                child: None,
                starts: 0,
                log: None,
                metrics_port: 0,
                restart_at: None,
                held_down: false,
            })
            .collect();
        Ccms {
            config,
            replicas,
            log,
            kills: 0,
            exits: BTreeMap::new(),
        }
    }

    /// Starts replica `index` (a no-op while it runs).
    pub fn start(&mut self, index: usize) -> anyhow::Result<()> {
        let config = self.config.clone();
        let Some(replica) = self.replicas.get_mut(index) else {
            anyhow::bail!("no CCM replica {index}");
        };
        replica.held_down = false;
        replica.restart_at = None;
        if replica.child.is_some() {
            return Ok(());
        }
        replica.starts += 1;
        let log_path = config
            .dir
            .join(format!("ccm-{index}-{}.log", replica.starts));
        let port = free_port()?;
        let child = spawn(&config, &log_path, port)?;
        self.log.log(format_args!(
            "CCM replica {index} started (pid {}, start {}, metrics on :{port})",
            child.id().unwrap_or_default(),
            replica.starts
        ));
        replica.child = Some(child);
        replica.log = Some(log_path);
        replica.metrics_port = port;
        Ok(())
    }

    /// Starts every replica.
    pub fn start_all(&mut self) -> anyhow::Result<()> {
        for index in 0..self.replicas.len() {
            self.start(index)?;
        }
        Ok(())
    }

    /// Kills replica `index` with SIGKILL; it stays down until [`Ccms::start`].
    pub async fn kill(&mut self, index: usize) -> anyhow::Result<()> {
        let Some(replica) = self.replicas.get_mut(index) else {
            anyhow::bail!("no CCM replica {index}");
        };
        replica.held_down = true;
        replica.restart_at = None;
        if let Some(mut child) = replica.child.take() {
            child.start_kill()?;
            let status = child.wait().await?;
            self.kills += 1;
            self.log.log(format_args!(
                "CCM replica {index} killed with SIGKILL ({status})"
            ));
        }
        Ok(())
    }

    /// Kills every replica (the end of a schedule).
    pub async fn kill_all(&mut self) -> anyhow::Result<()> {
        for replica in &mut self.replicas {
            if let Some(mut child) = replica.child.take() {
                child.start_kill()?;
                child.wait().await?;
            }
        }
        Ok(())
    }

    /// Notices replicas that exited on their own (logs and counts them, with the reason their
    /// log gives) and starts them again once their restart delay has passed.
    pub fn supervise(&mut self) -> anyhow::Result<()> {
        for index in 0..self.replicas.len() {
            let Some(replica) = self.replicas.get_mut(index) else {
                continue;
            };
            if let Some(child) = replica.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                replica.child = None;
                let reason = replica
                    .log
                    .as_deref()
                    .map(exit_reason)
                    .unwrap_or_else(|| "no log".to_owned());
                self.log.log(format_args!(
                    "CCM replica {index} exited on its own ({status}): {reason}; restarting it in {} s",
                    RESTART_DELAY.as_secs()
                ));
                *self.exits.entry(classify(&reason)).or_default() += 1;
                replica.restart_at = Some(Instant::now() + RESTART_DELAY);
            }
            if replica.restart_at.is_some_and(|at| at <= Instant::now()) && !replica.held_down {
                self.start(index)?;
            }
        }
        Ok(())
    }

    /// Whether every replica runs (none held down, none waiting for its restart).
    pub fn all_running(&self) -> bool {
        self.replicas.iter().all(|r| r.child.is_some())
    }

    /// The metrics ports of the running replicas.
    pub fn metrics_ports(&self) -> Vec<(usize, u16)> {
        self.replicas
            .iter()
            .enumerate()
            .filter(|(_, r)| r.child.is_some())
            .map(|(i, r)| (i, r.metrics_port))
            .collect()
    }
}

fn spawn(config: &CcmConfig, log_path: &Path, metrics_port: u16) -> anyhow::Result<Child> {
    let log = std::fs::File::create(log_path)
        .with_context(|| format!("creating {}", log_path.display()))?;
    let (cidr, len) = CLUSTER_CIDR;
    let mut command = Command::new(&config.binary);
    command
        .env_clear()
        .env("HCLOUD_TOKEN", secrets::API_TOKEN)
        // Robot credentials as a Secret would provide them; Robot itself stays off.
        .env("ROBOT_USER", secrets::ROBOT_USER)
        .env("ROBOT_PASSWORD", secrets::ROBOT_PASSWORD)
        .env("HCLOUD_ENDPOINT", &config.endpoint)
        .env("HCLOUD_METADATA_ENDPOINT", &config.metadata_endpoint)
        .env("HCLOUD_NETWORK", "k8s")
        .env(
            "HCLOUD_METRICS_ADDRESS",
            format!("127.0.0.1:{metrics_port}"),
        )
        .env("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1")
        // The schedules delete most servers of clusters of three to six Nodes, which the
        // deletion brake (default 50 %) rightly holds; its own tests prove it. Here the
        // invariant is that a Node whose server is gone goes.
        .env("HCLOUD_NODE_DELETION_MAX_PERCENT", "100")
        .env(
            "HCLOUD_DEBUG",
            if config.hcloud_debug { "true" } else { "false" },
        )
        .args([
            "--cloud-provider=hcloud",
            "--allow-untagged-cloud",
            &format!("--kubeconfig={}", config.kubeconfig.display()),
            "--secure-port=0",
            "--webhook-secure-port=0",
            "--leader-elect=true",
            "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline=3s",
            "--leader-elect-retry-period=500ms",
            "--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true",
            "--route-reconciliation-period=30s",
            "--allocate-node-cidrs=true",
            &format!("--cluster-cidr={cidr}/{len}"),
            &format!("-v={}", config.verbosity),
        ])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true);
    command.spawn().with_context(|| {
        format!(
            "starting {} (build it first: cargo build -p hcloud-ccm)",
            config.binary.display()
        )
    })
}

fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// `text` without ANSI colour sequences (`ESC [ ... m`).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The last error line of a log, without its timestamp and colours (at most 300 characters).
fn exit_reason(log: &Path) -> String {
    let text = strip_ansi(&std::fs::read_to_string(log).unwrap_or_default());
    let line = text
        .lines()
        .rev()
        .find(|l| l.contains("ERROR"))
        .or_else(|| text.lines().last())
        .unwrap_or("empty log");
    let line = line
        .split_once("ERROR")
        .map_or(line, |(_, rest)| rest)
        .trim();
    line.chars().take(300).collect()
}

/// A short class of an exit reason, for the counts.
fn classify(reason: &str) -> String {
    let class =
        if reason.contains("cannot reach the Hetzner Cloud API") || reason.contains("/locations") {
            "start-up: the token check (GET /locations) failed"
        } else if reason.contains("HCLOUD_NETWORK") {
            "start-up: resolving HCLOUD_NETWORK failed"
        } else if reason.contains("leader") {
            "leader election ended"
        } else if reason.contains("controller") {
            "a controller stopped or could not start"
        } else if reason.contains("fatal") {
            "start-up: other"
        } else {
            "other"
        };
    class.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_reasons_are_read_and_classified() {
        let dir = std::env::temp_dir().join(format!("chaos-ccm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("ccm.log");
        std::fs::write(
            &log,
            "2026-01-01T00:00:00Z  INFO hcloud_ccm: starting\n2026-01-01T00:00:01Z \u{1b}[31mERROR\u{1b}[0m hcloud_ccm: fatal error=cannot reach the Hetzner Cloud API at http://x/v1 (HCLOUD_ENDPOINT): GET /locations: 503 unavailable\n",
        )
        .unwrap();
        let reason = exit_reason(&log);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(reason.starts_with("hcloud_ccm: fatal error="), "{reason}");
        assert_eq!(
            classify(&reason),
            "start-up: the token check (GET /locations) failed"
        );
        assert_eq!(
            classify("hcloud_ccm: leadership lost; exiting state=Lost"),
            "leader election ended"
        );
        assert_eq!(classify("something else"), "other");
    }
}

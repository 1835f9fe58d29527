//! `hcloud-ccm-chaos`: seeded chaos schedules against the `hcloud-ccm` binary.
//!
//! Each seed picks a schedule (see `schedule.rs`): Nodes with their servers, LoadBalancer
//! Services, servers powered off and on or deleted, kubelets stopping, Node labels and Service
//! annotations changed, CCM replicas (one, or two with leader election) killed with SIGKILL
//! and started again, interleaved with faults between the CCM and the cloud (`proxy.rs`:
//! 5xx, 429 with `RateLimit-*`, resets before forwarding, replies lost after the cloud acted,
//! truncated bodies, a proxy's HTML 404, latency; and failed actions in the simulator). The
//! invariants (`invariants.rs`) are checked all the time and, after the faults stop, until
//! everything has converged. Every log line, event, metric and error of the run is searched
//! for the API token and the Robot password.
//!
//! The control plane is shared by all schedules (cleaned between them); each schedule gets a
//! fresh simulator and proxy. A failing seed prints itself and its event log; `--seed N`
//! replays it. The exit status is 1 when any invariant broke.

#![allow(clippy::print_stdout)] // the report is the output

mod ccm;
mod cluster;
mod eventlog;
mod invariants;
mod proxy;
mod run;
mod schedule;
mod secrets;
mod watch;

use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use kube_harness::ControlPlane;

use crate::run::{Options, Outcome};

#[derive(Debug, Parser)]
#[command(
    name = "hcloud-ccm-chaos",
    about = "Seeded chaos schedules (cluster changes, CCM kills, HTTP faults) against hcloud-ccm on the test control plane and the simulator, with invariants checked"
)]
struct Args {
    /// Run this many schedules, seeds `--first-seed` onwards (ignored with `--seed`).
    #[arg(long, default_value_t = 10)]
    schedules: u64,
    /// The first seed of `--schedules`.
    #[arg(long, default_value_t = 1)]
    first_seed: u64,
    /// Run (replay) exactly this seed; may be given several times.
    #[arg(long = "seed", value_name = "N")]
    seeds: Vec<u64>,
    /// Print the schedules of the seeds and exit, running nothing.
    #[arg(long)]
    print: bool,
    /// The hcloud-ccm binary (default: next to this one).
    #[arg(long)]
    ccm: Option<PathBuf>,
    /// Directory for each schedule's logs, events, metrics and event log (`seed-N/`); kept
    /// for failing seeds.
    #[arg(long, default_value = "target/chaos")]
    out: PathBuf,
    /// Keep the directories of passing seeds too.
    #[arg(long)]
    keep: bool,
    /// Seconds everything may take to converge after the faults stop.
    #[arg(long, default_value_t = 60)]
    converge_within: u64,
    /// Lanes that run schedules at the same time, each on its own control plane (a schedule
    /// mostly waits: one lane keeps a 2-core machine about 10% busy).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=8))]
    jobs: u64,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match chaos(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            println!("hcloud-ccm-chaos: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Runs the seeds; whether every invariant held.
async fn chaos(args: Args) -> anyhow::Result<bool> {
    let seeds: Vec<u64> = if args.seeds.is_empty() {
        (args.first_seed..args.first_seed.saturating_add(args.schedules)).collect()
    } else {
        args.seeds.clone()
    };
    if args.print {
        for seed in &seeds {
            println!("{}", schedule::generate(*seed));
        }
        return Ok(true);
    }
    let ccm = match &args.ccm {
        Some(path) => path.clone(),
        None => std::env::current_exe()?.with_file_name("hcloud-ccm"),
    };
    anyhow::ensure!(
        ccm.is_file(),
        "no hcloud-ccm binary at {} (build it: cargo build -p hcloud-ccm, or pass --ccm)",
        ccm.display()
    );
    let options = Options {
        ccm,
        out: args.out.clone(),
        keep: args.keep,
        converge_within: Duration::from_secs(args.converge_within),
    };
    let started = Instant::now();
    println!(
        "hcloud-ccm-chaos: {} schedule(s), seeds {}, {} lane(s)",
        seeds.len(),
        seed_list(&seeds),
        args.jobs
    );
    let queue = Arc::new(Mutex::new(seeds.into_iter().collect::<VecDeque<u64>>()));
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let mut lanes = Vec::new();
    for _ in 0..args.jobs {
        lanes.push(tokio::spawn(lane(
            queue.clone(),
            options.clone(),
            sender.clone(),
        )));
    }
    drop(sender);
    let mut outcomes = Vec::new();
    while let Some(outcome) = receiver.recv().await {
        println!("{}", one_line(&outcome));
        if !outcome.passed() {
            print_failure(&outcome);
        }
        outcomes.push(outcome);
    }
    for lane in lanes {
        lane.await.context("a lane panicked")??;
    }
    outcomes.sort_by_key(|o| o.seed);
    print_summary(&outcomes, started.elapsed());
    Ok(outcomes.iter().all(Outcome::passed))
}

/// One lane: its own control plane, the seeds it takes from the queue one after another.
async fn lane(
    queue: Arc<Mutex<VecDeque<u64>>>,
    options: Options,
    outcomes: tokio::sync::mpsc::UnboundedSender<Outcome>,
) -> anyhow::Result<()> {
    let plane = ControlPlane::start()
        .await
        .context("starting the control plane")?;
    let kube = plane.client().await?;
    cluster::prepare(&kube).await?;
    loop {
        let next = queue.lock().pop_front();
        let Some(seed) = next else {
            return Ok(());
        };
        let schedule = schedule::generate(seed);
        let outcome = run::run(&plane, &kube, &schedule, &options).await;
        if outcomes.send(outcome).is_err() {
            return Ok(());
        }
    }
}

fn seed_list(seeds: &[u64]) -> String {
    match seeds {
        [] => "none".to_owned(),
        [one] => one.to_string(),
        [first, .., last] if last.checked_sub(*first) == Some(seeds.len() as u64 - 1) => {
            format!("{first}..={last}")
        }
        many => many
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

fn one_line(outcome: &Outcome) -> String {
    let faults: u64 = outcome.faults.values().sum();
    let exits: u64 = outcome.exits.values().sum();
    format!(
        "seed {}: {} actions, {} faults on {} requests (+{} failed actions), {} kills, {} exits, {}, {} violation(s), {:.1} s",
        outcome.seed,
        outcome.actions,
        faults,
        outcome.requests,
        outcome.cloud_faults,
        outcome.kills,
        exits,
        outcome.converged_after.map_or_else(
            || "not converged".to_owned(),
            |d| format!("converged in {:.1} s", d.as_secs_f64())
        ),
        outcome.violations.len(),
        outcome.took.as_secs_f64()
    )
}

fn print_failure(outcome: &Outcome) {
    println!(
        "---- seed {} FAILED; replay: hcloud-ccm-chaos --seed {}",
        outcome.seed, outcome.seed
    );
    for violation in &outcome.violations {
        println!(
            "  VIOLATION of \"{}\": {}",
            violation.invariant, violation.detail
        );
    }
    if let Some(dir) = &outcome.dir {
        println!("  logs, events and metrics: {}", dir.display());
    }
    println!("  event log:");
    for line in &outcome.log {
        println!("    {line}");
    }
    println!("---- end of seed {}", outcome.seed);
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn print_summary(outcomes: &[Outcome], took: Duration) {
    let mut faults: BTreeMap<&str, u64> = BTreeMap::new();
    let mut exits: BTreeMap<&str, u64> = BTreeMap::new();
    let mut violations: BTreeMap<&str, u64> = BTreeMap::new();
    let mut times: Vec<Duration> = Vec::new();
    for outcome in outcomes {
        for (kind, n) in &outcome.faults {
            *faults.entry(kind).or_default() += n;
        }
        for (reason, n) in &outcome.exits {
            *exits.entry(reason).or_default() += n;
        }
        for violation in &outcome.violations {
            *violations.entry(violation.invariant).or_default() += 1;
        }
        times.extend(outcome.converged_after);
    }
    times.sort();
    let sum = |f: fn(&Outcome) -> u64| -> u64 { outcomes.iter().map(f).sum() };
    let list = |m: &BTreeMap<&str, u64>| -> String {
        if m.is_empty() {
            return "none".to_owned();
        }
        m.iter()
            .map(|(k, n)| format!("{k}: {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let failing: Vec<String> = outcomes
        .iter()
        .filter(|o| !o.passed())
        .map(|o| o.seed.to_string())
        .collect();
    // A total and its breakdown, e.g. `3 (reset: 2, timeout: 1)`.
    let counted = |m: &BTreeMap<&str, u64>| format!("{} ({})", m.values().sum::<u64>(), list(m));
    let rows = [
        ("schedules", outcomes.len().to_string()),
        (
            "actions (changes, kills, fault rules)",
            sum(|o| o.actions as u64).to_string(),
        ),
        (
            "requests through the fault proxy",
            sum(|o| o.requests).to_string(),
        ),
        ("HTTP faults injected", counted(&faults)),
        (
            "requests whose actions failed (simulator)",
            sum(|o| o.cloud_faults).to_string(),
        ),
        (
            "CCM replicas killed with SIGKILL",
            sum(|o| o.kills).to_string(),
        ),
        ("CCM exits on their own (restarted)", counted(&exits)),
        (
            "invariant checks",
            format!(
                "{} continuous, {} convergence snapshots, {} MB searched for secrets",
                sum(|o| o.continuous_checks),
                sum(|o| o.convergence_checks),
                sum(|o| o.scanned_bytes) / 1_000_000
            ),
        ),
        (
            "converged after the faults stopped",
            format!(
                "{}/{} (p50 {:.1} s, p90 {:.1} s, max {:.1} s)",
                times.len(),
                outcomes.len(),
                percentile(&times, 50.0).as_secs_f64(),
                percentile(&times, 90.0).as_secs_f64(),
                times.last().copied().unwrap_or_default().as_secs_f64()
            ),
        ),
        ("violations", counted(&violations)),
        (
            "failing seeds",
            if failing.is_empty() {
                "none".to_owned()
            } else {
                failing.join(", ")
            },
        ),
        (
            "runner actions not carried out (object gone, logged)",
            sum(|o| o.runner_errors.len() as u64).to_string(),
        ),
        ("wall time", format!("{:.0} s", took.as_secs_f64())),
    ];
    println!();
    println!("| what | result |\n|---|---|");
    for (what, result) in rows {
        println!("| {what} | {result} |");
    }
}

//! Named health and readiness checks, reported the way Kubernetes components do
//! (`ok`, or one `[+]name ok` / `[-]name failed: reason` line per check).

use std::fmt;
use std::sync::Arc;

use parking_lot::RwLock;
use tokio::sync::watch;

type CheckFn = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// A set of named checks, shared by cloning. `/healthz` and `/readyz` each have one.
#[derive(Clone, Default)]
pub struct HealthChecks {
    checks: Arc<RwLock<Vec<(String, CheckFn)>>>,
}

impl fmt::Debug for HealthChecks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let checks = self.checks.read();
        f.debug_list()
            .entries(checks.iter().map(|(name, _)| name))
            .finish()
    }
}

/// The outcome of every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthReport {
    /// `(name, Err(reason))` for failed checks.
    pub results: Vec<(String, Result<(), String>)>,
}

impl HealthReport {
    /// Whether every check passed.
    pub fn is_ok(&self) -> bool {
        self.results.iter().all(|(_, r)| r.is_ok())
    }

    /// Kubernetes-style body: "ok" when healthy and not `verbose`, else one line per check and a
    /// summary line naming `what` ("healthz", "readyz").
    pub fn render(&self, what: &str, verbose: bool) -> String {
        if self.is_ok() && !verbose {
            return "ok".to_owned();
        }
        let mut body = String::new();
        for (name, result) in &self.results {
            match result {
                Ok(()) => body.push_str(&format!("[+]{name} ok\n")),
                Err(reason) => body.push_str(&format!("[-]{name} failed: {reason}\n")),
            }
        }
        if self.is_ok() {
            body.push_str(&format!("{what} check passed\n"));
        } else {
            body.push_str(&format!("{what} check failed\n"));
        }
        body
    }
}

impl HealthChecks {
    /// A set with only the always-passing `ping` check.
    pub fn new() -> Self {
        let checks = HealthChecks::default();
        checks.add("ping", || Ok(()));
        checks
    }

    /// Adds a named check (a later check with the same name replaces the earlier one).
    pub fn add(
        &self,
        name: impl Into<String>,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) {
        let name = name.into();
        let mut checks = self.checks.write();
        checks.retain(|(n, _)| *n != name);
        checks.push((name, Arc::new(check)));
    }

    /// Adds a check that passes while `judge` accepts the latest value of `rx`.
    pub fn add_watch<T: Send + Sync + 'static>(
        &self,
        name: impl Into<String>,
        rx: watch::Receiver<T>,
        judge: impl Fn(&T) -> Result<(), String> + Send + Sync + 'static,
    ) {
        self.add(name, move || judge(&rx.borrow()));
    }

    /// Adds a check driven by a boolean flag; returns the sender that sets it. The check fails
    /// with `reason` while the flag is false. Dropping the sender freezes the last value.
    pub fn add_flag(
        &self,
        name: impl Into<String>,
        initial: bool,
        reason: impl Into<String>,
    ) -> watch::Sender<bool> {
        let (tx, rx) = watch::channel(initial);
        let reason = reason.into();
        self.add_watch(
            name,
            rx,
            move |ok| if *ok { Ok(()) } else { Err(reason.clone()) },
        );
        tx
    }

    /// Runs every check.
    pub fn evaluate(&self) -> HealthReport {
        let checks: Vec<(String, CheckFn)> = self.checks.read().clone();
        HealthReport {
            results: checks
                .into_iter()
                .map(|(name, check)| {
                    let r = check();
                    (name, r)
                })
                .collect(),
        }
    }

    /// Runs one check by name (`None` if there is no such check).
    pub fn evaluate_one(&self, name: &str) -> Option<Result<(), String>> {
        let check = self
            .checks
            .read()
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| Arc::clone(c))?;
        Some(check())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_only_is_ok() {
        let checks = HealthChecks::new();
        let report = checks.evaluate();
        assert!(report.is_ok());
        assert_eq!(report.render("healthz", false), "ok");
        assert_eq!(
            report.render("healthz", true),
            "[+]ping ok\nhealthz check passed\n"
        );
    }

    #[test]
    fn flags_and_watches_drive_checks() {
        let checks = HealthChecks::new();
        let synced = checks.add_flag("informer-sync", false, "caches not synced");
        let (tx, rx) = watch::channel(0u32);
        checks.add_watch("counter", rx, |n| {
            if *n > 0 { Ok(()) } else { Err("zero".into()) }
        });
        let report = checks.evaluate();
        assert!(!report.is_ok());
        assert_eq!(
            report.render("readyz", false),
            "[+]ping ok\n[-]informer-sync failed: caches not synced\n[-]counter failed: zero\nreadyz check failed\n"
        );
        synced.send_replace(true);
        tx.send_replace(3);
        assert!(checks.evaluate().is_ok());
        assert_eq!(checks.evaluate_one("counter"), Some(Ok(())));
        assert_eq!(checks.evaluate_one("missing"), None);
    }

    #[test]
    fn same_name_replaces() {
        let checks = HealthChecks::new();
        checks.add("x", || Err("old".into()));
        checks.add("x", || Ok(()));
        assert!(checks.evaluate().is_ok());
        assert_eq!(checks.evaluate().results.len(), 2);
    }
}

//! The event log of one schedule: every change, fault, CCM start and exit, check and violation,
//! each stamped with the seconds since the schedule began (the first line gives the wall-clock
//! start). It is what a failing seed prints, and it is searched for secrets like the rest.

use parking_lot::Mutex;
use std::fmt::Display;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// A shared, append-only log; clones write to the same log.
#[derive(Debug, Clone)]
pub struct EventLog {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug)]
struct Inner {
    start: Instant,
    lines: Vec<String>,
}

impl EventLog {
    /// A log whose clock starts now.
    pub fn new(title: &str) -> Self {
        let wall = k8s_openapi::jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
            .to_string();
        EventLog {
            inner: Arc::new(Mutex::new(Inner {
                start: Instant::now(),
                lines: vec![format!("[   0.000s] {title}, started {wall}")],
            })),
        }
    }

    /// Appends one line.
    pub fn log(&self, message: impl Display) {
        let mut inner = self.inner.lock();
        let at = inner.start.elapsed().as_secs_f64();
        let line = format!("[{at:>8.3}s] {message}");
        inner.lines.push(line);
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        let inner = self.inner.lock();
        inner.lines.clone()
    }

    /// Writes the log to `path`, one event a line.
    pub fn write_to(&self, path: &Path) -> std::io::Result<()> {
        let mut text = self.lines().join("\n");
        text.push('\n');
        std::fs::write(path, text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_carry_increasing_timestamps() {
        let log = EventLog::new("seed 1");
        log.log("first");
        std::thread::sleep(std::time::Duration::from_millis(5));
        log.clone().log(format_args!("second {}", 2));
        let lines = log.lines();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].contains("seed 1, started "), "{lines:?}");
        let stamp = |line: &str| -> f64 {
            line[1..line.find("s]").unwrap_or(1)]
                .trim()
                .parse()
                .unwrap_or(-1.0)
        };
        assert!(lines[1].ends_with("] first"));
        assert!(lines[2].ends_with("] second 2"));
        assert!(stamp(&lines[2]) > stamp(&lines[1]), "{lines:?}");
    }
}

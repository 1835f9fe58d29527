//! The `process_*` series of Prometheus' process collector, as every Go component exports them
//! (client_golang's `NewProcessCollector`): CPU seconds, resident and virtual memory, the
//! address-space limit, open and maximum file descriptors, and the start time. Read from
//! `/proc/self` at each scrape; where `/proc` is missing (not Linux) nothing is exported.

use std::path::{Path, PathBuf};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

/// Clock ticks per second of `/proc/<pid>/stat` times: Linux's `USER_HZ`, 100 on every
/// architecture this binary is built for (the kernel converts its own tick rate to it).
const USER_HZ: f64 = 100.0;

/// One reading of the process's figures.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcessStats {
    /// User and system CPU time in seconds.
    pub cpu_seconds: f64,
    /// Resident set size in bytes.
    pub resident_memory_bytes: f64,
    /// Virtual memory size in bytes.
    pub virtual_memory_bytes: f64,
    /// The soft address-space limit in bytes (`unlimited` as the largest u64, as Go's).
    pub virtual_memory_max_bytes: f64,
    /// Open file descriptors.
    pub open_fds: f64,
    /// The soft limit of open file descriptors.
    pub max_fds: f64,
    /// Start time, seconds since the Unix epoch.
    pub start_time_seconds: f64,
}

/// Why `/proc` could not be read or understood.
#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A file did not have the expected field.
    #[error("{file}: no {field}")]
    Missing {
        /// The file.
        file: &'static str,
        /// The field.
        field: &'static str,
    },
}

fn read(path: &Path) -> Result<String, ProcError> {
    std::fs::read_to_string(path).map_err(|source| ProcError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// `utime + stime` (seconds), `starttime` (ticks after boot) and `vsize` (bytes) of
/// `/proc/<pid>/stat`. The command name (field 2) may contain spaces and parentheses, so fields
/// are counted after its last `)`.
fn parse_stat(text: &str) -> Result<(f64, f64, f64), ProcError> {
    let missing = |field| ProcError::Missing {
        file: "stat",
        field,
    };
    let after = text
        .rfind(')')
        .map(|i| &text[i + 1..])
        .ok_or(missing("command"))?;
    // Field 3 (state) is the first after the command; utime is 14, stime 15, starttime 22,
    // vsize 23.
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |n: usize, name| {
        fields
            .get(n - 3)
            .and_then(|f| f.parse::<f64>().ok())
            .ok_or(missing(name))
    };
    Ok((
        (field(14, "utime")? + field(15, "stime")?) / USER_HZ,
        field(22, "starttime")? / USER_HZ,
        field(23, "vsize")?,
    ))
}

/// `VmRSS` of `/proc/<pid>/status`, in bytes.
fn parse_rss(text: &str) -> Result<f64, ProcError> {
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kb| kb * 1024.0)
        .ok_or(ProcError::Missing {
            file: "status",
            field: "VmRSS",
        })
}

/// The soft limit of the `/proc/<pid>/limits` line starting with `name`.
fn parse_limit(text: &str, name: &'static str) -> Result<f64, ProcError> {
    let soft = text
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .ok_or(ProcError::Missing {
            file: "limits",
            field: name,
        })?;
    if soft == "unlimited" {
        // As Go's collector: the largest uint64, as a float.
        return Ok(u64::MAX as f64);
    }
    soft.parse().map_err(|_| ProcError::Missing {
        file: "limits",
        field: name,
    })
}

/// `btime` of `/proc/stat`: the boot time, seconds since the Unix epoch.
fn parse_boot_time(text: &str) -> Result<f64, ProcError> {
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
        .ok_or(ProcError::Missing {
            file: "/proc/stat",
            field: "btime",
        })
}

impl ProcessStats {
    /// Read the figures of the process whose `/proc` directory is `dir`, with `proc_stat` the
    /// system-wide `/proc/stat`.
    pub fn read(dir: &Path, proc_stat: &Path) -> Result<Self, ProcError> {
        let (cpu_seconds, start_after_boot, virtual_memory_bytes) =
            parse_stat(&read(&dir.join("stat"))?)?;
        let limits = read(&dir.join("limits"))?;
        let fd_dir = dir.join("fd");
        let open_fds = std::fs::read_dir(&fd_dir)
            .map_err(|source| ProcError::Read {
                path: fd_dir,
                source,
            })?
            .count();
        Ok(Self {
            cpu_seconds,
            resident_memory_bytes: parse_rss(&read(&dir.join("status"))?)?,
            virtual_memory_bytes,
            virtual_memory_max_bytes: parse_limit(&limits, "Max address space")?,
            // The directory listing holds its own descriptor while it runs, as in Go.
            open_fds: open_fds as f64,
            max_fds: parse_limit(&limits, "Max open files")?,
            start_time_seconds: parse_boot_time(&read(proc_stat)?)? + start_after_boot,
        })
    }

    /// This process's figures.
    pub fn current() -> Result<Self, ProcError> {
        Self::read(Path::new("/proc/self"), Path::new("/proc/stat"))
    }
}

/// The collector registered by [`register`].
#[derive(Debug)]
struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        // Without /proc (another OS, a locked-down sandbox) the series are left out rather than
        // failing the whole scrape.
        let Ok(stats) = ProcessStats::current() else {
            return Ok(());
        };
        let cpu = ConstCounter::new(stats.cpu_seconds);
        cpu.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
            None,
            cpu.metric_type(),
        )?)?;
        for (name, help, value) in [
            (
                "process_open_fds",
                "Number of open file descriptors.",
                stats.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors.",
                stats.max_fds,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                stats.virtual_memory_bytes,
            ),
            (
                "process_virtual_memory_max_bytes",
                "Maximum amount of virtual memory available in bytes.",
                stats.virtual_memory_max_bytes,
            ),
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                stats.resident_memory_bytes,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                stats.start_time_seconds,
            ),
        ] {
            let gauge = ConstGauge::new(value);
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        Ok(())
    }
}

/// Register the `process_*` series in `registry`.
pub fn register(registry: &mut Registry) {
    registry.register_collector(Box::new(ProcessCollector));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        // A command name with spaces and a parenthesis; utime 150, stime 50 ticks, starttime
        // 640477 ticks, vsize 3133440 bytes.
        let stat = "6965 (a (b) c) R 6962 6962 8417 0 -1 4194304 98 0 0 0 150 50 0 0 20 0 1 0 \
                    640477 3133440 359 18446744073709551615 0";
        assert_eq!(parse_stat(stat).ok(), Some((2.0, 6404.77, 3_133_440.0)));
        assert!(parse_stat("12 (x) R 1").is_err());
    }

    #[test]
    fn limits_rss_and_boot_time() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n\
                      Max address space         unlimited            unlimited            bytes\n";
        assert_eq!(parse_limit(limits, "Max open files").ok(), Some(1024.0));
        assert_eq!(
            parse_limit(limits, "Max address space").ok(),
            Some(u64::MAX as f64)
        );
        assert!(parse_limit(limits, "Max processes").is_err());
        assert_eq!(
            parse_rss("Name:\tx\nVmRSS:\t   24576 kB\n").ok(),
            Some(24576.0 * 1024.0)
        );
        assert_eq!(
            parse_boot_time("cpu 1 2 3\nbtime 1795564774\n").ok(),
            Some(1_795_564_774.0)
        );
    }

    #[test]
    fn this_process_reads_plausibly() {
        let Ok(stats) = ProcessStats::current() else {
            // Not Linux: nothing to read.
            assert!(!Path::new("/proc/self/stat").exists());
            return;
        };
        assert!(stats.resident_memory_bytes > 0.0, "{stats:?}");
        assert!(
            stats.virtual_memory_bytes >= stats.resident_memory_bytes,
            "{stats:?}"
        );
        assert!(
            stats.open_fds >= 3.0 && stats.open_fds <= stats.max_fds,
            "{stats:?}"
        );
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or_default();
        assert!(
            stats.start_time_seconds <= now + 1.0
                && stats.start_time_seconds > now - 86_400.0 * 365.0,
            "{stats:?}"
        );
    }
}

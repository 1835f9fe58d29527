//! The running binary exports the series dashboards built for the Go CCM read: client-go's
//! work-queue series per controller, the REST client series of its Kubernetes clients and the
//! process collector's series, each with its upstream type and label set. The alert rules and
//! the Grafana dashboard in `deploy/monitoring` name only series the binary exports (or, marked
//! there, kube-state-metrics' and Prometheus' own).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::ccm;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use ccm::{BIN, TOKEN, free_port, lb_service, metrics};
use hcloud_sim::{ServerSeed, SimConfig, Simulator};
use kube_harness::{UNINITIALIZED_TAINT, eventually, has_taint};
use serde_json::Value;

use crate::support::scope::Scope;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One metric family of an OpenMetrics text: its type and, per sample name, the label names.
#[derive(Debug, Default)]
struct Family {
    kind: String,
    samples: BTreeMap<String, BTreeSet<BTreeSet<String>>>,
    /// Every sample's labels as `name=value`.
    values: BTreeSet<BTreeMap<String, String>>,
}

/// The families of an OpenMetrics text, by name.
fn families(text: &str) -> BTreeMap<String, Family> {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    let mut current = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            current = name.to_owned();
            families.entry(current.clone()).or_default().kind = kind.to_owned();
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (sample, labels) = match line.split_once('{') {
            Some((sample, rest)) => (sample, rest.split_once('}').unwrap().0),
            None => (line.split_once(' ').unwrap().0, ""),
        };
        assert!(
            sample.starts_with(&current),
            "sample {sample} outside its family {current}"
        );
        let mut pairs = BTreeMap::new();
        for pair in labels.split("\",").filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap();
            pairs.insert(name.to_owned(), value.trim_matches('"').to_owned());
        }
        let family = families.get_mut(&current).unwrap();
        family
            .samples
            .entry(sample.to_owned())
            .or_default()
            .insert(pairs.keys().cloned().collect());
        family.values.insert(pairs);
    }
    families
}

fn labels(names: &[&str]) -> BTreeSet<BTreeSet<String>> {
    BTreeSet::from([names.iter().map(|n| (*n).to_owned()).collect()])
}

/// Checks `name`'s type and that its samples (`suffix` → label names) are exactly these.
fn expect(families: &BTreeMap<String, Family>, name: &str, kind: &str, names: &[&str]) {
    let family = families
        .get(name)
        .unwrap_or_else(|| panic!("{name} is not exported: {:?}", families.keys()));
    assert_eq!(family.kind, kind, "{name}");
    let mut expected = BTreeMap::new();
    let with_le: Vec<&str> = names.iter().copied().chain(["le"]).collect();
    match kind {
        "counter" => {
            expected.insert(format!("{name}_total"), labels(names));
        }
        "histogram" => {
            expected.insert(format!("{name}_bucket"), labels(&with_le));
            expected.insert(format!("{name}_sum"), labels(names));
            expected.insert(format!("{name}_count"), labels(names));
        }
        _ => {
            expected.insert(name.to_owned(), labels(names));
        }
    }
    assert_eq!(family.samples, expected, "{name}");
}

/// The values label `label` takes in family `name`.
fn label_values(families: &BTreeMap<String, Family>, name: &str, label: &str) -> BTreeSet<String> {
    families[name]
        .values
        .iter()
        .filter_map(|l| l.get(label).cloned())
        .collect()
}

/// Every metric name an expression mentions (identifiers followed by `{`, `[` or a space that are
/// not PromQL keywords or functions).
fn metric_names(expr: &str) -> BTreeSet<String> {
    const NOT_METRICS: [&str; 22] = [
        "sum",
        "max",
        "min",
        "count",
        "avg",
        "rate",
        "increase",
        "irate",
        "absent",
        "by",
        "without",
        "histogram_quantile",
        "le",
        "on",
        "ignoring",
        "and",
        "or",
        "unless",
        "topk",
        "delta",
        "time",
        "clamp_min",
    ];
    let mut names = BTreeSet::new();
    let mut word = String::new();
    let mut in_braces = false;
    let mut in_string = false;
    for c in expr.chars().chain([' ']) {
        if in_string {
            in_string = c != '"';
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => {
                if !word.is_empty() && !NOT_METRICS.contains(&word.as_str()) {
                    names.insert(std::mem::take(&mut word));
                }
                in_braces = true;
            }
            '}' => in_braces = false,
            c if c.is_ascii_alphanumeric() || c == '_' || c == ':' => {
                if !in_braces {
                    word.push(c);
                }
                continue;
            }
            _ => {}
        }
        let w = std::mem::take(&mut word);
        // A metric name has an underscore; numbers, durations and keywords do not qualify.
        if !in_braces
            && w.contains('_')
            && !w.starts_with(|c: char| c.is_ascii_digit())
            && !NOT_METRICS.contains(&w.as_str())
            && c != '('
        {
            names.insert(w);
        }
    }
    names
}

/// Series of other exporters that the rules and the dashboard may name: Prometheus' own `up`
/// and kube-state-metrics' Node taints.
const FOREIGN: [&str; 2] = ["up", "kube_node_spec_taint"];

/// Whether `name` (a family or one of its sample names, also of a family without samples yet)
/// is exported.
fn exported(families: &BTreeMap<String, Family>, name: &str) -> bool {
    let suffixes: &[&str] = &["_total", "_bucket", "_sum", "_count"];
    FOREIGN.contains(&name)
        || families.iter().any(|(family, f)| {
            let kind_suffixes: &[&str] = match f.kind.as_str() {
                "counter" => &suffixes[..1],
                "histogram" => &suffixes[1..],
                _ => &[],
            };
            family == name
                || kind_suffixes
                    .iter()
                    .any(|suffix| name.strip_suffix(suffix) == Some(family))
        })
}

#[tokio::test]
async fn the_binary_exports_the_upstream_series_and_the_dashboards_name_only_those() {
    let scope = Scope::new("metrics").await;
    let node = scope.name("metrics-node");
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    sim.admin()
        .create_server(ServerSeed::new(&node))
        .await
        .unwrap();
    let access = scope.admin_access("ccm").await;
    let port = free_port();
    let _ccm = tokio::process::Command::new(BIN)
        .env_clear()
        .env("HCLOUD_TOKEN", TOKEN)
        .env("HCLOUD_ENDPOINT", sim.base_url())
        .env("HCLOUD_METRICS_ADDRESS", format!("127.0.0.1:{port}"))
        .env("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1")
        .args([
            "--cloud-provider=hcloud",
            &format!("--kubeconfig={}", access.kubeconfig.display()),
            &scope.lease_flag(),
            "--secure-port=0",
            "--leader-elect-retry-period=500ms",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let nodes = scope.nodes();
    scope.register_node(&node, None).await;
    scope.create_service(lb_service("web", &[])).await;
    // A Service whose sync fails, so that the error series exist (a family without samples is
    // not exported at all).
    scope
        .create_service(lb_service("broken", &[("health-check-interval", "soon")]))
        .await;
    eventually("the Node initialised", Duration::from_secs(30), || async {
        let node = nodes.get(&node).await.unwrap();
        (!has_taint(&node, UNINITIALIZED_TAINT)).then_some(())
    })
    .await;
    // The service queue has handed out a key and finished it, and the broken Service failed.
    let text = eventually(
        "the service queue has done work and failed once",
        Duration::from_secs(30),
        || async {
            let text = metrics(port).await?;
            let f = families(&text);
            let service_queue = |family: &str| {
                f.get(family).is_some_and(|family| {
                    family
                        .values
                        .iter()
                        .any(|l| l.get("name").map(String::as_str) == Some("service"))
                })
            };
            (service_queue("workqueue_work_duration_seconds")
                && service_queue("workqueue_retries")
                && f.contains_key("cloud_controller_reconcile_errors"))
            .then_some(text)
        },
    )
    .await;
    let f = families(&text);

    for (name, kind) in [
        ("workqueue_adds", "counter"),
        ("workqueue_retries", "counter"),
        ("workqueue_depth", "gauge"),
        ("workqueue_unfinished_work_seconds", "gauge"),
        ("workqueue_longest_running_processor_seconds", "gauge"),
        ("workqueue_queue_duration_seconds", "histogram"),
        ("workqueue_work_duration_seconds", "histogram"),
    ] {
        expect(&f, name, kind, &["name"]);
    }
    let queues = label_values(&f, "workqueue_adds", "name");
    for queue in ["cloud-node", "cloud-node-lifecycle", "service"] {
        assert!(queues.contains(queue), "{queue} missing: {queues:?}");
    }

    expect(
        &f,
        "rest_client_requests",
        "counter",
        &["code", "host", "method"],
    );
    expect(
        &f,
        "rest_client_request_duration_seconds",
        "histogram",
        &["host", "verb"],
    );
    // The host the binary talks to: its scoped endpoint.
    let host = access
        .endpoint
        .url()
        .trim_start_matches("http://")
        .to_owned();
    let requests = &f["rest_client_requests"].values;
    for (method, code) in [("GET", "200"), ("PATCH", "200")] {
        assert!(
            requests
                .iter()
                .any(|l| l["method"] == method && l["code"] == code && l["host"] == host),
            "no {method} answered {code} from {host}: {requests:?}"
        );
    }
    assert_eq!(
        label_values(&f, "rest_client_request_duration_seconds", "host"),
        BTreeSet::from([host])
    );

    expect(&f, "process_cpu_seconds", "counter", &[]);
    for name in [
        "process_open_fds",
        "process_max_fds",
        "process_virtual_memory_bytes",
        "process_virtual_memory_max_bytes",
        "process_resident_memory_bytes",
        "process_start_time_seconds",
    ] {
        expect(&f, name, "gauge", &[]);
    }
    let resident: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("process_resident_memory_bytes "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(resident > 1e6, "{resident}");

    // The alert rules and the dashboard name only what is exported.
    let rules: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(repo().join("deploy/monitoring/alerts.yaml")).unwrap(),
    )
    .unwrap();
    let mut expressions: Vec<String> = rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .map(|r| r["expr"].as_str().unwrap().to_owned())
        .collect();
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("deploy/monitoring/dashboard.json")).unwrap(),
    )
    .expect("deploy/monitoring/dashboard.json is valid JSON");
    let panels = dashboard["panels"].as_array().unwrap();
    assert!(panels.len() >= 6, "{} panels", panels.len());
    for panel in panels {
        for target in panel["targets"].as_array().into_iter().flatten() {
            expressions.push(target["expr"].as_str().unwrap().to_owned());
        }
    }
    let mut named = BTreeSet::new();
    for expr in &expressions {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "no metric in {expr}");
        for name in names {
            assert!(exported(&f, &name), "{name} (in {expr}) is not exported");
            named.insert(name);
        }
    }
    for family in [
        "workqueue_depth",
        "rest_client_requests_total",
        "process_resident_memory_bytes",
        "hcloud_api_rate_limit_remaining",
    ] {
        assert!(named.contains(family), "the dashboard shows no {family}");
    }
}

#[test]
fn metric_names_are_found_in_expressions() {
    assert_eq!(
        metric_names(
            r#"sum by (name) (rate(workqueue_adds_total{name=~"a|b_c"}[5m])) > 0 or absent(up{job="x_y"} == 1)"#
        ),
        BTreeSet::from(["workqueue_adds_total".to_owned(), "up".to_owned()])
    );
    assert_eq!(
        metric_names(
            "histogram_quantile(0.99, sum by (le) (rate(rest_client_request_duration_seconds_bucket[5m])))"
        ),
        BTreeSet::from(["rest_client_request_duration_seconds_bucket".to_owned()])
    );
}

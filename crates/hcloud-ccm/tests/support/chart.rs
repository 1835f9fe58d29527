//! The chart rendered by real Helm: `scripts/helm.sh render` runs Helm's own Go library (PyPI's
//! `helm-python-sdk`, a pinned version, in a virtualenv the script caches), offline like
//! `helm template --api-versions ...`. Plus the YAML helpers the deploy tests share.

// Shared by several test crates, each using a part.
#![allow(dead_code)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Deserialize as _;
use serde_json::{Map, Value, json};

type Result<T> = std::result::Result<T, String>;

/// The Helm version `scripts/helm.sh` pins (through helm-python-sdk 0.2.2).
pub const HELM_VERSION: &str = "v4.2.3";

/// The CRD-backed kinds a cluster with prometheus-operator serves, as `--api-versions` takes them.
pub const PROMETHEUS_OPERATOR: [&str; 2] = [
    "monitoring.coreos.com/v1/PodMonitor",
    "monitoring.coreos.com/v1/PrometheusRule",
];

/// A chart directory.
#[derive(Debug)]
pub struct Chart {
    dir: PathBuf,
}

/// What one render produced: the objects, in template order, and `NOTES.txt`.
#[derive(Debug)]
pub struct Rendered {
    pub objects: Vec<Value>,
    pub notes: String,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

impl Chart {
    pub fn load(dir: &Path) -> Result<Chart> {
        if !dir.join("Chart.yaml").is_file() {
            return Err(format!("{}: no Chart.yaml", dir.display()));
        }
        Ok(Chart {
            dir: dir.to_path_buf(),
        })
    }

    /// Every object the chart renders for `values` (`helm template RELEASE -n NAMESPACE -f
    /// values`) in a cluster that serves only the built-in API groups.
    pub fn render(&self, release: &str, namespace: &str, values: &Value) -> Result<Vec<Value>> {
        Ok(self.render_with(release, namespace, values, &[])?.objects)
    }

    /// As [`Chart::render`], in a cluster that also serves `api_versions`
    /// (`group/version/Kind`, Helm's `--api-versions`).
    pub fn render_with(
        &self,
        release: &str,
        namespace: &str,
        values: &Value,
        api_versions: &[&str],
    ) -> Result<Rendered> {
        let request = json!({
            "chart": self.dir,
            "release": release,
            "namespace": namespace,
            "values": values,
            "api_versions": api_versions,
        });
        let mut child = Command::new(repo().join("scripts/helm.sh"))
            .arg("render")
            .current_dir(repo())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("scripts/helm.sh: {e}"))?;
        child
            .stdin
            .take()
            .ok_or("no stdin")?
            .write_all(request.to_string().as_bytes())
            .map_err(|e| e.to_string())?;
        let output = child.wait_with_output().map_err(|e| e.to_string())?;
        let answer: Value = serde_json::from_slice(&output.stdout).map_err(|e| {
            format!(
                "scripts/helm.sh render answered {}: {e}: {}",
                output.status,
                String::from_utf8_lossy(&output.stdout)
            )
        })?;
        if let Some(error) = answer["error"].as_str() {
            return Err(format!("helm: {error}"));
        }
        if answer["helm"] != HELM_VERSION {
            return Err(format!(
                "scripts/helm.sh runs Helm {}, expected {HELM_VERSION}",
                answer["helm"]
            ));
        }
        let templates = answer["templates"].as_object().ok_or("no templates")?;
        // Helm's own order for `helm template` is by kind; the tests sort where order matters.
        let mut names: Vec<&String> = templates.keys().collect();
        names.sort();
        let mut objects = Vec::new();
        let mut notes = String::new();
        for name in names {
            let text = templates[name].as_str().unwrap_or_default();
            if name.ends_with("NOTES.txt") {
                notes = text.to_owned();
                continue;
            }
            for doc in serde_yaml_ng::Deserializer::from_str(text) {
                let value = Value::deserialize(doc)
                    .map_err(|e| format!("{name} renders invalid YAML: {e}\n{text}"))?;
                if !value.is_null() {
                    objects.push(value);
                }
            }
        }
        Ok(Rendered { objects, notes })
    }
}

/// Helm's merge of a values file over another: maps deeply, anything else replaced, `null`
/// removes a key.
pub fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                if let Some(existing) = b.get_mut(k).filter(|e| e.is_object() && v.is_object()) {
                    merge(existing, v);
                } else {
                    b.insert(k.clone(), v.clone());
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// The objects of a multi-document YAML file (empty documents skipped).
pub fn documents(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).expect("valid YAML document"))
        .filter(|v| !v.is_null())
        .collect()
}

/// `objects` keyed by "Kind/name", for comparisons that ignore document order.
pub fn by_kind_and_name(objects: &[Value]) -> Map<String, Value> {
    objects
        .iter()
        .map(|o| {
            let key = format!(
                "{}/{}",
                o["kind"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default()
            );
            (key, o.clone())
        })
        .collect()
}

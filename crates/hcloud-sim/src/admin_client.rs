//! A typed async client of the admin API.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::Error;
use crate::faults::Fault;
use crate::limits::LimitsSeed;
use crate::ratelimit::RateLimitConfig;
use crate::robot::{RobotRateLimit, RobotServerSeed};
use crate::seed::{
    CertificateSeed, LoadBalancerSeed, NetworkSeed, PrimaryIpSeed, SeedFile, ServerSeed,
};

/// A load balancer target as the admin health call names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetRef {
    /// A server (also a server matched by a label selector target).
    Server(i64),
    /// An IP target.
    Ip(String),
}

impl TargetRef {
    fn to_json(&self) -> Value {
        match self {
            TargetRef::Server(id) => json!({"type": "server", "server": {"id": id}}),
            TargetRef::Ip(ip) => json!({"type": "ip", "ip": {"ip": ip}}),
        }
    }
}

/// How managed certificates get issued (`/_admin/certificate_issuance`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CertificateIssuance {
    /// How long issuance takes in milliseconds; `None`: the action delay.
    pub delay_ms: Option<u64>,
    /// Every issuance fails.
    pub fail_all: bool,
    /// Issuance fails for certificates naming one of these domains.
    pub fail_domains: Vec<String>,
}

impl CertificateIssuance {
    /// Issuance takes `delay`.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay_ms = Some(delay.as_millis() as u64);
        self
    }
    /// Every issuance fails (or not).
    pub fn fail_all(mut self, on: bool) -> Self {
        self.fail_all = on;
        self
    }
    /// Issuance fails for certificates naming `domain`.
    pub fn fail_domain(mut self, domain: impl Into<String>) -> Self {
        self.fail_domains.push(domain.into());
        self
    }
}

/// Client of `/_admin`.
#[derive(Debug, Clone)]
pub struct AdminClient {
    http: reqwest::Client,
    base: String,
}

/// Installs the ring crypto provider for rustls if none is installed (reqwest needs one to
/// build a client, even for plain HTTP). Safe to call many times.
pub fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race against another installer is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

impl AdminClient {
    /// A client for the admin API at `admin_url` (e.g. `http://127.0.0.1:PORT/_admin`).
    pub fn new(admin_url: impl Into<String>) -> Result<AdminClient, Error> {
        install_crypto_provider();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?;
        Ok(AdminClient {
            http,
            base: admin_url.into().trim_end_matches('/').to_string(),
        })
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> Result<Option<Value>, Error> {
        let resp = req.send().await?;
        let status = resp.status();
        let bytes = resp.bytes().await?;
        if !status.is_success() {
            let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            return Err(Error::Api {
                status: status.as_u16(),
                code: v["error"]["code"].as_str().unwrap_or("unknown").to_string(),
                message: v["error"]["message"].as_str().unwrap_or("").to_string(),
            });
        }
        if bytes.is_empty() {
            return Ok(None);
        }
        Ok(Some(serde_json::from_slice(&bytes)?))
    }

    async fn post<T: Serialize + ?Sized>(&self, path: &str, body: &T) -> Result<Value, Error> {
        let v = self
            .send(self.http.post(format!("{}{path}", self.base)).json(body))
            .await?;
        Ok(v.unwrap_or(Value::Null))
    }

    /// Creates a network; returns its ID.
    pub async fn create_network(&self, seed: NetworkSeed) -> Result<i64, Error> {
        let v = self.post("/networks", &seed).await?;
        v["network"]["id"].as_i64().ok_or_else(|| Error::Api {
            status: 500,
            code: "server_error".into(),
            message: "no network ID in answer".into(),
        })
    }

    /// Creates a server (no action, status as given); returns it as the API shows it.
    pub async fn create_server(&self, seed: ServerSeed) -> Result<Value, Error> {
        let v = self.post("/servers", &seed).await?;
        Ok(v["server"].clone())
    }

    /// Creates an unassigned Primary IP; returns it as the API shows it.
    pub async fn create_primary_ip(&self, seed: PrimaryIpSeed) -> Result<Value, Error> {
        let v = self.post("/primary_ips", &seed).await?;
        Ok(v["primary_ip"].clone())
    }

    /// Creates a certificate (issued, pending or failed as seeded, no action); returns it as
    /// the API shows it.
    pub async fn create_certificate(&self, seed: CertificateSeed) -> Result<Value, Error> {
        let v = self.post("/certificates", &seed).await?;
        Ok(v["certificate"].clone())
    }

    /// Creates a complete load balancer (no action); returns it as the API shows it.
    pub async fn create_load_balancer(&self, seed: LoadBalancerSeed) -> Result<Value, Error> {
        let v = self.post("/load_balancers", &seed).await?;
        Ok(v["load_balancer"].clone())
    }

    /// Sets how managed certificates get issued from now on (delay, failures).
    pub async fn set_certificate_issuance(
        &self,
        issuance: &CertificateIssuance,
    ) -> Result<(), Error> {
        self.send(
            self.http
                .put(format!("{}/certificate_issuance", self.base))
                .json(issuance),
        )
        .await
        .map(|_| ())
    }

    /// How managed certificates get issued.
    pub async fn certificate_issuance(&self) -> Result<CertificateIssuance, Error> {
        let v = self
            .send(self.http.get(format!("{}/certificate_issuance", self.base)))
            .await?
            .unwrap_or(Value::Null);
        Ok(serde_json::from_value(v)?)
    }

    /// Chooses the server the metadata service answers for (`None`: no server, every
    /// metadata path answers 404).
    pub async fn set_metadata_server(&self, server_id: Option<i64>) -> Result<(), Error> {
        self.send(
            self.http
                .put(format!("{}/metadata_server", self.base))
                .json(&json!({"server_id": server_id})),
        )
        .await
        .map(|_| ())
    }

    /// Applies a whole seed.
    pub async fn seed(&self, seed: &SeedFile) -> Result<(), Error> {
        self.post("/seed", seed).await.map(|_| ())
    }

    /// Sets a server's status (`off`, `running`, ...) immediately.
    pub async fn set_server_status(&self, id: i64, status: &str) -> Result<(), Error> {
        self.post(&format!("/servers/{id}/status"), &json!({"status": status}))
            .await
            .map(|_| ())
    }

    /// Deletes a server immediately, as a user would in the console (ignores locks and
    /// protection, removes it from load balancer targets and networks).
    pub async fn delete_server(&self, id: i64) -> Result<(), Error> {
        self.send(self.http.delete(format!("{}/servers/{id}", self.base)))
            .await
            .map(|_| ())
    }

    /// Sets the health a target reports for one service (`Some(port)`) or all services.
    pub async fn set_target_health(
        &self,
        lb_id: i64,
        target: TargetRef,
        listen_port: Option<u16>,
        status: &str,
    ) -> Result<(), Error> {
        let body =
            json!({"target": target.to_json(), "listen_port": listen_port, "status": status});
        self.post(&format!("/load_balancers/{lb_id}/target_health"), &body)
            .await
            .map(|_| ())
    }

    /// Adds a fault rule.
    pub async fn inject_fault(&self, fault: Fault) -> Result<(), Error> {
        self.post("/faults", &fault).await.map(|_| ())
    }

    /// Replaces every fault rule with `faults` in one step (no request runs in between).
    pub async fn replace_faults(&self, faults: &[Fault]) -> Result<(), Error> {
        self.send(self.http.put(format!("{}/faults", self.base)).json(faults))
            .await
            .map(|_| ())
    }

    /// The fault rules still active (each with the count it has left).
    pub async fn faults(&self) -> Result<Vec<Fault>, Error> {
        let v = self
            .send(self.http.get(format!("{}/faults", self.base)))
            .await?
            .unwrap_or(Value::Null);
        Ok(serde_json::from_value(v["faults"].clone())?)
    }

    /// Removes every fault rule.
    pub async fn clear_faults(&self) -> Result<(), Error> {
        self.send(self.http.delete(format!("{}/faults", self.base)))
            .await
            .map(|_| ())
    }

    /// Sets how long new actions run.
    pub async fn set_action_delay(&self, delay: Duration) -> Result<(), Error> {
        let ms = delay.as_millis() as u64;
        self.send(
            self.http
                .put(format!("{}/action_delay", self.base))
                .json(&json!({"ms": ms})),
        )
        .await
        .map(|_| ())
    }

    /// Sets the limits `limits` names (the others stay); returns every limit now in force.
    pub async fn set_limits(&self, limits: &LimitsSeed) -> Result<LimitsSeed, Error> {
        let v = self
            .send(self.http.put(format!("{}/limits", self.base)).json(limits))
            .await?
            .unwrap_or(Value::Null);
        Ok(serde_json::from_value(v)?)
    }

    /// Every limit in force: per network, per server and each load balancer type's caps.
    pub async fn limits(&self) -> Result<LimitsSeed, Error> {
        let v = self
            .send(self.http.get(format!("{}/limits", self.base)))
            .await?
            .unwrap_or(Value::Null);
        Ok(serde_json::from_value(v)?)
    }

    /// Replaces the rate limit (and refills the bucket).
    pub async fn set_rate_limit(&self, config: RateLimitConfig) -> Result<(), Error> {
        self.send(
            self.http
                .put(format!("{}/rate_limit", self.base))
                .json(&config),
        )
        .await
        .map(|_| ())
    }

    /// Requests per "METHOD /route/template" of the public API.
    pub async fn request_counts(&self) -> Result<BTreeMap<String, u64>, Error> {
        let v = self
            .send(self.http.get(format!("{}/request_counts", self.base)))
            .await?
            .unwrap_or(Value::Null);
        Ok(serde_json::from_value(v["counts"].clone())?)
    }

    /// Resets the request counters.
    pub async fn reset_request_counts(&self) -> Result<(), Error> {
        self.send(self.http.delete(format!("{}/request_counts", self.base)))
            .await
            .map(|_| ())
    }

    /// Adds a dedicated server to the Robot account; returns its number.
    pub async fn add_robot_server(&self, seed: RobotServerSeed) -> Result<u64, Error> {
        let v = self.post("/robot/servers", &seed).await?;
        v["server"]["server_number"]
            .as_u64()
            .ok_or_else(|| Error::Api {
                status: 500,
                code: "server_error".into(),
                message: "no server number in answer".into(),
            })
    }

    /// Every dedicated server (the `GET /server` fields plus `operating_status`).
    pub async fn robot_servers(&self) -> Result<Vec<Value>, Error> {
        let v = self
            .send(self.http.get(format!("{}/robot/servers", self.base)))
            .await?
            .unwrap_or(Value::Null);
        Ok(serde_json::from_value(v["servers"].clone())?)
    }

    /// Removes a dedicated server from the Robot account (cancelled and gone).
    pub async fn remove_robot_server(&self, number: u64) -> Result<(), Error> {
        self.send(
            self.http
                .delete(format!("{}/robot/servers/{number}", self.base)),
        )
        .await
        .map(|_| ())
    }

    /// Renames a dedicated server in Robot.
    pub async fn rename_robot_server(&self, number: u64, name: &str) -> Result<(), Error> {
        self.robot_put(&format!("/servers/{number}/name"), &json!({"name": name}))
            .await
    }

    /// Sets a dedicated server's `operating_status` (`running`, `shut off`, `shut down`,
    /// `not supported`).
    pub async fn set_robot_operating_status(&self, number: u64, status: &str) -> Result<(), Error> {
        self.robot_put(
            &format!("/servers/{number}/operating_status"),
            &json!({"operating_status": status}),
        )
        .await
    }

    /// Powers a dedicated server off (`operating_status: shut off`).
    pub async fn robot_power_off(&self, number: u64) -> Result<(), Error> {
        self.set_robot_operating_status(number, "shut off").await
    }

    /// Powers a dedicated server on (`operating_status: running`).
    pub async fn robot_power_on(&self, number: u64) -> Result<(), Error> {
        self.set_robot_operating_status(number, "running").await
    }

    /// Adds a fault rule for the Robot webservice (paths below `/robot`, e.g. `/server`).
    pub async fn inject_robot_fault(&self, fault: Fault) -> Result<(), Error> {
        self.post("/robot/faults", &fault).await.map(|_| ())
    }

    /// Replaces every Robot fault rule in one step.
    pub async fn replace_robot_faults(&self, faults: &[Fault]) -> Result<(), Error> {
        self.robot_put("/faults", faults).await
    }

    /// Removes every Robot fault rule.
    pub async fn clear_robot_faults(&self) -> Result<(), Error> {
        self.send(self.http.delete(format!("{}/robot/faults", self.base)))
            .await
            .map(|_| ())
    }

    /// Replaces the Robot request limit (`None`: unlimited) and opens fresh windows.
    pub async fn set_robot_rate_limit(&self, limit: Option<RobotRateLimit>) -> Result<(), Error> {
        self.robot_put("/rate_limit", &json!({ "rate_limit": limit }))
            .await
    }

    /// Robot requests per "METHOD /route/template" (paths below `/robot`).
    pub async fn robot_request_counts(&self) -> Result<BTreeMap<String, u64>, Error> {
        let v = self
            .send(self.http.get(format!("{}/robot/request_counts", self.base)))
            .await?
            .unwrap_or(Value::Null);
        Ok(serde_json::from_value(v["counts"].clone())?)
    }

    /// Resets the Robot request counters.
    pub async fn reset_robot_request_counts(&self) -> Result<(), Error> {
        self.send(
            self.http
                .delete(format!("{}/robot/request_counts", self.base)),
        )
        .await
        .map(|_| ())
    }

    async fn robot_put<T: Serialize + ?Sized>(&self, path: &str, body: &T) -> Result<(), Error> {
        self.send(
            self.http
                .put(format!("{}/robot{path}", self.base))
                .json(body),
        )
        .await
        .map(|_| ())
    }

    /// The whole state as JSON.
    pub async fn state(&self) -> Result<Value, Error> {
        Ok(self
            .send(self.http.get(format!("{}/state", self.base)))
            .await?
            .unwrap_or(Value::Null))
    }
}

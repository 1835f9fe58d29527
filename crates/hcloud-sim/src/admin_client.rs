//! A typed async client of the admin API.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::Method;
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

    /// Sends `method path`, with `body` as JSON if given; the answer's JSON (null when empty).
    async fn call<T: Serialize + ?Sized>(
        &self,
        method: Method,
        path: &str,
        body: Option<&T>,
    ) -> Result<Value, Error> {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            req = req.json(body);
        }
        Ok(self.send(req).await?.unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> Result<Value, Error> {
        self.call::<Value>(Method::GET, path, None).await
    }

    async fn post<T: Serialize + ?Sized>(&self, path: &str, body: &T) -> Result<Value, Error> {
        self.call(Method::POST, path, Some(body)).await
    }

    async fn put<T: Serialize + ?Sized>(&self, path: &str, body: &T) -> Result<Value, Error> {
        self.call(Method::PUT, path, Some(body)).await
    }

    async fn delete(&self, path: &str) -> Result<(), Error> {
        self.call::<Value>(Method::DELETE, path, None)
            .await
            .map(|_| ())
    }

    /// Creates a network; returns its ID.
    pub async fn create_network(&self, seed: NetworkSeed) -> Result<i64, Error> {
        let v = self.post("/networks", &seed).await?;
        v["network"]["id"]
            .as_i64()
            .ok_or_else(|| missing_in_answer("network ID"))
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
        self.put("/certificate_issuance", issuance)
            .await
            .map(|_| ())
    }

    /// How managed certificates get issued.
    pub async fn certificate_issuance(&self) -> Result<CertificateIssuance, Error> {
        Ok(serde_json::from_value(
            self.get("/certificate_issuance").await?,
        )?)
    }

    /// Chooses the server the metadata service answers for (`None`: no server, every
    /// metadata path answers 404).
    pub async fn set_metadata_server(&self, server_id: Option<i64>) -> Result<(), Error> {
        let body = json!({"server_id": server_id});
        self.put("/metadata_server", &body).await.map(|_| ())
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
        self.delete(&format!("/servers/{id}")).await
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
        self.put("/faults", faults).await.map(|_| ())
    }

    /// The fault rules still active (each with the count it has left).
    pub async fn faults(&self) -> Result<Vec<Fault>, Error> {
        let v = self.get("/faults").await?;
        Ok(serde_json::from_value(v["faults"].clone())?)
    }

    /// Removes every fault rule.
    pub async fn clear_faults(&self) -> Result<(), Error> {
        self.delete("/faults").await
    }

    /// Sets how long new actions run.
    pub async fn set_action_delay(&self, delay: Duration) -> Result<(), Error> {
        let body = json!({"ms": delay.as_millis() as u64});
        self.put("/action_delay", &body).await.map(|_| ())
    }

    /// Sets the limits `limits` names (the others stay); returns every limit now in force.
    pub async fn set_limits(&self, limits: &LimitsSeed) -> Result<LimitsSeed, Error> {
        Ok(serde_json::from_value(self.put("/limits", limits).await?)?)
    }

    /// Every limit in force: per network, per server and each load balancer type's caps.
    pub async fn limits(&self) -> Result<LimitsSeed, Error> {
        Ok(serde_json::from_value(self.get("/limits").await?)?)
    }

    /// Replaces the rate limit (and refills the bucket).
    pub async fn set_rate_limit(&self, config: RateLimitConfig) -> Result<(), Error> {
        self.put("/rate_limit", &config).await.map(|_| ())
    }

    /// Requests per "METHOD /route/template" of the public API.
    pub async fn request_counts(&self) -> Result<BTreeMap<String, u64>, Error> {
        let v = self.get("/request_counts").await?;
        Ok(serde_json::from_value(v["counts"].clone())?)
    }

    /// Resets the request counters.
    pub async fn reset_request_counts(&self) -> Result<(), Error> {
        self.delete("/request_counts").await
    }

    /// Accepts `token` too, as a token of the simulated project (`other_project` false) or of
    /// another project, whose requests see an empty project of their own.
    pub async fn add_token(&self, token: &str, other_project: bool) -> Result<(), Error> {
        let project = if other_project { "other" } else { "own" };
        self.post(
            "/tokens",
            &serde_json::json!({"token": token, "project": project}),
        )
        .await
        .map(|_| ())
    }

    /// Revokes `token`: the API answers its requests with 401 `unauthorized`.
    pub async fn revoke_token(&self, token: &str) -> Result<(), Error> {
        self.post("/tokens/revoke", &serde_json::json!({"token": token}))
            .await
            .map(|_| ())
    }

    /// Requests of the public API per accepted token.
    pub async fn token_request_counts(&self) -> Result<BTreeMap<String, u64>, Error> {
        let v = self.get("/token_counts").await?;
        Ok(serde_json::from_value(v["counts"].clone())?)
    }

    /// Adds a dedicated server to the Robot account; returns its number.
    pub async fn add_robot_server(&self, seed: RobotServerSeed) -> Result<u64, Error> {
        let v = self.post("/robot/servers", &seed).await?;
        v["server"]["server_number"]
            .as_u64()
            .ok_or_else(|| missing_in_answer("server number"))
    }

    /// Every dedicated server (the `GET /server` fields plus `operating_status`).
    pub async fn robot_servers(&self) -> Result<Vec<Value>, Error> {
        let v = self.get("/robot/servers").await?;
        Ok(serde_json::from_value(v["servers"].clone())?)
    }

    /// Removes a dedicated server from the Robot account (cancelled and gone).
    pub async fn remove_robot_server(&self, number: u64) -> Result<(), Error> {
        self.delete(&format!("/robot/servers/{number}")).await
    }

    /// Renames a dedicated server in Robot.
    pub async fn rename_robot_server(&self, number: u64, name: &str) -> Result<(), Error> {
        let body = json!({"name": name});
        self.put(&format!("/robot/servers/{number}/name"), &body)
            .await
            .map(|_| ())
    }

    /// Sets a dedicated server's `operating_status` (`running`, `shut off`, `shut down`,
    /// `not supported`).
    pub async fn set_robot_operating_status(&self, number: u64, status: &str) -> Result<(), Error> {
        let body = json!({"operating_status": status});
        self.put(&format!("/robot/servers/{number}/operating_status"), &body)
            .await
            .map(|_| ())
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
        self.put("/robot/faults", faults).await.map(|_| ())
    }

    /// Removes every Robot fault rule.
    pub async fn clear_robot_faults(&self) -> Result<(), Error> {
        self.delete("/robot/faults").await
    }

    /// Changes the Robot webservice password (the user stays): requests with the old one get
    /// 401 from now on.
    pub async fn set_robot_password(&self, password: &str) -> Result<(), Error> {
        let body = json!({ "password": password });
        self.put("/robot/password", &body).await.map(|_| ())
    }

    /// Replaces the Robot request limit (`None`: unlimited) and opens fresh windows.
    pub async fn set_robot_rate_limit(&self, limit: Option<RobotRateLimit>) -> Result<(), Error> {
        let body = json!({ "rate_limit": limit });
        self.put("/robot/rate_limit", &body).await.map(|_| ())
    }

    /// Robot requests per "METHOD /route/template" (paths below `/robot`).
    pub async fn robot_request_counts(&self) -> Result<BTreeMap<String, u64>, Error> {
        let v = self.get("/robot/request_counts").await?;
        Ok(serde_json::from_value(v["counts"].clone())?)
    }

    /// Resets the Robot request counters.
    pub async fn reset_robot_request_counts(&self) -> Result<(), Error> {
        self.delete("/robot/request_counts").await
    }

    /// The whole state as JSON.
    pub async fn state(&self) -> Result<Value, Error> {
        self.get("/state").await
    }
}

/// The error for an answer that lacks `what`.
fn missing_in_answer(what: &str) -> Error {
    Error::Api {
        status: 500,
        code: "server_error".into(),
        message: format!("no {what} in answer"),
    }
}

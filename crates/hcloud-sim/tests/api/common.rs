use std::time::Duration;

use hcloud_sim::{SimConfig, Simulator};
use reqwest::{Method, StatusCode};
use serde_json::Value;

pub struct Api {
    pub sim: Simulator,
    pub http: reqwest::Client,
}

pub async fn start() -> Api {
    start_with(SimConfig::default().action_delay(Duration::from_millis(30))).await
}

pub async fn start_with(config: SimConfig) -> Api {
    let sim = Simulator::start(config).await.unwrap();
    let http = reqwest::Client::new();
    Api { sim, http }
}

pub struct Resp {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Api {
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Resp {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.sim.base_url()))
            .bearer_auth(self.sim.token());
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.unwrap();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap()
        };
        Resp {
            status,
            headers,
            body,
        }
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.call(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Resp {
        self.call(Method::POST, path, Some(body)).await
    }

    pub async fn put(&self, path: &str, body: Value) -> Resp {
        self.call(Method::PUT, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> Resp {
        self.call(Method::DELETE, path, None).await
    }

    /// Polls an action until it is no longer running.
    pub async fn wait_action(&self, id: i64) -> Value {
        for _ in 0..200 {
            let r = self.get(&format!("/actions/{id}")).await;
            assert_eq!(r.status, 200, "{:?}", r.body);
            if r.body["action"]["status"] != "running" {
                return r.body["action"].clone();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("action {id} never finished");
    }

    /// Posts, expects 201 + action, waits for success, returns the action.
    pub async fn act(&self, path: &str, body: Value) -> Value {
        let r = self.post(path, body).await;
        assert_eq!(r.status, 201, "{path}: {:?}", r.body);
        let a = self
            .wait_action(r.body["action"]["id"].as_i64().unwrap())
            .await;
        assert_eq!(a["status"], "success", "{a:?}");
        a
    }
}

pub fn assert_error(r: &Resp, status: u16, code: &str) {
    assert_eq!(r.status.as_u16(), status, "body: {:?}", r.body);
    assert_eq!(r.body["error"]["code"], code, "body: {:?}", r.body);
    assert!(r.body["error"]["message"].is_string());
    assert!(r.body["error"].as_object().unwrap().contains_key("details"));
}

pub fn field_names(r: &Resp) -> Vec<String> {
    r.body["error"]["details"]["fields"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect()
}

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// Starts the binary with the example seed and `args`; returns it and its "listening" line.
pub async fn start_binary(args: &[&str], env: &[(&str, &str)]) -> (Child, String) {
    hcloud_sim::install_crypto_provider();
    let seed = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/seed.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_hcloud-sim"))
        .args(["--listen", "127.0.0.1:0", "--seed", seed])
        .args(args)
        .envs(env.iter().copied())
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let line = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find(|l| l.contains("listening"))
    })
    .await
    .unwrap();
    (child, line.expect("no listening line"))
}

#[tokio::test]
async fn binary_serves_the_seed_with_the_token() {
    let (mut child, line) = start_binary(&["--token", "bin-token"], &[]).await;
    let start = line.find("http://").unwrap();
    let endpoint: String = line[start..]
        .chars()
        .take_while(|c| !c.is_whitespace())
        .collect();
    assert!(endpoint.ends_with("/v1"), "{endpoint}");
    let http = reqwest::Client::new();
    let r = http
        .get(format!("{endpoint}/servers?sort=name"))
        .bearer_auth("bin-token")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: serde_json::Value = r.json().await.unwrap();
    let names: Vec<&str> = body["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["control-plane-1", "worker-1", "worker-2"]);
    let r = http
        .get(format!("{endpoint}/servers"))
        .bearer_auth("test-token")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    child.kill().unwrap();
    child.wait().unwrap();
}

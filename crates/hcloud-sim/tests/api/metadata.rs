//! The metadata service on the simulator's listener.

use hcloud_sim::{NetworkSeed, ServerSeed};

use crate::common::start;

async fn fetch(url: &str) -> (u16, String) {
    let r = reqwest::get(url).await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test]
async fn answers_for_the_chosen_server() {
    let api = start().await;
    let admin = api.sim.admin();
    let base = api.sim.metadata_url();
    assert!(base.ends_with("/hetzner/v1/metadata"), "{base}");
    assert_eq!(fetch(&format!("{base}/private-networks")).await.0, 404);
    assert_eq!(fetch(&format!("{base}/instance-id")).await.0, 404);

    let net = admin
        .create_network(NetworkSeed::new("k8s", "10.0.0.0/16").subnet("10.0.1.0/24", "eu-central"))
        .await
        .unwrap();
    let other = admin
        .create_network(
            NetworkSeed::new("other", "10.1.0.0/16").subnet("10.1.0.0/24", "eu-central"),
        )
        .await
        .unwrap();
    let server = admin
        .create_server(
            ServerSeed::new("node-1")
                .location("nbg1")
                .network(net)
                .network(other),
        )
        .await
        .unwrap();
    let lonely = admin
        .create_server(ServerSeed::new("node-2").public_ipv4(false))
        .await
        .unwrap();
    let id = server["id"].as_i64().unwrap();
    admin.set_metadata_server(Some(id)).await.unwrap();

    let (status, yaml) = fetch(&format!("{base}/private-networks")).await;
    assert_eq!(status, 200);
    let ip = server["private_net"][0]["ip"].as_str().unwrap();
    let mac = server["private_net"][0]["mac_address"].as_str().unwrap();
    let expected_first = format!(
        "- ip: {ip}\n  alias_ips: []\n  interface_num: 1\n  mac_address: {mac}\n  network_id: {net}\n  network_name: k8s\n  network: 10.0.0.0/16\n  subnet: 10.0.1.0/24\n  gateway: 10.0.0.1\n"
    );
    assert!(yaml.starts_with(&expected_first), "{yaml}");
    // What the official cloud controller looks for.
    assert!(yaml.contains(&format!("network_id: {net}\n")), "{yaml}");
    assert!(yaml.contains(&format!("network_id: {other}\n")), "{yaml}");
    assert!(yaml.contains("interface_num: 2\n"), "{yaml}");

    assert_eq!(
        fetch(&format!("{base}/instance-id")).await,
        (200, id.to_string())
    );
    assert_eq!(
        fetch(&format!("{base}/hostname")).await,
        (200, "node-1".to_string())
    );
    assert_eq!(
        fetch(&format!("{base}/region")).await,
        (200, "eu-central".to_string())
    );
    assert_eq!(
        fetch(&format!("{base}/availability-zone")).await,
        (200, "nbg1-dc1".to_string())
    );
    assert_eq!(
        fetch(&format!("{base}/public-ipv4")).await,
        (
            200,
            server["public_net"]["ipv4"]["ip"]
                .as_str()
                .unwrap()
                .to_string()
        )
    );

    // Another server: no networks, no public IPv4.
    admin
        .set_metadata_server(Some(lonely["id"].as_i64().unwrap()))
        .await
        .unwrap();
    assert_eq!(
        fetch(&format!("{base}/private-networks")).await,
        (200, "[]\n".to_string())
    );
    assert_eq!(fetch(&format!("{base}/public-ipv4")).await.0, 404);

    // Unknown servers are refused; clearing makes every path 404 again.
    let err = admin.set_metadata_server(Some(999_999)).await.unwrap_err();
    assert!(err.to_string().contains("not_found"), "{err}");
    admin.set_metadata_server(None).await.unwrap();
    assert_eq!(fetch(&format!("{base}/hostname")).await.0, 404);

    // Not part of the public API: neither counted nor authenticated.
    let counts = admin.request_counts().await.unwrap();
    assert!(counts.keys().all(|k| !k.contains("metadata")), "{counts:?}");
}

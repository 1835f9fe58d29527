//! Locations and load balancer types against the simulator.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code

use crate::common;

use hcloud_api::NetworkZone;

use common::{count, setup};

#[tokio::test]
async fn locations() {
    let (sim, client) = setup().await;
    let all = client.locations().list().await.expect("list");
    let names: Vec<&str> = all.iter().map(|l| l.name.as_str()).collect();
    for expected in ["fsn1", "nbg1", "hel1", "ash", "hil", "sin"] {
        assert!(names.contains(&expected), "{names:?}");
    }
    let zone = |name: &str| {
        all.iter()
            .find(|l| l.name == name)
            .map(|l| l.network_zone.clone())
    };
    assert_eq!(zone("hel1"), Some(NetworkZone::EuCentral));
    assert_eq!(zone("ash"), Some(NetworkZone::UsEast));
    assert_eq!(zone("hil"), Some(NetworkZone::UsWest));
    assert_eq!(zone("sin"), Some(NetworkZone::ApSoutheast));
    assert_eq!(count(&sim, "GET /locations").await, 1, "one page of 50");

    let fsn1 = all.iter().find(|l| l.name == "fsn1").expect("fsn1");
    let one = client.locations().get(fsn1.id).await.expect("get");
    assert_eq!(&one, fsn1);
    assert_eq!(one.country, "DE");
    let by_name = client
        .locations()
        .get_by_name("hil")
        .await
        .expect("by name");
    assert_eq!(by_name.map(|l| l.city), Some("Hillsboro, OR".to_owned()));
    assert!(
        client
            .locations()
            .get(999)
            .await
            .expect_err("missing")
            .is_not_found()
    );
}

#[tokio::test]
async fn load_balancer_types() {
    let (_sim, client) = setup().await;
    let all = client.load_balancer_types().list().await.expect("list");
    assert!(all.len() >= 3);
    let lb21 = client
        .load_balancer_types()
        .get_by_name("lb21")
        .await
        .expect("by name")
        .expect("lb21 exists");
    assert_eq!(
        (
            lb21.max_connections,
            lb21.max_services,
            lb21.max_targets,
            lb21.max_assigned_certificates
        ),
        (20_000, 15, 75, 25)
    );
    let again = client
        .load_balancer_types()
        .get(lb21.id)
        .await
        .expect("get");
    assert_eq!(again, lb21);
    assert!(
        client
            .load_balancer_types()
            .get(424_242)
            .await
            .expect_err("missing")
            .is_not_found()
    );
}

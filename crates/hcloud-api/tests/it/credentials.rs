//! Swapping credentials at runtime: a new token is used by the next request, a request refused
//! with 401 asks the hook and is tried once more, for the Cloud and the Robot client.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use hcloud_api::credentials::{Reauthorize, Reauthorizing};
use hcloud_api::robot::{RobotClient, RobotConfig, RobotPassword};
use hcloud_api::{Client, Token};
use hcloud_sim::{SimConfig, Simulator};

use crate::common::{config_for, setup};

/// Sets `token` on the client when asked, counting the questions.
#[derive(Debug)]
struct SetToken {
    client: Client,
    token: Option<&'static str>,
    asked: AtomicUsize,
}

impl Reauthorize for SetToken {
    fn reauthorize(&self) -> Reauthorizing<'_> {
        Box::pin(async move {
            self.asked.fetch_add(1, Ordering::SeqCst);
            if let Some(token) = self.token {
                self.client.set_token(&Token::new(token)).expect("token");
            }
        })
    }
}

#[tokio::test]
async fn the_next_request_uses_a_swapped_token() {
    let (sim, client) = setup().await;
    sim.admin()
        .add_token("token-2", false)
        .await
        .expect("token");
    client.set_token(&Token::new("token-2")).expect("set");
    client.locations().list().await.expect("with the new token");
    let counts = sim.admin().token_request_counts().await.expect("counts");
    assert_eq!(counts.get("token-2"), Some(&1));
    assert_eq!(counts.get(sim.token()), None);
    assert!(
        client.set_token(&Token::new("  ")).is_err(),
        "an empty token"
    );
    client.locations().list().await.expect("the old one kept");
}

#[tokio::test]
async fn a_refused_request_asks_for_a_new_token_and_is_tried_once_more() {
    let (sim, client) = setup().await;
    let admin = sim.admin();
    admin.add_token("token-2", false).await.expect("token");
    admin.revoke_token(sim.token()).await.expect("revoke");
    // Without a hook the 401 is the answer.
    let err = client.locations().list().await.expect_err("revoked");
    assert_eq!(err.status(), Some(401));
    let hook = Arc::new(SetToken {
        client: client.clone(),
        token: Some("token-2"),
        asked: AtomicUsize::new(0),
    });
    assert!(client.set_reauthorize(hook.clone()));
    client
        .locations()
        .list()
        .await
        .expect("retried with the new token");
    assert_eq!(hook.asked.load(Ordering::SeqCst), 1);
    client
        .locations()
        .list()
        .await
        .expect("the new token stays");
    assert_eq!(hook.asked.load(Ordering::SeqCst), 1, "asked once");

    // A hook that finds nothing new: the 401 is returned after one question, no loop.
    let other = Client::new(config_for(&sim)).expect("client");
    let nothing = Arc::new(SetToken {
        client: other.clone(),
        token: None,
        asked: AtomicUsize::new(0),
    });
    other.set_reauthorize(nothing.clone());
    let err = other.locations().list().await.expect_err("still revoked");
    assert_eq!(err.status(), Some(401));
    assert_eq!(nothing.asked.load(Ordering::SeqCst), 1);
    // A new token that is refused too: tried once, then its 401.
    let refused = Client::new(config_for(&sim)).expect("client");
    let bad = Arc::new(SetToken {
        client: refused.clone(),
        token: Some("never-accepted"),
        asked: AtomicUsize::new(0),
    });
    refused.set_reauthorize(bad.clone());
    let err = refused.locations().list().await.expect_err("refused");
    assert_eq!(err.status(), Some(401));
    assert_eq!(bad.asked.load(Ordering::SeqCst), 1);
}

/// Sets the right Robot password when asked.
#[derive(Debug)]
struct SetRobot {
    client: RobotClient,
    asked: AtomicUsize,
}

impl Reauthorize for SetRobot {
    fn reauthorize(&self) -> Reauthorizing<'_> {
        Box::pin(async move {
            self.asked.fetch_add(1, Ordering::SeqCst);
            self.client
                .set_credentials("#ws+test", RobotPassword::new("right-password"))
                .expect("credentials");
        })
    }
}

#[tokio::test]
async fn robot_asks_for_new_credentials_after_a_401() {
    let sim =
        Simulator::start(SimConfig::default().robot_credentials("#ws+test", "right-password"))
            .await
            .expect("simulator");
    let config = RobotConfig::new("#ws+test", "old-password")
        .endpoint(&sim.robot_url())
        .expect("endpoint");
    let robot = RobotClient::new(config).expect("client");
    assert!(
        robot.servers().await.is_err(),
        "the old password is refused"
    );
    let hook = Arc::new(SetRobot {
        client: robot.clone(),
        asked: AtomicUsize::new(0),
    });
    assert!(robot.set_reauthorize(hook.clone()));
    robot
        .servers()
        .await
        .expect("retried with the new password");
    robot.servers().await.expect("kept");
    assert_eq!(hook.asked.load(Ordering::SeqCst), 1);
    assert!(
        robot.set_credentials("", RobotPassword::new("x")).is_err(),
        "an empty user"
    );
    assert!(!format!("{robot:?}").contains("right-password"));
}

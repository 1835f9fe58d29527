//! The Robot webservice of the simulator (`/robot`): shapes, errors, auth, the request
//! limit, faults, counters, seeds, the admin API and the binary's flags.

use hcloud_sim::{Fault, RobotRateLimit, RobotServerSeed, SeedFile, SimConfig, Simulator};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::binary::start_binary;

struct Robot {
    sim: Simulator,
    http: reqwest::Client,
}

async fn start(config: SimConfig) -> Robot {
    Robot {
        sim: Simulator::start(config).await.unwrap(),
        http: reqwest::Client::new(),
    }
}

impl Robot {
    async fn get_as(&self, path: &str, user: &str, password: &str) -> (StatusCode, Value) {
        let r = self
            .http
            .get(format!("{}{path}", self.sim.robot_url()))
            .basic_auth(user, Some(password))
            .send()
            .await
            .unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.get_as(path, self.sim.robot_user(), self.sim.robot_password())
            .await
    }
}

fn assert_robot_error(answer: &(StatusCode, Value), status: u16, code: &str) {
    assert_eq!(answer.0.as_u16(), status, "{:?}", answer.1);
    assert_eq!(answer.1["error"]["status"], status, "{:?}", answer.1);
    assert_eq!(answer.1["error"]["code"], code, "{:?}", answer.1);
    assert!(answer.1["error"]["message"].is_string(), "{:?}", answer.1);
}

#[tokio::test]
async fn servers_and_resets_have_robots_shapes() {
    let robot = start(SimConfig::default()).await;
    let admin = robot.sim.admin();
    let a = admin
        .add_robot_server(
            RobotServerSeed::new("dedicated-1")
                .product("Server Auction")
                .dc("NBG1-DC1"),
        )
        .await
        .unwrap();
    let b = admin
        .add_robot_server(RobotServerSeed::new("dedicated-2").number(42).server_ip(""))
        .await
        .unwrap();
    assert_eq!((a, b), (1_000_001, 42));

    let (status, list) = robot.get("/server").await;
    assert_eq!(status, 200, "{list}");
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 2);
    // Ordered by number, each element wrapped in {"server": …}.
    let second = &list[1]["server"];
    assert_eq!(second["server_number"], 1_000_001);
    assert_eq!(second["server_name"], "dedicated-1");
    assert_eq!(second["server_ip"], "203.0.113.101");
    assert_eq!(second["server_ipv6_net"], "2001:db8:ffee:1::");
    assert_eq!(second["product"], "Server Auction");
    assert_eq!(second["dc"], "NBG1-DC1");
    assert_eq!(second["status"], "ready");
    assert_eq!(second["cancelled"], false);
    assert_eq!(second["ip"], json!(["203.0.113.101"]));
    assert!(second.get("reset").is_none(), "the list has no flags");
    assert_eq!(list[0]["server"]["server_ip"], Value::Null);
    assert_eq!(list[0]["server"]["ip"], json!([]));

    let (status, one) = robot.get(&format!("/server/{a}")).await;
    assert_eq!(status, 200, "{one}");
    assert_eq!(one["server"]["server_name"], "dedicated-1");
    assert_eq!(one["server"]["reset"], true);
    assert_eq!(one["server"]["linked_storagebox"], Value::Null);

    let (status, reset) = robot.get(&format!("/reset/{a}")).await;
    assert_eq!(status, 200, "{reset}");
    assert_eq!(reset["reset"]["server_number"], a);
    assert_eq!(reset["reset"]["operating_status"], "running");
    assert!(reset["reset"]["type"].as_array().unwrap().len() > 1);

    // Power drives operating_status; a rename shows in the list.
    admin.robot_power_off(a).await.unwrap();
    let (_, reset) = robot.get(&format!("/reset/{a}")).await;
    assert_eq!(reset["reset"]["operating_status"], "shut off");
    admin.robot_power_on(a).await.unwrap();
    let (_, reset) = robot.get(&format!("/reset/{a}")).await;
    assert_eq!(reset["reset"]["operating_status"], "running");
    admin.rename_robot_server(a, "renamed").await.unwrap();
    let (_, one) = robot.get(&format!("/server/{a}")).await;
    assert_eq!(one["server"]["server_name"], "renamed");
    let refused = admin
        .set_robot_operating_status(a, "off")
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("operating_status"),
        "{refused}"
    );

    // Removed: gone from the list, 404 by number and for its reset.
    admin.remove_robot_server(a).await.unwrap();
    let (_, list) = robot.get("/server").await;
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_robot_error(
        &robot.get(&format!("/server/{a}")).await,
        404,
        "SERVER_NOT_FOUND",
    );
    assert_robot_error(
        &robot.get(&format!("/reset/{a}")).await,
        404,
        "SERVER_NOT_FOUND",
    );
    assert!(admin.remove_robot_server(a).await.is_err());
    let servers = admin.robot_servers().await.unwrap();
    assert_eq!(servers.len(), 1);
    assert_eq!(servers[0]["operating_status"], "running");
}

#[tokio::test]
async fn errors_use_robots_envelope() {
    let robot = start(SimConfig::default().robot_credentials("#ws+abc", "s3cret")).await;
    // An account without servers answers SERVER_NOT_FOUND on the list too.
    assert_robot_error(&robot.get("/server").await, 404, "SERVER_NOT_FOUND");
    assert_robot_error(&robot.get("/server/abc").await, 404, "SERVER_NOT_FOUND");
    assert_robot_error(
        &robot.get_as("/server", "#ws+abc", "wrong").await,
        401,
        "UNAUTHORIZED",
    );
    let anonymous = robot
        .http
        .get(format!("{}/server", robot.sim.robot_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    // The Cloud token is no Robot credential, and Robot credentials are no Cloud token.
    let bearer = robot
        .http
        .get(format!("{}/server", robot.sim.robot_url()))
        .bearer_auth(robot.sim.token())
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status(), 401);
    let cloud = robot
        .http
        .get(format!("{}/servers", robot.sim.base_url()))
        .basic_auth("#ws+abc", Some("s3cret"))
        .send()
        .await
        .unwrap();
    assert_eq!(cloud.status(), 401);
    assert_robot_error(&robot.get("/nothing").await, 404, "NOT_FOUND");
}

#[tokio::test]
async fn the_request_limit_counts_per_endpoint() {
    let robot = start(SimConfig::default().robot_rate_limit(Some(RobotRateLimit {
        max_request: 2,
        interval: 3600,
    })))
    .await;
    let admin = robot.sim.admin();
    let n = admin
        .add_robot_server(RobotServerSeed::new("d"))
        .await
        .unwrap();
    assert_eq!(robot.get("/server").await.0, 200);
    assert_eq!(robot.get("/server").await.0, 200);
    let limited = robot.get("/server").await;
    assert_robot_error(&limited, 403, "RATE_LIMIT_EXCEEDED");
    assert_eq!(limited.1["error"]["max_request"], 2);
    assert_eq!(limited.1["error"]["interval"], 3600);
    // Another endpoint has its own budget.
    assert_eq!(robot.get(&format!("/reset/{n}")).await.0, 200);

    let counts = admin.robot_request_counts().await.unwrap();
    assert_eq!(counts.get("GET /server"), Some(&3));
    assert_eq!(counts.get("GET /reset/{id}"), Some(&1));
    // Robot requests are not counted as Cloud requests.
    assert!(admin.request_counts().await.unwrap().is_empty());

    // A new limit opens fresh windows; none at all lets everything through.
    admin.set_robot_rate_limit(None).await.unwrap();
    for _ in 0..5 {
        assert_eq!(robot.get("/server").await.0, 200);
    }
    admin.reset_robot_request_counts().await.unwrap();
    assert!(admin.robot_request_counts().await.unwrap().is_empty());
}

#[tokio::test]
async fn faults_apply_to_robot_requests_with_robot_codes() {
    let robot = start(SimConfig::default()).await;
    let admin = robot.sim.admin();
    let n = admin
        .add_robot_server(RobotServerSeed::new("d"))
        .await
        .unwrap();
    admin
        .inject_robot_fault(Fault::new("/server").method("GET").status(500))
        .await
        .unwrap();
    admin
        .inject_robot_fault(Fault::new("/reset/{id}").code("RATE_LIMIT_EXCEEDED"))
        .await
        .unwrap();
    admin
        .inject_robot_fault(Fault::new("/server/{id}").proxy_status(502))
        .await
        .unwrap();
    assert_robot_error(&robot.get("/server").await, 500, "INTERNAL_ERROR");
    assert_eq!(robot.get("/server").await.0, 200, "a fault counts down");
    let limited = robot.get(&format!("/reset/{n}")).await;
    assert_robot_error(&limited, 403, "RATE_LIMIT_EXCEEDED");
    assert_eq!(limited.1["error"]["max_request"], 200);
    let (status, page) = robot.get(&format!("/server/{n}")).await;
    assert_eq!(status, 502);
    assert!(page.as_str().unwrap().contains("<html>"), "{page}");
    // Robot faults never touch the Cloud API, and Cloud faults never touch Robot.
    admin
        .inject_fault(Fault::new("*").status(503).count(5))
        .await
        .unwrap();
    assert_eq!(robot.get("/server").await.0, 200);
    admin.clear_faults().await.unwrap();
    admin
        .replace_robot_faults(&[Fault::new("*").status(503)])
        .await
        .unwrap();
    admin.clear_robot_faults().await.unwrap();
    assert_eq!(robot.get("/server").await.0, 200);
}

#[tokio::test]
async fn seeds_create_robot_servers() {
    let seed: SeedFile = serde_json::from_str(include_str!("../../examples/seed.json")).unwrap();
    assert_eq!(seed.robot_servers.len(), 2);
    let robot = start(SimConfig::default().seed(seed)).await;
    let (status, list) = robot.get("/server").await;
    assert_eq!(status, 200, "{list}");
    let names: Vec<(u64, &str)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["server"]["server_number"].as_u64().unwrap(),
                s["server"]["server_name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        vec![(321, "dedicated-1"), (1_000_001, "dedicated-2")]
    );
    assert_eq!(list[0]["server"]["product"], "Server Auction");
    assert_eq!(list[0]["server"]["server_ip"], "203.0.113.201");
    let state = robot.sim.admin().state().await.unwrap();
    assert_eq!(state["robot_servers"].as_array().unwrap().len(), 2);

    // A bad entry fails the whole seed, naming it.
    let bad = SeedFile {
        robot_servers: vec![RobotServerSeed::new("x").server_ip("not-an-ip")],
        ..SeedFile::default()
    };
    let err = Simulator::start(SimConfig::default().seed(bad))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("robot server \"x\"") && text.contains("server_ip"),
        "{text}"
    );
}

#[tokio::test]
async fn binary_serves_robot_with_its_credentials() {
    let (mut child, line) = start_binary(
        &[
            "--token",
            "bin-token",
            "--robot-user",
            "bin-robot",
            "--robot-rate-limit",
            "1",
        ],
        &[("HCLOUD_SIM_ROBOT_PASSWORD", "bin-robot-password")],
    )
    .await;
    assert!(!line.contains("bin-robot-password"), "{line}");
    let robot_url: String = line[line.find("robot=").unwrap() + "robot=".len()..]
        .chars()
        .take_while(|c| !c.is_whitespace())
        .collect();
    assert!(robot_url.ends_with("/robot"), "{line}");
    let http = reqwest::Client::new();
    let get = |user: &'static str, password: &'static str| {
        http.get(format!("{robot_url}/server"))
            .basic_auth(user, Some(password))
            .send()
    };
    assert_eq!(
        get("bin-robot", "robot-password").await.unwrap().status(),
        401
    );
    let ok = get("bin-robot", "bin-robot-password").await.unwrap();
    assert_eq!(ok.status(), 200);
    let list: Value = ok.json().await.unwrap();
    assert_eq!(list.as_array().unwrap().len(), 2);
    let limited = get("bin-robot", "bin-robot-password").await.unwrap();
    assert_eq!(limited.status(), 403);
    child.kill().unwrap();
    child.wait().unwrap();
}

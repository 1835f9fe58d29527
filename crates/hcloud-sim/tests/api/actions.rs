use hcloud_sim::ServerSeed;
use serde_json::json;

use crate::common::{Api, Resp, assert_error, start};

/// A simulator with the server `a`, powered off by an action that succeeded: the API, the
/// server's ID and the action's.
async fn powered_off_server() -> (Api, i64, i64) {
    let api = start().await;
    let s = api
        .sim
        .admin()
        .create_server(ServerSeed::new("a"))
        .await
        .unwrap();
    let id = s["id"].as_i64().unwrap();
    let action = api
        .act(&format!("/servers/{id}/actions/poweroff"), json!({}))
        .await;
    let action = action["id"].as_i64().unwrap();
    (api, id, action)
}

/// The IDs of the actions of a list, in its order.
fn action_ids(r: &Resp) -> Vec<i64> {
    r.body["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_i64().unwrap())
        .collect()
}

#[tokio::test]
async fn get_and_list_actions() {
    let (api, id, i1) = powered_off_server().await;
    let a2 = api
        .act(&format!("/servers/{id}/actions/poweron"), json!({}))
        .await;
    let i2 = a2["id"].as_i64().unwrap();
    let r = api.get(&format!("/actions?id={i1}&id={i2}")).await;
    assert_eq!(r.status, 200);
    assert_eq!(action_ids(&r), vec![i1, i2]);
    assert_eq!(r.body["meta"]["pagination"]["total_entries"], 2);
    let r = api.get(&format!("/actions?id={i2}")).await;
    assert_eq!(r.body["actions"].as_array().unwrap().len(), 1);
    assert_error(&api.get("/actions").await, 422, "invalid_input");
    assert_error(&api.get("/actions/999999").await, 404, "not_found");
    let r = api.get(&format!("/servers/{id}/actions")).await;
    assert_eq!(r.body["actions"].as_array().unwrap().len(), 2);
    let r = api.get(&format!("/servers/{id}/actions/{i1}")).await;
    assert_eq!(r.body["action"]["command"], "stop_server");
    let r = api.get(&format!("/servers/actions/{i1}")).await;
    assert_eq!(r.body["action"]["id"], i1);
    assert_error(
        &api.get(&format!("/networks/actions/{i1}")).await,
        404,
        "not_found",
    );
}

/// The official Go client's action waiter polls `GET /actions?id=…&sort=status&sort=id`; the
/// API sorts action lists by `id`, `command`, `status`, `started` and `finished` (not by the
/// resources' `name` or `created`).
#[tokio::test]
async fn action_lists_sort_by_the_action_fields() {
    let (api, id, done) = powered_off_server().await;
    api.sim
        .admin()
        .set_action_delay(std::time::Duration::from_secs(60))
        .await
        .unwrap();
    let running = api
        .post(&format!("/servers/{id}/actions/poweron"), json!({}))
        .await;
    assert_eq!(running.status, 201, "{}", running.body);
    let running = running.body["action"]["id"].as_i64().unwrap();
    let order = |path: String| {
        let api = &api;
        async move {
            let r = api.get(&path).await;
            assert_eq!(r.status, 200, "{path}: {}", r.body);
            action_ids(&r)
        }
    };
    let ids = format!("id={done}&id={running}");
    for (path, want) in [
        (
            format!("/actions?{ids}&sort=status&sort=id"),
            [running, done],
        ),
        (format!("/actions?{ids}&sort=id:desc"), [running, done]),
        (format!("/actions?{ids}&sort=command:desc"), [done, running]),
        (
            format!("/servers/{id}/actions?sort=started:desc"),
            [running, done],
        ),
        (
            "/servers/actions?sort=started:asc&sort=status:desc".to_owned(),
            [done, running],
        ),
    ] {
        assert_eq!(order(path.clone()).await, want, "{path}");
    }
    assert_eq!(
        order(format!("/actions?{ids}&sort=finished:asc&sort=id"))
            .await
            .len(),
        2
    );
    for sort in ["name", "id:up"] {
        assert_error(
            &api.get(&format!("/actions?{ids}&sort={sort}")).await,
            422,
            "invalid_input",
        );
    }
}

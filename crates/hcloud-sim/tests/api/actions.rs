use hcloud_sim::ServerSeed;
use serde_json::json;

use crate::common::{assert_error, start};

#[tokio::test]
async fn get_and_list_actions() {
    let api = start().await;
    let s = api
        .sim
        .admin()
        .create_server(ServerSeed::new("a"))
        .await
        .unwrap();
    let id = s["id"].as_i64().unwrap();
    let a1 = api
        .act(&format!("/servers/{id}/actions/poweroff"), json!({}))
        .await;
    let a2 = api
        .act(&format!("/servers/{id}/actions/poweron"), json!({}))
        .await;
    let (i1, i2) = (a1["id"].as_i64().unwrap(), a2["id"].as_i64().unwrap());
    let r = api.get(&format!("/actions?id={i1}&id={i2}")).await;
    assert_eq!(r.status, 200);
    let ids: Vec<i64> = r.body["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![i1, i2]);
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
    let api = start().await;
    let s = api
        .sim
        .admin()
        .create_server(ServerSeed::new("a"))
        .await
        .unwrap();
    let id = s["id"].as_i64().unwrap();
    let done = api
        .act(&format!("/servers/{id}/actions/poweroff"), json!({}))
        .await;
    let done = done["id"].as_i64().unwrap();
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
            r.body["actions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a["id"].as_i64().unwrap())
                .collect::<Vec<i64>>()
        }
    };
    let ids = format!("id={done}&id={running}");
    assert_eq!(
        order(format!("/actions?{ids}&sort=status&sort=id")).await,
        vec![running, done]
    );
    assert_eq!(
        order(format!("/actions?{ids}&sort=id:desc")).await,
        vec![running, done]
    );
    assert_eq!(
        order(format!("/actions?{ids}&sort=command:desc")).await,
        vec![done, running]
    );
    assert_eq!(
        order(format!("/servers/{id}/actions?sort=started:desc")).await,
        vec![running, done]
    );
    assert_eq!(
        order("/servers/actions?sort=started:asc&sort=status:desc".to_owned()).await,
        vec![done, running]
    );
    assert_eq!(
        order(format!("/actions?{ids}&sort=finished:asc&sort=id"))
            .await
            .len(),
        2
    );
    assert_error(
        &api.get(&format!("/actions?{ids}&sort=name")).await,
        422,
        "invalid_input",
    );
    assert_error(
        &api.get(&format!("/actions?{ids}&sort=id:up")).await,
        422,
        "invalid_input",
    );
}

//! The API server double served on 127.0.0.1 and driven by the machine's `kubectl`.

use std::time::Duration;

use nodewright::sim::apiserver::ApiServer;

#[tokio::test(flavor = "multi_thread")]
#[ignore]
async fn serve_for_manual_use() {
    let port: u16 = std::env::var("NODEWRIGHT_DOUBLE_PORT")
        .unwrap()
        .parse()
        .unwrap();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let server = ApiServer::default();
    let _ = tokio::time::timeout(Duration::from_secs(3000), server.serve(listener)).await;
}

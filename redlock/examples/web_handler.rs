//! A web handler that takes a lock per entity (axum): requests for one order are
//! serialised, requests for different orders run in parallel.
//!
//! `POST /orders/{id}/process` locks `order:{id}` for the request's work:
//! - without `?wait_ms=`, one attempt: a busy order answers `409 Conflict` at once;
//! - with `?wait_ms=N`, the request waits up to N ms for the order (woken by the release
//!   of the request ahead of it), then `409` if still busy;
//! - `503` when the lock nodes, not another request, stand in the way.
//!
//! A client that hangs up drops the handler's future wherever it is: the acquire is
//! cancel-safe and a dropped lease is released in the background, so no order stays
//! locked for a TTL. On shutdown the server stops taking requests, then
//! `Redlock::shutdown` lets those background releases finish.
//!
//! ```sh
//! REDLOCK_NODES=redis://127.0.0.1:7000,redis://127.0.0.1:7001,redis://127.0.0.1:7002 \
//!     cargo run -p fenced-redlock --example web_handler
//! curl -X POST 'http://127.0.0.1:3000/orders/42/process?wait_ms=2000'
//! ```

use std::error::Error;
use std::future::Future;
use std::time::{Duration, Instant};

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use fenced_redlock::Redlock;
use serde_json::{Value, json};

#[derive(Clone)]
struct App {
    redlock: Redlock,
    /// How long the work under the lock takes (stands in for charging the order, etc.).
    work: Duration,
    /// Times in responses are counted from here.
    epoch: Instant,
}

#[derive(serde::Deserialize)]
struct Params {
    wait_ms: Option<u64>,
}

/// The routes, on a client the caller built (one per process, shared by all requests).
pub fn router(redlock: Redlock, work: Duration) -> Router {
    let app = App {
        redlock,
        work,
        epoch: Instant::now(),
    };
    Router::new()
        .route("/orders/{id}/process", post(process))
        .with_state(app)
}

async fn process(
    State(app): State<App>,
    Path(id): Path<String>,
    Query(params): Query<Params>,
) -> (StatusCode, Json<Value>) {
    let resource = format!("order:{id}");
    let taken = match params.wait_ms {
        None | Some(0) => app.redlock.try_acquire(&resource).await,
        Some(ms) => {
            app.redlock
                .acquire(&resource, Duration::from_millis(ms))
                .await
        }
    };
    let lease = match taken {
        Ok(lease) => lease,
        Err(e) if e.is_contended() => {
            let busy = json!({ "order": id, "error": "another request is processing this order" });
            return (StatusCode::CONFLICT, Json(busy));
        }
        Err(e) => {
            let down = json!({ "order": id, "error": e.to_string() });
            return (StatusCode::SERVICE_UNAVAILABLE, Json(down));
        }
    };
    let held_from = app.epoch.elapsed();
    // The work: every write it makes carries `lease.fence()`, so that a request whose
    // lease ran out (a long pause) cannot overwrite a later one's.
    tokio::time::sleep(app.work).await;
    let held_to = app.epoch.elapsed();
    let fence = lease.fence().map(|t| t.get());
    lease.release().await;
    let done = json!({
        "order": id,
        "fence": fence,
        "held_from_us": held_from.as_micros() as u64,
        "held_to_us": held_to.as_micros() as u64,
    });
    (StatusCode::OK, Json(done))
}

/// Serves on `listener` until `stop` resolves, then shuts the lock client down.
pub async fn serve(
    listener: tokio::net::TcpListener,
    nodes: &[String],
    work: Duration,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Box<dyn Error + Send + Sync>> {
    let redlock = Redlock::builder(nodes)
        .ttl(Duration::from_secs(10))
        .fencing(true)
        .build()?;
    axum::serve(listener, router(redlock.clone(), work))
        .with_graceful_shutdown(stop)
        .await?;
    redlock.shutdown().await?;
    Ok(())
}

fn nodes_from_env() -> Vec<String> {
    std::env::var("REDLOCK_NODES")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
        .split(',')
        .map(str::to_owned)
        .collect()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error + Send + Sync>> {
    let bind = std::env::var("BIND").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(&bind).await?;
    println!("listening on http://{}", listener.local_addr()?);
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    serve(
        listener,
        &nodes_from_env(),
        Duration::from_millis(200),
        ctrl_c,
    )
    .await
}

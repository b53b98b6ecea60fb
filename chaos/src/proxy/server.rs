//! The HTTP API (axum) and the ways to run it: in-process ([`ProxyServer`],
//! [`serve`]) or as the `chaos toxiproxy` command ([`run`]).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::api::{ApiError, NewProxy, Populated, ProxyUpdate, Toxic, ToxicWire, Version};
use super::registry::Registry;

/// Why the API server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The API address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Requested address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The listener failed while serving.
    #[error("API server failed: {source}")]
    Serve {
        /// The I/O error.
        source: std::io::Error,
    },
    /// The server task panicked or was cancelled.
    #[error("API server task ended abnormally: {message}")]
    Task {
        /// What the runtime reported.
        message: String,
    },
}

type Shared = Arc<Registry>;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, Json(self)).into_response()
    }
}

/// Parses a JSON body, turning any failure into Toxiproxy's 400 answer.
fn parse<T: for<'de> Deserialize<'de>>(body: &Bytes) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("bad request body: {e}")))
}

/// Proxy creation body: optional fields so a missing one gets a precise 400.
#[derive(Debug, Deserialize)]
struct CreateBody {
    name: Option<String>,
    listen: Option<String>,
    upstream: Option<String>,
    enabled: Option<bool>,
}

impl CreateBody {
    fn into_new(self) -> Result<NewProxy, ApiError> {
        let missing = |f: &str| ApiError::bad_request(format!("missing required field: {f}"));
        Ok(NewProxy {
            name: self.name.ok_or_else(|| missing("name"))?,
            listen: self.listen.ok_or_else(|| missing("listen"))?,
            upstream: self.upstream.ok_or_else(|| missing("upstream"))?,
            enabled: self.enabled.unwrap_or(true),
        })
    }
}

/// The API routes over a registry.
fn router(registry: Shared) -> Router {
    Router::new()
        .route("/version", get(version))
        .route("/proxies", get(list).post(create))
        .route("/populate", post(populate))
        .route("/reset", post(reset))
        .route(
            "/proxies/{proxy}",
            get(get_proxy)
                .post(update_proxy)
                .patch(update_proxy)
                .delete(delete_proxy),
        )
        .route("/proxies/{proxy}/toxics", get(toxics).post(add_toxic))
        .route(
            "/proxies/{proxy}/toxics/{toxic}",
            get(get_toxic)
                .post(update_toxic)
                .patch(update_toxic)
                .delete(remove_toxic),
        )
        .fallback(|| async { ApiError::not_found("not found") })
        .with_state(registry)
}

async fn version() -> Json<Version> {
    Json(Version {
        version: env!("CARGO_PKG_VERSION").to_owned(),
    })
}

async fn list(State(r): State<Shared>) -> Response {
    Json(r.list().await).into_response()
}

async fn create(State(r): State<Shared>, body: Bytes) -> Result<Response, ApiError> {
    let new = parse::<CreateBody>(&body)?.into_new()?;
    let proxy = r.create(new).await?;
    Ok((StatusCode::CREATED, Json(proxy)).into_response())
}

async fn populate(State(r): State<Shared>, body: Bytes) -> Result<Response, ApiError> {
    let list = parse::<Vec<CreateBody>>(&body)?
        .into_iter()
        .map(CreateBody::into_new)
        .collect::<Result<Vec<_>, _>>()?;
    let proxies = r.populate(list).await?;
    Ok((StatusCode::CREATED, Json(Populated { proxies })).into_response())
}

async fn reset(State(r): State<Shared>) -> Result<StatusCode, ApiError> {
    r.reset().await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn get_proxy(
    State(r): State<Shared>,
    Path(proxy): Path<String>,
) -> Result<Response, ApiError> {
    Ok(Json(r.get(&proxy).await?).into_response())
}

async fn update_proxy(
    State(r): State<Shared>,
    Path(proxy): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let update = parse::<ProxyUpdate>(&body)?;
    Ok(Json(r.update(&proxy, update).await?).into_response())
}

async fn delete_proxy(
    State(r): State<Shared>,
    Path(proxy): Path<String>,
) -> Result<StatusCode, ApiError> {
    r.delete(&proxy).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn toxics(State(r): State<Shared>, Path(proxy): Path<String>) -> Result<Response, ApiError> {
    Ok(Json(r.toxics(&proxy).await?).into_response())
}

async fn add_toxic(
    State(r): State<Shared>,
    Path(proxy): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    // Parse the wire form first so a bad type or stream gets a clean message.
    let toxic = Toxic::try_from(parse::<ToxicWire>(&body)?).map_err(ApiError::bad_request)?;
    Ok(Json(r.add_toxic(&proxy, toxic).await?).into_response())
}

async fn get_toxic(
    State(r): State<Shared>,
    Path((proxy, toxic)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    Ok(Json(r.get_toxic(&proxy, &toxic).await?).into_response())
}

async fn update_toxic(
    State(r): State<Shared>,
    Path((proxy, toxic)): Path<(String, String)>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let update = parse::<ToxicWire>(&body)?;
    Ok(Json(r.update_toxic(&proxy, &toxic, update).await?).into_response())
}

async fn remove_toxic(
    State(r): State<Shared>,
    Path((proxy, toxic)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    r.remove_toxic(&proxy, &toxic).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Serves the API on `listener` until `shutdown` completes, then stops every
/// proxy (listeners and connections) before returning.
pub async fn serve(
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let registry = Shared::default();
    let result = axum::serve(listener, router(registry.clone()))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|source| ServerError::Serve { source });
    registry.stop_all().await;
    result
}

/// Runs the API on `listen` until Ctrl-C or SIGTERM (what `chaos toxiproxy`
/// does; SIGTERM matters as PID 1 in a container).
pub async fn run(listen: SocketAddr) -> Result<(), ServerError> {
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|source| ServerError::Bind {
            addr: listen,
            source,
        })?;
    let addr = listener.local_addr().unwrap_or(listen);
    tracing::info!(%addr, "Toxiproxy-compatible API listening");
    serve(listener, termination()).await
}

async fn termination() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch SIGTERM; only Ctrl-C stops the server");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// An API server running in the current Tokio runtime.
///
/// Dropping it asks the server to stop (without waiting); call
/// [`ProxyServer::shutdown`] to wait until every proxy is closed.
#[derive(Debug)]
pub struct ProxyServer {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), ServerError>>>,
}

impl ProxyServer {
    /// Binds `addr` (port 0 picks a free port) and starts serving.
    pub async fn start(addr: SocketAddr) -> Result<Self, ServerError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServerError::Bind { addr, source })?;
        Self::from_listener(listener)
    }

    /// Starts serving on an already bound listener.
    pub fn from_listener(listener: TcpListener) -> Result<Self, ServerError> {
        let addr = listener
            .local_addr()
            .map_err(|source| ServerError::Serve { source })?;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, async move {
            // A dropped sender also means stop.
            let _ = stopped.await;
        }));
        Ok(ProxyServer {
            addr,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The API address actually bound.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Base URL for a client, e.g. `http://127.0.0.1:8474`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops the API and every proxy, and waits until they are closed.
    pub async fn shutdown(mut self) -> Result<(), ServerError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => task.await.map_err(|e| ServerError::Task {
                message: e.to_string(),
            })?,
            None => Ok(()),
        }
    }
}

impl Drop for ProxyServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

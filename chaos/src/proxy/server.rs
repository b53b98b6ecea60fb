//! The HTTP API (axum) and the ways to run it: in-process ([`ProxyServer`],
//! [`serve`]) or as the `chaos toxiproxy` command ([`run`]), with
//! [`ServeOptions`] for Toxiproxy's `-seed` and `-config`.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use rand::Rng;
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::api::{ApiError, Proxy, ProxyUpdate, Toxic, ToxicWire};
use super::populate::{self, ProxyBody};
use super::registry::Registry;
use super::toxics::Dice;

/// Response header carrying a fresh id per request, as Toxiproxy sends it.
pub const REQUEST_ID_HEADER: &str = "x-toxiproxy-request-id";

/// How a server starts: Toxiproxy's `-seed` and `-config`.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    seed: Option<u64>,
    config: Option<PathBuf>,
}

impl ServeOptions {
    /// Seeds toxicity rolls, jitter and slice sizes: the same seed gives the
    /// same draws for the same sequence of connections. Unseeded: from the OS.
    pub fn seed(&mut self, seed: u64) -> &mut Self {
        self.seed = Some(seed);
        self
    }

    /// Populates from this JSON file (a `POST /populate` body) before
    /// serving. Unlike Toxiproxy, which logs a bad file and starts empty,
    /// a missing or invalid file stops the start with [`ServerError::Config`].
    pub fn config(&mut self, path: impl Into<PathBuf>) -> &mut Self {
        self.config = Some(path.into());
        self
    }

    async fn registry(&self) -> Result<Shared, ServerError> {
        let dice = self.seed.map_or_else(Dice::from_os, Dice::seeded);
        let registry = Arc::new(Registry::with_dice(dice));
        if let Some(path) = &self.config {
            let fail = |message: String| ServerError::Config {
                path: path.clone(),
                message,
            };
            let body = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
            let list = populate::parse(&body).map_err(|e| fail(e.error))?;
            let done = registry.populate(list).await.map_err(|e| fail(e.error))?;
            tracing::info!(path = %path.display(), proxies = done.len(), "populated from config");
        }
        Ok(registry)
    }
}

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
    /// The `--config` file cannot be read or populated.
    #[error("config {}: {message} (fix the file or drop --config)", path.display())]
    Config {
        /// The file given.
        path: PathBuf,
        /// What was wrong: I/O error or the populate error.
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
        .layer(middleware::from_fn(no_browsers))
        .layer(middleware::from_fn(request_id))
        .with_state(registry)
}

/// Toxiproxy refuses browsers (a user agent starting `Mozilla/`) so that a
/// web page cannot drive the API from a developer's machine.
async fn no_browsers(req: Request, next: Next) -> Response {
    let browser = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ua| ua.starts_with("Mozilla/"));
    if browser {
        return (StatusCode::FORBIDDEN, "User agent not allowed\n").into_response();
    }
    next.run(req).await
}

/// Tags every answer with a fresh id (20 base32hex characters, the shape of
/// the xid Toxiproxy sends), so a client's logs can name the request.
async fn request_id(req: Request, next: Next) -> Response {
    const ALPHABET: &[u8; 32] = b"0123456789abcdefghijklmnopqrstuv";
    let id: String = {
        let mut rng = rand::rng();
        (0..20)
            .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
            .collect()
    };
    let mut resp = next.run(req).await;
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert(REQUEST_ID_HEADER, v);
    }
    resp
}

/// Parses a JSON body, turning any failure into Toxiproxy's 400 answer.
fn parse<T: for<'de> Deserialize<'de>>(body: &Bytes) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("bad request body: {e}")))
}

/// Byte for byte Toxiproxy's answer (`{"version": "X"}` and a newline):
/// some clients hand the raw body to their callers.
async fn version() -> Response {
    let body = format!("{{\"version\": \"{}\"}}\n", env!("CARGO_PKG_VERSION"));
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json;charset=utf-8"),
        )],
        body,
    )
        .into_response()
}

async fn list(State(r): State<Shared>) -> Response {
    Json(r.list().await).into_response()
}

async fn create(State(r): State<Shared>, body: Bytes) -> Result<Response, ApiError> {
    let new = parse::<ProxyBody>(&body)?.into_new("")?;
    let proxy = r.create(new).await?;
    Ok((StatusCode::CREATED, Json(proxy)).into_response())
}

/// Populate's answer, errors included: Toxiproxy puts `error` and `status`
/// beside `proxies` (which is `null` after an error, as nothing was applied).
#[derive(Serialize)]
struct PopulateAnswer {
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    error: Option<ApiError>,
    proxies: Option<Vec<Proxy>>,
}

async fn populate(State(r): State<Shared>, body: Bytes) -> Response {
    let result = match populate::parse(&body) {
        Ok(list) => r.populate(list).await,
        Err(e) => Err(e),
    };
    let (status, answer) = match result {
        Ok(proxies) => (
            StatusCode::CREATED,
            PopulateAnswer {
                error: None,
                proxies: Some(proxies),
            },
        ),
        Err(e) => (
            StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            PopulateAnswer {
                error: Some(e),
                proxies: None,
            },
        ),
    };
    (status, Json(answer)).into_response()
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
    // Toxiproxy looks the proxy up before reading the body: 404 beats 400.
    r.get(&proxy).await?;
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
    // As in Toxiproxy: an unknown proxy is a 404 whatever the body says.
    r.get(&proxy).await?;
    let toxic = Toxic::try_from(parse::<ToxicWire>(&body)?)?;
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
    // Unknown proxy or toxic is a 404 whatever the body says (as in Toxiproxy).
    r.get_toxic(&proxy, &toxic).await?;
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
    serve_with(listener, shutdown, &ServeOptions::default()).await
}

/// [`serve`] with a seed and/or a config file to populate from first.
pub async fn serve_with(
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    options: &ServeOptions,
) -> Result<(), ServerError> {
    let registry = options.registry().await?;
    serve_registry(listener, shutdown, registry).await
}

async fn serve_registry(
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    registry: Shared,
) -> Result<(), ServerError> {
    let result = axum::serve(listener, router(registry.clone()))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|source| ServerError::Serve { source });
    registry.stop_all().await;
    result
}

/// Runs the API on `listen` until Ctrl-C or SIGTERM (what `chaos toxiproxy`
/// does; SIGTERM matters as PID 1 in a container).
pub async fn run(listen: SocketAddr, options: &ServeOptions) -> Result<(), ServerError> {
    // The config is checked before the API answers, so a bad file fails fast.
    let registry = options.registry().await?;
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|source| ServerError::Bind {
            addr: listen,
            source,
        })?;
    let addr = listener.local_addr().unwrap_or(listen);
    tracing::info!(%addr, "Toxiproxy-compatible API listening");
    serve_registry(listener, termination(), registry).await
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
        Self::start_with(addr, &ServeOptions::default()).await
    }

    /// [`ProxyServer::start`] with a seed and/or a config file; a bad config
    /// fails here, before the API answers.
    pub async fn start_with(addr: SocketAddr, options: &ServeOptions) -> Result<Self, ServerError> {
        let registry = options.registry().await?;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServerError::Bind { addr, source })?;
        Self::spawn(listener, registry)
    }

    /// Starts serving on an already bound listener.
    pub fn from_listener(listener: TcpListener) -> Result<Self, ServerError> {
        Self::spawn(listener, Shared::default())
    }

    fn spawn(listener: TcpListener, registry: Shared) -> Result<Self, ServerError> {
        let addr = listener
            .local_addr()
            .map_err(|source| ServerError::Serve { source })?;
        let (stop, stopped) = oneshot::channel::<()>();
        // A dropped sender also means stop.
        let shutdown = async move {
            let _ = stopped.await;
        };
        let task = tokio::spawn(serve_registry(listener, shutdown, registry));
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

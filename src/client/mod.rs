//! The Rust SDK: `AgentClient` and `AppClient`.
//!
//! Both register over HTTP, connect over WebSocket, call methods with the
//! catalogue's typed params and results, and receive notifications as a
//! stream. An `AppClient` also answers the hub's server-initiated requests
//! through handlers registered before it connects, so no callback can arrive
//! before its handler exists. The hub's integration tests drive it.

mod connection;
mod deadlines;
mod http;

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::Value;
use uuid::Uuid;

use crate::protocol::events::Resume;
use crate::protocol::network::{
    AgentConnect, AgentConnectParams, AgentConnectResult, AppConnect, AppConnectParams,
    AppConnectResult, AppIdentityGet,
};
use crate::protocol::Method;
use crate::rpc::RpcError;

pub use connection::{CloseInfo, Connection, Notification};
pub use deadlines::{Deadlines, DEFAULT_PING_DEADLINE};

/// Verifying the hub's signed webhooks (Standard Webhooks `v1` and `v1a`).
pub mod webhooks {
    pub use crate::webhooks::signature::{
        verify, VerificationKey, VerifyError, DEFAULT_TOLERANCE_SECONDS, ID_HEADER,
        SIGNATURE_HEADER, TIMESTAMP_HEADER,
    };
}
pub use http::{AgentCredentials, AppCredentials, HttpClient};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("the hub answered with an error: {0}")]
    Rpc(RpcError),
    #[error("no answer within the deadline")]
    Timeout,
    #[error("the connection is closed")]
    Disconnected,
    #[error("the answer does not match the method's result type: {0}")]
    BadResult(String),
    #[error("HTTP {status}: {body}")]
    Http { status: u16, body: Value },
    #[error("transport error: {0}")]
    Transport(String),
}

impl ClientError {
    /// The hub's error object, when the hub answered with one.
    pub fn rpc(&self) -> Option<&RpcError> {
        match self {
            ClientError::Rpc(e) => Some(e),
            _ => None,
        }
    }
}

/// Default deadline of a call made through the SDK.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) type Handler =
    Arc<dyn Fn(Value) -> BoxFuture<'static, Result<Value, RpcError>> + Send + Sync>;

/// Derives `ws://host:port/ws` from `http://host:port` (and wss from https).
pub fn websocket_url(base: &str) -> Result<String, ClientError> {
    let mut url =
        url::Url::parse(base).map_err(|e| ClientError::Transport(format!("bad hub URL: {e}")))?;
    let scheme = match url.scheme() {
        "http" | "ws" => "ws",
        "https" | "wss" => "wss",
        other => {
            return Err(ClientError::Transport(format!(
                "unsupported scheme {other}"
            )))
        }
    };
    url.set_scheme(scheme)
        .map_err(|_| ClientError::Transport("cannot derive the WebSocket URL".into()))?;
    url.set_path("/ws");
    Ok(url.to_string())
}

/// An agent's connection to the hub.
pub struct AgentClient {
    pub connection: Connection,
    pub session: AgentConnectResult,
}

impl AgentClient {
    /// `POST /api/v1/agents/register`.
    pub async fn register(
        base: &str,
        name: &str,
        description: Option<&str>,
    ) -> Result<AgentCredentials, ClientError> {
        HttpClient::new(base)
            .register_agent(name, description)
            .await
    }

    /// Opens a socket and authenticates with `agent/network/connect`;
    /// delivery starts after the last acknowledged event.
    pub async fn connect(base: &str, agent_key: &str) -> Result<AgentClient, ClientError> {
        Self::connect_resuming(base, agent_key, None).await
    }

    /// Connects and replays every event after `resume.after`.
    pub async fn connect_resuming(
        base: &str,
        agent_key: &str,
        resume: Option<Resume>,
    ) -> Result<AgentClient, ClientError> {
        let connection = Connection::open(&websocket_url(base)?, Default::default()).await?;
        let session = connection
            .call::<AgentConnect>(AgentConnectParams {
                agent_key: agent_key.to_string(),
                protocol: None,
                resume,
            })
            .await?;
        Ok(AgentClient {
            connection,
            session,
        })
    }

    pub fn agent_id(&self) -> Uuid {
        self.session.agent_id
    }

    pub async fn call<M: Method>(&self, params: M::Params) -> Result<M::Result, ClientError> {
        self.connection.call::<M>(params).await
    }
}

/// An app's connection to the hub, answering the hub's callbacks, each
/// within its deadline (`deadlines`): a handler still working when the hub
/// has stopped waiting is cancelled and its answer is not sent.
pub struct AppClient {
    pub connection: Connection,
    pub session: AppConnectResult,
}

/// Collects callback handlers before the app connects.
pub struct AppClientBuilder {
    base: String,
    app_key: String,
    resume: Option<Resume>,
    handlers: std::collections::HashMap<String, Handler>,
    ping_deadline: Duration,
}

impl AppClient {
    /// `POST /api/v1/apps/register`.
    pub async fn register(base: &str, manifest: &Value) -> Result<AppCredentials, ClientError> {
        HttpClient::new(base).register_app(manifest).await
    }

    pub fn builder(base: &str, app_key: &str) -> AppClientBuilder {
        AppClientBuilder {
            base: base.to_string(),
            app_key: app_key.to_string(),
            resume: None,
            handlers: Default::default(),
            ping_deadline: DEFAULT_PING_DEADLINE,
        }
    }

    pub fn app_id(&self) -> Uuid {
        self.session.app_id
    }

    pub async fn call<M: Method>(&self, params: M::Params) -> Result<M::Result, ClientError> {
        self.connection.call::<M>(params).await
    }
}

impl AppClientBuilder {
    /// Answers the hub's `M` requests. A handler error goes back to the hub
    /// as the JSON-RPC error; the hub treats it as a failed (closed) gate.
    pub fn handle<M, F, Fut>(mut self, handler: F) -> Self
    where
        M: Method,
        F: Fn(M::Params) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<M::Result, RpcError>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let erased: Handler = Arc::new(move |raw: Value| {
            let handler = handler.clone();
            Box::pin(async move {
                let params: M::Params = crate::protocol::params::decode(Some(raw))?;
                let result = handler(params).await?;
                serde_json::to_value(result).map_err(|_| RpcError::internal())
            })
        });
        // Under the seed-002 name too, so the app answers whichever its
        // manifest's `callbackNames` makes the hub call (ADR 0023 §8).
        if let Some(alias) = M::MOLTZAP_V1_NAME {
            self.handlers.insert(alias.to_string(), erased.clone());
        }
        self.handlers.insert(M::NAME.to_string(), erased);
        self
    }

    /// How long a ping handler may take: the hub does not announce it (the
    /// operator's `timeoutMs`). The gates' deadlines are the manifest's
    /// `timeoutMs`, and autocomplete's is the request's `deadlineMs`.
    pub fn ping_deadline(mut self, deadline: Duration) -> Self {
        self.ping_deadline = deadline;
        self
    }

    /// Replays every event after `resume.after` once connected.
    pub fn resume(mut self, resume: Resume) -> Self {
        self.resume = Some(resume);
        self
    }

    pub async fn connect(self) -> Result<AppClient, ClientError> {
        let connection = Connection::open(&websocket_url(&self.base)?, self.handlers).await?;
        let session = connection
            .call::<AppConnect>(AppConnectParams {
                app_key: self.app_key,
                protocol: None,
                resume: self.resume,
            })
            .await?;
        // The deadlines are the manifest's as the hub stored it; a gate
        // arriving meanwhile waits, its clock started on arrival.
        let identity = connection
            .call::<AppIdentityGet>(Default::default())
            .await?;
        connection.set_deadlines(Deadlines::from_manifest(
            &identity.manifest,
            self.ping_deadline,
        ));
        Ok(AppClient {
            connection,
            session,
        })
    }
}

//! The SDK's REST calls.

use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use super::ClientError;

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCredentials {
    pub agent_id: Uuid,
    pub agent_key: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppCredentials {
    pub app_id: Uuid,
    pub app_key: String,
}

pub struct HttpClient {
    base: String,
    http: reqwest::Client,
    registration_secret: Option<String>,
}

impl HttpClient {
    pub fn new(base: &str) -> Self {
        HttpClient {
            base: base.trim_end_matches('/').to_string(),
            http: reqwest::Client::new(),
            registration_secret: None,
        }
    }

    /// Sends `X-Registration-Secret` with registrations.
    pub fn with_registration_secret(mut self, secret: &str) -> Self {
        self.registration_secret = Some(secret.to_string());
        self
    }

    async fn post<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &Value,
    ) -> Result<T, ClientError> {
        let mut request = self.http.post(format!("{}{path}", self.base)).json(body);
        if let Some(secret) = &self.registration_secret {
            request = request.header("x-registration-secret", secret);
        }
        let response = request
            .send()
            .await
            .map_err(|e| ClientError::Transport(e.to_string()))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| ClientError::Transport(e.to_string()))?;
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if !status.is_success() {
            return Err(ClientError::Http {
                status: status.as_u16(),
                body,
            });
        }
        serde_json::from_value(body).map_err(|e| ClientError::BadResult(e.to_string()))
    }

    pub async fn register_agent(
        &self,
        name: &str,
        description: Option<&str>,
    ) -> Result<AgentCredentials, ClientError> {
        let mut body = json!({ "name": name });
        if let Some(d) = description {
            body["description"] = json!(d);
        }
        self.post("/api/v1/agents/register", &body).await
    }

    pub async fn register_app(&self, manifest: &Value) -> Result<AppCredentials, ClientError> {
        self.post("/api/v1/apps/register", &json!({ "manifest": manifest }))
            .await
    }
}

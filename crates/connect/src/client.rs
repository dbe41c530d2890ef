//! A Spark Connect session: one gRPC channel, `ExecutePlan` of pipeline
//! commands, Spark's errors decoded (error class, SQL state, message).

use std::collections::HashMap;
use std::time::Duration;

use tonic::metadata::{MetadataKey, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, ClientTlsConfig};

use crate::proto::spark_connect_service_client::SparkConnectServiceClient;
use crate::proto::{
    command, execute_plan_request, pipeline_command, plan, Command, ExecutePlanRequest,
    ExecutePlanResponse, PipelineCommand, Plan, ReleaseSessionRequest, UserContext,
};
use crate::url::RemoteUrl;

/// The largest message accepted (as PySpark's channel).
const MAX_MESSAGE_BYTES: usize = 128 * 1024 * 1024;

/// How the client names itself to the server.
pub const CLIENT_TYPE: &str = concat!("pipelines/", env!("CARGO_PKG_VERSION"), " rust");

/// Something Spark Connect did not do.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// No connection could be made.
    #[error("cannot reach Spark Connect at {url}: {reason}")]
    Unreachable {
        /// The server, without parameters.
        url: String,
        /// Why (refused, timed out, TLS).
        reason: String,
    },
    /// Spark refused a command or a run failed there.
    #[error("{}", spark_text(error_class.as_deref(), message))]
    Spark {
        /// Spark's error class, e.g. `TABLE_OR_VIEW_NOT_FOUND`.
        error_class: Option<String>,
        /// The SQL state, e.g. `42P01`.
        sql_state: Option<String>,
        /// The exception class on the server.
        reason: Option<String>,
        /// Spark's message (its first line carries the class again).
        message: String,
    },
    /// The server answered something this client does not understand.
    #[error("unexpected answer from Spark Connect: {0}")]
    Protocol(String),
}

/// Spark's message, led by its error class when the message does not
/// already start with it.
fn spark_text(error_class: Option<&str>, message: &str) -> String {
    let message = message.trim();
    match error_class {
        Some(c) if !message.starts_with(&format!("[{c}]")) => format!("[{c}] {message}"),
        _ => message.to_string(),
    }
}

/// Adds the URL's token and headers to every call.
#[derive(Clone)]
pub struct Headers(
    Vec<(
        MetadataKey<tonic::metadata::Ascii>,
        MetadataValue<tonic::metadata::Ascii>,
    )>,
);

impl tonic::service::Interceptor for Headers {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        for (k, v) in &self.0 {
            request.metadata_mut().insert(k.clone(), v.clone());
        }
        Ok(request)
    }
}

/// One session with a Spark Connect server.
pub struct Session {
    client: SparkConnectServiceClient<InterceptedService<Channel, Headers>>,
    session_id: String,
    server_session_id: Option<String>,
    user_context: UserContext,
    client_type: String,
}

impl Session {
    /// Connects (10 s to establish the connection).
    pub async fn connect(url: &RemoteUrl) -> Result<Session, ConnectError> {
        let unreachable = |reason: String| ConnectError::Unreachable {
            url: url.to_string(),
            reason,
        };
        let mut endpoint = Channel::from_shared(url.endpoint())
            .map_err(|e| unreachable(e.to_string()))?
            .connect_timeout(Duration::from_secs(10))
            .http2_keep_alive_interval(Duration::from_secs(60))
            .keep_alive_while_idle(true);
        if url.use_ssl {
            endpoint = endpoint
                .tls_config(
                    ClientTlsConfig::new()
                        .with_native_roots()
                        .domain_name(url.host.clone()),
                )
                .map_err(|e| unreachable(format!("TLS: {e}")))?;
        }
        let channel = endpoint
            .connect()
            .await
            .map_err(|e| unreachable(error_chain(&e)))?;
        let mut headers = Vec::new();
        if let Some(token) = &url.token {
            let value = format!("Bearer {token}").parse().map_err(|_| {
                unreachable("the token has characters a header cannot carry".into())
            })?;
            headers.push((MetadataKey::from_static("authorization"), value));
        }
        for (k, v) in &url.headers {
            let key = MetadataKey::from_bytes(k.as_bytes())
                .map_err(|_| unreachable(format!("`{k}` cannot be a header name")))?;
            let value = v
                .parse()
                .map_err(|_| unreachable(format!("the value of `{k}` cannot be a header value")))?;
            headers.push((key, value));
        }
        let client = SparkConnectServiceClient::with_interceptor(channel, Headers(headers))
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let user_id = url
            .user_id
            .clone()
            .or_else(|| std::env::var("SPARK_USER").ok())
            .or_else(|| std::env::var("USER").ok())
            .unwrap_or_default();
        Ok(Session {
            client,
            session_id: url
                .session_id
                .clone()
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
            server_session_id: None,
            user_context: UserContext {
                user_id,
                ..Default::default()
            },
            client_type: url
                .user_agent
                .clone()
                .unwrap_or_else(|| CLIENT_TYPE.to_string()),
        })
    }

    /// Runs one pipeline command, handing every response to `each` as it
    /// arrives (a run's events stream for as long as it runs).
    pub async fn pipeline_command(
        &mut self,
        command: pipeline_command::CommandType,
        each: &mut dyn FnMut(&ExecutePlanResponse),
    ) -> Result<(), ConnectError> {
        let request = ExecutePlanRequest {
            session_id: self.session_id.clone(),
            client_observed_server_side_session_id: self.server_session_id.clone(),
            user_context: Some(self.user_context.clone()),
            operation_id: Some(uuid::Uuid::new_v4().to_string()),
            plan: Some(Plan {
                op_type: Some(plan::OpType::Command(Command {
                    command_type: Some(command::CommandType::PipelineCommand(PipelineCommand {
                        command_type: Some(command),
                    })),
                })),
            }),
            client_type: Some(self.client_type.clone()),
            request_options: Vec::<execute_plan_request::RequestOption>::new(),
            tags: Vec::new(),
        };
        let mut stream = self
            .client
            .execute_plan(request)
            .await
            .map_err(|s| from_status(&s))?
            .into_inner();
        loop {
            match stream.message().await {
                Ok(Some(response)) => {
                    if !response.server_side_session_id.is_empty() {
                        self.server_session_id = Some(response.server_side_session_id.clone());
                    }
                    each(&response);
                }
                Ok(None) => return Ok(()),
                Err(status) => return Err(from_status(&status)),
            }
        }
    }

    /// Ends the session on the server (best effort).
    pub async fn release(&mut self) {
        let request = ReleaseSessionRequest {
            session_id: self.session_id.clone(),
            user_context: Some(self.user_context.clone()),
            client_type: Some(self.client_type.clone()),
            ..Default::default()
        };
        let _ = self.client.release_session(request).await;
    }
}

/// The message and its causes, joined.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

/// `google.rpc.Status`, the body of `grpc-status-details-bin`.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
    #[prost(message, repeated, tag = "3")]
    details: Vec<prost_types::Any>,
}

/// `google.rpc.ErrorInfo`: Spark puts its error class and SQL state in the metadata.
#[derive(Clone, PartialEq, prost::Message)]
struct ErrorInfo {
    #[prost(string, tag = "1")]
    reason: String,
    #[prost(string, tag = "2")]
    domain: String,
    #[prost(map = "string, string", tag = "3")]
    metadata: HashMap<String, String>,
}

/// A gRPC status as Spark's error: class, state and message.
pub fn from_status(status: &tonic::Status) -> ConnectError {
    use prost::Message;
    match status.code() {
        tonic::Code::Unavailable | tonic::Code::DeadlineExceeded => {
            return ConnectError::Unreachable {
                url: "the server".into(),
                reason: format!("{} ({})", status.message(), status.code()),
            }
        }
        tonic::Code::Unauthenticated | tonic::Code::PermissionDenied => {
            return ConnectError::Unreachable {
                url: "the server".into(),
                reason: format!(
                    "{} ({}); check the token (`/;token=...` in the URL)",
                    status.message(),
                    status.code()
                ),
            }
        }
        _ => {}
    }
    let mut error_class = None;
    let mut sql_state = None;
    let mut reason = None;
    if let Ok(details) = RpcStatus::decode(status.details()) {
        for any in details.details {
            if any.type_url.ends_with("google.rpc.ErrorInfo") {
                if let Ok(info) = ErrorInfo::decode(any.value.as_slice()) {
                    error_class = info.metadata.get("errorClass").cloned();
                    sql_state = info.metadata.get("sqlState").cloned();
                    if !info.reason.is_empty() {
                        reason = Some(info.reason);
                    }
                }
            }
        }
    }
    ConnectError::Spark {
        error_class,
        sql_state,
        reason,
        message: status.message().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn spark_error_class_and_state_come_from_error_info() {
        let info = ErrorInfo {
            reason: "org.apache.spark.sql.AnalysisException".into(),
            domain: "org.apache.spark".into(),
            metadata: HashMap::from([
                (
                    "errorClass".to_string(),
                    "TABLE_OR_VIEW_NOT_FOUND".to_string(),
                ),
                ("sqlState".to_string(), "42P01".to_string()),
            ]),
        };
        let body = RpcStatus {
            code: 13,
            message: "[TABLE_OR_VIEW_NOT_FOUND] The table or view `x` cannot be found.".into(),
            details: vec![prost_types::Any {
                type_url: "type.googleapis.com/google.rpc.ErrorInfo".into(),
                value: info.encode_to_vec(),
            }],
        };
        let status = tonic::Status::with_details(
            tonic::Code::Internal,
            body.message.clone(),
            body.encode_to_vec().into(),
        );
        match from_status(&status) {
            ConnectError::Spark {
                error_class,
                sql_state,
                reason,
                message,
            } => {
                assert_eq!(error_class.as_deref(), Some("TABLE_OR_VIEW_NOT_FOUND"));
                assert_eq!(sql_state.as_deref(), Some("42P01"));
                assert_eq!(
                    reason.as_deref(),
                    Some("org.apache.spark.sql.AnalysisException")
                );
                assert_eq!(message, body.message);
            }
            other => panic!("{other:?}"),
        }
    }
}

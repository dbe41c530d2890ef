//! Spark Connect's connection string: `sc://host[:port][/;param=value;...]`.
//!
//! The parameters Spark's clients know: `token` (a bearer token; implies
//! TLS), `use_ssl`, `user_id`, `session_id`, `user_agent`; any other
//! parameter is sent as a gRPC header (Databricks' `x-databricks-cluster-id`).

use std::collections::BTreeMap;

/// Spark Connect's default port.
pub const DEFAULT_PORT: u16 = 15002;

/// A parsed `sc://` URL.
#[derive(Clone, PartialEq, Eq)]
pub struct RemoteUrl {
    /// Host name or address.
    pub host: String,
    /// Port (15002 when not written).
    pub port: u16,
    /// A bearer token (`token=`), sent as `Authorization: Bearer ...`.
    pub token: Option<String>,
    /// TLS (`use_ssl=true`, or implied by a token).
    pub use_ssl: bool,
    /// `user_id=`, else the `SPARK_USER` or `USER` environment variable.
    pub user_id: Option<String>,
    /// `session_id=` (a UUID); a new one when absent.
    pub session_id: Option<String>,
    /// `user_agent=`.
    pub user_agent: Option<String>,
    /// Every other parameter, sent as a header.
    pub headers: BTreeMap<String, String>,
}

impl std::fmt::Debug for RemoteUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token.
        write!(f, "{}", self)
    }
}

impl std::fmt::Display for RemoteUrl {
    /// `sc://host:port`, without the parameters (a token is a secret).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sc://{}:{}", self.host, self.port)
    }
}

/// What is wrong with a connection string.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("--remote {url}: {problem}; write sc://host:port, e.g. sc://localhost:15002 (parameters after `/;`: token, use_ssl, user_id)")]
pub struct UrlError {
    /// The URL, with any token hidden.
    pub url: String,
    /// What is wrong.
    pub problem: String,
}

impl RemoteUrl {
    /// Parses `sc://host[:port][/;k=v;...]`.
    pub fn parse(text: &str) -> Result<RemoteUrl, UrlError> {
        let shown = hide_token(text);
        let err = |problem: String| UrlError {
            url: shown.clone(),
            problem,
        };
        let rest = text
            .trim()
            .strip_prefix("sc://")
            .ok_or_else(|| err("a Spark Connect URL starts with `sc://`".into()))?;
        let (authority, params) = match rest.split_once('/') {
            Some((a, p)) => (a, p),
            None => (rest, ""),
        };
        let (host, port) = split_host_port(authority).map_err(err)?;
        let mut url = RemoteUrl {
            host,
            port,
            token: None,
            use_ssl: false,
            user_id: None,
            session_id: None,
            user_agent: None,
            headers: BTreeMap::new(),
        };
        let params = params.strip_prefix(';').unwrap_or(params);
        for part in params.split(';').filter(|p| !p.trim().is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| err(format!("parameter `{part}` has no `=value`")))?;
            let value = value.to_string();
            match key.trim() {
                "token" => url.token = Some(value),
                "use_ssl" => {
                    url.use_ssl = match value.to_ascii_lowercase().as_str() {
                        "true" => true,
                        "false" => false,
                        _ => return Err(err(format!("use_ssl={value}: write true or false"))),
                    }
                }
                "user_id" => url.user_id = Some(value),
                "session_id" => {
                    if uuid::Uuid::parse_str(&value).is_err() {
                        return Err(err(format!("session_id={value} is not a UUID")));
                    }
                    url.session_id = Some(value)
                }
                "user_agent" => url.user_agent = Some(value),
                other => {
                    url.headers.insert(other.to_ascii_lowercase(), value);
                }
            }
        }
        if url.token.is_some() {
            url.use_ssl = true;
        }
        Ok(url)
    }

    /// The gRPC endpoint: `http://host:port` or `https://host:port`.
    pub fn endpoint(&self) -> String {
        let scheme = if self.use_ssl { "https" } else { "http" };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        format!("{scheme}://{host}:{}", self.port)
    }
}

fn split_host_port(authority: &str) -> Result<(String, u16), String> {
    if authority.is_empty() {
        return Err("no host".into());
    }
    // `[::1]:15002`
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| "an IPv6 host needs its closing `]`".to_string())?;
        let port = match after.strip_prefix(':') {
            Some(p) => parse_port(p)?,
            None if after.is_empty() => DEFAULT_PORT,
            None => return Err(format!("unexpected `{after}` after the host")),
        };
        return Ok((host.to_string(), port));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() => Ok((host.to_string(), parse_port(port)?)),
        Some(_) => Err("no host".into()),
        None => Ok((authority.to_string(), DEFAULT_PORT)),
    }
}

fn parse_port(p: &str) -> Result<u16, String> {
    p.parse::<u16>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("port `{p}` is not a number from 1 to 65535"))
}

/// `text` with the value of `token=` replaced by `***`.
pub fn hide_token(text: &str) -> String {
    let Some(start) = text.find("token=") else {
        return text.to_string();
    };
    let value_start = start + "token=".len();
    let end = text[value_start..]
        .find(';')
        .map(|i| value_start + i)
        .unwrap_or(text.len());
    format!("{}***{}", &text[..value_start], &text[end..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_and_parameters() {
        let u = RemoteUrl::parse("sc://localhost").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.use_ssl),
            ("localhost", 15002, false)
        );
        assert_eq!(u.endpoint(), "http://localhost:15002");
        let u = RemoteUrl::parse(
            "sc://dbc-1.cloud.example:443/;token=dapi123;x-databricks-cluster-id=0101-abc;user_id=ana",
        )
        .unwrap();
        assert_eq!(u.token.as_deref(), Some("dapi123"));
        assert!(u.use_ssl);
        assert_eq!(u.user_id.as_deref(), Some("ana"));
        assert_eq!(u.headers["x-databricks-cluster-id"], "0101-abc");
        assert_eq!(u.endpoint(), "https://dbc-1.cloud.example:443");
        assert_eq!(format!("{u:?}"), "sc://dbc-1.cloud.example:443");
        let u = RemoteUrl::parse("sc://[::1]:7000").unwrap();
        assert_eq!(u.endpoint(), "http://[::1]:7000");
    }

    #[test]
    fn mistakes_are_explained_and_tokens_hidden() {
        let e = RemoteUrl::parse("http://localhost:15002").unwrap_err();
        assert_eq!(
            e.to_string(),
            "--remote http://localhost:15002: a Spark Connect URL starts with `sc://`; write sc://host:port, e.g. sc://localhost:15002 (parameters after `/;`: token, use_ssl, user_id)"
        );
        let e = RemoteUrl::parse("sc://h:99999/;token=secret").unwrap_err();
        assert_eq!(e.url, "sc://h:99999/;token=***");
        assert_eq!(e.problem, "port `99999` is not a number from 1 to 65535");
        let e = RemoteUrl::parse("sc://h/;use_ssl").unwrap_err();
        assert_eq!(e.problem, "parameter `use_ssl` has no `=value`");
    }
}

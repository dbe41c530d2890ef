//! TLS to the server, with libpq's `sslmode` and `sslrootcert` (rustls
//! through `tokio-postgres-rustls`; no OpenSSL):
//!
//! | `sslmode` | encrypted | the certificate is checked |
//! |---|---|---|
//! | `disable` | no | - |
//! | `prefer` (default, as libpq and pgjdbc) | when the server offers TLS | no |
//! | `require` | yes, or the connection fails | no |
//! | `verify-ca` | yes | signed by a trusted CA |
//! | `verify-full` | yes | signed by a trusted CA and issued for the host |
//!
//! The trusted CAs are the PEM certificates in `sslrootcert`, else the
//! system's. Both may also be given in `url` (`?sslmode=verify-full&sslrootcert=/path`
//! or `sslmode=... sslrootcert=...`); the options win.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::config::SslMode as WireMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use pipelines_core::error::{Error, Result};
use pipelines_core::options::Options;

/// The values of `sslmode`.
pub(crate) const SSL_MODES: &[&str] = &["disable", "prefer", "require", "verify-ca", "verify-full"];

/// How a connection uses TLS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str, origin: &str) -> Result<SslMode> {
        match value.trim().to_ascii_lowercase().as_str() {
            "disable" => Ok(SslMode::Disable),
            "prefer" | "allow" => Ok(SslMode::Prefer),
            "require" => Ok(SslMode::Require),
            "verify-ca" => Ok(SslMode::VerifyCa),
            "verify-full" => Ok(SslMode::VerifyFull),
            other => Err(Error::runtime_with_help(
                format!("{origin} `sslmode` is `{other}`, not a TLS mode"),
                format!("use one of {}", SSL_MODES.join(", ")),
            )),
        }
    }

    /// The name as written.
    pub(crate) fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// The TLS settings of a sink.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tls {
    pub mode: SslMode,
    /// PEM file of the CAs trusted by `verify-ca` / `verify-full`.
    pub root_cert: Option<PathBuf>,
}

impl Tls {
    /// The settings from the options, over those in `url`, and `url`
    /// without them (tokio-postgres' parser knows three modes only).
    pub(crate) fn from_options(options: &Options) -> Result<(Tls, Option<String>)> {
        let (url, from_url) = match options.get("url") {
            Some(url) => {
                let (rest, found) = take_tls_params(url);
                (Some(rest), found)
            }
            None => (None, Vec::new()),
        };
        let url_value = |key: &str| {
            from_url
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        let mode = match options.get("sslmode") {
            Some(m) => SslMode::parse(m, "option")?,
            None => match url_value("sslmode") {
                Some(m) => SslMode::parse(&m, "the `url`'s")?,
                None => SslMode::Prefer,
            },
        };
        let root_cert = options
            .get("sslrootcert")
            .map(str::to_string)
            .or_else(|| url_value("sslrootcert"))
            .map(PathBuf::from);
        Ok((Tls { mode, root_cert }, url))
    }

    /// The mode tokio-postgres negotiates with.
    pub(crate) fn wire_mode(&self) -> WireMode {
        match self.mode {
            SslMode::Disable => WireMode::Disable,
            SslMode::Prefer => WireMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => WireMode::Require,
        }
    }

    /// The connector doing the handshake with this mode's certificate check.
    pub(crate) fn connector(&self) -> Result<MakeRustlsConnect> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier: Arc<dyn ServerCertVerifier> = match self.mode {
            SslMode::Disable | SslMode::Prefer | SslMode::Require => {
                Arc::new(Unchecked(provider.clone()))
            }
            SslMode::VerifyCa | SslMode::VerifyFull => {
                let roots = self.roots()?;
                let webpki =
                    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                        .build()
                        .map_err(|e| {
                            Error::runtime(format!("cannot check the server's certificate: {e}"))
                        })?;
                if self.mode == SslMode::VerifyCa {
                    Arc::new(ChainOnly(webpki))
                } else {
                    webpki
                }
            }
        };
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::runtime(format!("cannot set up TLS: {e}")))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        Ok(MakeRustlsConnect::new(config))
    }

    /// The trusted CAs: `sslrootcert`'s certificates, else the system's.
    fn roots(&self) -> Result<RootCertStore> {
        let mut roots = RootCertStore::empty();
        match &self.root_cert {
            Some(path) => {
                let bad = |why: String| {
                    Error::runtime_with_help(
                        format!(
                            "option `sslrootcert`: cannot read {}: {why}",
                            path.display()
                        ),
                        "point `sslrootcert` at a PEM file of the CA certificates to trust",
                    )
                };
                let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
                    .map_err(|e| bad(e.to_string()))?
                    .collect::<std::result::Result<_, _>>()
                    .map_err(|e| bad(e.to_string()))?;
                if certs.is_empty() {
                    return Err(bad("it holds no certificate".into()));
                }
                for cert in certs {
                    roots.add(cert).map_err(|e| bad(e.to_string()))?;
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                for cert in found.certs {
                    let _ = roots.add(cert);
                }
                if roots.is_empty() {
                    return Err(Error::runtime_with_help(
                        format!(
                            "`sslmode: {}` needs trusted CA certificates, and this system has none",
                            self.mode.name()
                        ),
                        "set `sslrootcert` to the PEM file of the CA that signed the server's certificate",
                    ));
                }
            }
        }
        Ok(roots)
    }

    /// The help for a failed TLS handshake, from the error's text.
    pub(crate) fn handshake_help(&self, error: &str, host: &str) -> Option<String> {
        let error = error.to_ascii_lowercase();
        if error.contains("notvalidforname") || error.contains("not valid for name") {
            return Some(format!(
                "the server's certificate is not issued for `{host}`: connect by the name it was issued for, or set `sslmode: verify-ca` to check only who signed it"
            ));
        }
        if error.contains("unknownissuer") || error.contains("badsignature") {
            return Some(match &self.root_cert {
                Some(p) => format!(
                    "the server's certificate is not signed by a CA in {}: point `sslrootcert` at the CA that signed it",
                    p.display()
                ),
                None => "the server's certificate is not signed by a CA this system trusts: set `sslrootcert` to the PEM file of the CA that signed it".to_string(),
            });
        }
        if error.contains("server does not support tls") {
            return Some(
                "the server does not offer TLS: enable `ssl` on the server, or set `sslmode: prefer` (or `disable`)".to_string(),
            );
        }
        None
    }
}

/// `url` without its `sslmode` / `sslrootcert` parameters, and them.
fn take_tls_params(url: &str) -> (String, Vec<(String, String)>) {
    const KEYS: &[&str] = &["sslmode", "sslrootcert"];
    let mut found = Vec::new();
    if let Some((base, query)) = url
        .split_once('?')
        .filter(|_| url.starts_with("postgres://") || url.starts_with("postgresql://"))
    {
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if KEYS.contains(&k) {
                let v = String::from_utf8_lossy(&pipelines_core::engine::uri::percent_decode(v))
                    .into_owned();
                found.push((k.to_string(), v));
            } else {
                kept.push(pair);
            }
        }
        let rest = if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        return (rest, found);
    }
    if url.contains("://") {
        return (url.to_string(), found);
    }
    // `key=value` words.
    let mut kept = Vec::new();
    for word in url.split_whitespace() {
        match word.split_once('=') {
            Some((k, v)) if KEYS.contains(&k) => {
                found.push((k.to_string(), v.trim_matches('\'').to_string()))
            }
            _ => kept.push(word),
        }
    }
    (kept.join(" "), found)
}

/// `prefer` and `require`, as libpq: encrypted, the certificate not
/// checked (the handshake's signatures still are).
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain to a trusted CA is checked, the host name not.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        // The chain is checked first; a name mismatch means it passed.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// Whether `path` is readable (dry-run's check of `sslrootcert`).
pub(crate) fn check_root_cert(path: &Path) -> Result<()> {
    std::fs::metadata(path).map(|_| ()).map_err(|e| {
        Error::runtime_with_help(
            format!("option `sslrootcert`: cannot read {}: {e}", path.display()),
            "point `sslrootcert` at a PEM file of the CA certificates to trust",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_parameters_come_out_of_the_url() {
        assert_eq!(
            take_tls_params("postgres://u@h:5432/db?sslmode=verify-full&application_name=x&sslrootcert=%2Fca.pem"),
            (
                "postgres://u@h:5432/db?application_name=x".to_string(),
                vec![
                    ("sslmode".to_string(), "verify-full".to_string()),
                    ("sslrootcert".to_string(), "/ca.pem".to_string())
                ]
            )
        );
        assert_eq!(
            take_tls_params("host=h dbname=d sslmode=require"),
            (
                "host=h dbname=d".to_string(),
                vec![("sslmode".to_string(), "require".to_string())]
            )
        );
        assert_eq!(
            take_tls_params("postgres://u@h/db"),
            ("postgres://u@h/db".to_string(), vec![])
        );
    }
}

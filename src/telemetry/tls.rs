//! The OTLP exporter, and TLS for it: an endpoint that starts with `https://` is reached over
//! TLS, by either protocol, trusting the system's roots plus the PEM file the standard
//! `OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE` (or `OTEL_EXPORTER_OTLP_CERTIFICATE`) names, for a
//! collector whose certificate a private CA signed; and, when the collector asks for one, with
//! the client certificate and key that `OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE` and
//! `OTEL_EXPORTER_OTLP_CLIENT_KEY` (or their `TRACES_` forms) name (mutual TLS). An `http://`
//! endpoint is sent to as it is. The key's contents never reach a message: errors name the file.
//!
//! The SDK reads the rest of the variables itself (endpoint, headers, timeout, protocol); only
//! the transport is chosen here: grpc through tonic's TLS, http/protobuf through a rustls
//! connector in the exporter's hyper client (the SDK's own hyper client speaks plain HTTP only).

use std::sync::Arc;
use std::time::Duration;

use opentelemetry_http::hyper::HyperClient;
use opentelemetry_otlp::tonic_types::transport::{Certificate, ClientTlsConfig, Identity};
use opentelemetry_otlp::{SpanExporter, WithHttpConfig as _, WithTonicConfig as _};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// The exporter's timeout when `OTEL_EXPORTER_OTLP_*TIMEOUT` says none (the SDK's default).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The span exporter the variables ask for (read through `var`).
///
/// # Errors
/// What is wrong, in words an operator can act on: a certificate or key file that cannot be read
/// or holds no certificate or key, a client certificate without its key (or the reverse), or an
/// exporter the SDK could not build.
pub(super) fn exporter(var: &impl Fn(&str) -> Option<String>) -> Result<SpanExporter, String> {
    let built = if !https(var) {
        SpanExporter::builder().build()
    } else if protocol(var) == "grpc" {
        let mut tls = ClientTlsConfig::new().with_native_roots();
        if let Some((_, pem)) = extra_roots(var)? {
            tls = tls.ca_certificate(Certificate::from_pem(pem));
        }
        if let Some(client) = client_identity(var)? {
            // Checked here, as tonic would only fail at the first export, naming no file.
            client.parse()?;
            tls = tls.identity(Identity::from_pem(client.cert.1, client.key.1));
        }
        SpanExporter::builder().with_tonic().with_tls_config(tls).build()
    } else {
        let client = HyperClient::new(https_connector(extra_roots(var)?, client_identity(var)?)?, timeout(var), None);
        SpanExporter::builder().with_http().with_http_client(client).build()
    };
    built.map_err(|e| format!("the OTLP exporter could not be set up from OTEL_*: {e}"))
}

/// Whether the traces' endpoint is `https://`.
fn https(var: &impl Fn(&str) -> Option<String>) -> bool {
    first(var, &["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"])
        .is_some_and(|e| e.trim().to_ascii_lowercase().starts_with("https://"))
}

/// `grpc` or `http/protobuf` (the default), as the variables say.
fn protocol(var: &impl Fn(&str) -> Option<String>) -> String {
    first(var, &["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"])
        .map_or_else(|| "http/protobuf".to_string(), |p| p.trim().to_ascii_lowercase())
}

/// The export timeout (milliseconds in the variables).
fn timeout(var: &impl Fn(&str) -> Option<String>) -> Duration {
    first(var, &["OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"])
        .and_then(|ms| ms.trim().parse::<u64>().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_millis)
}

/// The certificate file the variables name, with its contents (PEM).
///
/// # Errors
/// The file cannot be read.
fn extra_roots(var: &impl Fn(&str) -> Option<String>) -> Result<Option<(String, Vec<u8>)>, String> {
    let names = ["OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "OTEL_EXPORTER_OTLP_CERTIFICATE"];
    let Some(path) = first(var, &names) else { return Ok(None) };
    let pem = std::fs::read(&path).map_err(|e| {
        format!("the OTLP certificate file {path} cannot be read ({e}): give a readable PEM file of the CA certificates that signed the collector's")
    })?;
    Ok(Some((path, pem)))
}

/// A client certificate chain and its private key (PEM), each with the file it came from.
struct ClientIdentity {
    cert: (String, Vec<u8>),
    key: (String, Vec<u8>),
}

impl ClientIdentity {
    /// The chain and the key, parsed.
    ///
    /// # Errors
    /// A file that holds no certificate or no private key (named, never shown).
    fn parse(&self) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
        let (cert_path, cert_pem) = &self.cert;
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("the OTLP client certificate file {cert_path} is not PEM certificates: {e}"))?;
        if chain.is_empty() {
            return Err(format!("the OTLP client certificate file {cert_path} holds no PEM certificate"));
        }
        let key_path = &self.key.0;
        let key = PrivateKeyDer::from_pem_slice(&self.key.1).map_err(|_| {
            format!("the OTLP client key file {key_path} holds no PEM private key (PKCS#8, PKCS#1 or SEC1)")
        })?;
        Ok((chain, key))
    }
}

/// The client certificate and key the variables name, read; `None` when neither is set.
///
/// # Errors
/// One is set without the other, or a file cannot be read.
fn client_identity(var: &impl Fn(&str) -> Option<String>) -> Result<Option<ClientIdentity>, String> {
    let cert = first(var, &["OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"]);
    let key = first(var, &["OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "OTEL_EXPORTER_OTLP_CLIENT_KEY"]);
    let read = |path: String, what: &str| {
        std::fs::read(&path)
            .map(|pem| (path.clone(), pem))
            .map_err(|e| format!("the OTLP client {what} file {path} cannot be read ({e})"))
    };
    match (cert, key) {
        (None, None) => Ok(None),
        (Some(cert), Some(key)) => Ok(Some(ClientIdentity { cert: read(cert, "certificate")?, key: read(key, "key")? })),
        (Some(_), None) => Err("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE is set without OTEL_EXPORTER_OTLP_CLIENT_KEY: set both for mutual TLS, or neither".into()),
        (None, Some(_)) => Err("OTEL_EXPORTER_OTLP_CLIENT_KEY is set without OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE: set both for mutual TLS, or neither".into()),
    }
}

/// A connector for `https://` (and `http://`) that trusts the system's roots and `extra`, and
/// shows `client`'s certificate to a collector that asks for one.
///
/// # Errors
/// `extra` holds no certificate, or one rustls refuses; `client` is not a certificate and its
/// key.
fn https_connector(
    extra: Option<(String, Vec<u8>)>,
    client: Option<ClientIdentity>,
) -> Result<hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>, String> {
    let mut roots = rustls::RootCertStore::empty();
    // The system's roots: one it cannot parse is left out, as the SDK's clients do.
    let _ = roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    if let Some((path, pem)) = extra {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("the OTLP certificate file {path} is not PEM certificates: {e}"))?;
        if certs.is_empty() {
            return Err(format!("the OTLP certificate file {path} holds no PEM certificate"));
        }
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| format!("the OTLP certificate file {path} has a certificate rustls refuses: {e}"))?;
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS for OTLP could not be set up: {e}"))?
        .with_root_certificates(roots);
    let config = match client {
        None => config.with_no_client_auth(),
        Some(client) => {
            let (chain, key) = client.parse()?;
            config.with_client_auth_cert(chain, key).map_err(|e| {
                format!(
                    "the OTLP client certificate {} and key {} do not go together: {e}",
                    client.cert.0, client.key.0
                )
            })?
        }
    };
    Ok(hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(config).https_or_http().enable_http1().build())
}

/// The first of `names` that is set and not blank.
fn first(var: &impl Fn(&str) -> Option<String>, names: &[&str]) -> Option<String> {
    names.iter().find_map(|n| var(n).filter(|v| !v.trim().is_empty()))
}

#[cfg(test)]
mod tests {
    use super::super::tests::vars;
    use super::*;

    #[test]
    fn the_traces_variables_come_before_the_general_ones() {
        let v = vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "HTTPS://c:4318/v1/traces"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", " "),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
        ]);
        assert!(https(&v));
        assert_eq!(protocol(&v), "grpc");
        assert_eq!(timeout(&v), Duration::from_millis(2500));
        assert!(!https(&vars(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")])));
        assert_eq!(protocol(&vars(&[])), "http/protobuf");
        assert_eq!(timeout(&vars(&[("OTEL_EXPORTER_OTLP_TIMEOUT", "soon")])), DEFAULT_TIMEOUT);
    }

    #[test]
    fn a_certificate_file_that_is_missing_or_no_pem_is_said_with_its_name() {
        let missing = vars(&[("OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent/ca.pem")]);
        let e = extra_roots(&missing).expect_err("missing");
        assert!(e.contains("/nonexistent/ca.pem") && e.contains("cannot be read"), "{e}");
        let e = https_connector(Some(("ca.pem".into(), b"not a certificate".to_vec())), None).expect_err("no PEM");
        assert!(e.contains("ca.pem") && e.contains("no PEM certificate"), "{e}");
        assert!(https_connector(None, None).is_ok(), "the system's roots alone");
    }

    /// A self-signed certificate for these tests only (its key was thrown away).
    const TEST_CERTIFICATE: &str = "-----BEGIN CERTIFICATE-----\nMIIBjTCCATOgAwIBAgIUDo5pazWOXexrpphL6NR+qBjjivEwCgYIKoZIzj0EAwIw\nGzEZMBcGA1UEAwwQZWNzLWVhLXVuaXQtdGVzdDAgFw0yNjEyMDYwMjMwNDdaGA8y\nMTI2MTExMjAyMzA0N1owGzEZMBcGA1UEAwwQZWNzLWVhLXVuaXQtdGVzdDBZMBMG\nByqGSM49AgEGCCqGSM49AwEHA0IABFdVGF/WTIvQ3mfrDUAiVaAAqCD9xKMZBrwN\nAupxEO6IuAzgtG0wEncpfM59nyTv1SyJ2Mwnuq1Y5rn9RgyO0NyjUzBRMB0GA1Ud\nDgQWBBTHkTwnkKOBXPRXR/Zzr4+BmMUZEDAfBgNVHSMEGDAWgBTHkTwnkKOBXPRX\nR/Zzr4+BmMUZEDAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0gAMEUCICmd\n13mtpGlqTB5FOBN2rxxh8tUP06dXl03Brv7Y0/+mAiEAzOWUfV7MYPxvt7ttuq1c\n/qJ/2ICniW8SaiqG4CDfJVY=\n-----END CERTIFICATE-----\n";

    #[test]
    fn a_client_certificate_needs_its_key_and_a_bad_key_file_is_named_not_shown() {
        let half = vars(&[("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "/etc/otlp/client.pem")]);
        let e = client_identity(&half).err().expect("the key is missing");
        assert!(e.contains("without OTEL_EXPORTER_OTLP_CLIENT_KEY"), "{e}");
        let other_half = vars(&[("OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "/etc/otlp/client.key")]);
        assert!(client_identity(&other_half).is_err());
        assert!(client_identity(&vars(&[])).expect("neither").is_none());
        let secret = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1ieXRlcw==\n-----END PRIVATE KEY-----\n";
        let client = ClientIdentity {
            cert: ("client.pem".into(), b"no certificate here".to_vec()),
            key: ("client.key".into(), secret.as_bytes().to_vec()),
        };
        let e = client.parse().expect_err("no certificate");
        assert!(e.contains("client.pem") && e.contains("no PEM certificate"), "{e}");
        let cert = ("client.pem".to_string(), TEST_CERTIFICATE.as_bytes().to_vec());
        let no_key = ClientIdentity { cert, key: ("client.key".into(), b"c2VjcmV0".to_vec()) };
        let e = https_connector(None, Some(no_key)).expect_err("no key");
        assert!(e.contains("client.key") && !e.contains("c2VjcmV0"), "the file named, its contents not: {e}");
    }
}

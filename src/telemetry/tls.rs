//! The OTLP exporter, and TLS for it: an endpoint that starts with `https://` is reached over
//! TLS, by either protocol, trusting the system's roots plus the PEM file the standard
//! `OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE` (or `OTEL_EXPORTER_OTLP_CERTIFICATE`) names, for a
//! collector whose certificate a private CA signed. An `http://` endpoint is sent to as it is.
//!
//! The SDK reads the rest of the variables itself (endpoint, headers, timeout, protocol); only
//! the transport is chosen here: grpc through tonic's TLS, http/protobuf through a rustls
//! connector in the exporter's hyper client (the SDK's own hyper client speaks plain HTTP only).

use std::sync::Arc;
use std::time::Duration;

use opentelemetry_http::hyper::HyperClient;
use opentelemetry_otlp::tonic_types::transport::{Certificate, ClientTlsConfig};
use opentelemetry_otlp::{SpanExporter, WithHttpConfig as _, WithTonicConfig as _};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::CertificateDer;

/// The exporter's timeout when `OTEL_EXPORTER_OTLP_*TIMEOUT` says none (the SDK's default).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The span exporter the variables ask for (read through `var`).
///
/// # Errors
/// What is wrong, in words an operator can act on: a certificate file that cannot be read or
/// holds no certificate, or an exporter the SDK could not build.
pub(super) fn exporter(var: &impl Fn(&str) -> Option<String>) -> Result<SpanExporter, String> {
    let built = if !https(var) {
        SpanExporter::builder().build()
    } else if protocol(var) == "grpc" {
        let mut tls = ClientTlsConfig::new().with_native_roots();
        if let Some((_, pem)) = extra_roots(var)? {
            tls = tls.ca_certificate(Certificate::from_pem(pem));
        }
        SpanExporter::builder().with_tonic().with_tls_config(tls).build()
    } else {
        let client = HyperClient::new(https_connector(extra_roots(var)?)?, timeout(var), None);
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

/// A connector for `https://` (and `http://`) that trusts the system's roots and `extra`.
///
/// # Errors
/// `extra` holds no certificate, or one rustls refuses.
fn https_connector(
    extra: Option<(String, Vec<u8>)>,
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
        .with_root_certificates(roots)
        .with_no_client_auth();
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
        let e = https_connector(Some(("ca.pem".into(), b"not a certificate".to_vec()))).expect_err("no PEM");
        assert!(e.contains("ca.pem") && e.contains("no PEM certificate"), "{e}");
        assert!(https_connector(None).is_ok(), "the system's roots alone");
    }
}

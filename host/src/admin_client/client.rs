//! The command line's side of the admin endpoint: one HTTP/1.1 request, the body back.

use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("invalid admin URL {url:?}: {reason} (expected http://host:port)")]
    Url { url: String, reason: String },
    #[error("cannot reach the admin endpoint at {authority}: {reason}")]
    Connect { authority: String, reason: String },
    #[error("the admin endpoint answered {status}: {body}")]
    Status { status: u16, body: String },
}

/// The answer to `method` `path` at the admin endpoint `admin` (`http://host:port`); a status
/// other than 2xx is an error carrying the body.
pub async fn request(admin: &str, method: hyper::Method, path: &str) -> Result<String, ClientError> {
    let url_error = |reason: &str| ClientError::Url {
        url: admin.to_owned(),
        reason: reason.to_owned(),
    };
    let uri: hyper::Uri = admin
        .parse()
        .map_err(|e: hyper::http::uri::InvalidUri| url_error(&e.to_string()))?;
    if uri.scheme_str().is_some_and(|s| s != "http") {
        return Err(url_error("only http is served"));
    }
    let authority = uri.authority().ok_or_else(|| url_error("no host:port"))?.to_string();
    let unreachable = |reason: String| ClientError::Connect {
        authority: authority.clone(),
        reason,
    };
    let exchange = async {
        let tcp = tokio::net::TcpStream::connect(&authority)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        tokio::spawn(connection);
        let req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, &authority)
            .body(Empty::<Bytes>::new())
            .map_err(|e| url_error(&e.to_string()))?;
        let response = sender.send_request(req).await.map_err(|e| unreachable(e.to_string()))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| unreachable(e.to_string()))?
            .to_bytes();
        let body = String::from_utf8_lossy(&body).into_owned();
        if status.is_success() {
            Ok(body)
        } else {
            Err(ClientError::Status {
                status: status.as_u16(),
                body: body.trim_end().to_owned(),
            })
        }
    };
    tokio::time::timeout(Duration::from_secs(60), exchange)
        .await
        .map_err(|_| ClientError::Connect {
            authority: authority.clone(),
            reason: "no answer within 60s".into(),
        })?
}

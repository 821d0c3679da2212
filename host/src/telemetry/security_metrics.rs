//! The metrics of the limits against abuse and of authentication and authorization: each limit
//! has a counter that moves when it bites.

use std::time::Duration;

use prometheus::core::Collector;
use prometheus::{HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec};

use super::vectors::{MetricsRegistry, counter, counters, gauge, gauges, histograms, register};

#[derive(Clone)]
pub struct SecurityMetrics {
    connections: IntGauge,
    connections_refused: IntCounterVec,
    tls_handshake_failures: IntCounterVec,
    tls_reloads: IntCounterVec,
    keepalive_violations: IntCounter,
    stream_limit_reached: IntCounter,
    subscriptions_refused: IntCounter,
    auth_refused: IntCounterVec,
    reviews: IntCounterVec,
    review_waits: IntCounterVec,
    reviews_in_flight: IntGaugeVec,
    review_duration: HistogramVec,
    connections_closed: IntCounterVec,
    admin_refused: IntCounterVec,
    certificate_expiry: IntGaugeVec,
    client_ca_expiry: IntGaugeVec,
}

/// Counts a review in flight until dropped.
pub struct InFlight(prometheus::IntGauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl SecurityMetrics {
    pub fn new(registry: &MetricsRegistry) -> Self {
        let m = Self {
            connections: gauge(
                "conductor_grpc_connections",
                "Open gRPC connections (counted once their TLS handshake is done).",
            ),
            connections_refused: counters(
                "conductor_grpc_connections_refused_total",
                "Connections closed as soon as accepted, by reason (limit: server.max_connections).",
                &["reason"],
            ),
            tls_handshake_failures: counters(
                "conductor_tls_handshake_failures_total",
                "TLS handshakes that failed (error) or took longer than server.tls_handshake_timeout (timeout).",
                &["reason"],
            ),
            tls_reloads: counters(
                "conductor_tls_reloads_total",
                "Changes of the TLS files on disk: loaded (ok) or refused, keeping the previous ones (error).",
                &["result"],
            ),
            keepalive_violations: counter(
                "conductor_grpc_keepalive_violations_total",
                "Connections closed with GOAWAY too_many_pings: the client pinged more often than server.client_min_ping_interval.",
            ),
            stream_limit_reached: counter(
                "conductor_grpc_stream_limit_reached_total",
                "Calls that brought their connection to server.max_concurrent_streams (further calls wait or are refused by HTTP/2).",
            ),
            subscriptions_refused: counter(
                "conductor_grpc_subscriptions_refused_total",
                "Subscribe calls refused (ResourceExhausted): their identity held server.max_subscriptions_per_identity.",
            ),
            auth_refused: counters(
                "conductor_grpc_auth_refused_total",
                "Calls refused by authentication (Unauthenticated) or authorization (PermissionDenied).",
                &["method", "grpc_code"],
            ),
            reviews: counters(
                "conductor_auth_reviews_total",
                "TokenReview and SubjectAccessReview decisions: answered from the cache (cached), by a review another caller started (joined), by the API server (reviewed), or failed (error).",
                &["review", "outcome"],
            ),
            review_waits: counters(
                "conductor_auth_review_waits_total",
                "Reviews that waited for a free place: auth.max_concurrent_reviews were in flight.",
                &["review"],
            ),
            reviews_in_flight: gauges(
                "conductor_auth_reviews_in_flight",
                "Reviews the API server is answering now (at most auth.max_concurrent_reviews of each kind).",
                &["review"],
            ),
            review_duration: histograms(
                "conductor_auth_review_duration_seconds",
                "How long the API server took to answer a TokenReview or SubjectAccessReview.",
                &["review"],
                vec![0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0],
            ),
            connections_closed: counters(
                "conductor_grpc_connections_closed_total",
                "Connections the server closed, by reason (unauthenticated: no authenticated call within server.unauthenticated_timeout).",
                &["reason"],
            ),
            certificate_expiry: gauges(
                "conductor_tls_certificate_expiry_timestamp_seconds",
                "When the serving certificate in use expires (its notAfter, seconds since the Unix epoch), by listener: server.tls or admin.tls.",
                &["listener"],
            ),
            client_ca_expiry: gauges(
                "conductor_tls_client_ca_expiry_timestamp_seconds",
                "When the first certificate of the client CA bundle in use expires (notAfter, seconds since the Unix epoch), by listener: after it, client certificates it signed are refused.",
                &["listener"],
            ),
            admin_refused: counters(
                "conductor_admin_refused_total",
                "Requests to the admin endpoint refused: no valid token (401), not allowed (403), or the review failed (503); connections closed at once past admin.max_connections (limit).",
                &["code"],
            ),
        };
        // Series of what may happen, at 0 from the start.
        m.connections_closed.with_label_values(&["unauthenticated"]);
        m.connections_refused.with_label_values(&["limit"]);
        for reason in ["error", "timeout"] {
            m.tls_handshake_failures.with_label_values(&[reason]);
        }
        for result in ["ok", "error"] {
            m.tls_reloads.with_label_values(&[result]);
        }
        for code in ["401", "403", "503", "limit"] {
            m.admin_refused.with_label_values(&[code]);
        }
        for review in ["TokenReview", "SubjectAccessReview"] {
            m.review_waits.with_label_values(&[review]);
            m.reviews_in_flight.with_label_values(&[review]);
            for outcome in ["cached", "joined", "reviewed", "error"] {
                m.reviews.with_label_values(&[review, outcome]);
            }
        }
        register(
            registry,
            [
                Box::new(m.connections.clone()) as Box<dyn Collector>,
                Box::new(m.connections_refused.clone()),
                Box::new(m.tls_handshake_failures.clone()),
                Box::new(m.tls_reloads.clone()),
                Box::new(m.keepalive_violations.clone()),
                Box::new(m.stream_limit_reached.clone()),
                Box::new(m.subscriptions_refused.clone()),
                Box::new(m.auth_refused.clone()),
                Box::new(m.reviews.clone()),
                Box::new(m.review_waits.clone()),
                Box::new(m.reviews_in_flight.clone()),
                Box::new(m.review_duration.clone()),
                Box::new(m.connections_closed.clone()),
                Box::new(m.admin_refused.clone()),
                Box::new(m.certificate_expiry.clone()),
                Box::new(m.client_ca_expiry.clone()),
            ],
        );
        m
    }

    pub fn connection_opened(&self) {
        self.connections.inc();
    }

    pub fn connection_closed(&self) {
        self.connections.dec();
    }

    pub fn connection_refused(&self, reason: &str) {
        self.connections_refused.with_label_values(&[reason]).inc();
    }

    pub fn tls_handshake_failed(&self, reason: &str) {
        self.tls_handshake_failures.with_label_values(&[reason]).inc();
    }

    pub fn tls_reloaded(&self, ok: bool) {
        self.tls_reloads
            .with_label_values(&[if ok { "ok" } else { "error" }])
            .inc();
    }

    pub fn keepalive_violation(&self) {
        self.keepalive_violations.inc();
    }

    pub fn stream_limit_reached(&self) {
        self.stream_limit_reached.inc();
    }

    pub fn subscription_refused(&self) {
        self.subscriptions_refused.inc();
    }

    pub fn auth_refused(&self, method: &str, code: tonic::Code) {
        self.auth_refused
            .with_label_values(&[method, super::labels::code_name(code)])
            .inc();
    }

    /// A `review` ("TokenReview", "SubjectAccessReview") decided: "cached", "joined", "reviewed"
    /// or "error".
    pub fn review(&self, review: &str, outcome: &str) {
        self.reviews.with_label_values(&[review, outcome]).inc();
    }

    /// A `review` waited for a free place.
    pub fn review_waited(&self, review: &str) {
        self.review_waits.with_label_values(&[review]).inc();
    }

    /// A `review` is in flight until the returned guard is dropped.
    pub fn review_started(&self, review: &str) -> InFlight {
        let gauge = self.reviews_in_flight.with_label_values(&[review]);
        gauge.inc();
        InFlight(gauge)
    }

    /// How long the API server took to answer a `review`.
    pub fn review_took(&self, review: &str, took: Duration) {
        self.review_duration
            .with_label_values(&[review])
            .observe(took.as_secs_f64());
    }

    /// The server closed a connection for `reason`.
    pub fn connection_closed_for(&self, reason: &str) {
        self.connections_closed.with_label_values(&[reason]).inc();
    }

    /// The serving certificate of `listener` expires at `expiry` (seconds since the epoch), if
    /// it could be read.
    pub fn certificate_expires(&self, listener: &str, expiry: Option<i64>) {
        if let Some(expiry) = expiry {
            self.certificate_expiry.with_label_values(&[listener]).set(expiry);
        }
    }

    /// The client CA bundle of `listener` expires at `expiry` (none: no client CA, or none that
    /// parses).
    pub fn client_ca_expires(&self, listener: &str, expiry: Option<i64>) {
        match expiry {
            Some(expiry) => self.client_ca_expiry.with_label_values(&[listener]).set(expiry),
            None => {
                let _ = self.client_ca_expiry.remove_label_values(&[listener]);
            }
        }
    }

    /// The admin endpoint refused a request with HTTP status `code`.
    pub fn admin_refused(&self, code: u16) {
        self.admin_refused.with_label_values(&[&code.to_string()]).inc();
    }

    /// An admin connection closed at once: `admin.max_connections` were open.
    pub fn admin_refused_connection(&self) {
        self.admin_refused.with_label_values(&["limit"]).inc();
    }
}

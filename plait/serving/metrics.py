"""The server's Prometheus metrics, in a registry of its own (one per app: tests and Ray Serve
replicas may hold several apps in one process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class ServerMetrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self):
        self.registry = CollectorRegistry()
        self.requests = Counter("plait_requests", "Requests answered, by endpoint and HTTP status",
                                ["endpoint", "status"], registry=self.registry)
        self.latency = Histogram("plait_request_duration_seconds", "Time from a request's arrival to its answer",
                                 ["endpoint"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.in_flight = Gauge("plait_requests_in_flight", "Requests being answered now", registry=self.registry)
        self.rows = Counter("plait_rows_predicted", "Rows predicted, by endpoint", ["endpoint"], registry=self.registry)
        self.micro_batch = Histogram("plait_micro_batch_rows", "Single-row requests per forward pass",
                                     buckets=BATCH_BUCKETS, registry=self.registry)
        self.accepted = 0
        """Prediction requests read whole (the count a drain must answer)."""
        self.answered = 0
        """Prediction requests answered, whatever the status."""

    def observe(self, endpoint: str, status: int, seconds: float) -> None:
        self.requests.labels(endpoint, str(status)).inc()
        self.latency.labels(endpoint).observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

"""A registered query's answers to a Kafka topic as well (``"output": "kafka://host:port/topic"``).

The service keeps every query's answers in its result log (:mod:`api.results`: a directory sink, numbered,
exactly once across crashes). A query registered with an ``output`` also has its **committed** answers
published to Kafka, each record keyed ``<query id>:<seq>`` with the answer's own ``seq`` — what the result
log serves at that number — and its JSON (``seq``, ``emitted_at``, ``binding``, and ``op`` for a changelog) as
the value. Delivery is **at least once** (the README's "The Kafka sink"): a consumer keeps the first record of
each key.

How nothing is lost: after each commit of the result log, the answers not handed over yet are staged in a
:class:`~obda.execution.kafka_sink.KafkaSink` under the query's checkpoint folder (durable), the handed-over
position is recorded (``kafka-output.json``, written atomically), then the staged lines are sent. A crash
before the record re-stages them from the log; a crash after it sends the staged lines again on restart. The
result log's retention never drops an answer not handed over yet. A broker that does not acknowledge fails
the query with the reason (its answers stay in the log and the staging folder); ``POST /start`` resumes it.
"""

from __future__ import annotations

import json
from pathlib import Path

from obda.execution.checkpoint import write_atomic
from obda.execution.kafka_sink import KafkaSink, is_kafka_url
from obda.errors import CheckpointError, ExecutionError

MARKER = "kafka-output.json"
STAGING = "kafka-output"
PAGE = 10_000  # answers read from the log and staged at once


def check_output(url: str | None) -> str | None:
    """``url`` as given, or an error saying what is accepted (only Kafka: the log itself is the service's output)."""
    if url is not None and not is_kafka_url(url):
        raise ExecutionError(f"output {url!r} is not a Kafka URL; write kafka://host:port/topic (the answers are "
                             "always kept by the service as well, under GET /v1/queries/{id}/results)")
    return url


class KafkaOutput:
    """Publishes a query's committed answers (:class:`api.results.ResultLog`) to one topic.

    Connects to the brokers and checks the topic when built (a :class:`~obda.errors.BrokerError` names what is
    wrong); ``folder``: the query's checkpoint folder (None: the service keeps no state, staged in memory)."""

    def __init__(self, url: str, query_id: str, folder: Path | None):
        self.url = url
        self.marker = folder / MARKER if folder is not None else None
        self.handed = 0  # answers (by seq) staged in the sink and recorded in the marker
        if self.marker is not None and self.marker.exists():
            try:
                self.handed = int(json.loads(self.marker.read_text(encoding="utf-8"))["handed"])
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise CheckpointError(f"{self.marker} cannot be read ({type(e).__name__}: {e}); it records how far "
                                      "the answers were handed to Kafka: restore it, or delete the query and "
                                      "register it again") from None
        self.sink = KafkaSink(url, query_id, folder / STAGING if folder is not None else None)
        self._recovered = False

    def publish(self, log) -> None:
        """Stage and send the answers ``log`` committed since the last call (the first call also sends what a
        previous run staged and did not send)."""
        if not self._recovered:
            self.sink.recover(self.handed)  # staged beyond the marker: dropped, staged again below
            self._recovered = True
        while self.handed < log.last_seq:
            page = log.page(after=self.handed, limit=PAGE)
            if page.gap is not None or not page.items or page.items[0]["seq"] != self.handed + 1:
                raise ExecutionError(f"kafka output {self.url}: answers {self.handed + 1}.. are no longer in the "
                                     "result log; they cannot be published (this is a bug: retention keeps them)")
            self.sink.write_lines([json.dumps(item, separators=(",", ":")) for item in page.items])
            offset = self.sink.flush()  # staged durably; its seq is the log's
            if self.marker is not None:
                self.marker.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(self.marker, json.dumps({"handed": offset}).encode())
            self.handed = offset
        self.sink.commit(self.handed)  # sent, or a BrokerError (the staged lines are kept)

    def close(self) -> None:
        self.sink.close()

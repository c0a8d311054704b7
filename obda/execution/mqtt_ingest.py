"""The MQTT ingester: subscribes to an MQTT stream's topic filters and lands each message in its ingest log.

MQTT has no offsets to replay from, so obda keeps the messages itself: one ingester per stream location
(:class:`~obda.execution.ingest_log.IngestLog`) subscribes with QoS 1 in a persistent session (MQTT 5,
clean start off, the sources file's session expiry, a fixed client id) and acknowledges a message only
after the part file holding it is durable.  The query reads the log like any folder of JSON-lines files.

* A crash before a message is landed loses nothing: it is not acknowledged, the broker keeps it (in the
  session, while the session has not expired) and sends it again when the ingester is back.
* A crash after it was landed repeats nothing: the redelivery is recognised in the log and only
  acknowledged (see :mod:`obda.execution.ingest_log` for what a repeat is).
* Messages published with QoS 0 (the broker delivers them at that QoS) are landed but cannot be
  acknowledged or redelivered: at most once.  Retained messages are not sent to the ingester (retain
  handling 2): the stream starts at the first subscription.

``ContinuousQuery.open`` starts the ingesters of its MQTT streams (:func:`start_ingesters`; shared by the
queries of one process that read the same stream, stopped with the last one).  Of several processes
whose queries read one stream, one lands the messages (it holds the log's lock); the others read the log
and take over when that process ends.  Standalone: ``python -m obda.execution.mqtt_ingest SOURCES TABLE``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import ssl
import threading
import time
from collections import deque
from pathlib import Path

from obda.errors import BrokerError
from obda.execution.ingest_log import IngestLog, Message
from obda.execution.spark_io import resolve_location
from obda.model.sources import Table

log = logging.getLogger("obda.execution.mqtt")
CONNECT_TIMEOUT = 10.0  # seconds for the broker to accept the connection and the subscriptions at start
RETRY = 1.0  # seconds between attempts to land a part again (a full disk) or to take over the log


def client_id_of(table: Table, folder: Path) -> str:
    """The fixed client id of a stream's ingester: the persistent session is the log's (its folder's)."""
    digest = hashlib.sha256(str(folder.resolve()).encode("utf-8")).hexdigest()[:12]
    return table.ingest.client_id or f"obda-{table.name[:32]}-{digest}"


class MqttIngester:
    """One MQTT stream's ingester (see the module).  :meth:`start` raises :class:`BrokerError` (located at the
    sources file's option) when the broker cannot be reached or refuses the session or a subscription."""

    def __init__(self, table: Table, base_dir: str | os.PathLike, connect_timeout: float = CONNECT_TIMEOUT):
        if table.ingest is None:
            raise ValueError(f"table {table.name!r} is not an MQTT stream")
        self.table, self.source = table, table.ingest
        self.folder = resolve_location(table, base_dir)
        self.log = IngestLog(self.folder)
        self.client_id = client_id_of(table, self.folder)
        self.connect_timeout = connect_timeout
        self._queue: deque = deque()  # (arrival time, Message), in arrival order
        self._cv = threading.Condition()
        self._ack_lock = threading.Lock()
        self._generation = 0  # counts lost connections: an acknowledgement goes to its message's connection
        self._ready = threading.Event()  # connected and subscribed (or refused: _refused says why)
        self._refused: str | None = None
        self._up = False  # connected (a loss of the connection is then worth a warning)
        self._pending_sub: int | None = None
        self._stopping = threading.Event()
        self._client = None
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    # -- the session --------------------------------------------------------------------------------
    def _password(self) -> str | None:
        src = self.source
        if src.password_env is None:
            return src.password
        value = os.environ.get(src.password_env)
        if value is None:
            raise BrokerError(f"stream {self.table.name!r}: the environment variable {src.password_env!r} "
                              "(password_env) is not set", src.at("password_env"))
        return value

    def _new_client(self):
        import paho.mqtt.client as mqtt

        src = self.source
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=self.client_id, protocol=mqtt.MQTTv5,
                        manual_ack=True)
        if src.username is not None:
            c.username_pw_set(src.username, self._password())
        if src.tls:
            c.tls_set(ca_certs=src.ca_file, certfile=src.cert_file, keyfile=src.key_file)
        c.on_connect, c.on_disconnect = self._on_connect, self._on_disconnect
        c.on_message, c.on_subscribe = self._on_message, self._on_subscribe
        c.reconnect_delay_set(1, 30)
        return c

    def _connect(self) -> None:
        """Connect and subscribe, waiting for the broker's answers; BrokerError when it cannot be used."""
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        src, name = self.source, self.table.name
        self._ready.clear()
        self._refused = None
        self._client = c = self._new_client()
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = src.session_expiry
        props.ReceiveMaximum = src.batch  # the broker sends at most a part's worth of unacknowledged messages
        try:
            c.connect(src.host, src.port, src.keepalive, clean_start=False, properties=props)
        except (OSError, ssl.SSLError) as e:
            self._client = None
            why = getattr(e, "strerror", None) or e
            raise BrokerError(f"stream {name!r}: cannot reach the MQTT broker {src.broker}: {why}; start it or fix "
                              "'broker'", src.at("broker")) from None
        c.loop_start()
        if not self._ready.wait(self.connect_timeout) or self._refused:
            why = self._refused or f"no answer within {self.connect_timeout:g} s"
            self._drop_client()
            credentials = "not authorized" in why.lower() or "bad user" in why.lower()
            at = src.at("username") if credentials else src.at("broker")
            raise BrokerError(f"stream {name!r}: the MQTT broker {src.broker} {why}", at)

    def _drop_client(self) -> None:
        c, self._client = self._client, None
        self._up = False  # a disconnection asked for: no warning (and paho does not reconnect)
        if c is not None:
            c.disconnect()
            c.loop_stop()

    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        if reason_code.is_failure:
            self._refused = f"refused the session (client id {self.client_id!r}): {reason_code}"
            self._ready.set()
            client.disconnect()
            return
        self._up = True
        if not flags.session_present and self.log.next_id > 1:
            log.warning("stream %s: the MQTT broker %s had no session for client id %r (it expired, or the broker "
                        "restarted without persistence): messages published while obda was not connected are "
                        "not in the log", self.table.name, self.source.broker, self.client_id)
        from paho.mqtt.subscribeoptions import SubscribeOptions

        opts = SubscribeOptions(qos=1, retainHandling=SubscribeOptions.RETAIN_DO_NOT_SEND)
        _, self._pending_sub = client.subscribe([(t, opts) for t in self.source.topics])

    def _on_subscribe(self, client, userdata, mid, reason_codes, properties) -> None:
        if mid != self._pending_sub:
            return
        bad = [(t, rc) for t, rc in zip(self.source.topics, reason_codes) if rc.is_failure]
        if bad:
            self._refused = "refused the subscription to " + ", ".join(f"{t!r} ({rc})" for t, rc in bad)
        self._ready.set()

    def _on_disconnect(self, client, userdata, flags, reason_code, properties) -> None:
        with self._ack_lock:  # acknowledgements of that connection's messages are not sent on the next one
            self._generation += 1
        up, self._up = self._up, False
        if up and not self._stopping.is_set():
            log.warning("stream %s: lost the MQTT broker %s (%s); reconnecting", self.table.name,
                        self.source.broker, reason_code)

    def _on_message(self, client, userdata, msg) -> None:
        m = Message(msg.topic, msg.mid, msg.payload, bool(msg.dup), msg.qos, self._generation)
        with self._cv:
            self._queue.append((time.monotonic(), m))
            if len(self._queue) == 1 or len(self._queue) >= self.source.batch:  # a part begins, or is full
                self._cv.notify()

    # -- landing ------------------------------------------------------------------------------------
    def _take(self) -> list[Message]:
        """The next part's messages: up to ``batch``, once the oldest waited ``flush_interval`` (or at stop)."""
        src = self.source
        with self._cv:
            while not self._queue and not self._stopping.is_set():
                self._cv.wait(0.5)
            if self._queue and not self._stopping.is_set():
                deadline = self._queue[0][0] + src.flush_interval
                while len(self._queue) < src.batch and not self._stopping.is_set():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cv.wait(left)
            n = min(src.batch, len(self._queue))
            return [self._queue.popleft()[1] for _ in range(n)]

    def _land(self, messages: list[Message]) -> None:
        while True:
            try:
                landed, repeats = self.log.land(messages)
                break
            except OSError as e:  # nothing acknowledged: the broker keeps the messages
                log.error("stream %s: cannot land %d message(s) in %s: %s; retrying", self.table.name,
                          len(messages), self.folder, e.strerror or e)
                if self._stopping.wait(RETRY):
                    return
        with self._ack_lock:
            for m in landed + repeats:
                if m.qos > 0 and m.generation == self._generation and self._client is not None:
                    self._client.ack(m.packet_id, m.qos)

    def _run(self, holding: bool) -> None:
        try:
            while not holding:  # another process lands the messages: take over when it ends
                if self._stopping.wait(RETRY):
                    return
                holding = self.log.acquire()
            while self._client is None and not self._stopping.is_set():
                try:
                    self._connect()
                    log.info("stream %s: took over the ingest log %s", self.table.name, self.folder)
                except BrokerError as e:
                    log.warning("%s; retrying", e)
                    self._stopping.wait(RETRY)
            while True:
                messages = self._take()
                if messages:
                    self._land(messages)
                elif self._stopping.is_set():
                    return
        except BaseException as e:  # reported through .error and the log
            self.error = e
            log.exception("stream %s: the MQTT ingester failed", self.table.name)

    def start(self) -> "MqttIngester":
        self.folder.mkdir(parents=True, exist_ok=True)
        holding = self.log.acquire()
        if holding:
            try:
                self._connect()
            except BaseException:
                self.log.release()
                raise
            log.info("stream %s: landing MQTT messages of %s from %s in %s", self.table.name,
                     ", ".join(self.source.topics), self.source.broker, self.folder)
        else:
            log.info("stream %s: another process lands the messages in %s; reading its log", self.table.name,
                     self.folder)
        self._thread = threading.Thread(target=self._run, args=(holding,), name=f"obda-mqtt-{self.table.name}",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 30) -> None:
        """Land and acknowledge what was received, then leave the session (kept by the broker) and the log."""
        self._stopping.set()
        with self._cv:
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self._drop_client()
        self.log.release()

    def status(self) -> dict:
        return {"stream": self.table.name, "client_id": self.client_id, "log": str(self.folder),
                "landed": self.log.landed, "repeats": self.log.repeats, "next_id": self.log.next_id,
                "landing": self.log._lock_fd is not None}


# -- the ingesters of a process's queries -------------------------------------------------------------
_RUNNING: dict[Path, list] = {}  # log folder -> [ingester, number of queries using it]
_RUNNING_LOCK = threading.Lock()


class Ingesters:
    """The ingesters a query started (or shares): :meth:`annotate` names a quarantined row's MQTT message."""

    def __init__(self, ingesters: list[MqttIngester]):
        self.ingesters = ingesters

    def annotate(self, record: dict) -> dict:
        """A quarantine record of a row from an ingest log, with its message's topic and id in the reason."""
        for ing in self.ingesters:
            o = ing.log.origin(record.get("file") or "", record.get("line"))
            if o is not None:
                reason = f"{record.get('reason', '')} [MQTT topic {o['topic']!r}, message {o['message']}]"
                return {**record, "reason": reason, "mqtt": o}
        return record

    def stop(self) -> None:
        with _RUNNING_LOCK:
            for ing in self.ingesters:
                entry = _RUNNING.get(ing.folder)
                if entry is None or entry[0] is not ing:
                    continue
                entry[1] -= 1
                if entry[1] == 0:
                    del _RUNNING[ing.folder]
                    ing.stop()
        self.ingesters = []

    def status(self) -> list[dict]:
        return [i.status() for i in self.ingesters]


def start_ingesters(tables, base_dir: str | os.PathLike) -> Ingesters:
    """Start (or share) the ingester of each MQTT stream among ``tables``; BrokerError if one cannot start."""
    started = Ingesters([])
    try:
        for t in tables:
            if t.ingest is None:
                continue
            folder = resolve_location(t, base_dir)
            with _RUNNING_LOCK:
                entry = _RUNNING.get(folder)
                if entry is None:
                    entry = _RUNNING[folder] = [MqttIngester(t, base_dir), 0]
                    try:
                        entry[0].start()
                    except BaseException:
                        del _RUNNING[folder]
                        raise
                entry[1] += 1
            started.ingesters.append(entry[0])
    except BaseException:
        started.stop()
        raise
    return started


def main(argv: list[str] | None = None) -> int:
    """``python -m obda.execution.mqtt_ingest SOURCES TABLE [--base-dir DIR]``: land one stream's messages
    until SIGTERM or Ctrl-C (the folder's lock makes it the only lander; a query started meanwhile reads it)."""
    import argparse
    import json
    import signal
    import sys

    from obda.errors import ObdaError
    from obda.model.sources_file import load_sources

    ap = argparse.ArgumentParser(prog="python -m obda.execution.mqtt_ingest", description=main.__doc__)
    ap.add_argument("sources")
    ap.add_argument("table")
    ap.add_argument("--base-dir", help="what the stream's location is relative to (default: the sources file's folder)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        sources = load_sources(args.sources)
        table = sources.table(args.table)
        if table is None or table.ingest is None:
            print(f"{args.sources}: no MQTT stream {args.table!r}", file=sys.stderr)
            return 2
        ing = MqttIngester(table, args.base_dir or Path(args.sources).resolve().parent).start()
    except ObdaError as e:
        print(str(e), file=sys.stderr)
        return 2
    print(json.dumps({"started": ing.status()}), flush=True)
    try:
        while not stop.wait(0.2) and ing.error is None:
            pass
    except KeyboardInterrupt:
        pass
    ing.stop()
    print(json.dumps({"stopped": ing.status()}), flush=True)
    return 1 if ing.error is not None else 0


if __name__ == "__main__":
    raise SystemExit(main())

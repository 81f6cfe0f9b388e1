#!/usr/bin/env python3
"""Record real Pulsar binary-protocol traffic between the official client and a broker.

Run with the project venv (made by scripts/setup):

    .venv/bin/python scripts/capture/capture.py                 # spawns pulsar-lite
    .venv/bin/python scripts/capture/capture.py --broker 127.0.0.1:6650 --out DIR
    .venv/bin/python scripts/capture/capture.py --only produce_plain keepalive

How every connection is recorded (the "lookup through the proxy" problem)
------------------------------------------------------------------------
A broker answers LOOKUP with its own advertised URL, and the client then
connects there. With a proxy on another port that second connection would
bypass the proxy. Bytes are never rewritten here. Instead the client runs in a
private, empty network namespace in which the *only* listener is the recording
proxy, bound to exactly the address the broker advertises (127.0.0.1:PORT for
pulsar-lite, which advertises its --addr). The proxy forwards each accepted
connection to the real broker, which listens on the same address in the
machine's own namespace. So the service URL and every looked-up URL reach the
proxy, and a connection to any other address would simply be refused: nothing
can go round the recorder.

Mechanics (Linux, needs CAP_SYS_ADMIN, i.e. root): the main thread calls
unshare(CLONE_NEWNET), brings up `lo`, binds the listener, and setns()es back to
the original namespace to start the proxy thread (whose upstream sockets thus
live in the original namespace). It then setns()es into the private namespace
again and creates every pulsar.Client there, so all of the client's C++ threads
inherit the private namespace.

Output, per scenario S and per TCP connection N (numbered in accept order from 0):
    S.connN.c2b.bin   every byte the client sent on that connection
    S.connN.b2c.bin   every byte the broker sent on that connection
plus manifest.json describing what each scenario asked the client to do.
"""
from __future__ import annotations

import argparse
import asyncio
import ctypes
import datetime
import fcntl
import importlib.metadata
import json
import logging
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pulsar

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "tests" / "data" / "captures"
NAMESPACE = "persistent://public/default"
HANG_GUARD_MS = 10_000  # receive timeouts: only there so a broken run cannot hang

BROKER_CONFIG = """keep_alive_interval_secs = 1
connection_liveness_check_timeout_secs = 10
[metrics]
enabled = false
"""

# --------------------------------------------------------------------------
# network namespaces
# --------------------------------------------------------------------------
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)} (recording needs root / CAP_SYS_ADMIN)")


def _unshare_net() -> None:
    _check(_libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")


def _setns(fd: int) -> None:
    _check(_libc.setns(fd, CLONE_NEWNET), "setns")


def _bring_up_loopback() -> None:
    SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(s, SIOCGIFFLAGS, req)[:18])[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


class ClientNamespace:
    """A private network namespace for the client; the calling thread switches between the two."""

    def __init__(self) -> None:
        self.host_fd = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        _unshare_net()
        self.client_fd = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        _bring_up_loopback()
        self.inside = True

    def enter(self) -> None:
        _setns(self.client_fd)
        self.inside = True

    def leave(self) -> None:
        _setns(self.host_fd)
        self.inside = False

    def close(self) -> None:
        if self.inside:
            self.leave()
        os.close(self.client_fd)
        os.close(self.host_fd)


# --------------------------------------------------------------------------
# recording proxy
# --------------------------------------------------------------------------
class Conn:
    def __init__(self, index: int) -> None:
        self.index = index
        self.c2b = bytearray()
        self.b2c = bytearray()
        self.done = threading.Event()


class RecordingProxy:
    """Forwards every accepted connection to the broker and keeps both byte streams verbatim."""

    def __init__(self, listener: socket.socket, upstream: tuple[str, int]) -> None:
        self.listener = listener
        self.upstream = upstream
        self.loop = asyncio.new_event_loop()
        self.lock = threading.Lock()
        self.conns: list[Conn] = []
        self.accepting = False
        self.server = None
        started = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(started,), name="recording-proxy", daemon=True)
        self.thread.start()
        if not started.wait(10):
            raise RuntimeError("proxy did not start")

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)

        async def start() -> None:
            self.server = await asyncio.start_server(self._handle, sock=self.listener)
            started.set()

        self.loop.run_until_complete(start())
        self.loop.run_forever()

    async def _handle(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        with self.lock:
            if not self.accepting:
                cwriter.close()
                return
            conn = Conn(len(self.conns))
            self.conns.append(conn)
        try:
            breader, bwriter = await asyncio.open_connection(*self.upstream)
        except OSError:
            cwriter.close()
            conn.done.set()
            raise

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, buf: bytearray) -> None:
            try:
                while True:
                    data = await src.read(65536)
                    if not data:
                        break
                    buf += data
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                try:
                    if dst.can_write_eof():
                        dst.write_eof()
                except (ConnectionError, OSError):
                    pass

        await asyncio.gather(pump(creader, bwriter, conn.c2b), pump(breader, cwriter, conn.b2c))
        for w in (cwriter, bwriter):
            w.close()
        conn.done.set()

    def begin(self) -> None:
        with self.lock:
            self.conns = []
            self.accepting = True

    def end(self, timeout: float = 15.0) -> list[Conn]:
        deadline = time.monotonic() + timeout
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            if not c.done.wait(max(0.0, deadline - time.monotonic())):
                raise RuntimeError(f"connection {c.index} still open {timeout}s after client.close()")
        with self.lock:
            self.accepting = False
            if len(self.conns) != len(conns):
                raise RuntimeError("a connection opened after the client was closed")
            return list(self.conns)

    def stop(self) -> None:
        async def shutdown() -> None:
            self.server.close()
            await self.server.wait_closed()

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


# --------------------------------------------------------------------------
# broker
# --------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(host: str, port: int, proc: subprocess.Popen | None, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"broker exited early with code {proc.returncode}")
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"broker not listening on {host}:{port}")


def pulsar_lite_binary() -> str:
    import pulsar_lite

    return os.path.join(os.path.dirname(pulsar_lite.__file__), "bin", "pulsar-lite")


# --------------------------------------------------------------------------
# scenario helpers
# --------------------------------------------------------------------------
def mid(m: pulsar.MessageId) -> dict:
    return {
        "ledger_id": m.ledger_id(),
        "entry_id": m.entry_id(),
        "batch_index": m.batch_index(),
        "partition": m.partition(),
    }


def received(msg: pulsar.Message) -> dict:
    return {
        "payload": msg.data().decode(),
        "key": msg.partition_key() or None,
        "properties": dict(msg.properties()),
        "event_timestamp": msg.event_timestamp(),
        "publish_timestamp": msg.publish_timestamp(),
        "redelivery_count": msg.redelivery_count(),
        "message_id": mid(msg.message_id()),
        "topic": msg.topic_name(),
    }


class Scenario:
    """Collects what a scenario asked the client to do, for manifest.json."""

    def __init__(self, name: str, topic: str, description: str) -> None:
        self.name = name
        self.info: dict = {"description": description, "topic": topic}
        self.actions: list[dict] = []

    def act(self, action: str, **details) -> None:
        self.actions.append({"action": action, **details})


def normalized(m: dict) -> dict:
    """Every message record has the same keys; None = not set (sequence_id None: client-assigned)."""
    return {
        "payload": m["payload"],
        "key": m.get("key"),
        "properties": m.get("properties") or {},
        "event_timestamp": m.get("event_timestamp"),
        "sequence_id": m.get("sequence_id"),
        **{k: v for k, v in m.items() if k not in ("payload", "key", "properties", "event_timestamp", "sequence_id")},
    }


def produce(sc: Scenario, producer: pulsar.Producer, messages: list[dict]) -> list[dict]:
    """Synchronous sends; each message dict: payload, key, properties, event_timestamp, sequence_id."""
    out = []
    for i, m in enumerate(messages):
        kwargs = {}
        if m.get("key") is not None:
            kwargs["partition_key"] = m["key"]
        if m.get("properties"):
            kwargs["properties"] = m["properties"]
        if m.get("event_timestamp") is not None:
            kwargs["event_timestamp"] = m["event_timestamp"]
        if m.get("sequence_id") is not None:
            kwargs["sequence_id"] = m["sequence_id"]
        msg_id = producer.send(m["payload"].encode(), **kwargs)
        rec = {**normalized(m), "message_id": mid(msg_id)}
        out.append(rec)
        sc.act("send", message=i, message_id=rec["message_id"])
    return out


def produce_async_then_flush(sc: Scenario, producer: pulsar.Producer, messages: list[dict]) -> list[dict]:
    results: list = [None] * len(messages)
    done = threading.Semaphore(0)

    def cb_for(i: int):
        def cb(res, msg_id):
            results[i] = (res.name, mid(msg_id) if res == pulsar.Result.Ok else None)
            done.release()

        return cb

    for i, m in enumerate(messages):
        kwargs = {}
        if m.get("key") is not None:
            kwargs["partition_key"] = m["key"]
        if m.get("properties"):
            kwargs["properties"] = m["properties"]
        if m.get("event_timestamp") is not None:
            kwargs["event_timestamp"] = m["event_timestamp"]
        if m.get("sequence_id") is not None:
            kwargs["sequence_id"] = m["sequence_id"]
        producer.send_async(m["payload"].encode(), cb_for(i), **kwargs)
        sc.act("send_async", message=i)
    producer.flush()
    sc.act("flush")
    for _ in messages:
        if not done.acquire(timeout=HANG_GUARD_MS / 1000):
            raise RuntimeError("send callback missing")
    out = []
    for m, (res, msg_id) in zip(messages, results):
        if res != "Ok":
            raise RuntimeError(f"send failed: {res}")
        out.append({**normalized(m), "message_id": msg_id})
    return out


def producer_settings(**kw) -> dict:
    base = dict(batching_enabled=False, compression_type=pulsar.CompressionType.NONE)
    base.update(kw)
    return base


def describe_producer(name: str, settings: dict) -> dict:
    d = {"producer_name": name}
    for k, v in settings.items():
        d[k] = v.name if hasattr(v, "name") else v
    return d


def compressible(prefix: str, size: int = 300) -> str:
    filler = "the quick brown fox jumps over the lazy dog; "
    text = prefix + " " + filler * (size // len(filler) + 1)
    return text[:size]


# --------------------------------------------------------------------------
# scenarios: each gets (client, topic-of-its-own, Scenario) and returns nothing
# --------------------------------------------------------------------------
EVENT_TS0 = 1_700_000_000_000


def s_produce_plain(client: pulsar.Client, topic: str, sc: Scenario) -> None:
    settings = producer_settings()
    name = "capture-produce-plain"
    sc.info["producer"] = describe_producer(name, settings)
    p = client.create_producer(topic, producer_name=name, **settings)
    sc.act("create_producer", producer_name=name)
    msgs = [
        {
            "payload": f"plain message {i}",
            "key": f"key-{i}",
            "properties": {"k1": "v1", "k2": "v2"},
            "event_timestamp": EVENT_TS0 + i,
            "sequence_id": 100 + i,
        }
        for i in range(3)
    ]
    sc.info["messages"] = produce(sc, p, msgs)
    p.close()
    sc.act("close_producer")


def s_produce_batched(client: pulsar.Client, topic: str, sc: Scenario) -> None:
    settings = producer_settings(
        batching_enabled=True,
        batching_max_messages=100,
        batching_max_publish_delay_ms=60_000,  # only flush() sends the batch
        batching_type=pulsar.BatchingType.Default,
    )
    name = "capture-produce-batched"
    sc.info["producer"] = describe_producer(name, settings)
    p = client.create_producer(topic, producer_name=name, **settings)
    sc.act("create_producer", producer_name=name)
    msgs = [
        {"payload": "batched message 0", "key": "key-a", "properties": {"idx": "0", "kind": "first"}},
        {"payload": "batched message 1"},
        {"payload": "batched message 2", "key": "key-b"},
        {"payload": "batched message 3", "properties": {"idx": "3"}, "event_timestamp": EVENT_TS0 + 3},
        {"payload": "batched message 4", "key": "key-a", "properties": {"idx": "4"}},
    ]
    sc.info["messages"] = produce_async_then_flush(sc, p, msgs)
    p.close()
    sc.act("close_producer")


def make_compressed(ctype: pulsar.CompressionType, label: str):
    def run(client: pulsar.Client, topic: str, sc: Scenario) -> None:
        settings = producer_settings(
            batching_enabled=True,
            batching_max_messages=100,
            batching_max_publish_delay_ms=60_000,
            compression_type=ctype,
        )
        name = f"capture-produce-{label}"
        sc.info["producer"] = describe_producer(name, settings)
        p = client.create_producer(topic, producer_name=name, **settings)
        sc.act("create_producer", producer_name=name)
        msgs = [{"payload": compressible(f"{label} message {i}:")} for i in range(4)]
        sc.info["messages"] = produce_async_then_flush(sc, p, msgs)
        p.close()
        sc.act("close_producer")

    return run


def _seed(client, topic, sc, prefix, keys=None, n=3, name=None) -> list[dict]:
    """Produce n plain (unbatched) messages on the scenario's topic before consuming."""
    name = name or f"capture-{sc.name.replace('_', '-')}-producer"
    settings = producer_settings()
    sc.info["producer"] = describe_producer(name, settings)
    p = client.create_producer(topic, producer_name=name, **settings)
    sc.act("create_producer", producer_name=name)
    msgs = []
    for i in range(n):
        m = {"payload": f"{prefix} {i}", "event_timestamp": EVENT_TS0 + i}
        if keys:
            m["key"] = keys[i]
        msgs.append(m)
    out = produce(sc, p, msgs)
    p.close()
    sc.act("close_producer")
    sc.info["messages"] = out
    return out


def _consumer_info(sc, sub, ctype, name, **extra) -> None:
    sc.info.setdefault("consumers", []).append(
        {
            "subscription": sub,
            "subscription_type": ctype.name,
            "consumer_name": name,
            "initial_position": "Earliest",
            **extra,
        }
    )


def s_consume_shared(client: pulsar.Client, topic: str, sc: Scenario) -> None:
    _seed(client, topic, sc, "shared message")
    sub, cname = "capture-shared-sub", "capture-shared-consumer"
    _consumer_info(sc, sub, pulsar.ConsumerType.Shared, cname, negative_ack_redelivery_delay_ms=100)
    c = client.subscribe(
        topic,
        sub,
        consumer_type=pulsar.ConsumerType.Shared,
        consumer_name=cname,
        initial_position=pulsar.InitialPosition.Earliest,
        negative_ack_redelivery_delay_ms=100,
    )
    sc.act("subscribe", subscription=sub)
    got = []
    for _ in range(3):
        m = c.receive(timeout_millis=HANG_GUARD_MS)
        got.append(m)
        sc.act("receive", **received(m))
    c.acknowledge(got[0])
    sc.act("acknowledge", payload=got[0].data().decode())
    c.negative_acknowledge(got[1])
    sc.act("negative_acknowledge", payload=got[1].data().decode())
    c.acknowledge(got[2])
    sc.act("acknowledge", payload=got[2].data().decode())
    again = c.receive(timeout_millis=HANG_GUARD_MS)
    sc.act("receive", **received(again))
    if again.data() != got[1].data() or again.redelivery_count() != 1:
        raise RuntimeError(f"unexpected redelivery {again.data()!r} count={again.redelivery_count()}")
    c.acknowledge(again)
    sc.act("acknowledge", payload=again.data().decode())
    c.close()
    sc.act("close_consumer")


def s_consume_exclusive_cumulative(client: pulsar.Client, topic: str, sc: Scenario) -> None:
    _seed(client, topic, sc, "exclusive message", n=4)
    sub, cname = "capture-exclusive-sub", "capture-exclusive-consumer"
    _consumer_info(sc, sub, pulsar.ConsumerType.Exclusive, cname)
    c = client.subscribe(
        topic, sub, consumer_type=pulsar.ConsumerType.Exclusive, consumer_name=cname,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    sc.act("subscribe", subscription=sub)
    last = None
    for _ in range(4):
        last = c.receive(timeout_millis=HANG_GUARD_MS)
        sc.act("receive", **received(last))
    c.acknowledge_cumulative(last)
    sc.act("acknowledge_cumulative", payload=last.data().decode(), message_id=mid(last.message_id()))
    c.close()
    sc.act("close_consumer")


def s_consume_failover(client: pulsar.Client, topic: str, sc: Scenario) -> None:
    _seed(client, topic, sc, "failover message")
    sub = "capture-failover-sub"
    names = ["capture-failover-a", "capture-failover-b"]
    _consumer_info(sc, sub, pulsar.ConsumerType.Failover, names[0])
    a = client.subscribe(
        topic, sub, consumer_type=pulsar.ConsumerType.Failover, consumer_name=names[0],
        initial_position=pulsar.InitialPosition.Earliest,
    )
    sc.act("subscribe", subscription=sub, consumer_name=names[0])
    for _ in range(3):
        m = a.receive(timeout_millis=HANG_GUARD_MS)
        sc.act("receive", consumer_name=names[0], **received(m))
        a.acknowledge(m)
        sc.act("acknowledge", consumer_name=names[0], payload=m.data().decode())
    # A second consumer on the same Failover subscription (receives nothing here).
    _consumer_info(sc, sub, pulsar.ConsumerType.Failover, names[1])
    b = client.subscribe(
        topic, sub, consumer_type=pulsar.ConsumerType.Failover, consumer_name=names[1],
        initial_position=pulsar.InitialPosition.Earliest,
    )
    sc.act("subscribe", subscription=sub, consumer_name=names[1])
    b.close()
    sc.act("close_consumer", consumer_name=names[1])
    a.close()
    sc.act("close_consumer", consumer_name=names[0])


def s_consume_key_shared(client: pulsar.Client, topic: str, sc: Scenario) -> None:
    _seed(client, topic, sc, "key-shared message", keys=["alpha", "beta", "alpha", "gamma"], n=4)
    sub, cname = "capture-key-shared-sub", "capture-key-shared-consumer"
    _consumer_info(sc, sub, pulsar.ConsumerType.KeyShared, cname, key_shared_policy="default (AutoSplit)")
    c = client.subscribe(
        topic, sub, consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=cname,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    sc.act("subscribe", subscription=sub)
    for _ in range(4):
        m = c.receive(timeout_millis=HANG_GUARD_MS)
        sc.act("receive", **received(m))
        c.acknowledge(m)
        sc.act("acknowledge", payload=m.data().decode())
    c.close()
    sc.act("close_consumer")


def s_consume_batched_lz4(client: pulsar.Client, topic: str, sc: Scenario) -> None:
    """Broker-sent MESSAGE carrying an LZ4-compressed batch (extra scenario)."""
    settings = producer_settings(
        batching_enabled=True,
        batching_max_messages=100,
        batching_max_publish_delay_ms=60_000,
        compression_type=pulsar.CompressionType.LZ4,
    )
    name = "capture-consume-batched-lz4-producer"
    sc.info["producer"] = describe_producer(name, settings)
    p = client.create_producer(topic, producer_name=name, **settings)
    sc.act("create_producer", producer_name=name)
    msgs = [{"payload": compressible(f"batched-lz4 {i}:", 120)} for i in range(4)]
    msgs[0].update(key="key-x", properties={"p": "0"})
    msgs[2].update(key="key-y", event_timestamp=EVENT_TS0 + 2)
    sc.info["messages"] = produce_async_then_flush(sc, p, msgs)
    p.close()
    sc.act("close_producer")
    sub, cname = "capture-batched-lz4-sub", "capture-batched-lz4-consumer"
    _consumer_info(sc, sub, pulsar.ConsumerType.Exclusive, cname, batch_index_ack_enabled=False)
    c = client.subscribe(
        topic, sub, consumer_type=pulsar.ConsumerType.Exclusive, consumer_name=cname,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    sc.act("subscribe", subscription=sub)
    for _ in range(4):
        m = c.receive(timeout_millis=HANG_GUARD_MS)
        sc.act("receive", **received(m))
        c.acknowledge(m)
        sc.act("acknowledge", message_id=mid(m.message_id()))
    c.close()
    sc.act("close_consumer")


def s_reader_and_seek(client: pulsar.Client, topic: str, sc: Scenario) -> None:
    seeded = _seed(client, topic, sc, "seek message")
    # Reader from the earliest message.
    reader_name = "capture-reader"
    sc.info["reader"] = {"reader_name": reader_name, "start_message_id": "earliest",
                         "subscription": "chosen by the client: 'reader-' + 10 random hex digits, non-durable"}
    r = client.create_reader(topic, pulsar.MessageId.earliest, reader_name=reader_name)
    sc.act("create_reader", start_message_id="earliest")
    n = 0
    while True:
        avail = r.has_message_available()
        sc.act("has_message_available", result=avail)
        if not avail:
            break
        m = r.read_next(timeout_millis=HANG_GUARD_MS)
        sc.act("read_next", **received(m))
        n += 1
    if n != len(seeded):
        raise RuntimeError(f"reader read {n} messages")
    r.close()
    sc.act("close_reader")

    # Consumer: receive all, get_last_message_id, seek by message id, seek by publish
    # time, unsubscribe. pulsar-lite 0.2.0 answers SEEK with SUCCESS and moves the
    # cursor, but (unlike Apache Pulsar, which disconnects the consumer so that it
    # re-subscribes) neither closes the consumer nor re-dispatches; so after each
    # seek the consumer is closed and re-subscribed, which reads from the reset
    # cursor on either broker.
    sub, cname = "capture-seek-sub", "capture-seek-consumer"
    _consumer_info(sc, sub, pulsar.ConsumerType.Exclusive, cname)

    def subscribe():
        c = client.subscribe(
            topic, sub, consumer_type=pulsar.ConsumerType.Exclusive, consumer_name=cname,
            initial_position=pulsar.InitialPosition.Earliest,
        )
        sc.act("subscribe", subscription=sub)
        return c

    def recv(c):
        m = c.receive(timeout_millis=HANG_GUARD_MS)
        sc.act("receive", **received(m))
        return m

    c = subscribe()
    got = [recv(c) for _ in range(3)]
    last = c.get_last_message_id()
    sc.act("get_last_message_id", message_id=mid(last))
    # Seek to the first message's id. (MessageId.earliest, i.e. ledger/entry -1 as
    # u64::MAX, makes pulsar-lite 0.2.0 drop the connection with "out of range
    # integral type conversion", so a concrete id is used.)
    first = got[0].message_id()
    c.seek(first)
    sc.act("seek", target="message_id", message_id=mid(first))
    c.close()
    sc.act("close_consumer")
    c = subscribe()
    m = recv(c)
    if m.data() != got[0].data():
        raise RuntimeError(f"after seek to first id got {m.data()!r}")
    ts = got[2].publish_timestamp()
    c.seek(ts)
    sc.act("seek", target="publish_time", timestamp_ms=ts)
    c.close()
    sc.act("close_consumer")
    c = subscribe()
    m = recv(c)
    if m.data() != got[2].data():
        raise RuntimeError(f"after seek to publish time got {m.data()!r}")
    c.unsubscribe()
    sc.act("unsubscribe", subscription=sub)
    c.close()
    sc.act("close_consumer")


def s_partitioned_lookup(client: pulsar.Client, topic: str, sc: Scenario) -> None:
    parts = client.get_topic_partitions(topic)
    sc.act("get_topic_partitions", result=parts)
    name = "capture-partitioned-lookup"
    settings = producer_settings()
    sc.info["producer"] = describe_producer(name, settings)
    p = client.create_producer(topic, producer_name=name, **settings)
    sc.act("create_producer", producer_name=name)
    sc.info["messages"] = produce(sc, p, [{"payload": "after lookup"}])
    p.close()
    sc.act("close_producer")


def make_keepalive(hold_secs: float):
    def run(client: pulsar.Client, topic: str, sc: Scenario) -> None:
        name = "capture-keepalive"
        settings = producer_settings()
        sc.info["producer"] = describe_producer(name, settings)
        p = client.create_producer(topic, producer_name=name, **settings)
        sc.act("create_producer", producer_name=name)
        time.sleep(hold_secs)
        sc.act("idle", seconds=hold_secs)
        p.close()
        sc.act("close_producer")

    return run


def scenarios(keepalive_secs: float) -> dict:
    C = pulsar.CompressionType
    return {
        "produce_plain": (s_produce_plain, "non-batched producer, 3 messages with key, properties, event time, explicit sequence ids"),
        "produce_batched": (s_produce_batched, "batching producer, 5 send_async then flush -> one batch"),
        "produce_lz4": (make_compressed(C.LZ4, "lz4"), "batching + LZ4, 4 compressible messages"),
        "produce_zlib": (make_compressed(C.ZLib, "zlib"), "batching + ZLIB, 4 compressible messages"),
        "produce_zstd": (make_compressed(C.ZSTD, "zstd"), "batching + ZSTD, 4 compressible messages"),
        "produce_snappy": (make_compressed(C.SNAPPY, "snappy"), "batching + SNAPPY, 4 compressible messages"),
        "consume_shared": (s_consume_shared, "Shared consumer: ack, negative ack (100 ms) and redelivery"),
        "consume_exclusive_cumulative": (s_consume_exclusive_cumulative, "Exclusive consumer, cumulative ack"),
        "consume_failover": (s_consume_failover, "Failover consumer receives and acks; a second consumer joins and leaves"),
        "consume_key_shared": (s_consume_key_shared, "Key_Shared consumer receives and acks keyed messages"),
        "reader_and_seek": (s_reader_and_seek, "reader from earliest; consumer get_last_message_id, seek to first message id, seek by publish time, unsubscribe"),
        "partitioned_lookup": (s_partitioned_lookup, "get_topic_partitions then a producer (partitioned metadata + lookup)"),
        "keepalive": (make_keepalive(keepalive_secs), f"producer connection idle {keepalive_secs}s: broker PING, client PONG"),
        # extra: a broker-sent batch
        "consume_batched_lz4": (s_consume_batched_lz4, "LZ4 batch produced, then consumed by an Exclusive consumer (MESSAGE with a compressed batch), individual acks"),
    }


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------
def parse_addr(s: str) -> tuple[str, int]:
    host, _, port = s.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {s!r}")
    return host, int(port)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--broker", type=parse_addr, metavar="HOST:PORT",
                    help="record against this already-running broker (it must advertise this same "
                         "HOST:PORT in lookups) instead of spawning pulsar-lite")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    ap.add_argument("--only", nargs="+", metavar="SCENARIO", help="run only these scenarios")
    ap.add_argument("--topic-suffix", default=None,
                    help="appended to every topic name (default: none with pulsar-lite, a timestamp with --broker)")
    ap.add_argument("--keepalive-secs", type=float, default=2.5, help="idle time in the keepalive scenario")
    args = ap.parse_args()

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    client_logger = logging.getLogger("pulsar-client")
    client_logger.setLevel(logging.WARNING)

    all_scenarios = scenarios(args.keepalive_secs)
    chosen = args.only or list(all_scenarios)
    for n in chosen:
        if n not in all_scenarios:
            ap.error(f"unknown scenario {n}; known: {', '.join(all_scenarios)}")
    suffix = args.topic_suffix
    if suffix is None:
        suffix = "" if args.broker is None else "-" + time.strftime("%Y%m%d%H%M%S")

    tmp = Path(tempfile.mkdtemp(prefix="pulsar-capture-"))
    broker_proc = None
    ns = None
    proxy = None
    keep_tmp = False
    log = None
    try:
        if args.broker is None:
            host, port = "127.0.0.1", free_port()
            (tmp / "cfg.toml").write_text(BROKER_CONFIG)
            log = open(tmp / "broker.log", "wb")
            broker_proc = subprocess.Popen(
                [pulsar_lite_binary(), "--addr", f"{host}:{port}", "--db-path", str(tmp / "db"),
                 "--config", str(tmp / "cfg.toml"), "--log-level", "warn"],
                stdout=log, stderr=subprocess.STDOUT,
            )
            broker_desc = {"kind": "pulsar-lite", "version": importlib.metadata.version("pulsar-lite"),
                           "config_toml": BROKER_CONFIG}
        else:
            host, port = args.broker
            broker_desc = {"kind": "external", "address": f"{host}:{port}"}
        ip = socket.gethostbyname(host)
        if not ip.startswith("127."):
            raise SystemExit(f"--broker must be a loopback address (got {host} -> {ip})")
        wait_listening(ip, port, broker_proc)

        # Client namespace: the proxy listens there on the broker's own address.
        ns = ClientNamespace()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((ip, port))
        listener.listen(64)
        ns.leave()
        proxy = RecordingProxy(listener, (ip, port))
        ns.enter()

        args.out.mkdir(parents=True, exist_ok=True)
        manifest_path = args.out / "manifest.json"
        manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() and args.only else {}
        manifest.update({
            "generated_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "client": {"pypi": "pulsar-client", "version": importlib.metadata.version("pulsar-client")},
            "broker": broker_desc,
            "files": "per scenario S and TCP connection N (accept order): S.connN.c2b.bin = client->broker bytes, "
                     "S.connN.b2c.bin = broker->client bytes, verbatim",
        })
        manifest.setdefault("scenarios", {})
        service_url = f"pulsar://{host}:{port}"

        for name in chosen:
            fn, desc = all_scenarios[name]
            topic = f"{NAMESPACE}/capture-{name.replace('_', '-')}{suffix}"
            sc = Scenario(name, topic, desc)
            sc.info["service_url"] = service_url  # pulsar-lite advertises this same URL in LOOKUP_RESPONSE
            for old in args.out.glob(f"{name}.conn*.bin"):
                old.unlink()
            proxy.begin()
            client = pulsar.Client(service_url, operation_timeout_seconds=15, logger=client_logger)
            try:
                fn(client, topic, sc)
            except BaseException:
                client.close()
                keep_tmp = True
                dump = tmp / f"failed-{name}"
                dump.mkdir()
                try:
                    partial = proxy.end()
                except RuntimeError:
                    partial = list(proxy.conns)
                for c in partial:
                    (dump / f"{name}.conn{c.index}.c2b.bin").write_bytes(bytes(c.c2b))
                    (dump / f"{name}.conn{c.index}.b2c.bin").write_bytes(bytes(c.b2c))
                print(f"{name} FAILED; partial capture in {dump}, broker log in {tmp}", file=sys.stderr)
                raise
            client.close()
            sc.act("client_close")
            conns = proxy.end()
            files = []
            for c in conns:
                c2b = f"{name}.conn{c.index}.c2b.bin"
                b2c = f"{name}.conn{c.index}.b2c.bin"
                (args.out / c2b).write_bytes(bytes(c.c2b))
                (args.out / b2c).write_bytes(bytes(c.b2c))
                files.append({"connection": c.index, "c2b": c2b, "c2b_bytes": len(c.c2b),
                              "b2c": b2c, "b2c_bytes": len(c.b2c)})
            sc.info["actions"] = sc.actions
            sc.info["connections"] = files
            manifest["scenarios"][name] = sc.info
            print(f"{name}: {len(conns)} connection(s), "
                  f"{sum(f['c2b_bytes'] for f in files)} B c2b, {sum(f['b2c_bytes'] for f in files)} B b2c")

        manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
        return 0
    finally:
        if ns is not None:
            ns.close()
        if proxy is not None:
            proxy.stop()
        if broker_proc is not None:
            broker_proc.terminate()
            try:
                broker_proc.wait(10)
            except subprocess.TimeoutExpired:
                broker_proc.kill()
                broker_proc.wait()
        if log is not None:
            log.close()
        if not keep_tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""`transdec serve` facing the network: API keys (HTTP, OpenAI's client, the WebSocket's three forms), request ids and
one access log line per request, metrics per key and status, per-key limits, slow and stalled uploads, idle
streams, the bound on a request's boost weights and the warning for an open server on a public address."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import soundfile

fastapi = pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")
websockets_sync = pytest.importorskip("websockets.sync.client")
from websockets.exceptions import ConnectionClosed  # noqa: E402

from test_serve import LOGIC, LOGIC_TEXT, MAKING, LiveServer, parse_metrics, stream_file, wait_until  # noqa: E402
from transdec import load_model  # noqa: E402
from transdec.serve import ServeOptions, create_app  # noqa: E402
from transdec.serve.auth import ApiKeys  # noqa: E402
from transdec.serve.server import is_loopback  # noqa: E402
from transdec.streaming import StreamingOptions  # noqa: E402

KEYS = ApiKeys.gather(["alice:sk-alice-123", "bob:sk-bob-456"])


@pytest.fixture(scope="module")
def model():
    return load_model("tiny-en-rnnt")


@pytest.fixture(scope="module")
def guarded(model):
    """A server that takes two keys, one request or stream per key at a time, and short timeouts."""
    options = ServeOptions(model_name="tiny-en-rnnt", api_keys=KEYS, max_per_key=1, log_format="json")
    live = LiveServer(create_app(model, options))
    yield live
    live.stop()


def post(url: str, key: str | None = None, path: str = LOGIC, **headers: str) -> httpx.Response:
    if key is not None:
        headers["authorization"] = f"Bearer {key}"
    with open(path, "rb") as f:
        return httpx.post(f"{url}/v1/audio/transcriptions", files={"file": f}, headers=headers, timeout=60)


def test_requests_need_a_key_as_openai_s_clients_send_it(guarded):
    response = post(guarded.url)
    assert response.status_code == 401 and response.headers["www-authenticate"].startswith("Bearer")
    assert response.json()["error"]["code"] == "invalid_api_key" and "no API key" in response.json()["error"]["message"]
    assert post(guarded.url, "sk-mallory").json()["error"]["message"] == "the API key is not one this server takes"
    with pytest.raises(openai.AuthenticationError):
        with open(LOGIC, "rb") as f:
            guarded.client().audio.transcriptions.create(model="x", file=f)  # the test client's key is "x"
    client = openai.OpenAI(base_url=f"{guarded.url}/v1", api_key="sk-alice-123", max_retries=0)
    with open(LOGIC, "rb") as f:
        assert client.audio.transcriptions.create(model="x", file=f).text == LOGIC_TEXT
    assert httpx.get(f"{guarded.url}/health").status_code == 200  # open: load balancers probe it
    assert httpx.get(f"{guarded.url}/metrics").status_code == 401
    assert httpx.get(f"{guarded.url}/docs").status_code == 401
    assert httpx.get(f"{guarded.url}/metrics", headers={"authorization": "Bearer sk-bob-456"}).status_code == 200


def test_websocket_streams_take_the_key_as_a_header_a_query_or_a_subprotocol(guarded):
    url = guarded.url.replace("http", "ws") + "/v1/audio/stream"
    with websockets_sync.connect(url) as ws:
        assert "no API key" in json.loads(ws.recv())["message"]
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv()
    assert closed.value.rcvd.code == 1008

    def stream(**connect) -> list[dict]:
        audio, rate = soundfile.read(LOGIC, dtype="int16")
        with websockets_sync.connect(url + connect.pop("query", ""), **connect) as ws:
            ws.send(json.dumps({"sample_rate": rate}))
            ws.send(audio.tobytes())
            ws.send(json.dumps({"type": "end"}))
            return [json.loads(message) for message in ws], ws.subprotocol

    for connect in ({"additional_headers": {"Authorization": "Bearer sk-alice-123"}}, {"query": "?api_key=sk-bob-456"},
                    {"subprotocols": ["transdec", "bearer.sk-alice-123"]}):
        messages, subprotocol = stream(**connect)
        assert messages[-1] == {"type": "done"} and any(m["type"] == "final" for m in messages), connect
        assert subprotocol == ("transdec" if "subprotocols" in connect else None)  # the key is never echoed


def test_every_response_has_a_request_id_and_one_log_line_without_the_key(guarded, caplog):
    with caplog.at_level(logging.INFO, logger="transdec.serve.access"):
        response = post(guarded.url, "sk-alice-123", **{"x-request-id": "client-id-42"})
        assert response.headers["x-request-id"] == "client-id-42"
        refused = post(guarded.url, "sk-wrong")
        generated = refused.headers["x-request-id"]
        unusable = post(guarded.url, "sk-bob-456", **{"x-request-id": "an id, with spaces"})
        assert len(generated) == 32 and len(unusable.headers["x-request-id"]) == 32
        wait_until(lambda: len([r for r in caplog.records if r.name == "transdec.serve.access"]) >= 3)
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "transdec.serve.access"]
    ok = next(line for line in lines if line["id"] == "client-id-42")
    assert ok["status"] == 200 and ok["key"] == "alice" and ok["path"] == "/v1/audio/transcriptions"
    assert ok["audio_seconds"] == pytest.approx(4.0, abs=0.5) and ok["queue_ms"] >= 0 and ok["decode_ms"] > 0
    assert next(line for line in lines if line["id"] == generated)["status"] == 401
    assert not any("sk-" in r.getMessage() for r in caplog.records)


def test_metrics_count_requests_by_key_and_status(guarded):
    before = parse_metrics(httpx.get(f"{guarded.url}/metrics", headers={"authorization": "Bearer sk-bob-456"}).text)
    post(guarded.url, "sk-bob-456")
    post(guarded.url)
    after = parse_metrics(httpx.get(f"{guarded.url}/metrics", headers={"authorization": "Bearer sk-bob-456"}).text)

    def grew(labels: str) -> float:
        name = f"transdec_requests_total{{{labels}}}"
        return after.get(name, 0) - before.get(name, 0)

    assert grew('endpoint="transcriptions",status="200",key="bob"') == 1
    assert grew('endpoint="transcriptions",status="401"') == 1


def test_one_key_cannot_hold_more_than_its_share(guarded):
    """max_per_key=1: while alice's request decodes, her second request and her stream are refused; bob's is not."""
    gate = guarded.hold_model_thread()
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(post, guarded.url, "sk-alice-123")
        wait_until(lambda: guarded.state.batcher.running or guarded.state.batcher.waiting)
        second = post(guarded.url, "sk-alice-123")
        assert second.status_code == 429 and second.json()["error"]["type"] == "rate_limit_error"
        with websockets_sync.connect(guarded.url.replace("http", "ws") + "/v1/audio/stream",
                                     additional_headers={"Authorization": "Bearer sk-alice-123"}) as ws:
            assert "'alice' has 1 requests and streams in flight" in json.loads(ws.recv())["message"]
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv()
        assert closed.value.rcvd.code == 1013
        with ThreadPoolExecutor(1) as other:
            bob = other.submit(post, guarded.url, "sk-bob-456")
            gate.set()
            assert first.result(60).status_code == 200 and bob.result(60).status_code == 200
    assert post(guarded.url, "sk-alice-123").status_code == 200  # her place is free again


def stalled_upload(port: int, key: str, sent: bytes = b"--x\r\n") -> socket.socket:
    """A request that announces a body and sends only its first bytes."""
    client = socket.create_connection(("127.0.0.1", port))
    client.sendall(f"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
                   "Content-Type: multipart/form-data; boundary=x\r\nContent-Length: 100000\r\n\r\n".encode() + sent)
    return client


def test_slow_uploads_keep_no_client_out_and_are_cut_off_at_the_body_timeout(model):
    """64 clients uploading a byte a second (or not at all) hold no place in a queue of one: a normal client is
    served at once; the slow ones get 408 at the body timeout and their connections go."""
    options = ServeOptions(model_name="tiny-en-rnnt", max_queue=1, max_batch=1, body_timeout=3.0)
    live = LiveServer(create_app(model, options))
    stop = threading.Event()
    try:
        slow = [stalled_upload(live.port, "none") for _ in range(64)]

        def trickle() -> None:  # a byte a second each, until told to stop
            while not stop.wait(1.0):
                for client in slow:
                    try:
                        client.sendall(b"a")
                    except OSError:
                        pass

        threading.Thread(target=trickle, daemon=True).start()
        began = time.monotonic()
        response = post(live.url)
        assert response.status_code == 200 and response.json()["text"] == LOGIC_TEXT
        assert time.monotonic() - began < 2.5  # before any slow one was cut off
        slow[0].settimeout(10)
        answer = b""
        while b"}}" not in answer:
            answer += slow[0].recv(4096)
        assert answer.startswith(b"HTTP/1.1 408") and b"did not arrive within 3 s" in answer
    finally:
        stop.set()
        for client in slow:
            client.close()
        live.stop()


def test_idle_streams_are_closed_and_free_their_places(model):
    """Four streams that stop sending fill the server's four places; after the idle timeout they are closed with
    1008 and a fifth stream is served."""
    options = ServeOptions(model_name="tiny-en-rnnt", stream_idle_timeout=1.0,
                           streaming=StreamingOptions(max_streams=4))
    live = LiveServer(create_app(model, options))
    url = live.url.replace("http", "ws") + "/v1/audio/stream"
    try:
        with contextlib.ExitStack() as stack:
            idle = [stack.enter_context(websockets_sync.connect(url)) for _ in range(4)]
            for ws in idle:
                ws.send(json.dumps({"sample_rate": 16000}))
                ws.send(np.zeros(1600, "<i2").tobytes())
            wait_until(lambda: live.state.hub.full)
            with websockets_sync.connect(url) as fifth:  # refused while they hold the places
                assert "try again later" in json.loads(fifth.recv())["message"]
            for ws in idle:
                messages = []
                with pytest.raises(ConnectionClosed) as closed:
                    while True:
                        messages.append(json.loads(ws.recv()))
                assert closed.value.rcvd.code == 1008 and "no audio for 1 s" in messages[-1]["message"]
        messages = stream_file(live.url, MAKING)
        assert messages[-1] == {"type": "done"}
    finally:
        live.stop()


def test_a_request_s_boost_weights_are_bounded(guarded):
    with open(LOGIC, "rb") as f:
        response = httpx.post(f"{guarded.url}/v1/audio/transcriptions", files={"file": f},
                              data={"boost": "logic\t1000"}, headers={"authorization": "Bearer sk-alice-123"})
    assert response.status_code == 400 and "weight 1000 is beyond this server's limit of 10" in response.text


def test_keys_come_from_flags_a_file_and_the_environment(tmp_path):
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text("# operators\nops:sk-ops\n\nsk-nameless\n")
    keys = ApiKeys.gather(["ci:sk-ci"], str(keys_file), {"TRANSDEC_API_KEYS": "web:sk-web, sk-env"})
    assert {keys.name_of(k) for k in ("sk-ci", "sk-ops", "sk-web")} == {"ci", "ops", "web"}
    assert keys.name_of("sk-nameless").startswith("key-") and keys.name_of("sk-env").startswith("key-")
    assert keys.name_of("sk-other") is None and keys.name_of("") is None and keys.name_of(None) is None
    with pytest.raises(ValueError, match="keys.txt:2: two keys are named 'ops'"):
        keys_file.write_text("ops:a\nops:b\n")
        ApiKeys.gather([], str(keys_file), {})
    with pytest.raises(ValueError, match="--api-key: an empty API key"):
        ApiKeys.gather(["name:"], None, {})


def test_an_open_server_on_a_public_address_warns_in_one_line():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and not is_loopback("0.0.0.0")
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    number = port.getsockname()[1]
    port.close()
    environment = {**os.environ, "TRANSDEC_API_KEYS": ""}
    process = subprocess.Popen([sys.executable, "-m", "transdec", "serve", "--host", "0.0.0.0", "--port", str(number)],
                               stderr=subprocess.PIPE, text=True, env=environment)
    try:
        line = process.stderr.readline()
        while line and "without API keys" not in line:
            line = process.stderr.readline()
        assert "listening on 0.0.0.0 without API keys: anyone who reaches the port can use it" in line
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)

"""``transdec serve``: real servers on free ports (uvicorn in a thread, one in a subprocess for SIGTERM), the bundled
model and the example recordings, called by OpenAI's own client, httpx and the ``websockets`` client.

Requests are held back deterministically where a test needs a queue: a task that waits on an event is put on the
model thread, so whatever the server sends there waits behind it until the test lets it go.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import soundfile

pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")
websockets_sync = pytest.importorskip("websockets.sync.client")
from websockets.exceptions import ConnectionClosed  # noqa: E402

from helpers import cli  # noqa: E402
from transdec import load_model  # noqa: E402
from transdec.audio import load_audio  # noqa: E402
from transdec.serve import ServeOptions, create_app  # noqa: E402
from transdec.streaming import StreamingOptions  # noqa: E402
from transdec.transcribe import transcribe  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LOGIC = "examples/espeak_logic.flac"
AXIOM = "examples/piper_allens_axiom.flac"
MAKING = "examples/piper_are_you_making_this_up.flac"
LOGIC_TEXT = "logic is a systematic method of coming to the wrong conclusion with confidence"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """An app served by uvicorn in a background thread."""

    def __init__(self, app) -> None:
        self.app, self.state = app, app.state.transdec
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                timeout_graceful_shutdown=5)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "the server did not start"
            time.sleep(0.02)

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key="x", max_retries=0)

    def hold_model_thread(self) -> threading.Event:
        """Block the model thread until the returned event is set."""
        gate = threading.Event()
        self.state.worker.submit(gate.wait, 30)
        return gate

    def metrics(self) -> dict[str, float]:
        return parse_metrics(httpx.get(f"{self.url}/metrics").text)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def wait_until(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (\S+)$')


def parse_metrics(text: str) -> dict[str, float]:
    """The samples of a Prometheus text exposition, checked line by line: ``{"name{labels}": value}``."""
    samples, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram"), line
            types[name] = kind
        elif line.startswith("# HELP ") or not line:
            continue
        else:
            match = SAMPLE.match(line)
            assert match, f"not a Prometheus sample line: {line!r}"
            base = re.sub(r"_(bucket|sum|count)$", "", match[1])
            assert match[1] in types or base in types, f"sample without a TYPE: {line!r}"
            samples[match[1] + (match[2] or "")] = float(match[3])
    return samples


@pytest.fixture(scope="module")
def model():
    return load_model("tiny-en-rnnt")


@pytest.fixture(scope="module")
def server(model):
    live = LiveServer(create_app(model, ServeOptions(model_name="tiny-en-rnnt", max_batch=16, max_wait_ms=10)))
    yield live
    live.stop()


@pytest.fixture(scope="module")
def small(model):
    """A server with room for one request in its queue, one stream and short limits."""
    options = ServeOptions(model_name="tiny-en-rnnt", max_batch=1, max_queue=1, max_audio_seconds=3.0,
                           max_request_mb=0.2, streaming=StreamingOptions(max_streams=1))
    live = LiveServer(create_app(model, options))
    yield live
    live.stop()


@pytest.fixture(scope="module")
def recordings(tmp_path_factory) -> list[str]:
    """Recordings of different lengths: the examples, a cut one, two joined ones and one at 44.1 kHz (resampled)."""
    folder = tmp_path_factory.mktemp("recordings")
    logic, axiom, making = (load_audio(path, 16000) for path in (LOGIC, AXIOM, MAKING))
    soundfile.write(folder / "cut.wav", logic[: len(logic) // 2], 16000, subtype="PCM_16")
    soundfile.write(folder / "joined.wav", np.concatenate([making, axiom]), 16000, subtype="PCM_16")
    import soxr

    soundfile.write(folder / "cd.wav", soxr.resample(making, 16000, 44100), 44100, subtype="FLOAT")
    return [LOGIC, AXIOM, MAKING, str(folder / "cut.wav"), str(folder / "joined.wav"), str(folder / "cd.wav")]


def alone(model, path: str, phrases=None):
    """The transcript of ``path`` decoded by itself, batch 1."""
    return transcribe(model, [path], batch_size=1, phrases=[phrases] if phrases else None)[0]


def word_times(transcript) -> list[tuple[str, float, float]]:
    return [(w.word, round(w.start, 3), round(w.end, 3)) for w in transcript.words]


def served_words(verbose) -> list[tuple[str, float, float]]:
    return [(w.word, w.start, w.end) for w in verbose.words]


# --- the OpenAI endpoint ---------------------------------------------------------------------------------------------


def test_openai_client_gets_every_response_format(server, model):
    client = server.client()
    expected = alone(model, LOGIC)
    assert expected.text == LOGIC_TEXT
    with open(LOGIC, "rb") as f:
        assert client.audio.transcriptions.create(model="whisper-1", file=f).text == LOGIC_TEXT
    with open(LOGIC, "rb") as f:
        assert client.audio.transcriptions.create(model="x", file=f, response_format="text").strip() == LOGIC_TEXT
    with open(LOGIC, "rb") as f:
        verbose = client.audio.transcriptions.create(model="x", file=f, response_format="verbose_json",
                                                     timestamp_granularities=["word", "segment"], language="en")
    assert verbose.text == LOGIC_TEXT and verbose.language == "en"
    assert verbose.duration == pytest.approx(4.002, abs=1e-3)
    assert served_words(verbose) == word_times(expected)
    assert [s.text for s in verbose.segments] == [LOGIC_TEXT]  # no pause of 0.8 s in it
    assert verbose.segments[0].start == 0.0 and verbose.segments[0].end == round(expected.words[-1].end, 3)
    with open(LOGIC, "rb") as f:
        no_words = client.audio.transcriptions.create(model="x", file=f, response_format="verbose_json")
    assert no_words.words is None and no_words.segments
    with open(LOGIC, "rb") as f:
        srt = client.audio.transcriptions.create(model="x", file=f, response_format="srt")
    assert srt == f"1\n00:00:00,000 --> 00:00:03,760\n{LOGIC_TEXT}\n"
    with open(LOGIC, "rb") as f:
        vtt = client.audio.transcriptions.create(model="x", file=f, response_format="vtt")
    assert vtt == f"WEBVTT\n\n00:00:00.000 --> 00:00:03.760\n{LOGIC_TEXT}\n"


def test_server_subtitles_equal_transcribe_s(server, recordings, tmp_path, capsys):
    """One segmentation: the server's srt and vtt of each example, and of two joined (cut by the character limit),
    are the documents `transdec transcribe` writes (each recording decoded alone on both sides)."""
    client = server.client()
    paths = [LOGIC, AXIOM, MAKING, next(path for path in recordings if path.endswith("joined.wav"))]
    for kind in ("srt", "vtt"):
        code, _, err = cli(capsys, "transcribe", *paths, "--format", kind, "--output-dir", tmp_path / kind,
                           "--batch-size", "1")
        assert code == 0, err
        for path in paths:
            with open(path, "rb") as f:
                served = client.audio.transcriptions.create(model="x", file=f, response_format=kind)
            assert served == (tmp_path / kind / f"{Path(path).stem}.{kind}").read_text(encoding="utf-8")
    assert (tmp_path / "srt" / "joined.srt").read_text().count(" --> ") == 2  # 91 characters, no pause of 0.8 s


def test_request_phrases_are_boosted_as_transcribe_boosts_them(server, model):
    plain, boosted = alone(model, AXIOM), alone(model, AXIOM, ["allen's axiom"])
    assert plain.text != boosted.text and boosted.text.startswith("allen's axiom")
    client = server.client()
    with open(AXIOM, "rb") as f:
        # OpenAI's `keywords` field (extra_body: clients older than the field send it too)
        assert client.audio.transcriptions.create(model="x", file=f, extra_body={"keywords": ["allen's axiom"]}
                                                  ).text == boosted.text
    with open(AXIOM, "rb") as f:
        response = httpx.post(f"{server.url}/v1/audio/transcriptions", files={"file": f},
                              data={"boost": "# names\nallen's axiom\t1.0\n"})
    assert response.json() == {"text": boosted.text}


def test_concurrent_requests_are_batched_with_the_results_of_each_alone(server, model, recordings):
    expected = {path: alone(model, path) for path in recordings}
    expected_boosted = alone(model, AXIOM, ["allen's axiom"])
    before = server.metrics()
    client = server.client()

    def request(path: str, keywords=None):
        with open(path, "rb") as f:
            extra = {"extra_body": {"keywords": keywords}} if keywords else {}
            return client.audio.transcriptions.create(model="x", file=f, response_format="verbose_json",
                                                      timestamp_granularities=["word"], **extra)

    gate = server.hold_model_thread()  # the requests queue up behind it and are batched together
    with ThreadPoolExecutor(len(recordings) + 1) as pool:
        futures = {path: pool.submit(request, path) for path in recordings}
        boosted = pool.submit(request, AXIOM, ["allen's axiom"])
        wait_until(lambda: server.state.batcher.waiting + server.state.batcher.running == len(recordings) + 1)
        gate.set()
        results = {path: future.result(timeout=60) for path, future in futures.items()}
        boosted_result = boosted.result(timeout=60)
    for path in recordings:
        assert results[path].text == expected[path].text, path
        assert served_words(results[path]) == word_times(expected[path]), path
    assert boosted_result.text == expected_boosted.text
    assert served_words(boosted_result) == word_times(expected_boosted)
    after = server.metrics()
    batches = after["transdec_batch_size_count"] - before["transdec_batch_size_count"]
    singles = after['transdec_batch_size_bucket{le="1"}'] - before['transdec_batch_size_bucket{le="1"}']
    assert batches < len(recordings) + 1 and batches - singles >= 1  # a batch of more than one request


def test_many_clients_at_once_all_get_their_own_transcript(server, model, recordings):
    expected = {path: alone(model, path).text for path in recordings}
    client = server.client()

    def request(path: str) -> str:
        with open(path, "rb") as f:
            return client.audio.transcriptions.create(model="x", file=f).text

    paths = recordings * 4
    with ThreadPoolExecutor(len(paths)) as pool:  # more than a batch: requests finish while others wait
        texts = list(pool.map(request, paths))
    assert texts == [expected[path] for path in paths]


def test_bad_requests_are_400_in_openai_s_error_shape(server, tmp_path):
    client = server.client()
    bad = tmp_path / "notes.wav"
    bad.write_bytes(b"RIFF....WAVEfmt this is no audio")
    with pytest.raises(openai.BadRequestError) as caught:
        with open(bad, "rb") as f:
            client.audio.transcriptions.create(model="x", file=f)
    error = caught.value.body
    assert caught.value.status_code == 400 and "notes.wav" in error["message"]
    assert error["type"] == "invalid_request_error" and error["param"] == "file" and error["code"] == "invalid_audio"
    response = httpx.post(f"{server.url}/v1/audio/transcriptions", data={"model": "x"})
    assert response.status_code == 400 and response.json()["error"]["param"] == "file"
    with open(LOGIC, "rb") as f:
        response = httpx.post(f"{server.url}/v1/audio/transcriptions", files={"file": f},
                              data={"response_format": "mp3"})
    assert response.status_code == 400 and response.json()["error"]["param"] == "response_format"
    with pytest.raises(openai.BadRequestError, match="transcribes 'en' only"), open(LOGIC, "rb") as f:
        client.audio.transcriptions.create(model="x", file=f, language="de")
    response = httpx.get(f"{server.url}/v1/nothing")
    assert response.status_code == 404 and set(response.json()["error"]) == {"message", "type", "param", "code"}


def test_audio_that_is_no_audio_is_400_and_a_flac_without_its_length_is_read(server, tmp_path):
    """Float samples far beyond [-1, 1] are refused as NaN is; a FLAC whose header gives no length (as piped encoders
    write it) is decoded to its end, not taken for an endless recording."""
    from helpers import flac_without_length

    loud = tmp_path / "loud.wav"
    soundfile.write(loud, np.full(16000, 1e30, np.float32), 16000, subtype="FLOAT")
    with open(loud, "rb") as f:
        response = httpx.post(f"{server.url}/v1/audio/transcriptions", files={"file": f})
    error = response.json()["error"]
    assert response.status_code == 400 and error["code"] == "invalid_audio"
    assert "loud.wav: samples as large as 1e+30" in error["message"]
    piped = flac_without_length(LOGIC, tmp_path / "piped.flac")
    with open(piped, "rb") as f:
        response = httpx.post(f"{server.url}/v1/audio/transcriptions", files={"file": f})
    assert response.status_code == 200 and response.json()["text"] == LOGIC_TEXT


def test_malformed_uploads_say_what_is_wrong(server):
    """A body cut off before its closing boundary, a 'file' sent as a text field and a header too long for the
    parser each get their own message, not "a file is required" or "Invalid multipart data"."""
    audio = Path(LOGIC).read_bytes()

    def post(body: bytes, boundary: str = "XyZ") -> dict:
        response = httpx.post(f"{server.url}/v1/audio/transcriptions", content=body,
                              headers={"content-type": f"multipart/form-data; boundary={boundary}"})
        assert response.status_code == 400
        return response.json()["error"]

    def part(filename: str | None) -> bytes:
        disposition = 'form-data; name="file"' + (f'; filename="{filename}"' if filename is not None else "")
        return f"--XyZ\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + audio + b"\r\n"

    for body in (part("a.flac"), part("a.flac") + b"--XyZ"):
        assert "ends before its closing boundary: the upload was cut off" in post(body)["message"]
    assert "the field 'file' is text, not a file" in post(part(None) + b"--XyZ--\r\n")["message"]
    error = post(part("x" * 5000 + ".flac") + b"--XyZ--\r\n")
    assert "headers are longer than the server reads (a filename thousands of characters long?)" in error["message"]
    response = httpx.post(f"{server.url}/v1/audio/transcriptions", content=part("a.flac") + b"--XyZ--\r\n",
                          headers={"content-type": "multipart/form-data; boundary=XyZ"})
    assert response.status_code == 200 and response.json()["text"] == LOGIC_TEXT


def test_long_recordings_and_large_requests_are_refused(small, tmp_path):
    with open(LOGIC, "rb") as f:  # 4.0 s, the limit is 3
        response = httpx.post(f"{small.url}/v1/audio/transcriptions", files={"file": f})
    assert response.status_code == 413 and response.json()["error"]["code"] == "audio_too_long"
    assert "3 s" in response.json()["error"]["message"]
    big = tmp_path / "big.wav"
    soundfile.write(big, np.zeros(150_000, np.int16), 16000)  # 0.3 MB, the limit is 0.2
    with open(big, "rb") as f:
        response = httpx.post(f"{small.url}/v1/audio/transcriptions", files={"file": f})
    assert response.status_code == 413 and response.json()["error"]["code"] == "request_too_large"

    def chunked():  # no Content-Length: cut off while it is read
        yield b"--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\n"
        for _ in range(30):
            yield bytes(10_000)

    response = httpx.post(f"{small.url}/v1/audio/transcriptions", content=chunked(),
                          headers={"content-type": "multipart/form-data; boundary=x"})
    assert response.status_code == 413
    with open(MAKING, "rb") as f:  # 2.1 s: within the limits
        assert httpx.post(f"{small.url}/v1/audio/transcriptions", files={"file": f}).status_code == 200


def test_a_full_queue_is_503_with_retry_after_and_a_client_that_leaves_frees_its_place(small):
    url = f"{small.url}/v1/audio/transcriptions"

    def post(timeout: float = 30.0):
        with open(MAKING, "rb") as f:
            return httpx.post(url, files={"file": f}, timeout=timeout)

    before = small.metrics()
    gate = small.hold_model_thread()
    try:
        with ThreadPoolExecutor(4) as pool:
            first = pool.submit(post)  # its batch starts (and waits for the model thread): its place is freed
            wait_until(lambda: small.state.batcher.running)
            leaving = pool.submit(post, 1.0)  # takes the one place, and leaves after 1 s
            wait_until(lambda: small.state.batcher.waiting == 1)
            refused = post()
            assert refused.status_code == 503 and int(refused.headers["retry-after"]) >= 1
            assert refused.json()["error"]["code"] == "overloaded"
            with pytest.raises(httpx.TimeoutException):
                leaving.result()
            wait_until(lambda: small.state.batcher.waiting == 0)  # dropped from the queue, its place free
            last = pool.submit(post)
            wait_until(lambda: small.state.batcher.waiting == 1)
            gate.set()
            assert first.result().status_code == 200 and last.result().status_code == 200
    finally:
        gate.set()
    after = small.metrics()

    def count(status: int) -> float:
        key = f'transdec_requests_total{{endpoint="transcriptions",status="{status}"}}'
        return after.get(key, 0) - before.get(key, 0)

    assert (count(200), count(503), count(499)) == (2, 1, 1)
    assert after["transdec_batch_size_count"] - before["transdec_batch_size_count"] == 2  # the one that left: never


# --- streaming -------------------------------------------------------------------------------------------------------


def stream_file(url: str, path: str, encoding: str = "pcm_s16le", piece_seconds: float = 0.25) -> list[dict]:
    """Stream a recording over the WebSocket and return the server's messages."""
    audio, rate = soundfile.read(path, dtype="int16" if encoding == "pcm_s16le" else "float32")
    piece = int(piece_seconds * rate)
    messages = []
    with websockets_sync.connect(url.replace("http", "ws") + "/v1/audio/stream") as ws:
        ws.send(json.dumps({"sample_rate": rate, "encoding": encoding}))
        for start in range(0, len(audio), piece):
            ws.send(audio[start : start + piece].astype("<i2" if encoding == "pcm_s16le" else "<f4").tobytes())
        ws.send(json.dumps({"type": "end"}))
        for message in ws:
            messages.append(json.loads(message))
    return messages


def test_websocket_streams_give_partials_and_the_finals_of_transdec_stream(server, capsys):
    code, out, _ = cli(capsys, "stream", LOGIC, AXIOM, "--format", "jsonl")
    assert code == 0
    expected = {}
    for record in map(json.loads, out.splitlines()):
        expected.setdefault(record.pop("path"), []).append({"type": "final", **record})
    before = server.metrics()
    with ThreadPoolExecutor(2) as pool:  # two clients at once, stepped in the same batches
        logic = pool.submit(stream_file, server.url, LOGIC)
        axiom = pool.submit(stream_file, server.url, AXIOM, "f32le")
        results = {LOGIC: logic.result(timeout=60), AXIOM: axiom.result(timeout=60)}
    for path, messages in results.items():
        assert messages[-1] == {"type": "done"}
        assert [m for m in messages if m["type"] == "final"] == expected[path], path
        partials = [m["text"] for m in messages if m["type"] == "partial"]
        assert partials and all(text for text in partials)
    assert expected[LOGIC][0]["text"] == LOGIC_TEXT
    after = server.metrics()
    assert after['transdec_streams_total{outcome="completed"}'] - before.get(
        'transdec_streams_total{outcome="completed"}', 0) == 2
    assert after["transdec_streams_active"] == 0


def test_more_streams_than_allowed_are_closed_with_1013_and_a_leaving_client_frees_its_stream(small):
    url = small.url.replace("http", "ws") + "/v1/audio/stream"
    with websockets_sync.connect(url) as first:
        first.send(json.dumps({"sample_rate": 16000}))
        first.send(np.zeros(1600, "<i2").tobytes())
        wait_until(lambda: small.state.hub.full)
        with websockets_sync.connect(url) as second:
            error = json.loads(second.recv())
            with pytest.raises(ConnectionClosed) as closed:
                second.recv()
        assert error["type"] == "error" and "try again later" in error["message"]
        assert closed.value.rcvd.code == 1013
    wait_until(lambda: not small.state.hub.full)  # the first left without its end: its stream is freed
    messages = stream_file(small.url, MAKING)
    assert messages[-1] == {"type": "done"} and any(m["type"] == "final" for m in messages)


def test_streamed_samples_far_beyond_full_scale_are_an_error_and_a_close(server):
    with websockets_sync.connect(server.url.replace("http", "ws") + "/v1/audio/stream") as ws:
        ws.send(json.dumps({"sample_rate": 16000, "encoding": "f32le"}))
        ws.send(np.full(1600, 1e30, "<f4").tobytes())
        assert "samples as large as 1e+30" in json.loads(ws.recv())["message"]
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv()
    assert closed.value.rcvd.code == 1003


def test_a_bad_stream_config_is_an_error_and_a_close(server):
    with websockets_sync.connect(server.url.replace("http", "ws") + "/v1/audio/stream") as ws:
        ws.send(json.dumps({"sample_rate": 16000, "encoding": "mp3"}))
        assert "encoding" in json.loads(ws.recv())["message"]
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv()
    assert closed.value.rcvd.code == 1003


@pytest.mark.parametrize("strategy, options, reason", [
    ("beam_maes", {"beam_size": 2}, "'beam_maes' does not stream; strategies that stream: greedy_label"),
    ("beam_alsd_pp", {"keep_greedy": True}, "keep_greedy is not offered when streaming"),
], ids=["strategy", "option"])
def test_decoding_that_does_not_stream_serves_requests_and_refuses_streams_saying_why(model, strategy, options,
                                                                                      reason):
    """A strategy that does not stream (the reason names those that do), or an option of one that does which its
    stream search refuses: requests are served, and the WebSocket says why and closes with 1008."""
    from transdec.decoding import DecodingConfig

    live = LiveServer(create_app(model, ServeOptions(decoding=DecodingConfig(strategy, **options))))
    try:
        with open(MAKING, "rb") as f:
            assert live.client().audio.transcriptions.create(model="x", file=f).text
        with websockets_sync.connect(live.url.replace("http", "ws") + "/v1/audio/stream") as ws:
            error = json.loads(ws.recv())
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv()
        assert reason in error["message"]
        assert closed.value.rcvd.code == 1008
    finally:
        live.stop()


# --- health, metrics, the command line -------------------------------------------------------------------------------


def test_health_models_and_metrics(server):
    assert httpx.get(f"{server.url}/health").json() == {"status": "ok", "model": "tiny-en-rnnt"}
    assert httpx.get(f"{server.url}/v1/models").json()["data"][0]["id"] == "tiny-en-rnnt"
    with open(MAKING, "rb") as f:
        assert server.client().audio.transcriptions.create(model="x", file=f).text
    response = httpx.get(f"{server.url}/metrics")
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = parse_metrics(response.text)
    assert samples['transdec_info{model="tiny-en-rnnt"}'] == 1
    assert samples['transdec_requests_total{endpoint="transcriptions",status="200"}'] >= 1
    assert samples['transdec_audio_seconds_total{endpoint="transcriptions"}'] > 2
    assert samples["transdec_rtfx"] > 0 and samples["transdec_queue_depth"] == 0
    buckets = [v for k, v in samples.items() if k.startswith("transdec_request_seconds_bucket")]
    assert buckets == sorted(buckets) and buckets[-1] == samples["transdec_request_seconds_count"]


def test_serve_without_the_extra_names_it(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "fastapi", None)
    monkeypatch.setattr("transdec.serve.server.run", lambda *args: pytest.fail("serve ran without FastAPI"))
    code, _, err = cli(capsys, "serve")
    assert code == 2 and "pip install 'transdec[serve]'" in err and len(err.strip().splitlines()) == 1


def test_serve_usage_errors_are_one_line(capsys):
    code, _, err = cli(capsys, "serve", "--lm-weight", "0.3")
    assert code == 2 and "without --lm" in err
    code, _, err = cli(capsys, "serve", "--max-batch", "0")
    assert code == 2 and "--max-batch" in err


def test_an_address_the_server_cannot_listen_on_is_one_line_before_the_model_loads(capsys, monkeypatch):
    monkeypatch.setattr("transdec.loading.load_model", lambda *args, **kwargs: pytest.fail("the model was loaded"))
    code, _, err = cli(capsys, "serve", "--port", "99999")
    assert code == 2 and "--port: must be from 0 to 65535, got 99999" in err and len(err.strip().splitlines()) == 1
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = cli(capsys, "serve", "--port", str(port))
    assert code == 2 and f"cannot listen on 127.0.0.1:{port}" in err and len(err.strip().splitlines()) == 1


def test_sigterm_finishes_the_request_in_flight_then_exits_0(tmp_path):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    process = subprocess.Popen([sys.executable, "-m", "transdec", "serve", "--port", str(port)], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: _answers(f"{url}/health"), timeout=60)
        began = time.monotonic()
        result = upload_with_sigterm_in_flight(url, process, timeout=30)
        assert result.status_code == 200 and result.json()["text"] == LOGIC_TEXT
        assert time.monotonic() - began >= 1.4
        assert process.wait(30) == 0
    finally:
        if process.poll() is None:
            process.kill()
        output = process.communicate()[0]
    assert "Shutting down" in output and "Finished server process" in output


def upload_with_sigterm_in_flight(url: str, process: subprocess.Popen, timeout: float,
                                  headers: dict[str, str] | None = None) -> httpx.Response:
    """POST the logic recording to ``url``'s transcriptions endpoint as an upload that takes 1.5 s, sending
    ``process`` SIGTERM while it is in flight; returns the response."""
    boundary = "transdec-test"
    body = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="logic.flac"\r\n\r\n'.encode()
            + (ROOT / LOGIC).read_bytes() + f"\r\n--{boundary}--\r\n".encode())
    uploading = threading.Event()

    def slow_body():
        yield body[:100]
        uploading.set()
        time.sleep(1.5)
        yield body[100:]

    with ThreadPoolExecutor(1) as pool:
        response = pool.submit(httpx.post, f"{url}/v1/audio/transcriptions", content=slow_body(), timeout=timeout,
                               headers={"content-type": f"multipart/form-data; boundary={boundary}", **(headers or {})})
        assert uploading.wait(10)
        time.sleep(0.3)
        process.send_signal(signal.SIGTERM)
        return response.result()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_segments_start_at_pauses_and_subtitle_times():
    from transdec.serve.responses import segments_of, subtitles
    from transdec.transcribe import Transcript, WordTiming

    words = [WordTiming("a", 0.0, 0.5, 1.0), WordTiming("b", 0.6, 1.0, 1.0), WordTiming("c", 2.0, 2.5, 0.5),
             WordTiming("d", 3661.0, 3661.25, 1.0)]
    assert [(s.start, s.end, s.text) for s in segments_of(words)] == [(0.0, 1.0, "a b"), (2.0, 2.5, "c"),
                                                                      (3661.0, 3661.25, "d")]
    srt = subtitles(Transcript("a b c d", words=words), "srt")
    assert srt.splitlines()[-2] == "01:01:01,000 --> 01:01:01,250"
    assert len(segments_of([WordTiming(str(i), i * 0.5, i * 0.5 + 0.4, 1.0) for i in range(60)])) == 3


def test_streams_search_as_the_server_decodes_where_the_strategy_streams():
    from transdec.decoding import DecodingConfig
    from transdec.serve.options import streaming_options

    def search(strategy: str, **values):
        return streaming_options(ServeOptions(decoding=DecodingConfig(strategy, **values))).decoding

    assert search("beam_alsd_pp", beam_size=4) == DecodingConfig("beam_alsd_pp", beam_size=4)
    assert search("greedy_label", window_size=8, max_symbols_per_frame=3) == DecodingConfig(
        "greedy_label", window_size=8, max_symbols_per_frame=3)
    with pytest.raises(ValueError, match="'beam_maes' does not stream; strategies that stream: greedy_label"):
        search("beam_maes", beam_size=4)
    with pytest.raises(ValueError, match="max_batch"):
        ServeOptions(max_batch=0)

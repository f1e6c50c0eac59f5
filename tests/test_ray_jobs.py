"""Batch transcription on a Ray cluster (`transdec transcribe --ray`, `transdec.scale.ray_transcribe`), on a real
local cluster of 2 CPUs that this module starts and stops: the output equals a single-process run's, bad items are
reported and the others go on, an interrupted run resumes, and a replica killed mid-run loses nothing."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from transdec import transcribe_files as transcribe_files_module
from transdec.biasing.items import BoostOptions
from transdec.decoding import DecodingConfig
from transdec.loading import load_model
from transdec.scale import RayOptions, ReplicaPlan, plan_replicas, ray_transcribe
from transdec.transcribe_files import transcribe_files

from helpers import cli

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.flac"))
MODEL = "tiny-en-rnnt"
ITEMS = 14  # 12 recordings, a corrupt file (line 5) and a missing one (line 10)


@pytest.fixture(scope="module")
def manifest(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("ray")
    corrupt = folder / "corrupt.flac"
    corrupt.write_bytes(EXAMPLES[0].read_bytes()[:3000])  # a FLAC cut short: libsndfile loses sync
    rows: list[dict] = [{"audio_filepath": str(EXAMPLES[i % len(EXAMPLES)]), "id": i} for i in range(12)]
    rows[2]["boost_phrases"] = ["are you making this up", ["logic", 2.0]]  # with --item-phrases
    rows[7]["boost_phrases"] = "not a list"  # a failed item with --item-phrases
    rows.insert(4, {"audio_filepath": str(corrupt)})
    rows.insert(9, {"audio_filepath": str(folder / "missing.flac")})
    path = folder / "m.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture(scope="module")
def plain(manifest: Path, tmp_path_factory):
    """The output of a single-process ``transdec transcribe`` of the manifest, by format and batch size."""
    model = load_model(MODEL)
    folder = tmp_path_factory.mktemp("plain")
    done: dict[tuple[str, int, bool], str] = {}

    def output(output_format: str, batch_size: int, item_phrases: bool = False) -> str:
        if (output_format, batch_size, item_phrases) not in done:
            path = folder / f"{output_format}-{batch_size}-{item_phrases}.txt"
            assert transcribe_files(model, [str(manifest)], DecodingConfig(), batch_size, output_format,
                                    str(path), item_boost=BoostOptions() if item_phrases else None) == 1
            done[output_format, batch_size, item_phrases] = path.read_text()
        return done[output_format, batch_size, item_phrases]

    return output


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster of 2 CPUs for the module (runs join it: the process is on it), always shut down."""
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    try:
        yield ray
    finally:
        ray.shutdown()


def replica_pids() -> list[int]:
    """The processes of the model replicas (Ray names an actor's process after its class)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if b"WindowTranscriber" in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def wait_for_free_cpus(ray, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while ray.available_resources().get("CPU", 0) < 2:
        assert time.monotonic() < deadline, f"the cluster's CPUs are still held: {ray.available_resources()}"
        time.sleep(0.1)


def test_without_ray_the_flag_is_a_one_line_error(manifest: Path, capsys, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed: importing it fails
    code, out, err = cli(capsys, "transcribe", manifest, "--ray")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("transdec transcribe: error: Ray is not installed") and "pip install 'transdec[ray]'" in err
    assert ray_transcribe(MODEL, [str(manifest)]) == 2
    assert "pip install 'transdec[ray]'" in capsys.readouterr().err


def test_replicas_fit_the_cluster() -> None:
    assert plan_replicas(RayOptions(), 2, 0, "cpu") == ReplicaPlan(1, 1.0, 0.0, 1, 0.5)
    # more replicas than the CPUs hold beside reading: each asks for a share, and runs one thread
    assert plan_replicas(RayOptions(replicas=2), 2, 0, "cpu") == ReplicaPlan(2, 0.75, 0.0, 1, 0.5)
    assert plan_replicas(RayOptions(cpus_per_replica=4), 16, 0, "cpu") == ReplicaPlan(3, 4.0, 0.0, 4, 0.5)
    assert plan_replicas(RayOptions(), 32, 4, "cuda:0") == ReplicaPlan(4, 1.0, 1.0, 1, 0.5)
    with pytest.raises(ValueError, match="the Ray cluster has no GPU"):
        plan_replicas(RayOptions(), 8, 0, "cuda")
    with pytest.raises(ValueError, match="5 replicas of one GPU each: the Ray cluster has 4 GPU"):
        plan_replicas(RayOptions(replicas=5), 32, 4, "cuda")
    with pytest.raises(ValueError, match="expected auto, HOST:PORT or ray://HOST:PORT"):
        RayOptions(address="nowhere")
    assert RayOptions(address="10.0.0.1:6379").address and RayOptions(address="ray://head:10001").address


def test_ray_flags_are_checked_first(manifest: Path, capsys) -> None:
    for args, message in [(["--ray-replicas", "2"], "--ray-replicas without --ray"),
                          (["--ray", "nowhere"], "--ray nowhere: expected auto, HOST:PORT or ray://HOST:PORT"),
                          (["--ray", "--ray-replicas", "0"], "--ray-replicas: must be positive, got 0")]:
        code, out, err = cli(capsys, "transcribe", manifest, *args)
        assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err
    code, _, err = cli(capsys, "transcribe", "--ray", manifest, manifest)  # argparse takes a path for the address
    assert code == 2 and "put --ray after the paths" in err


def test_the_model_and_the_address_are_checked_before_the_run(manifest: Path, capsys) -> None:
    ray = pytest.importorskip("ray")
    nemo = Path(__file__).parent / "fixtures" / "nemo" / "fc_rnnt.nemo"
    for args, message in [(["--model", "no-such-model"], "no model file 'no-such-model'"),
                          (["--model", nemo, "--decoding", "ctc_greedy"],
                           "--decoding ctc_greedy needs a model with a CTC head")]:
        code, out, err = cli(capsys, "transcribe", manifest, "--ray", "127.0.0.1:1", *args)
        assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err
    if not ray.is_initialized():  # a process on a cluster uses it, whatever the address
        code, out, err = cli(capsys, "transcribe", manifest, "--ray", "127.0.0.1:1")
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert "error: Ray: no Ray cluster answers at 127.0.0.1:1" in err


def test_the_output_equals_a_plain_run_and_bad_items_are_reported(cluster, manifest: Path, plain, tmp_path: Path,
                                                                  capsys) -> None:
    out = tmp_path / "out.jsonl"
    code = ray_transcribe(MODEL, [str(manifest)], batch_size=1, output_format="jsonl", output=str(out),
                          options=RayOptions(replicas=2))
    err = capsys.readouterr().err
    assert code == 1, err
    assert out.read_text() == plain("jsonl", 1)
    assert f"{manifest}:5: {manifest.parent / 'corrupt.flac'}: not readable as audio" in err
    assert f"{manifest}:10: {manifest.parent / 'missing.flac'}: no such file" in err
    assert "2 item(s) failed, 12 transcribed" in err
    assert "ray: 14 item(s) in 2 window(s) of up to 8, 2 replicas (0.75 CPU, 1 thread each)" in err
    assert f"ray: {ITEMS}/{ITEMS} item(s), " in err and " s of audio/s" in err  # progress and throughput
    assert not list(tmp_path.glob("*.partial"))


def test_the_command_line_writes_what_it_writes_without_ray(cluster, manifest: Path, plain, capsys) -> None:
    code, out, err = cli(capsys, "transcribe", manifest, "--batch-size", "4", "--item-phrases", "--ray")
    assert code == 1 and out == plain("text", 4, item_phrases=True), err
    assert f"{manifest}:9: {EXAMPLES[1]}: boost_phrases must be a list of phrases, got str" in err
    assert "3 item(s) failed, 11 transcribed" in err
    assert "ray: 14 item(s) in 1 window(s) of up to 32, 1 replica (1 CPU, 1 thread each)" in err


def test_an_interrupted_run_resumes_where_it_stopped(cluster, manifest: Path, plain, tmp_path: Path, capsys,
                                                     monkeypatch) -> None:
    out = tmp_path / "out.jsonl"
    real = transcribe_files_module.format_result
    written = []

    def interrupting(*args):
        if len(written) == 5:
            raise KeyboardInterrupt  # Ctrl-C (or SIGTERM) while results come in
        written.append(args)
        return real(*args)

    monkeypatch.setattr(transcribe_files_module, "format_result", interrupting)
    run = dict(batch_size=1, output_format="manifest", output=str(out), options=RayOptions(replicas=1, window=4))
    assert ray_transcribe(MODEL, [str(manifest)], **run) == 130
    err = capsys.readouterr().err
    partial = (tmp_path / "out.jsonl.partial").read_text().splitlines()
    assert len(partial) >= 5 and f"{len(partial)} result(s) so far are in {out}.partial" in err
    monkeypatch.undo()
    wait_for_free_cpus(cluster)  # the interrupted run let go of its replica and tasks
    assert ray_transcribe(MODEL, [str(manifest)], resume=True, **run) == 1
    err = capsys.readouterr().err
    assert f"resuming: {len(partial)} item(s) are in {out}.partial already" in err
    assert f"ray: {ITEMS - len(partial)} item(s) in" in err  # only the rest was transcribed
    assert sorted(out.read_text().splitlines()) == sorted(plain("manifest", 1).splitlines())
    assert not (tmp_path / "out.jsonl.partial").exists()


def test_a_replica_killed_mid_run_loses_nothing(cluster, manifest: Path, plain, tmp_path: Path, capsys,
                                                monkeypatch) -> None:
    out = tmp_path / "out.jsonl"
    real = transcribe_files_module.format_result
    killed: list[int] = []

    def kill_the_replica(*args):
        if not killed:  # at the first result, with windows to go
            killed.extend(replica_pids())
            for pid in killed:
                os.kill(pid, signal.SIGKILL)
        return real(*args)

    deadline = time.monotonic() + 20
    while replica_pids():  # the replicas of the runs before are gone
        assert time.monotonic() < deadline
        time.sleep(0.1)
    monkeypatch.setattr(transcribe_files_module, "format_result", kill_the_replica)
    code = ray_transcribe(MODEL, [str(manifest)], batch_size=1, output_format="jsonl", output=str(out),
                          options=RayOptions(replicas=1, window=4))
    err = capsys.readouterr().err
    assert len(killed) == 1 and code == 1, err
    assert out.read_text() == plain("jsonl", 1)
    assert "2 item(s) failed, 12 transcribed" in err and f"ray: {ITEMS}/{ITEMS} item(s)" in err


@pytest.mark.slow
def test_the_command_joins_a_running_cluster_by_its_address(cluster, manifest: Path, plain, tmp_path: Path) -> None:
    """`transdec transcribe --ray HOST:PORT` in a process of its own, as on a cluster's head node: it joins the
    cluster, writes what a plain run writes, and leaves the cluster running."""
    address = cluster.get_runtime_context().gcs_address
    out = tmp_path / "out.txt"
    result = subprocess.run([sys.executable, "-m", "transdec", "transcribe", str(manifest), "--batch-size", "4",
                             "--item-phrases", "--output", str(out), "--ray", address], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert out.read_text() == plain("text", 4, item_phrases=True)
    assert "ray: 14 item(s) in 1 window(s) of up to 32, 1 replica" in result.stderr
    wait_for_free_cpus(cluster)  # still up, and the job's replica is gone with the job

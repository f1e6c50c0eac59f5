"""``transdec stream`` on the bundled model and the example recordings, and ``--mic`` with a fake input device (a
stand-in ``sounddevice`` module that plays a recording through the callback, as PortAudio would)."""

import json
import sys
import threading
import time
import types

import numpy as np

from helpers import cli
from transdec.audio import load_audio

LOGIC = "examples/espeak_logic.flac"
LOGIC_TEXT = "logic is a systematic method of coming to the wrong conclusion with confidence"


def test_files_stream_together_with_final_segments_and_word_times(capsys):
    code, out, _ = cli(capsys, "stream", LOGIC, "examples/piper_are_you_making_this_up.flac", "--format", "jsonl")
    assert code == 0
    records = {record["path"]: record for record in map(json.loads, out.splitlines())}
    assert records[LOGIC]["text"] == LOGIC_TEXT
    words = records[LOGIC]["words"]
    assert [word["word"] for word in words] == LOGIC_TEXT.split()
    assert all(a["end"] <= b["start"] + 1e-9 for a, b in zip(words, words[1:]))
    assert set(records) == {LOGIC, "examples/piper_are_you_making_this_up.flac"}


def test_partials_grow_and_text_lines_carry_times(capsys):
    code, out, err = cli(capsys, "stream", LOGIC, "--partials", "--chunk-ms", "240", "--right-context-ms", "240")
    assert code == 0
    assert out.strip().endswith(LOGIC_TEXT) and out.startswith("[   0.00 -")
    partials = err.splitlines()
    assert len(partials) > 5 and all(LOGIC_TEXT.startswith(line[:-3]) for line in partials[1:])


def test_realtime_takes_the_recording_s_duration(capsys):
    began = time.perf_counter()
    code, out, _ = cli(capsys, "stream", "examples/piper_are_you_making_this_up.flac", "--realtime")
    assert code == 0 and out.strip()
    assert time.perf_counter() - began >= 2.0  # the recording lasts 2.1 s


def test_a_bad_file_is_reported_and_the_others_go_on(capsys, tmp_path):
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF....WAVEfmt not audio at all")
    code, out, err = cli(capsys, "stream", LOGIC, str(bad))
    assert code == 1 and LOGIC_TEXT in out and "bad.wav" in err


def test_usage_errors_are_one_line(capsys):
    code, _, err = cli(capsys, "stream")
    assert code == 2 and "no audio files given" in err
    code, _, err = cli(capsys, "stream", LOGIC, "--chunk-ms", "0")
    assert code == 2 and "--chunk-ms" in err and len(err.strip().splitlines()) == 1


def fake_sounddevice(samples: np.ndarray) -> types.ModuleType:
    """A ``sounddevice`` whose input device plays ``samples`` faster than real time, then silence."""
    module = types.ModuleType("sounddevice")

    class InputStream:
        def __init__(self, samplerate, channels, dtype, device, blocksize, callback):
            assert channels == 1 and dtype == "float32"
            self.blocksize, self.callback = blocksize, callback
            self.running = False

        def _play(self):
            position = 0
            while self.running:
                block = samples[position : position + self.blocksize]
                block = np.pad(block, (0, self.blocksize - len(block)))
                self.callback(block[:, None].astype(np.float32), self.blocksize, None, None)
                position += self.blocksize
                time.sleep(0.001)

        def __enter__(self):
            self.running = True
            self.thread = threading.Thread(target=self._play, daemon=True)
            self.thread.start()
            return self

        def __exit__(self, *exc):
            self.running = False
            self.thread.join()

    module.InputStream = InputStream
    return module


def test_the_microphone_streams_through_a_fake_input_device(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "sounddevice", fake_sounddevice(load_audio(LOGIC, 16000)))
    code, out, err = cli(capsys, "stream", "--mic", "--seconds", "6", "--format", "jsonl")
    assert code == 0
    assert [json.loads(line)["text"] for line in out.splitlines()] == [LOGIC_TEXT]
    assert "logic is a" in err  # the partial results


def test_mic_without_sounddevice_says_what_to_install(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "sounddevice", None)
    code, _, err = cli(capsys, "stream", "--mic", "--seconds", "1")
    assert code == 2 and "transdec[mic]" in err


def test_beam_search_and_an_lm_stream_too(capsys, tmp_path):
    from arpa_fixtures import random_arpa

    lm = tmp_path / "lm.arpa"
    lm.write_text(random_arpa(256, order=2, seed=1))
    code, out, err = cli(capsys, "stream", LOGIC, "--beam-size", "4", "--lm", lm, "--lm-weight", "0.1")
    assert code == 0, err
    assert out.split("] ", 1)[1].strip() == LOGIC_TEXT
    code, _, err = cli(capsys, "stream", LOGIC, "--lm-weight", "0.3")
    assert code == 2 and "without --lm" in err


def test_more_files_than_streams_wait_for_a_free_one(capsys):
    code, out, _ = cli(capsys, "stream", LOGIC, LOGIC, "examples/piper_are_you_making_this_up.flac", "--max-streams",
                       "1", "--format", "jsonl", "--no-endpoint")
    assert code == 0
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["path"] for r in records] == [LOGIC, LOGIC, "examples/piper_are_you_making_this_up.flac"]
    assert records[0]["text"] == records[1]["text"] == LOGIC_TEXT


def test_the_decoding_flags_are_transcribes_and_a_strategy_that_does_not_stream_is_refused(capsys):
    """``--decoding`` and the options of the strategies that stream, generated as for ``transcribe``; without
    ``--decoding``, the first strategy that streams and takes the options given."""
    code, out, err = cli(capsys, "stream", LOGIC, "--decoding", "beam_alsd_pp", "--beam-size", "2", "--format", "jsonl")
    assert code == 0, err
    assert json.loads(out)["text"] == LOGIC_TEXT
    code, out, err = cli(capsys, "stream", LOGIC, "--window-size", "4", "--format", "jsonl")
    assert code == 0, err
    assert json.loads(out)["text"] == LOGIC_TEXT
    code, _, err = cli(capsys, "stream", LOGIC, "--decoding", "beam_maes")
    assert code == 2
    assert "'beam_maes' does not stream; strategies that stream: greedy_label, greedy_wind, greedy_reference, " \
           "beam_alsd_pp" in err
    code, _, err = cli(capsys, "stream", LOGIC, "--beam-size", "2", "--window-size", "3")
    assert code == 2 and "takes all of --beam-size, --window-size" in err


def test_a_flac_stream_whose_header_gives_no_length_streams_to_its_end(capsys, tmp_path):
    from helpers import flac_without_length

    piped = flac_without_length(LOGIC, tmp_path / "piped.flac")
    code, out, err = cli(capsys, "stream", piped, "--format", "jsonl")
    assert code == 0, err
    assert json.loads(out)["text"] == LOGIC_TEXT

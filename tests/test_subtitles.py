"""Subtitles: the cue rule (``transdec.subtitles``), the documents' file names, and ``transdec transcribe --format
srt|vtt|tsv`` run on the bundled model and examples, its documents parsed back and checked against the words of the
transcripts, on the examples and on a 20-minute recording made of them (encoded in windows)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import soundfile

from transdec import load_model, long_audio, transcribe_files
from transdec.audio import load_audio
from transdec.sources import AudioItem
from transdec.subtitle_files import SubtitleOptions, document_names
from transdec.subtitles import CueRule, cues_of, document, srt, timestamp, tsv, vtt
from transdec.transcribe import WordTiming

from helpers import cli

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(str(path) for path in (ROOT / "examples").glob("*.flac"))


# --- parsing the documents back --------------------------------------------------------------------------------------

@dataclass
class ParsedCue:
    start: int  # milliseconds
    end: int
    words: list[str]
    word_starts: dict[int, int]  # WebVTT: index of a word in the cue -> its timestamp tag, in milliseconds


TIME = r"(\d\d):(\d\d):(\d\d)[,.](\d\d\d)"


def milliseconds(match: re.Match, first: int = 1) -> int:
    hours, minutes, seconds, millis = (int(match[first + i]) for i in range(4))
    return ((hours * 60 + minutes) * 60 + seconds) * 1000 + millis


def parse_srt(text: str) -> list[ParsedCue]:
    cues = []
    blocks = text.split("\n\n") if text else []
    for number, block in enumerate(blocks, 1):
        lines = block.strip("\n").split("\n")
        assert lines[0] == str(number), block
        timing = re.fullmatch(f"{TIME} --> {TIME}", lines[1])
        assert timing, lines[1]
        assert len(lines) == 3, f"one line of text per cue: {block!r}"
        cues.append(ParsedCue(milliseconds(timing), milliseconds(timing, 5), lines[2].split(" "), {}))
    assert not text or text.endswith("\n") and not text.endswith("\n\n")
    return cues


def parse_vtt(text: str) -> list[ParsedCue]:
    assert text.startswith("WEBVTT\n\n")
    cues = []
    for block in filter(None, text[len("WEBVTT\n\n"):].split("\n\n")):
        timing_line, payload = block.strip("\n").split("\n")
        timing = re.fullmatch(f"{TIME} --> {TIME}", timing_line)
        assert timing, timing_line
        words, starts = [], {}
        for index, part in enumerate(payload.split(" ")):
            tag = re.fullmatch(f"<{TIME}>(.*)", part)
            if tag:
                starts[index] = milliseconds(tag)
                part = tag[5]
            assert "<" not in part and ">" not in part, payload
            words.append(part.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
        cues.append(ParsedCue(milliseconds(timing), milliseconds(timing, 5), words, starts))
    return cues


def parse_tsv(text: str) -> list[ParsedCue]:
    lines = text.split("\n")
    assert lines[0] == "start\tend\ttext" and lines[-1] == ""
    cues = []
    for line in lines[1:-1]:
        start, end, words = line.split("\t")
        cues.append(ParsedCue(int(start), int(end), words.split(" "), {}))
    return cues


PARSERS = {"srt": parse_srt, "vtt": parse_vtt, "tsv": parse_tsv}


def ms(seconds: float) -> int:
    return round(seconds * 1000)


def check_cues(cues: list[ParsedCue], words: list[WordTiming], rule: CueRule) -> None:
    """The cues hold the words in order, each cue from its first word's start to its last word's end (or the next
    cue's start, never overlapping it), in time order; inside a cue no pause reaches the pause limit and the limits
    hold (but for a cue of one word, or words the model emitted at the cue's first frame), and a new cue starts only
    where continuing would break one of them."""
    assert [word for cue in cues for word in cue.words] == [word.word for word in words]
    starts = list(np.cumsum([0] + [len(cue.words) for cue in cues]))
    for number, cue in enumerate(cues):
        own = words[starts[number] : starts[number + 1]]
        following = cues[number + 1].start if number + 1 < len(cues) else None
        assert cue.start == ms(own[0].start)
        assert cue.end == ms(own[-1].end) or (cue.end == following and following < ms(own[-1].end))
        assert cue.start < cue.end and (following is None or cue.end <= following), "cues overlap or go back"
        for previous, word in zip(own, own[1:]):
            assert word.start - previous.end < rule.pause_seconds
        if len(own) > 1 and all(word.start > own[0].start for word in own[1:]):
            assert own[-1].end - own[0].start <= rule.max_seconds
            assert rule.max_chars is None or len(" ".join(cue.words)) <= rule.max_chars
        if number:
            before = words[starts[number - 1] : starts[number]]
            text = " ".join([word.word for word in before] + cue.words[:1])
            assert (own[0].start - before[-1].end >= rule.pause_seconds
                    or own[0].end - before[0].start > rule.max_seconds
                    or (rule.max_chars is not None and len(text) > rule.max_chars)), f"cue {number} need not start"
        for index, at in cue.word_starts.items():
            assert at == ms(own[index].start)
            assert cue.start < at < cue.end


# --- the rule and the documents --------------------------------------------------------------------------------------


def words_at(*spans: tuple[str, float, float]) -> list[WordTiming]:
    return [WordTiming(word, start, end, 1.0) for word, start, end in spans]


def test_cues_end_at_pauses_durations_and_characters() -> None:
    words = words_at(("one", 0.0, 0.4), ("two", 0.5, 0.9), ("three", 1.8, 2.2), ("four", 2.3, 2.6))
    assert [c.text for c in cues_of(words)] == ["one two", "three four"]  # a pause of 0.9 s
    assert [c.text for c in cues_of(words, CueRule(pause_seconds=1.0))] == ["one two three four"]
    assert [c.text for c in cues_of(words, CueRule(max_seconds=2.0))] == ["one two", "three four"]
    assert [c.text for c in cues_of(words, CueRule(pause_seconds=5, max_seconds=2.0))] == ["one two", "three four"]
    # "one two" is 7 characters, "one two three" 13: a cue of 12 ends before "three"
    assert [c.text for c in cues_of(words, CueRule(pause_seconds=5, max_chars=13))] == ["one two three", "four"]
    assert [c.text for c in cues_of(words, CueRule(pause_seconds=5, max_chars=12))] == ["one two", "three four"]
    assert [c.text for c in cues_of(words, CueRule(pause_seconds=5, max_chars=3))] == ["one", "two", "three", "four"]
    assert [(c.start, c.end) for c in cues_of(words)] == [(0.0, 0.9), (1.8, 2.6)]
    assert cues_of([]) == []
    # the character limit counts the text the cue shows, words and the spaces between them: 21 words of 3
    many = words_at(*((f"w{i:02d}", i * 0.1, i * 0.1 + 0.05) for i in range(60)))
    assert [len(c.text) for c in cues_of(many, CueRule(max_chars=84))] == [83, 83, 71]
    assert len(cues_of(many, CueRule(max_chars=None))) == 1
    # a word longer than the limit has a cue of its own; words are never split
    assert [c.text for c in cues_of(words_at(("a", 0, 0.1), ("b" * 90, 0.1, 0.5), ("c", 0.5, 0.6)))] == [
        "a", "b" * 90, "c"]


def test_cues_never_overlap_where_words_share_a_frame() -> None:
    # "two" ends at 0.48, a frame after its last token, where "three" was emitted: the cut is at 0.44
    words = words_at(("one", 0.0, 0.2), ("two", 0.24, 0.48), ("three", 0.44, 0.6))
    assert [(c.text, c.start, c.end) for c in cues_of(words, CueRule(max_chars=7))] == [
        ("one two", 0.0, 0.44), ("three", 0.44, 0.6)]
    # a cut at the cue's own start would leave it no time: the word stays, past the limit
    words = words_at(("one", 0.0, 0.04), ("two", 0.0, 0.04), ("three", 0.04, 0.2))
    assert [(c.text, c.start, c.end) for c in cues_of(words, CueRule(max_chars=3))] == [
        ("one two", 0.0, 0.04), ("three", 0.04, 0.2)]


@pytest.mark.parametrize("bad", [dict(pause_seconds=0), dict(max_seconds=-1), dict(max_seconds=float("inf")),
                                 dict(max_chars=0)])
def test_cue_rule_refuses_limits_that_cut_nothing_sensible(bad: dict) -> None:
    with pytest.raises(ValueError):
        CueRule(**bad)


def test_documents_in_each_format() -> None:
    words = words_at(("a", 0.0, 0.5), ("b&c", 0.6, 1.0), ("<d>", 2.0, 2.5), ("e-->f", 3661.0, 3661.25))
    cues = cues_of(words)
    assert srt(cues) == ("1\n00:00:00,000 --> 00:00:01,000\na b&c\n\n2\n00:00:02,000 --> 00:00:02,500\n<d>\n\n"
                         "3\n01:01:01,000 --> 01:01:01,250\ne->f\n")
    assert vtt(cues) == ("WEBVTT\n\n00:00:00.000 --> 00:00:01.000\na b&amp;c\n\n00:00:02.000 --> 00:00:02.500\n"
                         "&lt;d&gt;\n\n01:01:01.000 --> 01:01:01.250\ne-&gt;f\n")
    assert tsv(cues) == "start\tend\ttext\n0\t1000\ta b&c\n2000\t2500\t<d>\n3661000\t3661250\te-->f\n"
    assert document(words, "tsv") == tsv(cues)
    assert (srt([]), vtt([]), tsv([])) == ("", "WEBVTT\n\n", "start\tend\ttext\n")
    assert timestamp(59.9996) == "00:01:00,000" and timestamp(360000.0, ".") == "100:00:00.000"
    tabbed = words_at(("x\ty", 0.0, 0.5), ("z\nw", 0.5, 1.0))
    assert tsv(cues_of(tabbed)) == "start\tend\ttext\n0\t1000\tx y z w\n"
    with pytest.raises(ValueError, match="unknown subtitle format 'ass'"):
        document(words, "ass")


def test_vtt_word_timestamps_lie_inside_their_cue_and_increase() -> None:
    # "c" starts in the millisecond "b" does: no tag of its own, it shows with "b"
    words = words_at(("a", 1.0, 1.2), ("b", 1.24, 1.3), ("c", 1.24, 1.4), ("d", 1.5, 1.6))
    assert vtt(cues_of(words), word_timestamps=True) == (
        "WEBVTT\n\n00:00:01.000 --> 00:00:01.600\na <00:00:01.240>b c <00:00:01.500>d\n")
    assert parse_vtt(vtt(cues_of(words), word_timestamps=True))[0].word_starts == {1: 1240, 3: 1500}
    with pytest.raises(ValueError, match="need output_format 'vtt'"):
        SubtitleOptions("srt", word_timestamps=True)


def test_document_names_never_collide() -> None:
    items = [AudioItem(Path("rec/a/talk.flac")), AudioItem(Path("rec/b/talk.wav")), AudioItem(Path("rec/c/x.flac")),
             AudioItem(Path("rec/c/x.wav")), AudioItem(Path("rec/d/X.mp3")), AudioItem(Path("one.flac")),
             AudioItem(Path("long.flac"), 12.5, 30.0), AudioItem(Path("long.flac"), 42.5, 30.0),
             AudioItem(Path("dup.flac")), AudioItem(Path("dup.flac")), AudioItem(Path("dup-2.flac"))]
    names = [name.as_posix() for name in document_names(items, "srt")]
    assert names == ["a/talk.srt", "b/talk.srt", "c/x.flac.srt", "c/x.wav.srt", "d/X.srt", "one.srt",
                     "long_12.5s+30s.srt", "long_42.5s+30s.srt", "dup.srt", "dup-3.srt", "dup-2.srt"]
    assert len({name.casefold() for name in names}) == len(names)
    assert [n.as_posix() for n in document_names([AudioItem(Path("/r/x.wav")), AudioItem(Path("/r/s/x.wav"))],
                                                 "vtt")] == ["x.vtt", "s/x.vtt"]


# --- transdec transcribe ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def example_words() -> dict[str, list[WordTiming]]:
    """The examples' words as the command decodes them: all three in one batch."""
    model = load_model("tiny-en-rnnt")
    return {Path(path).stem: transcript.words for path, transcript in zip(EXAMPLES, model.transcribe(EXAMPLES))}


@pytest.mark.parametrize("output_format, flags, rule", [
    ("srt", [], CueRule()),
    ("vtt", ["--vtt-word-timestamps", "--max-cue-chars", "30"], CueRule(max_chars=30)),
    ("tsv", ["--max-cue-seconds", "1.5", "--cue-pause", "0.3", "--max-cue-chars", "0"],
     CueRule(pause_seconds=0.3, max_seconds=1.5, max_chars=None)),
])
def test_examples_to_subtitle_files(tmp_path: Path, capsys, example_words, output_format: str, flags: list[str],
                                    rule: CueRule) -> None:
    code, out, err = cli(capsys, "transcribe", *EXAMPLES, "--format", output_format, "--output-dir", tmp_path / "subs",
                         *flags)
    assert (code, out, err) == (0, "", "")
    files = sorted(p.name for p in (tmp_path / "subs").iterdir())
    assert files == [f"{Path(path).stem}.{output_format}" for path in EXAMPLES]
    for stem, words in example_words.items():
        cues = PARSERS[output_format]((tmp_path / "subs" / f"{stem}.{output_format}").read_text(encoding="utf-8"))
        check_cues(cues, words, rule)
        if output_format == "vtt":
            assert sum(len(cue.word_starts) for cue in cues) > len(words) / 2  # the words' starts are there
        if output_format == "tsv":
            assert len(cues) > 1  # the 1.5 s limit cuts every example


def test_one_recording_to_standard_output_or_a_file(tmp_path: Path, capsys, example_words) -> None:
    logic = next(path for path in EXAMPLES if "logic" in path)
    code, out, _ = cli(capsys, "transcribe", logic, "--format", "srt")
    assert code == 0 and out == document(example_words["espeak_logic"], "srt")
    assert out == "1\n00:00:00,000 --> 00:00:03,760\nlogic is a systematic method of coming to the wrong conclusion " \
                  "with confidence\n"
    target = tmp_path / "logic.vtt"
    code, out, _ = cli(capsys, "transcribe", logic, "--format", "vtt", "--output", target)
    assert code == 0 and out == "" and target.read_text() == document(example_words["espeak_logic"], "vtt")
    assert [p.name for p in tmp_path.iterdir()] == ["logic.vtt"]


@pytest.mark.parametrize("args, message", [
    (["{examples}", "--format", "srt"], "--format srt writes a document per recording and the inputs hold 3: give "
                                        "--output-dir DIR for a file each"),
    (["{examples}", "--format", "tsv", "--output", "{tmp}/x.tsv"], "the inputs hold 3"),
    (["{examples}", "--output-dir", "{tmp}"], "--output-dir is for --format srt, vtt and tsv (a file per recording); "
                                              "--format text goes to one --output file"),
    (["{examples}", "--format", "jsonl", "--max-cue-chars", "40", "--cue-pause", "1"],
     "--cue-pause, --max-cue-chars: for --format srt, vtt and tsv"),
    (["{examples}", "--format", "srt", "--vtt-word-timestamps", "--output-dir", "{tmp}"],
     "--vtt-word-timestamps: for --format vtt"),
    (["{examples}", "--format", "srt", "--output", "{tmp}/x.srt", "--output-dir", "{tmp}"],
     "--output and --output-dir: give one"),
    (["{examples}", "--format", "srt", "--resume"], "--resume needs --output or --output-dir"),
    (["{examples}", "--format", "srt", "--output-dir", "{examples}/espeak_logic.flac/subs"], "is not a directory"),
    (["{examples}", "--format", "srt", "--output-dir", "{tmp}", "--max-cue-seconds", "0"],
     "argument --max-cue-seconds: must be more than 0, got '0'"),
    (["{examples}", "--format", "srt", "--output-dir", "{tmp}", "--max-cue-chars", "-1"],
     "argument --max-cue-chars: must be at least 0, got -1"),
    (["{examples}", "--format", "srt", "--output-dir", "{tmp}", "--ray"], "--ray writes --format text, jsonl or "
                                                                          "manifest"),
])
def test_subtitle_flags_are_checked_before_the_model_is_loaded(tmp_path: Path, capsys, args: list[str],
                                                              message: str) -> None:
    args = [a.format(tmp=tmp_path, examples=ROOT / "examples") for a in args]
    code, out, err = cli(capsys, "transcribe", *args, "--model", "no-such-model")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert message in err and "no model file" not in err


def test_bad_items_are_reported_and_the_others_written(tmp_path: Path, capsys) -> None:
    (tmp_path / "in" / "b").mkdir(parents=True)
    (tmp_path / "in" / "broken.wav").write_text("not audio")
    (tmp_path / "ex").mkdir()
    logic = next(path for path in EXAMPLES if "logic" in path)
    (tmp_path / "ex" / "espeak_logic.flac").write_bytes(Path(logic).read_bytes())
    soundfile.write(tmp_path / "in" / "espeak_logic.wav", load_audio(logic, 16000), 16000)  # the same name
    soundfile.write(tmp_path / "in" / "b" / "silence.wav", np.zeros(16000, np.float32), 16000)
    code, out, err = cli(capsys, "transcribe", tmp_path / "in", tmp_path / "ex" / "espeak_logic.flac", "--format",
                         "srt", "--output-dir", tmp_path / "out")
    assert code == 1 and out == ""
    assert "broken.wav: not readable as audio" in err and "1 item(s) failed, 3 transcribed" in err
    written = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*") if p.is_file())
    # the two espeak_logic recordings keep their folders, from the one they share
    assert written == ["ex/espeak_logic.srt", "in/espeak_logic.srt", "silence.srt"]
    assert (tmp_path / "out" / "silence.srt").read_text() == ""  # no words: an empty SubRip document
    for folder in ("ex", "in"):
        assert parse_srt((tmp_path / "out" / folder / "espeak_logic.srt").read_text())[0].words[0] == "logic"


def test_an_interrupted_run_keeps_whole_files_and_resume_finishes_it(tmp_path: Path, capsys, monkeypatch,
                                                                    example_words) -> None:
    real = transcribe_files.transcribe
    calls = []

    def transcribe_then_stop(*args):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(transcribe_files, "transcribe", transcribe_then_stop)
    out = tmp_path / "subs"
    args = ("transcribe", *EXAMPLES, "--format", "tsv", "--output-dir", out, "--batch-size", "1")
    code, _, err = cli(capsys, *args)
    assert code == 130
    assert f"interrupted; 1 of 3 file(s) are in {out} (--resume carries on from there)" in err
    # one item per batch, the shortest first
    assert [p.name for p in out.iterdir()] == ["piper_are_you_making_this_up.tsv"]
    finished = out / "piper_are_you_making_this_up.tsv"
    finished.write_text(finished.read_text() + "kept\n")  # a resumed run leaves a finished file alone
    monkeypatch.setattr(transcribe_files, "transcribe", real)
    code, _, err = cli(capsys, *args, "--resume")
    assert code == 0 and "resuming: 1 recording(s) have their file already" in err
    assert finished.read_text().endswith("kept\n")
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{Path(path).stem}.tsv" for path in EXAMPLES)
    for stem in ("espeak_logic", "piper_allens_axiom"):
        check_cues(parse_tsv((out / f"{stem}.tsv").read_text()), example_words[stem], CueRule())
    code, _, err = cli(capsys, *args, "--resume")
    assert code == 0 and "resuming: 3 recording(s)" in err


def test_a_file_that_cannot_be_written_is_one_line(tmp_path: Path, capsys) -> None:
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "espeak_logic.srt").mkdir()  # a folder where the document goes
    code, _, err = cli(capsys, "transcribe", EXAMPLES[0], "--format", "srt", "--output-dir", tmp_path / "subs")
    assert code == 2 and err.count("\n") == 1 and "cannot write" in err and "espeak_logic.srt" in err
    assert [p.name for p in (tmp_path / "subs").iterdir()] == ["espeak_logic.srt"]  # no temporary file left


# --- a long recording ------------------------------------------------------------------------------------------------


def long_recording(path: Path, seconds: float) -> list[tuple[float, float]]:
    """The examples one after another, 1-3 s of silence after each, up to ``seconds``; writes it to ``path`` and
    returns where each example is (seconds)."""
    clips = [load_audio(example, 16000) for example in EXAMPLES]
    rng = np.random.default_rng(0)
    parts, spans, length = [], [], 0
    while True:
        clip = clips[len(spans) % len(clips)]
        silence = np.zeros(int(16000 * rng.uniform(1.0, 3.0)), np.float32)
        if length + len(clip) > seconds * 16000:
            break
        spans.append((length / 16000, (length + len(clip)) / 16000))
        parts += [clip, silence]
        length += len(clip) + len(silence)
    audio = np.concatenate(parts)[: int(seconds * 16000)]
    audio = np.pad(audio, (0, int(seconds * 16000) - len(audio)))
    soundfile.write(path, audio, 16000, subtype="PCM_16")
    return spans


def test_a_20_minute_recording_is_encoded_in_windows_and_its_cues_follow_it(tmp_path: Path, capsys,
                                                                            monkeypatch) -> None:
    seconds = 20 * 60
    spans = long_recording(tmp_path / "long.wav", seconds)
    windowed, transcripts = [], []
    encode_long, transcribe = long_audio.encode_long, transcribe_files.transcribe
    monkeypatch.setattr(long_audio, "encode_long", lambda model, waveform, *a: windowed.append(len(waveform))
                        or encode_long(model, waveform, *a))

    def transcribe_and_keep(*args):
        transcripts.extend(transcribe(*args))
        return transcripts

    monkeypatch.setattr(transcribe_files, "transcribe", transcribe_and_keep)
    out = tmp_path / "long.srt"
    code, _, err = cli(capsys, "transcribe", tmp_path / "long.wav", "--format", "srt", "--output", out,
                       "--max-cue-chars", "42")  # a line each: two of the examples are cut
    assert code == 0, err
    assert windowed == [seconds * 16000]  # through the long-audio path, in 30 s windows
    words = transcripts[0].words
    cues = parse_srt(out.read_text())
    check_cues(cues, words, CueRule(max_chars=42))
    assert len(cues) > len(spans)
    # Each cue lies inside one example (they are 1 s or more apart, past the pause limit), every example has cues,
    # and the cues span the recording from the first example to the last.
    slack = 300  # ms: a word's frames around its sound
    owner = [next((i for i, (start, end) in enumerate(spans) if ms(start) - slack <= cue.start
                   and cue.end <= ms(end) + slack), None) for cue in cues]
    assert None not in owner, [(cue.start, cue.end) for cue, o in zip(cues, owner) if o is None][:5]
    assert owner == sorted(owner) and set(owner) == set(range(len(spans)))
    assert cues[0].start <= ms(spans[0][0]) + slack and cues[-1].end >= ms(spans[-1][1]) - 1000
    assert spans[-1][1] > seconds - 10

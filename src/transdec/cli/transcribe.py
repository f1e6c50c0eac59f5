"""Transcribe audio files (any format libsndfile reads, resampled as needed), folders of them (recursively) and NeMo
JSONL manifests. Bad items are reported and skipped, and each result is written as soon as it and the items before it
are done.
"""

from __future__ import annotations

import argparse

from transdec.cli.argtypes import at_least, positive_seconds
from transdec.cli.common import (add_device_argument, add_length_policy_arguments, add_long_audio_arguments,
                                 add_model_argument, chunking, device_problem, fail, load_for_decoding,
                                 output_dir_problem, output_problem, replica_loader, require_one_strategy)
from transdec.cli.fusions import (add_boost_arguments, add_lm_arguments, boost_options, lm_problem,
                                  require_one_lm_weight)
from transdec.decoding.flags import add_decoding_arguments, decoding_configs
from transdec.scale.flags import absolute_paths, add_ray_arguments, ray_options
from transdec.subtitles import SUBTITLE_FORMATS, CueRule

#: The command's line in ``transdec --help``, and its exit codes, as its own help ends.
HELP = "transcribe audio files, folders and NeMo manifests"
EXIT_CODES = ("exit codes: 0 all transcribed; 1 some items failed (each is reported) or there was nothing to "
              "transcribe; 2 a usage error (a bad option, a missing model, an output that cannot be written); 130 "
              "interrupted (Ctrl-C or SIGTERM), with the results so far in OUTPUT.partial when --output is given")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("transcribe", help=HELP, description=__doc__, epilog=EXIT_CODES)
    p.add_argument("paths", nargs="+", metavar="PATH")
    add_model_argument(p)
    p.add_argument("--batch-size", type=at_least(1), default=16)
    add_device_argument(p)
    add_length_policy_arguments(p)
    add_long_audio_arguments(p)
    add_lm_arguments(p)
    add_boost_arguments(p)
    p.add_argument("--format", choices=["text", "jsonl", "manifest", *SUBTITLE_FORMATS], default="text",
                   help="text: one transcript per line; jsonl: text, words with times and confidences; "
                        "manifest: the input entries with pred_text added; srt, vtt, tsv: subtitles, a document "
                        "per recording (see 'subtitles' below)")
    p.add_argument("--output", default=None,
                   help="write here instead of standard output; an existing file is replaced only when the run "
                        "is complete (if interrupted, every result finished so far goes to OUTPUT.partial)")
    p.add_argument("--resume", action="store_true",
                   help="with --output: keep the results in OUTPUT.partial and transcribe only the items it lacks")
    p.add_argument("--allow-upsampling", action="store_true", help="accept audio below the model's sample rate")
    add_subtitle_arguments(p)
    add_ray_arguments(p)
    add_decoding_arguments(p, default="greedy_label")


#: The cue flags, each with its :class:`CueRule` field; None in ``args``: not given (the rule's default).
CUE_FLAGS = {"--cue-pause": "pause_seconds", "--max-cue-seconds": "max_seconds", "--max-cue-chars": "max_chars"}


def add_subtitle_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``--format srt|vtt|tsv``: where the documents go and how the words are cut into cues."""
    group = p.add_argument_group(
        "subtitles", "--format srt, vtt or tsv writes a document per recording: one recording to standard output or "
        "--output FILE, any number to --output-dir DIR. Each file is renamed into place once whole, so an "
        "interrupted run leaves only finished files, and --resume skips the recordings whose file is there. Cues "
        "are cut from the word times as the server cuts its verbose_json segments: a new one at a pause, before a "
        "word that would pass the length or character limit. tsv is Whisper's: a 'start<TAB>end<TAB>text' header, "
        "times in integer milliseconds.")
    group.add_argument("--output-dir", default=None, metavar="DIR",
                       help="write each recording's document to DIR/NAME.FORMAT, NAME the recording's name without "
                            "its extension; recordings of the same name keep their folders (DIR/a/x.srt, "
                            "DIR/b/x.srt)")
    rule = CueRule()
    group.add_argument("--cue-pause", type=positive_seconds, default=None, metavar="SECONDS",
                       help="a pause between words at least this long starts a new cue (default "
                            f"{rule.pause_seconds:g})")
    group.add_argument("--max-cue-seconds", type=positive_seconds, default=None, metavar="SECONDS",
                       help=f"a cue ends before a word that would make it longer (default {rule.max_seconds:g})")
    group.add_argument("--max-cue-chars", type=at_least(0), default=None, metavar="N",
                       help="a cue ends before a word that would make its text longer than N characters (default "
                            f"{rule.max_chars}, two lines of 42; 0: no limit)")
    group.add_argument("--vtt-word-timestamps", action="store_true",
                       help="vtt: each word's start inside its cue (<00:00:01.250>), for players that show the words "
                            "as they are spoken")


def subtitle_problem(args: argparse.Namespace) -> str | None:
    """Why the subtitle flags cannot be used as given (None: they can), checked before the model is loaded: a
    subtitle document holds one recording, so without --output-dir the inputs are counted here."""
    if args.format not in SUBTITLE_FORMATS:
        if args.output_dir is not None:
            return (f"--output-dir is for --format srt, vtt and tsv (a file per recording); --format {args.format} "
                    "goes to one --output file")
        given = [flag for flag in CUE_FLAGS if getattr(args, _dest(flag)) is not None]
        given += ["--vtt-word-timestamps"] if args.vtt_word_timestamps else []
        return f"{', '.join(given)}: for --format srt, vtt and tsv" if given else None
    if args.vtt_word_timestamps and args.format != "vtt":
        return "--vtt-word-timestamps: for --format vtt"
    if args.output is not None and args.output_dir is not None:
        return "--output and --output-dir: give one (--output FILE for one recording, --output-dir DIR for any number)"
    if args.ray is not None:
        return f"--ray writes --format text, jsonl or manifest; --format {args.format} is written without --ray"
    if args.resume and args.output is None and args.output_dir is None:
        return "--resume needs --output or --output-dir (it skips the recordings whose file is there)"
    if args.output_dir is not None:
        return output_dir_problem(args.output_dir)
    from transdec.sources import collect_inputs
    from transdec.subtitle_files import target_problem

    return target_problem(len(collect_inputs(args.paths)[0]), args.format, None)


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def cue_rule(args: argparse.Namespace) -> CueRule:
    """The cue flags as a :class:`CueRule`: the rule's defaults where a flag is not given."""
    values = {field: getattr(args, _dest(flag)) for flag, field in CUE_FLAGS.items()
              if getattr(args, _dest(flag)) is not None}
    if values.get("max_chars") == 0:
        values["max_chars"] = None
    return CueRule(**values)


def run(args: argparse.Namespace) -> int:
    from transdec.transcribe_files import transcribe_files

    try:  # every option is checked before the model is loaded; a bad one is one line, not a traceback
        decodings = decoding_configs(args)
        require_one_strategy(args, decodings, "transcribe")
        ray = ray_options(args)
        problem = (lm_problem(args) or (args.ray is None and device_problem(args.device))
                   or (args.output and output_problem(args.output)) or subtitle_problem(args)
                   or (args.resume and not args.output and args.format not in SUBTITLE_FORMATS
                       and "--resume needs --output (it resumes OUTPUT.partial)"))
        if problem:
            raise ValueError(problem)
        require_one_lm_weight(args, "transcribe")
        boost = boost_options(args)
        if args.ray is None:  # on a cluster, each replica loads the model (ray_transcribe checks it first)
            model, decodings = load_for_decoding(args, decodings, boost)
    except (FileNotFoundError, ValueError) as error:
        return fail("transdec transcribe", error)
    if args.ray is not None:
        from transdec.scale import ray_transcribe

        absolute_paths(args)  # the replicas load the model, LM and phrases from other directories
        return ray_transcribe(replica_loader(args, decodings), args.paths,
                              batch_size=args.batch_size, output_format=args.format, output=args.output,
                              resume=args.resume, allow_upsampling=args.allow_upsampling, chunking=chunking(args),
                              item_boost=boost if args.item_phrases else None, device=args.device, options=ray)
    if args.format in SUBTITLE_FORMATS:
        from transdec.subtitle_files import SubtitleOptions, transcribe_subtitles

        options = SubtitleOptions(args.format, cue_rule(args), args.vtt_word_timestamps)
        return transcribe_subtitles(model, args.paths, decodings[0], options, args.output, args.output_dir,
                                    args.batch_size, args.allow_upsampling, chunking(args), args.resume,
                                    boost if args.item_phrases else None)
    return transcribe_files(model, args.paths, decodings[0], args.batch_size, args.format, args.output,
                            args.allow_upsampling, chunking(args), args.resume, boost if args.item_phrases else None)

"""The files of an ONNX Transducer directory: finding the three graphs, reading ``tokens.txt``, and text from its
pieces for exports that carry no sentencepiece model."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path, PurePath

_PARTS = ("encoder", "decoder", "joiner")
#: The variants :func:`find_parts` chooses between: float32 files and ``.int8.onnx`` ones (dynamically quantized).
VARIANTS = ("fp32", "int8")


def variant_of(path: str | PurePath) -> str:
    """``"int8"`` for ``*.int8.onnx``, ``"fp16"`` for ``*.fp16.onnx``, else ``"fp32"``."""
    for variant in ("int8", "fp16"):
        if PurePath(path).name.endswith(f".{variant}.onnx"):
            return variant
    return "fp32"


def find_parts(directory: Path, variant: str = "fp32") -> dict[str, Path]:
    """``{"encoder": path, "decoder": path, "joiner": path}``: per part, its file of ``variant`` (``"fp32"`` or
    ``"int8"``) where there is one, else its file of the other variant. So a directory with both loads float32 files
    by default and int8 ones when asked, and one with only int8 files (or, as some published sets, int8 encoder and
    joiner with a float32 decoder) loads what it has. ``.fp16.onnx`` files are not loaded."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory}: not a directory of ONNX files")
    try:
        parts, missing = choose_parts((p.name for p in directory.glob("*.onnx")), variant)
    except ValueError as error:
        raise ValueError(f"{directory}: {error}") from None
    if not (directory / "tokens.txt").is_file():
        missing.append("tokens.txt")
    if missing:
        raise FileNotFoundError(f"{directory}: an ONNX Transducer needs encoder, decoder and joiner files and "
                                f"tokens.txt; missing {', '.join(missing)}")
    return {part: directory / name for part, name in parts.items()}


def choose_parts(names: Iterable[str], variant: str = "fp32") -> tuple[dict[str, str], list[str]]:
    """:func:`find_parts`' choice among ``names``, the file names of one folder (a directory, or a Hugging Face Hub
    repository's folder before anything is downloaded): ``{"encoder": name, ...}`` for the parts found, and the
    parts missing (``"joiner*.onnx"``, ...). Two files of one part and variant raise ValueError."""
    names = list(names)
    parts, missing = {}, []
    order = [variant] + [v for v in VARIANTS if v != variant]
    for part in _PARTS:
        # icefall exports may also hold joiner_encoder_proj.onnx and joiner_decoder_proj.onnx: not the joiner.
        candidates = [n for n in names if n.startswith(part) and n.endswith(".onnx") and "_proj" not in n]
        chosen = next(([n for n in candidates if variant_of(n) == v] for v in order
                       if any(variant_of(n) == v for n in candidates)), [])
        if not chosen:
            fp16 = " (only .fp16.onnx, which is not loaded)" if candidates else ""
            missing.append(f"{part}*.onnx{fp16}")
        elif len(chosen) > 1:
            listed = ", ".join(sorted(chosen))
            if any("-chunk-" in n for n in chosen):  # icefall's streaming exports, one per chunk size
                raise ValueError(f"{listed} are streaming exports (chunk sizes in their names); only offline "
                                 "(non-streaming) transducers load")
            raise ValueError(f"more than one {variant_of(chosen[0])} {part} file ({listed}); keep one")
        else:
            parts[part] = chosen[0]
    return parts, missing


def int_metadata(meta: dict[str, str], key: str, file: Path) -> int:
    """The integer ``meta[key]`` of the ONNX file ``file``; a missing or non-integer value is a ValueError naming
    the file."""
    try:
        return int(meta[key])
    except KeyError:
        raise ValueError(f"{file}: metadata {key!r} is missing") from None
    except ValueError:
        raise ValueError(f"{file}: metadata {key}={meta[key]!r} is not an integer") from None


def read_tokens(path: Path) -> list[str]:
    """``tokens.txt`` (``piece id`` per line, ids 0, 1, 2, ... in order) as a list of pieces."""
    pieces: list[str] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        fields = line.rsplit(maxsplit=1)
        if len(fields) != 2 or not fields[1].lstrip("-").isdigit():
            raise ValueError(f"{path}:{number}: expected 'piece id', got {line!r}")
        if int(fields[1]) != len(pieces):
            raise ValueError(f"{path}:{number}: id {fields[1]} out of order (expected {len(pieces)})")
        pieces.append(fields[0])
    return pieces


class TokensTokenizer:
    """Text from ``tokens.txt`` pieces (sentencepiece's ``▁`` marks a word start), for exports without
    ``tokenizer.model``."""

    def __init__(self, pieces: list[str]) -> None:
        self.pieces = pieces
        self.vocab_size = len(pieces)

    def decode(self, ids: list[int]) -> str:
        return "".join(self.pieces[i] for i in ids).replace("▁", " ").strip()

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``: each word (split at spaces) as ``▁word``, cut greedily into the longest pieces there
        are. Without the sentencepiece model this is an approximation: its merges may cut a word otherwise. A
        character no piece starts with is ``<unk>`` where there is one, else a ValueError."""
        if not hasattr(self, "_ids"):
            self._ids = {piece: i for i, piece in reversed(list(enumerate(self.pieces)))}  # the first of repeats
            self._longest = max(map(len, self.pieces), default=0)
        ids = []
        for word in text.split():
            rest = "▁" + word
            while rest:
                length = next((n for n in range(min(len(rest), self._longest), 0, -1) if rest[:n] in self._ids), 0)
                if length:
                    ids.append(self._ids[rest[:length]])
                elif "<unk>" in self._ids:
                    ids.append(self._ids["<unk>"])
                    length = 1
                else:
                    raise ValueError(f"no token starts with {rest[0]!r} (in {word!r}) and there is no <unk>")
                rest = rest[length:]
        return ids

    def word_starts(self, ids: list[int]) -> list[bool]:
        return [self.pieces[i].startswith("▁") or position == 0 for position, i in enumerate(ids)]

"""The files of an ONNX Transducer directory: finding the three graphs, reading ``tokens.txt``, and text from its
pieces for exports that carry no sentencepiece model."""

from __future__ import annotations

from pathlib import Path

_PARTS = ("encoder", "decoder", "joiner")


def find_parts(directory: Path) -> dict[str, Path]:
    """``{"encoder": path, "decoder": path, "joiner": path}``; float files are preferred to ``.int8.onnx`` ones."""
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory}: not a directory of ONNX files")
    parts, missing = {}, []
    for part in _PARTS:
        # icefall exports may also hold joiner_encoder_proj.onnx and joiner_decoder_proj.onnx: not the joiner.
        candidates = [p for p in directory.glob(f"{part}*.onnx") if "_proj" not in p.name]
        candidates.sort(key=lambda p: (".int8." in p.name, len(p.name), p.name))
        if not candidates:
            missing.append(f"{part}*.onnx")
        else:
            parts[part] = candidates[0]
    if not (directory / "tokens.txt").is_file():
        missing.append("tokens.txt")
    if missing:
        raise FileNotFoundError(f"{directory}: an ONNX Transducer needs encoder, decoder and joiner files and "
                                f"tokens.txt; missing {', '.join(missing)}")
    return parts


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

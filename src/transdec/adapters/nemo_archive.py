"""Reading a NeMo ``.nemo`` archive: an uncompressed (sometimes gzipped) tar holding ``model_config.yaml``,
``model_weights.ckpt`` (a ``torch.save``-d state dict) and artifacts such as the tokenizer, whose names the config
refers to as ``nemo:<file name>``.

Nothing from the archive is executed: the config is parsed as YAML (OmegaConf, interpolations resolved), the
weights are loaded with ``weights_only=True``.
"""

from __future__ import annotations

import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import torch

CONFIG_NAME = "model_config.yaml"
WEIGHTS_NAME = "model_weights.ckpt"


@dataclass
class NemoArchive:
    """The parts of a ``.nemo`` file transdec uses.

    Attributes:
        path: the archive.
        config: the model config as plain data, interpolations resolved.
        state_dict: the weights, on the CPU.
        artifacts: every other file in the archive by base name -> bytes (tokenizer files, ...).
    """

    path: Path
    config: dict[str, Any]
    state_dict: dict[str, torch.Tensor]
    artifacts: dict[str, bytes] = field(default_factory=dict)

    def artifact(self, reference: str, what: str) -> bytes:
        """The bytes of a file the config names (``nemo:abc_tokenizer.model`` or a path ending in its name)."""
        name = PurePosixPath(str(reference).removeprefix("nemo:")).name
        if name not in self.artifacts:
            raise ValueError(f"{self.path}: the config's {what} {reference!r} is not in the archive "
                             f"(it holds {sorted(self.artifacts)})")
        return self.artifacts[name]


def read_nemo_archive(path: str | os.PathLike[str]) -> NemoArchive:
    """Read ``path``; a missing, non-tar, truncated or incomplete archive raises with the reason."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no .nemo file {str(path)!r}")
    try:
        archive = tarfile.open(path, "r:*")
    except (tarfile.TarError, OSError, EOFError) as error:
        raise ValueError(f"{path}: not a .nemo archive (a .nemo file is a tar archive): {error}") from error
    with archive:
        try:
            members = {PurePosixPath(m.name).name: m for m in archive.getmembers() if m.isfile()}
        except (tarfile.TarError, OSError, EOFError) as error:
            raise ValueError(f"{path}: the .nemo archive is corrupt or truncated: {error}") from error
        for required in (CONFIG_NAME, WEIGHTS_NAME):
            if required not in members:
                raise ValueError(f"{path}: not a NeMo model archive: no {required} in it "
                                 f"(it holds {sorted(members)})")
        try:
            config = parse_config(_read(archive, members[CONFIG_NAME]).decode("utf-8"))
        except ValueError as error:
            raise ValueError(f"{path}: {CONFIG_NAME} cannot be read: {error}") from error
        try:
            state = torch.load(archive.extractfile(members[WEIGHTS_NAME]), map_location="cpu", weights_only=True)
        except Exception as error:  # torch raises many kinds for a damaged or non-weights file
            raise ValueError(f"{path}: {WEIGHTS_NAME} cannot be loaded as weights: {error}") from error
        if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
            state = state["state_dict"]  # a Lightning checkpoint rather than a bare state dict
        if not isinstance(state, dict) or not all(isinstance(t, torch.Tensor) for t in state.values()):
            raise ValueError(f"{path}: {WEIGHTS_NAME} is not a state dict of tensors")
        artifacts = {name: _read(archive, member) for name, member in members.items()
                     if name not in (CONFIG_NAME, WEIGHTS_NAME) and member.size < 64 * 2**20}
    return NemoArchive(path, config, state, artifacts)


def _read(archive: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    handle = archive.extractfile(member)
    if handle is None:
        raise ValueError(f"{member.name} cannot be read from the archive")
    try:
        return handle.read()
    except (tarfile.TarError, OSError, EOFError) as error:
        raise ValueError(f"{member.name}: the archive is truncated: {error}") from error


#: A config's YAML aliases may expand it to at most this many times its own nodes (NeMo's configs use a handful);
#: beyond, it is refused as an alias bomb before anything is built.
MAX_ALIAS_EXPANSION = 100


def parse_config(text: str) -> dict[str, Any]:
    """YAML text -> plain data with OmegaConf interpolations resolved.

    NeMo configs refer to other keys both from the model section (``${model_defaults.pred_hidden}``) and from a
    training file's root (``${model.model_defaults.pred_hidden}``); both resolve here. The YAML is read by PyYAML's
    safe loader, with aliases checked by :func:`check_alias_expansion`, and only the resulting data goes to
    OmegaConf: OmegaConf 2.4's own YAML reading refuses any document of over 10,000 nodes, which every config with
    a vocabulary of a few thousand tokens is (parakeet-tdt-0.6b-v3 lists its 8,192 tokens twice).
    """
    from omegaconf import OmegaConf  # imported here: only .nemo loading needs it
    from omegaconf.errors import OmegaConfBaseException

    data = load_yaml(text)
    if not isinstance(data, dict):
        raise ValueError("the config is not a mapping")
    # OmegaConf takes seconds per 10,000 list entries; long lists of plain values (vocabularies) cannot hold an
    # interpolation, so they wait outside it, each as a placeholder string, and come back after resolution.
    lists: dict[str, list[Any]] = {}
    data = _set_aside_long_lists(data, lists)
    try:
        config = OmegaConf.create(data)
    except OmegaConfBaseException as error:
        raise ValueError(f"not a valid config: {error}") from error
    rooted = OmegaConf.merge(config, {"model": config}) if "model" not in config else config
    resolved: dict[str, Any] = {}
    for key in config:
        # Section by section: an interpolation that cannot be resolved (an environment variable of a training
        # data section, a resolver NeMo registers) stays as text, and matters only if the loader reads it.
        try:
            resolved[key] = OmegaConf.to_container(rooted[key], resolve=True) if OmegaConf.is_config(
                rooted[key]) else rooted[key]
        except OmegaConfBaseException:
            resolved[key] = OmegaConf.to_container(config, resolve=False)[key]
    return _put_back_long_lists(resolved, lists)


#: Lists longer than this, of plain values with no interpolation, skip OmegaConf (see :func:`parse_config`).
LONG_LIST = 256
_PLACEHOLDER = "\x00transdec-list-"


def _set_aside_long_lists(data: Any, lists: dict[str, list[Any]]) -> Any:
    if isinstance(data, dict):
        return {key: _set_aside_long_lists(value, lists) for key, value in data.items()}
    if isinstance(data, list):
        if len(data) > LONG_LIST and all(
                isinstance(v, (int, float, bool)) or v is None or (isinstance(v, str) and "${" not in v)
                for v in data):
            name = f"{_PLACEHOLDER}{len(lists)}"
            lists[name] = data
            return name
        return [_set_aside_long_lists(value, lists) for value in data]
    return data


def _put_back_long_lists(data: Any, lists: dict[str, list[Any]]) -> Any:
    if isinstance(data, dict):
        return {key: _put_back_long_lists(value, lists) for key, value in data.items()}
    if isinstance(data, list):
        return [_put_back_long_lists(value, lists) for value in data]
    if isinstance(data, str) and data.startswith(_PLACEHOLDER):
        return lists.get(data, data)
    return data


def load_yaml(text: str) -> Any:
    """Plain data from YAML ``text`` with PyYAML's safe loader; syntax errors and alias bombs raise ``ValueError``."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_alias_expansion(node)
        return loader.construct_document(node)
    except yaml.YAMLError as error:
        raise ValueError(f"not valid YAML: {error}") from error
    finally:
        loader.dispose()


def check_alias_expansion(root: Any) -> None:
    """Refuse a YAML node graph whose aliases would expand it to over :data:`MAX_ALIAS_EXPANSION` times its own
    size, or that contains itself. Counted without expanding (each distinct node once, depth first, its expanded
    size kept), so a "billion laughs" document is refused at once."""
    import yaml

    def children(node: Any) -> list[Any]:
        if isinstance(node, yaml.SequenceNode):
            return node.value
        if isinstance(node, yaml.MappingNode):
            return [part for pair in node.value for part in pair]
        return []

    expanded: dict[int, int] = {}
    on_path: set[int] = set()  # the nodes whose subtrees are being counted: an alias to one of them is a cycle
    stack = [(root, False)]
    while stack:
        node, counted_below = stack.pop()
        if counted_below:
            on_path.discard(id(node))
            expanded[id(node)] = 1 + sum(expanded[id(child)] for child in children(node))
        elif id(node) not in expanded:
            on_path.add(id(node))
            stack.append((node, True))
            for child in children(node):
                if id(child) in on_path:
                    raise ValueError("the YAML contains itself through an alias")
                stack.append((child, False))
    distinct, total = len(expanded), expanded[id(root)]
    if total > MAX_ALIAS_EXPANSION * distinct:
        raise ValueError(f"the YAML's aliases expand its {distinct:,} nodes to {total:,} (over "
                         f"{MAX_ALIAS_EXPANSION}x): refused as an alias bomb")

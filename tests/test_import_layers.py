"""transdec's modules form layers that import downward only, and its top-level modules have no import cycle.

Each layer may import the layers below it at module level, never one above: each is imported in a fresh
interpreter whose import system refuses every module of the layers above. Imports inside functions may be of any
layer below too (they are how optional extras, ONNX Runtime or NeMo's YAML, load), never one above.

``transdec.decoding`` is one layer here, whatever its inner structure.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "transdec"

#: Lowest first. An entry names a module, or a package with everything under it; ``"transdec"`` is the package's
#: ``__init__`` only.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("transdec", "transdec.protocol", "transdec.runtime", "transdec.padding", "transdec.audio",
              "transdec.manifest", "transdec.sources", "transdec.metrics", "transdec.sample_windows",
              "transdec.pretrained", "transdec.tensor_files")),
    ("decoding", ("transdec.decoding",)),
    ("biasing", ("transdec.biasing",)),  # a fusion: a TokenScorer, written against decoding only
    # Audio to text through any SpeechModel (the protocol, not a model class), and the `model.transcribe(...)`
    # method the models mix in: below the models, as decoding is.
    ("transcribing", ("transdec.long_audio", "transdec.transcribe", "transdec.transcribing")),
    ("losses", ("transdec.losses",)),
    ("model", ("transdec.model",)),
    ("lm", ("transdec.lm",)),  # lm.build tokenizes text with the model's tokenizer
    ("export", ("transdec.export",)),
    ("adapters", ("transdec.adapters",)),  # the ONNX adapter computes an export's front end (transdec.export)
    ("loading", ("transdec.loading",)),
    ("transcription", ("transdec.transcribe_files", "transdec.evaluate", "transdec.inspect_model")),
    ("scale", ("transdec.scale",)),  # transcription on a Ray cluster, written as transcription writes
    ("streaming", ("transdec.streaming",)),  # segments carry transcription's word timings
    ("serve", ("transdec.serve",)),  # HTTP: transcription batched, streams over a WebSocket
    ("training", ("transdec.training",)),  # validates by transcribing
    ("cli", ("transdec.cli", "transdec.console", "transdec.__main__")),
]
LAYER_NAMES = [name for name, _ in LAYERS]
#: Modules that do something when imported: ``python -m transdec`` runs the command line.
NOT_IMPORTABLE = {"transdec.__main__"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> list[str]:
    return sorted(module_name(path) for path in PACKAGE.rglob("*.py"))


def layer_of(module: str) -> int | None:
    """The index of ``module``'s layer in :data:`LAYERS`, or ``None`` for a module no layer names."""
    best, best_length = None, -1
    for index, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            covers = module == entry or (entry != "transdec" and module.startswith(entry + "."))
            if covers and len(entry) > best_length:
                best, best_length = index, len(entry)
    return best


def unit_of(module: str) -> str:
    """The top-level module or subpackage ``module`` belongs to (``transdec`` for the package's ``__init__``)."""
    return ".".join(module.split(".")[:2])


def module_level_imports(path: Path) -> set[str]:
    """The transdec modules ``path`` imports when it is imported: not inside functions, nor under
    ``if TYPE_CHECKING:`` (annotations only)."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def resolve(node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        return ".".join(base + ([node.module] if node.module else []))

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                source = resolve(node)
                found.add(source)
                # `from transdec.x import y` imports the module transdec.x.y where there is one.
                found.update(f"{source}.{alias.name}" for alias in node.names
                             if f"{source}.{alias.name}" in MODULES)
            elif isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)
            elif isinstance(node, (ast.With, ast.ClassDef)):  # class bodies run at import time
                visit(node.body)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return {name for name in found if name == "transdec" or name.startswith("transdec.")}


def imports_inside_functions(path: Path) -> set[str]:
    """The transdec modules ``path`` imports inside its functions (on first use, not when it is imported)."""
    found: set[str] = set()
    for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                if isinstance(node, ast.Import):
                    found.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    found.add(node.module)
    return {name for name in found if name in MODULES}


MODULES = set(all_modules())
GRAPH = {module_name(path): module_level_imports(path) for path in PACKAGE.rglob("*.py")}


def test_every_module_has_a_layer() -> None:
    unplaced = [module for module in all_modules() if layer_of(module) is None]
    assert not unplaced, f"add these modules to a layer in LAYERS: {unplaced}"


def test_module_level_imports_point_down() -> None:
    """The same rule as the import test below, read from the source: quick, and it names every offending line."""
    upward = []
    for module, imported in sorted(GRAPH.items()):
        for target in sorted(imported):
            if target in MODULES and (layer_of(target) or 0) > (layer_of(module) or 0):
                upward.append(f"{module} ({LAYER_NAMES[layer_of(module) or 0]}) imports {target} "
                              f"({LAYER_NAMES[layer_of(target) or 0]})")
    assert not upward, "imports into a higher layer:\n" + "\n".join(upward)


def test_imports_inside_functions_point_down() -> None:
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        upward.extend(f"{module} imports {target}" for target in sorted(imports_inside_functions(path))
                      if (layer_of(target) or 0) > (layer_of(module) or 0))
    assert not upward, "imports into a higher layer inside functions:\n" + "\n".join(upward)


def test_top_level_modules_have_no_import_cycle() -> None:
    edges: dict[str, set[str]] = {}
    for module, imported in GRAPH.items():
        source = unit_of(module)
        edges.setdefault(source, set()).update(unit_of(t) for t in imported if t in MODULES and unit_of(t) != source)
    cycle = _find_cycle(edges)
    assert cycle is None, "import cycle at module level: " + " -> ".join(cycle or [])


def _find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph ``edges`` as a path that returns to its start, or ``None``."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(node: str) -> list[str] | None:
        path.append(node)
        on_path.add(node)
        for target in sorted(edges.get(node, ())):
            if target in on_path:
                return path[path.index(target):] + [target]
            if target not in done:
                found = visit(target)
                if found:
                    return found
        on_path.discard(node)
        path.pop()
        done.add(node)
        return None

    for start in sorted(edges):
        if start not in done:
            found = visit(start)
            if found:
                return found
    return None


def test_find_cycle_finds_one() -> None:
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


#: Run in a fresh interpreter: refuse the modules of the layers above, import every module of the layer, and
#: report what was refused (recorded as well as raised, since a module may catch an ImportError).
_IMPORT_LAYER = """
import importlib, importlib.abc, json, sys, traceback

layer, blocked, modules = json.loads(sys.argv[1])
refused = []


class RefuseHigherLayers(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if any(fullname == entry or fullname.startswith(entry + ".") for entry in blocked):
            frames = [f for f in traceback.extract_stack()[:-1] if not f.filename.startswith("<frozen")]
            refused.append(f"{fullname}, imported by:\\n" + "".join(traceback.format_list(frames[-8:])))
            raise ImportError(f"{fullname} is in a layer above {layer!r}")
        return None


sys.meta_path.insert(0, RefuseHigherLayers())
failed = []
for name in modules:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name and not error.name.startswith("transdec") and not refused:
            print(f"skipped {name}: optional dependency {error.name} is not installed")
            continue
        failed.append(f"{name}: " + traceback.format_exc())
    except Exception:
        failed.append(f"{name}: " + traceback.format_exc())
for what in refused:
    print("REFUSED", what)
for what in failed:
    print("FAILED", what)
sys.exit(1 if refused or failed else 0)
"""


@pytest.mark.parametrize("layer", LAYER_NAMES)
def test_each_layer_imports_without_the_layers_above(layer: str) -> None:
    index = LAYER_NAMES.index(layer)
    blocked = [entry for _, entries in LAYERS[index + 1:] for entry in entries]
    modules = [m for m in all_modules() if layer_of(m) == index and m not in NOT_IMPORTABLE]
    result = subprocess.run([sys.executable, "-c", _IMPORT_LAYER, json.dumps([layer, blocked, modules])],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"layer {layer!r}:\n{result.stdout}\n{result.stderr}"


#: Inside ``transdec.decoding``, lowest first: the core the searches share, the CUDA-graph machinery, the searches
#: (each with its CUDA-graph driver), and the registry of built-in strategies with the entry points on top.
DECODING_LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("options", "registry", "results", "hypothesis", "scoring", "inputs", "emissions", "compute_dtype",
              "batched_hyps", "beam_hyps", "stream_frames")),
    ("cuda", ("cuda",)),
    ("searches", ("greedy", "beam")),
    ("entry points", ("", "strategies", "api", "flags")),
]


def decoding_layer_of(module: str) -> int:
    part = module.removeprefix("transdec.decoding").removeprefix(".").split(".")[0]
    return next(index for index, (_, parts) in enumerate(DECODING_LAYERS) if part in parts)


def test_decoding_imports_point_down_inside_the_package() -> None:
    modules = [m for m in GRAPH if m == "transdec.decoding" or m.startswith("transdec.decoding.")]
    assert all(decoding_layer_of(m) is not None for m in modules)
    upward = [f"{module} imports {target}" for module in sorted(modules) for target in sorted(GRAPH[module])
              if target.startswith("transdec.decoding.") and decoding_layer_of(target) > decoding_layer_of(module)]
    assert not upward, "imports into a higher layer of transdec.decoding:\n" + "\n".join(upward)
    edges: dict[str, set[str]] = {}
    for module in modules:
        edges[module] = {t for t in GRAPH[module] if t in MODULES and t.startswith("transdec.decoding.")}
    cycle = _find_cycle(edges)
    assert cycle is None, "import cycle inside transdec.decoding: " + " -> ".join(cycle or [])

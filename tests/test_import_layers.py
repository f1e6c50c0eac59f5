"""transdec's modules form layers that import downward only, and no modules import each other in a circle.

Each layer may import the layers below it, never one above: at module level (each layer is imported in a fresh
interpreter whose import system refuses every module of the layers above), inside functions (how optional extras,
ONNX Runtime or NeMo's YAML, load on first use) and under ``if TYPE_CHECKING:`` alike.

No module imports itself through others, whichever way each import is made: at module level, inside a function or
for annotations only. Python runs such a circle when the imports that close it wait for a function call or are
never executed, but its modules still cannot be read, tested or moved one without the others. The import graph
is read from the source (AST only), with relative imports resolved and ``from transdec.x import y`` counted as an
import of the module ``transdec.x.y`` where there is one, else of ``transdec.x`` (a package: its ``__init__``).

``transdec.decoding`` is one layer here, whatever its inner structure; the same rule holds inside it, one level
down (:data:`DECODING_LAYERS`).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from dataclasses import dataclass
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
    # Files and manifests to text, WER, subtitles (the cues the CLI and the server cut, and their files).
    ("transcription", ("transdec.transcribe_files", "transdec.evaluate", "transdec.inspect_model",
                       "transdec.subtitles", "transdec.subtitle_files")),
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


MODULE_LEVEL, INSIDE_A_FUNCTION, FOR_ANNOTATIONS = "at module level", "inside a function", "under TYPE_CHECKING"


@dataclass(frozen=True)
class Import:
    """One import of a transdec module, where the source makes it: line, and ``where`` (one of
    :data:`MODULE_LEVEL`, :data:`INSIDE_A_FUNCTION`, :data:`FOR_ANNOTATIONS`)."""

    target: str
    line: int
    where: str


def imports_of(path: Path) -> list[Import]:
    """Every import of a transdec module in ``path``, at module level, inside functions and under
    ``if TYPE_CHECKING:``."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def targets(node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        if node.level:
            parts = package.split(".")[: len(package.split(".")) - node.level + 1]
            source = ".".join(parts + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        return [f"{source}.{alias.name}" if f"{source}.{alias.name}" in MODULES else source for alias in node.names]

    found: list[Import] = []

    def visit(node: ast.AST, where: str) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.extend(Import(target, node.lineno, where) for target in targets(node) if target in MODULES)
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            where = INSIDE_A_FUNCTION
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                visit(child, FOR_ANNOTATIONS if where == MODULE_LEVEL else where)
            for child in node.orelse:
                visit(child, where)
            return
        for child in ast.iter_child_nodes(node):  # class bodies, try, with, ...: run when the module is imported
            visit(child, where)

    visit(ast.parse(path.read_text(encoding="utf-8")), MODULE_LEVEL)
    return found


MODULES = set(all_modules())
PATHS = {module_name(path): path for path in PACKAGE.rglob("*.py")}
#: Every module's imports of transdec modules, wherever they are made.
IMPORTS = {module: imports_of(path) for module, path in PATHS.items()}
#: The transdec modules each module imports when it is imported.
GRAPH = {module: {i.target for i in imports if i.where == MODULE_LEVEL} for module, imports in IMPORTS.items()}


def test_every_module_has_a_layer() -> None:
    unplaced = [module for module in all_modules() if layer_of(module) is None]
    assert not unplaced, f"add these modules to a layer in LAYERS: {unplaced}"


def _upward_imports(where: set[str]) -> list[str]:
    """The imports made ``where`` into a higher layer, one line each, naming the file and line."""
    upward = []
    for module, imports in sorted(IMPORTS.items()):
        for found in sorted(imports, key=lambda i: i.line):
            if found.where in where and (layer_of(found.target) or 0) > (layer_of(module) or 0):
                upward.append(f"{_source_line(module, found)}: {module} ({LAYER_NAMES[layer_of(module) or 0]}) "
                              f"imports {found.target} ({LAYER_NAMES[layer_of(found.target) or 0]}) {found.where}")
    return upward


def _source_line(module: str, found: Import) -> str:
    return f"{PATHS[module].relative_to(SRC.parent)}:{found.line}"


def test_module_level_imports_point_down() -> None:
    """The same rule as the import test below, read from the source: quick, and it names every offending line."""
    upward = _upward_imports({MODULE_LEVEL})
    assert not upward, "imports into a higher layer:\n" + "\n".join(upward)


def test_imports_inside_functions_and_for_annotations_point_down() -> None:
    upward = _upward_imports({INSIDE_A_FUNCTION, FOR_ANNOTATIONS})
    assert not upward, "imports into a higher layer:\n" + "\n".join(upward)


def test_modules_import_each_other_in_no_circle() -> None:
    edges = {module: {i.target for i in imports} - {module} for module, imports in IMPORTS.items()}
    circles = _circles(edges)
    assert not circles, "modules that import each other in a circle:\n\n" + "\n\n".join(
        _describe(_find_cycle({module: edges[module] & circle for module in circle}) or []) for circle in circles)


def test_top_level_modules_have_no_import_cycle() -> None:
    """Between top-level modules and subpackages (``transdec.model``, ``transdec.loading``, ...): a circle there
    ties them together even when no two files import each other."""
    edges: dict[str, set[str]] = {}
    for module, imports in IMPORTS.items():
        source = unit_of(module)
        edges.setdefault(source, set()).update(unit_of(i.target) for i in imports if unit_of(i.target) != source)
    cycle = _find_cycle(edges)
    made_by = [f"  {source} -> {target}: " + "; ".join(dict.fromkeys(
        f"{_source_line(module, found)} {found.where}" for module, imports in sorted(IMPORTS.items())
        if unit_of(module) == source for found in imports if unit_of(found.target) == target))
        for source, target in zip(cycle or [], (cycle or [])[1:])]
    assert cycle is None, "import cycle between top-level modules: " + " -> ".join(cycle or []) + "\n" + "\n".join(
        made_by)


def _describe(cycle: list[str]) -> str:
    """``cycle`` (a path that returns to its start) as the lines of source that make it."""
    lines = []
    for module, target in zip(cycle, cycle[1:]):
        found = min((i for i in IMPORTS[module] if i.target == target), key=lambda i: i.line)
        lines.append(f"  {_source_line(module, found)} imports {target} {found.where}")
    return "\n".join(lines)


def _circles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected parts of ``edges`` with more than one node: the sets of nodes that reach each
    other."""
    reach = {node: _reachable(edges, node) for node in edges}
    parts = {frozenset({node} | {other for other in reach[node] if node in reach.get(other, ())}) for node in edges}
    return sorted((part for part in parts if len(part) > 1), key=sorted)


def _reachable(edges: dict[str, set[str]], start: str) -> set[str]:
    """The nodes reached from ``start`` in one step or more."""
    seen: set[str] = set()
    stack = list(edges.get(start, ()))
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(edges.get(node, ()))
    return seen


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


def test_find_cycle_and_circles_find_one() -> None:
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
    assert _circles({"a": {"b"}, "b": {"a", "c"}, "c": {"d"}, "d": {"c"}, "e": {"a"}}) == [
        frozenset({"a", "b"}), frozenset({"c", "d"})]
    assert _circles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


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
              "batched_hyps", "beam_hyps", "stream_frames", "stream_search")),
    ("cuda", ("cuda",)),
    ("searches", ("greedy", "beam")),
    ("entry points", ("", "strategies", "api", "flags")),
]


def decoding_layer_of(module: str) -> int:
    part = module.removeprefix("transdec.decoding").removeprefix(".").split(".")[0]
    return next(index for index, (_, parts) in enumerate(DECODING_LAYERS) if part in parts)


def test_decoding_imports_point_down_inside_the_package() -> None:
    """Every import inside ``transdec.decoding``, in functions and for annotations too."""
    modules = [m for m in IMPORTS if m == "transdec.decoding" or m.startswith("transdec.decoding.")]
    assert all(decoding_layer_of(m) is not None for m in modules)
    imported = {module: {i.target for i in IMPORTS[module]} for module in modules}
    upward = [f"{module} imports {target}" for module in sorted(modules) for target in sorted(imported[module])
              if target.startswith("transdec.decoding.") and decoding_layer_of(target) > decoding_layer_of(module)]
    assert not upward, "imports into a higher layer of transdec.decoding:\n" + "\n".join(upward)
    edges: dict[str, set[str]] = {}
    for module in modules:
        edges[module] = {t for t in imported[module] if t in MODULES and t.startswith("transdec.decoding.")}
    cycle = _find_cycle(edges)
    assert cycle is None, "import cycle inside transdec.decoding: " + " -> ".join(cycle or [])

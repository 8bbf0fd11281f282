"""Layers: an adapter package imports only itself and the layers below it, and no cycles.

Read from the source with `ast` (every import, including those inside functions and under
`TYPE_CHECKING`), so nothing is imported to check it.
"""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# `adapter`'s packages and top-level modules, top to bottom. A unit may import itself and any
# unit of a lower layer; units of one layer may import each other unless that makes a cycle.
LAYERS: tuple[frozenset[str], ...] = (
    # wiring, start-up and shutdown, the worker processes, the topics and ACL plan commands,
    # the upgrade commands, the secret files reloaded when they change
    frozenset(
        {
            "cli",
            "app",
            "parts",
            "faults_for_tests",
            "running",
            "supervisor",
            "workers",
            "topic_plan",
            "acl_plan",
            "secret_files",
            "kafka_secrets",
            "upgrade",
        }
    ),
    frozenset({"http"}),  # the only users of aiohttp's server side
    frozenset({"live"}),  # SSE fan-out and shared reads for live readers
    frozenset({"service"}),  # the stream logic and the live hub
    frozenset({"state", "cluster"}),  # the catalog and its follower; slot ownership
    frozenset(
        {"protocol", "auth"}
    ),  # pure protocol rules and their model; tokens, scopes, access decision
    frozenset({"log", "objects", "tier"}),  # Kafka, the object store and the cold tier
    # leaves (config: the settings, each declared once in `settings`, loaded by `config`;
    # console: its files; loop_metrics: the metrics' lock-free families; request_lines: the request
    # log's writer; tasks: the task groups of the parts and of the instance; memory_limit: the
    # container's memory limit and the cap it gives; heap_trim: freed memory given back after
    # large requests; tracing: the spans, with the SDK imported only when on)
    frozenset(
        {
            "config",
            "settings",
            "declared",
            "structured_settings",
            "readiness",
            "console",
            "metrics",
            "kafka_stats",
            "loop_metrics",
            "log_output",
            "request_lines",
            "tasks",
            "memory_limit",
            "heap_trim",
            "tracing",
        }
    ),
)
LAYER = {unit: depth for depth, units in enumerate(LAYERS) for unit in units}
# Packages beside `adapter` that must stand without it.
STANDALONE = ("topology", "schemas", "spark_streaming")
SCANNED = ("adapter", *STANDALONE)


@dataclass(frozen=True)
class Import:
    """One import statement's target module, where it was found."""

    module: str
    where: str  # path:line


def imports_in(source: str, module: str, where: str) -> Iterator[Import]:
    """The modules `source` (the module `module`) imports, relative imports resolved.

    `from a import b` yields `a.b` (b may be a module); for a name it is one level too deep,
    which `unit` ignores.
    """
    package = module.split(".") if where.endswith("__init__.py") else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        at = f"{where}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            yield from (Import(alias.name, at) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            yield from (Import(f"{target}.{alias.name}", at) for alias in node.names)


def unit(module: str) -> str | None:
    """`adapter.http.render` -> `http`; `topology.naming` -> `topology`; others None.

    A bare `import adapter` is the unit `adapter`, which belongs to no layer.
    """
    parts = module.split(".")
    if parts[0] == "adapter":
        return parts[1] if len(parts) > 1 else "adapter"
    return parts[0] if parts[0] in STANDALONE else None


def scan() -> dict[str, list[tuple[str, Import]]]:
    """For each unit, the units it imports, with where (imports of itself left out)."""
    found: dict[str, list[tuple[str, Import]]] = {}
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            relative = path.relative_to(ROOT)
            module = ".".join(relative.with_suffix("").parts).removesuffix(".__init__")
            source_unit = unit(module)
            if source_unit is None or source_unit == "adapter":  # adapter/__init__.py
                continue
            edges = found.setdefault(source_unit, [])
            for imported in imports_in(path.read_text(), module, str(relative)):
                target = unit(imported.module)
                if target is not None and target != source_unit:
                    edges.append((target, imported))
    return found


IMPORTS = scan()


def _adapter_units() -> set[str]:
    return {
        path.stem if path.is_file() else path.name
        for path in (ROOT / "adapter").iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").exists()
    }


def test_every_adapter_package_has_a_layer() -> None:
    assert _adapter_units() == set(LAYER)


def test_no_adapter_package_imports_one_above_it() -> None:
    upward = [
        f"{imported.where}: {source} imports {imported.module} ({target}, a layer above)"
        for source, edges in IMPORTS.items()
        if source in LAYER
        for target, imported in edges
        if target in LAYER and LAYER[target] < LAYER[source]
    ]
    assert upward == []


def test_no_import_cycle_between_packages() -> None:
    graph = {source: {target for target, _ in edges} for source, edges in IMPORTS.items()}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        pytest.fail(f"import cycle: {' -> '.join(error.args[1])}")


# The pure protocol rules (and their model) stand without any I/O or storage library.
NOT_IN_PROTOCOL = ("aiohttp", "confluent_kafka", "fastavro", "boto3", "botocore", "asyncio")


def test_the_protocol_imports_no_io_or_storage_library() -> None:
    found = [
        f"{path.relative_to(ROOT)}: imports {imported.module}"
        for path in sorted((ROOT / "adapter" / "protocol").rglob("*.py"))
        for imported in imports_in(path.read_text(), "adapter.protocol.x", str(path))
        if imported.module.split(".")[0] in NOT_IN_PROTOCOL
    ]
    assert found == []


def test_the_protocol_and_the_internal_formats_load_no_codec_or_client() -> None:
    # Imported, not scanned: the model spells its keys in `topology.internal_records`, which
    # must load fastavro only when it first encodes or decodes.
    loaded = "sorted(name for name in NAMES if name in sys.modules)"
    code = (
        "import sys, adapter.protocol.stream_machine, topology.internal_records\n"
        f"NAMES = {NOT_IN_PROTOCOL!r}\nprint({loaded})"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert found.stdout == "[]\n"


@pytest.mark.parametrize("package", STANDALONE)
def test_standalone_packages_never_import_the_adapter(package: str) -> None:
    # spark_streaming must load without confluent-kafka or aiohttp; topology and schemas are
    # what the adapter is built on.
    into_adapter = [
        f"{imported.where}: imports {imported.module}"
        for target, imported in IMPORTS.get(package, [])
        if target in LAYER or target == "adapter"
    ]
    assert into_adapter == []


def test_the_scan_sees_imports_inside_functions_and_relative_ones() -> None:
    source = "def f():\n    from adapter.http import render\n\nfrom ..log import writer\n"
    found = imports_in(source, "adapter.state.catalog", "adapter/state/catalog.py")
    assert {i.module for i in found} == {"adapter.http.render", "adapter.log.writer"}


def test_the_scan_sees_the_real_imports() -> None:
    assert {"protocol", "state", "readiness"} <= {target for target, _ in IMPORTS["http"]}
    assert "config" in {target for target, _ in IMPORTS["objects"]}

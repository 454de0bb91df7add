"""The committed models and catalogue are what tools/generate_types.py makes
from the hub's current schemas/ and rpc/openrpc.json (regenerate with
`python tools/generate_types.py` when the hub's catalogue changes)."""

from __future__ import annotations

import filecmp
import importlib.util
import json
import sys
from pathlib import Path

from switchboard import catalogue

PACKAGE = Path(__file__).resolve().parent.parent
REPO = PACKAGE.parent.parent


def load_generator():
    spec = importlib.util.spec_from_file_location("generate_types", PACKAGE / "tools" / "generate_types.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["generate_types"] = module
    spec.loader.exec_module(module)
    return module


def test_generated_code_matches_the_schemas(tmp_path: Path) -> None:
    load_generator().generate(tmp_path)
    committed = PACKAGE / "switchboard"
    fresh_types = sorted(p.name for p in (tmp_path / "types").glob("*.py"))
    assert fresh_types == sorted(
        p.name for p in (committed / "types").glob("*.py")
    ), "a schema was added or removed"
    drifted = [
        name
        for name in fresh_types
        if not filecmp.cmp(tmp_path / "types" / name, committed / "types" / name, shallow=False)
    ]
    if not filecmp.cmp(tmp_path / "catalogue.py", committed / "catalogue.py", shallow=False):
        drifted.append("catalogue.py")
    assert drifted == [], f"regenerate with `python tools/generate_types.py`: {drifted}"


def test_the_catalogue_names_every_method_of_the_hub() -> None:
    methods = {m["name"] for m in json.loads((REPO / "rpc" / "openrpc.json").read_text())["methods"]}
    assert set(catalogue.ALL) == methods
    for entry in catalogue.ALL.values():
        assert entry.params is not None, entry.name
        assert (entry.result is None) == (entry.kind == "event"), entry.name

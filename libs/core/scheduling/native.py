"""The scheduling core's hot modules compiled to C by mypyc, from this very source, at install time.

`make install` compiles `COMPILED_MODULES` (`deploy/compile_core.py`) into `<virtual env>/podway-compiled`,
with a stamp naming the interpreter and a digest of every module of the package. The package puts that
directory first on its `__path__` only while the stamp matches the source beside it: an edited module,
another interpreter or a failed build leaves the package interpreted, never running code other than what
is read here. `PODWAY_INTERPRETED_CORE=1` keeps it interpreted (to compare, or to debug with a Python debugger).

Compiled or not, a cycle decides the same: the modules are the same source, and mypyc keeps Python's
semantics for them (integers, dict and set order, exceptions). It refuses one thing the interpreter allows:
a class defined elsewhere (a test's) cannot subclass a compiled class.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import MutableSequence
from pathlib import Path

COMPILED_MODULES = (
    "buckets",
    "capacity",
    "composite",
    "cycle",
    "diagnosis",
    "filters",
    "model",
    "nesting",
    "packing",
    "snapshot",
    "topology",
)
"""The modules a cycle and its snapshot updates spend their time in (see the churn benchmark's profile)."""

STAMP = "stamp.json"
INTERPRETED_ENV = "PODWAY_INTERPRETED_CORE"
PACKAGE_DIR = Path(__file__).resolve().parent


def compiled_root() -> Path:
    """Where the compiled modules of this interpreter's virtual environment live."""
    return Path(sys.prefix) / "podway-compiled"


def stamp_for(package_dir: Path = PACKAGE_DIR) -> dict[str, object]:
    """What a build of the sources in `package_dir` records, and what a matching build must have recorded."""
    # Every module of the package, not only the compiled ones: mypyc compiles against the types they declare.
    return {
        "python": sys.implementation.cache_tag,
        "modules": list(COMPILED_MODULES),
        "sources": {
            path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(package_dir.glob("*.py"))
        },
    }


def use_compiled(package_path: MutableSequence[str], root: Path | None = None) -> bool:
    """Put the compiled modules first on the package's `package_path` if they were built from the source
    as it is now; returns whether it did."""
    if os.environ.get(INTERPRETED_ENV, "") not in ("", "0"):
        return False
    root = compiled_root() if root is None else root
    try:
        recorded = json.loads((root / STAMP).read_text())
    except (OSError, ValueError):
        return False
    if recorded != stamp_for():
        return False
    package_path.insert(0, str(root / "libs" / "core" / "scheduling"))
    if str(root) not in sys.path:
        sys.path.append(str(root))  # mypyc's shared runtime module is imported by its top-level name
    return True

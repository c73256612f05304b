"""Compile the scheduling core's hot modules with mypyc into the virtual environment (`make install` runs it).

    .venv/bin/python deploy/compile_core.py

The modules named by `libs.core.scheduling.native.COMPILED_MODULES` are compiled from the source as it is
now into `<virtual env>/podway-compiled`, which the package uses only while that source is unchanged (see
`native`). A machine without a C compiler, or a build that fails, keeps the core interpreted: the same
decisions, slower; this script then says so and still exits 0.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from libs.core.scheduling.native import COMPILED_MODULES, STAMP, compiled_root, stamp_for  # noqa: E402


def compile_core(root: Path) -> None:
    """Build the compiled modules into `root` (replaced whole), stamp last: a half-built tree is never used."""
    from mypyc.build import mypycify
    from setuptools import setup

    shutil.rmtree(root, ignore_errors=True)
    sources = [f"libs/core/scheduling/{name}.py" for name in COMPILED_MODULES]
    stamp = stamp_for()
    with tempfile.TemporaryDirectory(prefix="podway-compile-") as scratch:
        os.chdir(REPO)
        extensions = mypycify(sources, opt_level="3", target_dir=str(Path(scratch) / "c"))
        setup(
            name="podway-compiled-core",
            packages=[],
            py_modules=[],
            ext_modules=extensions,
            script_args=[
                "--quiet",
                "build_ext",
                "--build-lib",
                str(root),
                "--build-temp",
                scratch,
                "-j",
                "2",
            ],
        )
    (root / STAMP).write_text(json.dumps(stamp, indent=1))


def main() -> int:
    root = compiled_root()
    try:
        compile_core(root)
    except (Exception, SystemExit) as exc:  # setuptools reports a failed compiler as SystemExit
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True, exist_ok=True)
        # A stamp that matches no source: the package stays interpreted, and make does not retry every run.
        (root / STAMP).write_text(json.dumps({"failed": str(exc)}))
        print(f"the scheduling core stays interpreted (compiling it failed: {exc})", file=sys.stderr)
        return 0
    print(f"compiled {len(COMPILED_MODULES)} scheduling core modules into {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

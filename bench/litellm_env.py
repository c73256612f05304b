"""LiteLLM in a virtual environment of its own, installed on first use, for the comparison benchmarks: its
dependencies must not shape Podway's."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

INSTALL_TIMEOUT_S = 1200


class LiteLLMUnavailable(RuntimeError):
    """LiteLLM could not be installed or started here (e.g. no package index)."""


def ensure_litellm_env(venv_dir: Path, packages: Sequence[str], probe_imports: str) -> tuple[Path, str]:
    """The venv's python and LiteLLM's version, installing `packages` first when `probe_imports` (a comma-
    separated list of modules) does not import there."""
    python = venv_dir / "bin" / "python"
    if not _installed_version(python, probe_imports):
        print(f"installing {' '.join(packages)} into {venv_dir} (once)", file=sys.stderr)
        _install(python, venv_dir, packages)
    version = _installed_version(python, probe_imports)
    if not version:
        raise LiteLLMUnavailable(f"{probe_imports} is not importable in {venv_dir}")
    return python, version


def _install(python: Path, venv_dir: Path, packages: Sequence[str]) -> None:
    try:
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv_dir)], check=True, capture_output=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *packages],
            check=True,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
        )
    except subprocess.CalledProcessError as exc:
        detail = (exc.stderr or exc.stdout or str(exc)).strip().splitlines()[-3:]
        raise LiteLLMUnavailable(
            f"could not install {' '.join(packages)} (is the package index reachable?): " + " | ".join(detail)
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise LiteLLMUnavailable(f"installing LiteLLM took more than {INSTALL_TIMEOUT_S} s") from exc


def _installed_version(python: Path, probe_imports: str) -> str | None:
    if not python.exists():
        return None
    code = f"import importlib.metadata as m, {probe_imports}; print(m.version('litellm'))"
    probe = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    lines = probe.stdout.strip().splitlines()
    return lines[-1] if probe.returncode == 0 and lines else None

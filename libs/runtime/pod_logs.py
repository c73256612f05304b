"""Where the process runtime keeps a container's output, and how it is read back (`podway logs`): one file
per run of the container (`<logDir>/<container>/<restart>.log`, rotated copies `.log.1` ... beside it)."""

from __future__ import annotations

from pathlib import Path


def run_logs(log_dir: Path, container: str) -> list[Path]:
    """The container's current-run files of every run, oldest run first."""
    directory = log_dir / container
    return sorted(directory.glob("*.log"), key=lambda path: int(path.stem))


def containers(log_dir: Path) -> list[str]:
    return sorted(path.name for path in log_dir.iterdir() if path.is_dir()) if log_dir.is_dir() else []


def log_file(log_dir: Path, container: str, *, previous: bool) -> Path | None:
    """The latest run's log, or the run before it (`--previous`); None when there is no such run."""
    runs = run_logs(log_dir, container)
    wanted = runs[-2:-1] if previous else runs[-1:]
    return wanted[0] if wanted else None


def read_run(path: Path) -> str:
    """A run's output, its rotated copies first."""
    rotated = sorted(path.parent.glob(f"{path.name}.*"), key=lambda p: -int(p.suffix[1:]))
    return "".join(p.read_text(errors="replace") for p in [*rotated, path])

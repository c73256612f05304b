"""`podway demo` is part of the product: it must pass end to end."""

import subprocess
import sys


def test_podway_demo_passes_every_step(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "libs.client.cli", "demo", "--data-dir", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "steps passed" in proc.stdout
    assert "FAILED" not in proc.stdout
    assert "stack stopped" in proc.stdout

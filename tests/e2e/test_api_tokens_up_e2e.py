"""`podway up --api-tokens FILE` as a platform team runs it: the stack serves the Kubernetes API to the file's
users only, prints where it listens, and writes a kubeconfig that kubectl uses as the file's first writer; a
reader is refused what its group does not allow, in the API server's words."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PODWAY = [sys.executable, "-m", "libs.client.cli"]
KUBECTL = shutil.which("kubectl")
TOKENS = 'reader-token,bob,uid-bob,"podway:read-only"\nwriter-token,alice,uid-alice,"podway:read-write"\n'


def run(*argv: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s, check=False)


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH (the machine image has v1.32)")
def test_podway_up_serves_the_api_to_the_users_of_its_tokens_file(tmp_path: Path) -> None:
    assert KUBECTL is not None
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(TOKENS)
    data = tmp_path / "podway"
    up = run(
        *PODWAY, "up", "--detach", "--data-dir", str(data), "--services", "admission,api_server",
        "--api-tokens", str(tokens), timeout_s=180,
    )  # fmt: skip
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        kubeconfig = data / "kubeconfig"
        assert f"kubectl --kubeconfig {kubeconfig.resolve()} get podgroups -A" in up.stdout
        server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        assert f"kubernetes API: {server};" in up.stdout
        kubectl = [KUBECTL, f"--kubeconfig={kubeconfig}", f"--cache-dir={tmp_path / 'kube-cache'}"]

        whoami = run(*kubectl, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
        assert (whoami.returncode, whoami.stdout) == (0, "alice"), whoami.stderr
        created = run(*kubectl, "create", "namespace", "team")
        assert created.returncode == 0, created.stderr
        refused = run(*kubectl, "--token=reader-token", "delete", "namespace", "team")
        assert refused.returncode == 1
        assert (
            'Error from server (Forbidden): namespaces "team" is forbidden: User "bob" cannot delete resource '
            '"namespaces" in API group "" in the namespace "team"'
        ) in refused.stderr
        read = run(*kubectl, "--token=reader-token", "get", "namespace", "team", "-o", "name")
        assert (read.returncode, read.stdout.strip()) == (0, "namespace/team"), read.stderr
        stranger = run(*kubectl, "--token=not-in-the-file", "get", "namespaces")
        assert stranger.returncode == 1
        assert "error: You must be logged in to the server (Unauthorized)" in stranger.stderr
    finally:
        run(*PODWAY, "down", "--data-dir", str(data))

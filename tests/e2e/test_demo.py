"""`podway demo` is part of the product: it must pass end to end."""

import json
import os
import shutil
import sqlite3
import subprocess
import sys

from tests.support import chromium, dom_attribute, rendered_dom


def test_podway_demo_passes_every_step(tmp_path):
    report = tmp_path / "report.html"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "libs.client.cli",
            "demo",
            "--data-dir",
            str(tmp_path / "demo"),
            "--report",
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "steps passed" in proc.stdout
    assert "FAILED" not in proc.stdout
    assert "stack stopped" in proc.stdout
    if shutil.which("kubectl"):  # the gang applied and watched with kubectl itself, not the fallback
        assert "$ kubectl apply -f gang.yaml" in proc.stdout
        assert "podgroup.scheduling.k8s.io/kube-gang-worker-0 created" in proc.stdout
        assert "$ kubectl get pods -w" in proc.stdout
        assert "no kubectl on PATH" not in proc.stdout

    # The run's report renders in Chromium: no script error, every chart drawn, one Gantt row per PodGroup.
    assert report.exists()
    with sqlite3.connect(tmp_path / "demo" / "podway.db") as db:
        groups = {
            row[0] for row in db.execute("SELECT subject_uid FROM events WHERE type = 'podgroup.admitted'")
        }
        answered = db.execute("SELECT count(*) FROM events WHERE type = 'inference.completed'").fetchone()[0]
    assert groups
    assert answered
    if chromium() is None and not os.environ.get("CI"):
        return  # .ci/run installs it; a workstation without it still checks the demo
    dom = rendered_dom(report)
    assert dom_attribute(dom, None, "data-errors") == ""
    assert dom_attribute(dom, None, "data-charts") == "4"
    assert dom_attribute(dom, "gantt", "data-rows") == str(len(groups))
    data = json.loads(dom.split('id="run-data" type="application/json">')[1].split("</script>")[0])
    assert data["moves"]  # the demo's spillovers and failovers are marked

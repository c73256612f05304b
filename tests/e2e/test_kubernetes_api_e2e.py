"""The Kubernetes API as users reach it: the real `kubectl` on PATH and the official `kubernetes` Python client
against `podway-api-server`, in front of admission, the scheduler, the DRA allocator and a node agent, all as
processes on an embedded nats-server and SQLite, over TLS with the kubeconfig the API server writes."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from libs.db import migrate
from libs.kubeapi.security import VIEWER, Tokens
from libs.messaging.broker import provision_streams
from libs.runtime.health import health_file, last_beat
from libs.runtime.nats_server import EmbeddedNatsServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "deploy" / "examples"
KUBECTL = shutil.which("kubectl")
SERVICES = ("admission", "scheduler", "dra_allocator", "node_agent", "api_server")


@dataclass
class KubeStack:
    data_dir: Path
    env: dict[str, str]
    procs: dict[str, subprocess.Popen[bytes]]
    examples_applied: str = ""

    @property
    def kubeconfig(self) -> Path:
        return self.data_dir / "kubeconfig"

    def start(self, *names: str) -> None:
        """Start these services at once (each finds the others over the bus when they are up) and wait until
        every one is healthy."""
        beacons = {}
        for name in names:
            argv = [sys.executable, "-m", f"services.{name}.main"]
            if name == "node_agent":
                argv += ["--cluster", str(EXAMPLES / "cluster-small.yaml")]
            beacons[name] = health_file(self.data_dir / "run", name)
            beacons[name].unlink(missing_ok=True)
            self.procs[name] = subprocess.Popen(argv, env=self.env, cwd=ROOT)
        deadline = time.monotonic() + 60
        for name, beacon in beacons.items():
            while last_beat(beacon) is None:
                assert self.procs[name].poll() is None, f"{name} exited with {self.procs[name].returncode}"
                assert time.monotonic() < deadline, f"{name} did not become healthy"
                time.sleep(0.05)

    def stop(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.terminate()
        proc.wait(30)


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeStack]:
    data_dir = tmp_path_factory.mktemp("kube")
    nats = EmbeddedNatsServer(data_dir=data_dir / "nats").start()
    asyncio.run(provision_streams(nats.url))
    database_url = f"sqlite+aiosqlite:///{data_dir / 'podway.db'}"
    asyncio.run(migrate.upgrade(database_url))
    env = {
        **os.environ,
        "PODWAY_NATS_URL": nats.url,
        "PODWAY_DATABASE_URL": database_url,
        "PODWAY_DATA_DIR": str(data_dir),
        "PODWAY_LOG_LEVEL": "WARNING",
        "PODWAY_TIME_COMPRESSION": "4",
        "PODWAY_API_PORT": "0",
    }
    stack = KubeStack(data_dir, env, {})
    try:
        stack.start(*SERVICES)
        yield stack
    finally:
        for name in list(stack.procs):
            stack.stop(name)
        nats.stop()


def kubectl(
    kube: KubeStack, *args: str, stdin: str | None = None, token: str | None = None
) -> subprocess.CompletedProcess[str]:
    if KUBECTL is None:
        pytest.skip("kubectl is not on PATH (the machine image has v1.32)")
    command = [
        KUBECTL,
        f"--kubeconfig={kube.kubeconfig}",
        f"--cache-dir={kube.data_dir / 'kube-cache'}",
        *args,
    ]
    if token is not None:
        command.insert(2, f"--token={token}")
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
        env={"HOME": str(kube.data_dir), "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )


def examples(kube: KubeStack) -> str:
    """`kubectl apply -f deploy/examples` once per stack (tests may run on several workers, each with its
    own stack): what that apply printed."""
    if not kube.examples_applied:
        kube.examples_applied = ok(kubectl(kube, "apply", "-f", str(EXAMPLES)))
    return kube.examples_applied


def ok(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 0, run.stderr
    return run.stdout


def example_names(kind: str) -> set[tuple[str, str]]:
    found = set()
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == kind:
                meta = doc["metadata"]
                found.add((meta.get("namespace", "default"), meta["name"]))
    return found


POD = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: ml, labels: {{app: {app}}}, annotations: {{podway.io/run-seconds: "{seconds}"}}}}
spec:
  containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: "1"}}}}}}]
"""


def test_kubectl_applies_every_example_and_reads_what_podway_admitted(kube: KubeStack) -> None:
    out = examples(kube)
    assert "podgroup.scheduling.k8s.io/llm-train-worker-0 created" in out
    listed = json.loads(ok(kubectl(kube, "get", "podgroups", "-A", "-o", "json")))
    names = {(i["metadata"]["namespace"], i["metadata"]["name"]) for i in listed["items"]}
    assert example_names("PodGroup") <= names
    assert all(int(i["metadata"]["resourceVersion"]) > 0 for i in listed["items"])
    ok(
        kubectl(
            kube,
            "wait",
            "-n",
            "ml",
            "podgroup/llm-train-worker-0",
            "--for=condition=PodGroupInitiallyScheduled",
            "--timeout=90s",
        )
    )
    pods = [f"llm-train-worker-0-{i}" for i in range(4)]
    nodes = ok(
        kubectl(kube, "get", "pods", "-n", "ml", *pods, "-o", "jsonpath={.items[*].spec.nodeName}")
    ).split()
    assert len(nodes) == 4
    assert all(nodes)
    queues = ok(kubectl(kube, "get", "clusterqueues"))
    assert queues.splitlines()[0].split() == [
        "NAME",
        "COHORT",
        "PENDING",
        "WORKLOADS",
        "ADMITTED",
        "WORKLOADS",
        "AGE",
    ]
    assert {line.split()[0] for line in queues.splitlines()[1:]} == {"team-llm", "team-vision"}
    assert (
        ok(kubectl(kube, "get", "lq", "-n", "llm", "-o", "jsonpath={.items[*].spec.clusterQueue}"))
        == "team-llm"
    )
    again = ok(kubectl(kube, "apply", "-f", str(EXAMPLES)))  # every example, as a user applies it again
    assert "podgroup.scheduling.k8s.io/llm-train-worker-0 unchanged" in again
    # A v1.35 pod was converted when created: its second apply puts its workloadRef back, naming the
    # PodGroup it is in already.
    assert "pod/legacy-train-0 unchanged" in again or "pod/legacy-train-0 configured" in again


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _as_applied(kube: KubeStack, files: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Each object of `files` as they set it (everything but metadata and status, its labels and its
    annotations but kubectl's own), by apiVersion, kind and key: what an apply decides (a pod's node is
    its binding's)."""
    listed = json.loads(ok(kubectl(kube, "get", "-f", str(files), "-o", "json")))
    found = {}
    for item in listed["items"]:
        metadata = item["metadata"]
        shown = {k: v for k, v in item.items() if k not in ("metadata", "status")}
        if item["kind"] == "Pod":
            shown["spec"] = {k: v for k, v in shown["spec"].items() if k != "nodeName"}
        annotations = {k: v for k, v in (metadata.get("annotations") or {}).items() if k != LAST_APPLIED}
        shown["labels"], shown["annotations"] = metadata.get("labels") or {}, annotations
        found[(item["apiVersion"], item["kind"], f"{metadata.get('namespace', '')}/{metadata['name']}")] = (
            shown
        )
    return found


def test_kubectl_apply_has_the_outcome_podway_apply_has(kube: KubeStack, tmp_path: Path) -> None:
    examples(kube)
    # Every example but the cluster's Nodes and ResourceSlices, which are their node agent's.
    for path in EXAMPLES.glob("[0-9]*.yaml"):
        shutil.copy(path, tmp_path / path.name)
    by_kubectl = _as_applied(kube, tmp_path)
    assert len(by_kubectl) > 40
    podway = subprocess.run(
        [sys.executable, "-m", "libs.client.cli", "apply", "-f", str(tmp_path)],
        env=kube.env, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    try:
        assert podway.returncode == 0, podway.stdout + podway.stderr
        outcomes = {line.rsplit(" ", 1)[-1] for line in podway.stdout.splitlines() if line.strip()}
        assert outcomes <= {"configured", "unchanged"}, podway.stdout  # nothing created, nothing refused
        # What podway apply changed is kubectl's own annotation only: the objects are as kubectl applied them.
        assert _as_applied(kube, tmp_path) == by_kubectl
    finally:
        ok(kubectl(kube, "apply", "-f", str(tmp_path)))  # kubectl's annotation back, for the other tests


def test_kubectl_get_prints_podways_columns_and_every_output_format(kube: KubeStack) -> None:
    examples(kube)  # PodGroups to list, whichever test this stack ran first
    ok(kubectl(kube, "apply", "-f", "-", stdin=POD.format(name="formats", app="formats", seconds=1)))
    table = ok(kubectl(kube, "get", "podgroups", "-A"))
    assert table.splitlines()[0].split()[:6] == ["NAMESPACE", "NAME", "PHASE", "PLACED", "PRIORITY", "DOMAIN"]
    assert "WAITING" in ok(kubectl(kube, "get", "pods", "-n", "ml", "-o", "wide")).splitlines()[0]
    assert (
        yaml.safe_load(ok(kubectl(kube, "get", "pod", "formats", "-n", "ml", "-o", "yaml")))["kind"] == "Pod"
    )
    assert ok(kubectl(kube, "get", "pods", "-n", "ml", "-l", "app=formats", "-o", "name")).split() == [
        "pod/formats"
    ]
    assert ok(kubectl(kube, "get", "nodes", "-o", "jsonpath={.items[0].kind}")) == "Node"
    paged = ok(kubectl(kube, "get", "pods", "-A", "--chunk-size=2", "-o", "name")).split()
    whole = ok(kubectl(kube, "get", "pods", "-A", "--chunk-size=0", "-o", "name")).split()
    assert paged == whole
    assert len(whole) > 2
    # The table kubectl prints by default follows the pages too.
    rows = ok(kubectl(kube, "get", "pods", "-A", "--chunk-size=2", "--no-headers")).splitlines()
    assert [f"pod/{row.split()[1]}" for row in rows] == whole


def test_kubectl_watches_a_pod_from_created_to_finished(kube: KubeStack) -> None:
    if KUBECTL is None:
        pytest.skip("kubectl is not on PATH")
    watcher = subprocess.Popen(
        [
            KUBECTL,
            f"--kubeconfig={kube.kubeconfig}",
            "get",
            "pods",
            "-n",
            "ml",
            "-l",
            "app=watched",
            "-w",
            "--output-watch-events",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"HOME": str(kube.data_dir), "PATH": os.environ.get("PATH", "")},
    )
    try:
        time.sleep(1.0)
        ok(kubectl(kube, "apply", "-f", "-", stdin=POD.format(name="watched", app="watched", seconds=1)))
        seen: list[str] = []
        deadline = time.monotonic() + 60
        assert watcher.stdout is not None
        while time.monotonic() < deadline and not any("Succeeded" in line for line in seen):
            seen.append(watcher.stdout.readline())
        assert any(line.split()[:2] == ["ADDED", "watched"] for line in seen), seen
        assert any("Succeeded" in line for line in seen), seen
    finally:
        watcher.terminate()
        watcher.wait(10)


def test_kubectl_label_annotate_and_every_patch_type(kube: KubeStack) -> None:
    ok(kubectl(kube, "apply", "-f", "-", stdin=POD.format(name="patched", app="patched", seconds=600)))
    ok(kubectl(kube, "label", "-n", "ml", "pod/patched", "tier=gold"))
    ok(kubectl(kube, "annotate", "-n", "ml", "pod/patched", "note=kept"))
    ok(
        kubectl(
            kube,
            "patch",
            "-n",
            "ml",
            "pod/patched",
            "--type=merge",
            "-p",
            '{"metadata":{"labels":{"merged":"yes"}}}',
        )
    )
    ok(
        kubectl(
            kube,
            "patch",
            "-n",
            "ml",
            "pod/patched",
            "--type=json",
            "-p",
            '[{"op":"add","path":"/metadata/labels/json","value":"yes"}]',
        )
    )
    ok(kubectl(kube, "patch", "-n", "ml", "pod/patched", "-p", '{"metadata":{"labels":{"strategic":"yes"}}}'))
    pod = json.loads(ok(kubectl(kube, "get", "-n", "ml", "pod/patched", "-o", "json")))
    labels = pod["metadata"]["labels"]
    assert {k: labels.get(k) for k in ("app", "tier", "merged", "json", "strategic")} == {
        "app": "patched",
        "tier": "gold",
        "merged": "yes",
        "json": "yes",
        "strategic": "yes",
    }
    assert pod["metadata"]["annotations"]["note"] == "kept"
    failed = kubectl(
        kube,
        "patch",
        "-n",
        "ml",
        "pod/patched",
        "--type=json",
        "-p",
        '[{"op":"test","path":"/metadata/name","value":"other"}]',
    )
    assert failed.returncode != 0
    assert "the server rejected our request" in failed.stderr
    described = ok(kubectl(kube, "describe", "-n", "ml", "pod/patched"))
    assert "tier=gold" in described


def test_server_side_apply_conflicts_with_another_manager_unless_forced(kube: KubeStack) -> None:
    ok(kubectl(kube, "apply", "-f", "-", stdin=POD.format(name="owned", app="one", seconds=600)))
    changed = POD.format(name="owned", app="two", seconds=600)
    refused = kubectl(kube, "apply", "--server-side", "-f", "-", stdin=changed)
    assert refused.returncode != 0, refused.stdout
    assert "conflict" in refused.stderr.lower(), refused.stderr
    ok(kubectl(kube, "apply", "--server-side", "--force-conflicts", "-f", "-", stdin=changed))
    assert ok(kubectl(kube, "get", "-n", "ml", "pod/owned", "-o", "jsonpath={.metadata.labels.app}")) == "two"


def test_kubectl_delete_waits_until_the_object_is_gone(kube: KubeStack) -> None:
    ok(kubectl(kube, "apply", "-f", "-", stdin=POD.format(name="doomed", app="doomed", seconds=600)))
    ok(kubectl(kube, "delete", "-n", "ml", "pod/doomed", "--wait", "--timeout=60s"))
    gone = kubectl(kube, "get", "-n", "ml", "pod/doomed")
    assert gone.returncode != 0
    assert 'pods "doomed" not found' in gone.stderr


JOB = """
apiVersion: batch/v1
kind: Job
metadata: {{name: {name}, namespace: ml}}
spec:
  completions: 2
  parallelism: 2
  template:
    metadata: {{annotations: {{podway.io/run-seconds: "600"}}}}
    spec:
      restartPolicy: Never
      containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: "1"}}}}}}]
"""


def _pods_of_job(kube: KubeStack, job: str) -> list[dict[str, Any]]:
    listed = json.loads(ok(kubectl(kube, "get", "-n", "ml", "pods", "-o", "json")))
    return [p for p in listed["items"] if p["metadata"]["name"].startswith(f"{job}-")]


def test_kubectl_delete_cascades_as_asked(kube: KubeStack) -> None:
    for name in ("kept", "fg", "bg"):
        ok(kubectl(kube, "apply", "-f", "-", stdin=JOB.format(name=name)))
    assert len(_pods_of_job(kube, "kept")) == 2

    ok(kubectl(kube, "delete", "-n", "ml", "job/kept", "--cascade=orphan", "--wait", "--timeout=60s"))
    orphans = _pods_of_job(kube, "kept")
    assert len(orphans) == 2, "orphaned pods stay"
    assert all(not p["metadata"].get("ownerReferences") for p in orphans)

    ok(kubectl(kube, "delete", "-n", "ml", "job/fg", "--cascade=foreground", "--wait", "--timeout=60s"))
    assert _pods_of_job(kube, "fg") == [], "a foreground delete returns once the pods are gone"
    assert kubectl(kube, "get", "-n", "ml", "job/fg").returncode != 0

    from kubernetes import client, config

    batch = client.BatchV1Api(config.new_client_from_config(config_file=str(kube.kubeconfig)))
    batch.delete_namespaced_job("bg", "ml", body=client.V1DeleteOptions(propagation_policy="Background"))
    with pytest.raises(client.ApiException) as gone:
        batch.read_namespaced_job("bg", "ml")
    assert gone.value.status == 404, "a background delete removes the Job at once"
    ok(kubectl(kube, "delete", "-n", "ml", "pods", "-l", "batch.kubernetes.io/job-name=kept", "--wait"))


def test_the_python_client_schedules_a_gang_in_the_v1beta1_api(kube: KubeStack) -> None:
    """The official client speaks only v1beta1 for Workloads and PodGroups: a gang written that way is placed,
    and reads back in the shapes upstream's v1.37 serves."""
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(kube.kubeconfig))
    scheduling = client.SchedulingV1beta1Api(api)
    gang = client.V1beta1PodGroupSchedulingPolicy(gang=client.V1beta1GangSchedulingPolicy(min_count=2))
    scheduling.create_namespaced_workload(
        "ml",
        client.V1beta1Workload(
            metadata=client.V1ObjectMeta(name="beta"),
            spec=client.V1beta1WorkloadSpec(
                pod_group_templates=[
                    client.V1beta1PodGroupTemplate(
                        name="workers",
                        scheduling_policy=gang,
                        disruption_mode=client.V1beta1DisruptionMode(all={}),
                        preemption_policy="Never",
                    )
                ]
            ),
        ),
    )
    scheduling.create_namespaced_pod_group(
        "ml",
        client.V1beta1PodGroup(
            metadata=client.V1ObjectMeta(name="beta-0"),
            spec=client.V1beta1PodGroupSpec(
                workload_ref=client.V1beta1WorkloadReference(workload_name="beta", template_name="workers"),
                scheduling_policy=gang,
            ),
        ),
    )
    core = client.CoreV1Api(api)
    for index in range(2):
        core.create_namespaced_pod(
            "ml",
            client.V1Pod(
                metadata=client.V1ObjectMeta(
                    name=f"beta-{index}", annotations={"podway.io/run-seconds": "600"}
                ),
                spec=client.V1PodSpec(
                    scheduling_group=client.V1PodSchedulingGroup(pod_group_name="beta-0"),
                    containers=[
                        client.V1Container(
                            name="c",
                            image="x",
                            resources=client.V1ResourceRequirements(requests={"cpu": "1"}),
                        )
                    ],
                ),
            ),
        )
    ok(
        kubectl(
            kube,
            "wait",
            "-n",
            "ml",
            "podgroups.v1beta1.scheduling.k8s.io/beta-0",
            "--for=condition=PodGroupInitiallyScheduled",
            "--timeout=60s",
        )
    )

    group = scheduling.read_namespaced_pod_group("beta-0", "ml")
    assert group.spec.workload_ref.template_name == "workers"
    assert group.spec.disruption_mode.all == {}, "copied from its template"
    assert group.spec.preemption_policy == "Never"
    assert [c.type for c in group.status.conditions if c.status == "True"] == ["PodGroupInitiallyScheduled"]
    stored = json.loads(
        ok(kubectl(kube, "get", "-n", "ml", "podgroups.v1alpha2.scheduling.k8s.io/beta-0", "-o", "json"))
    )
    assert stored["spec"]["podGroupTemplateRef"]["workload"]["podGroupTemplateName"] == "workers"
    assert stored["spec"]["disruptionMode"] == "PodGroup"
    workload = scheduling.read_namespaced_workload("beta", "ml")
    assert workload.spec.pod_group_templates[0].disruption_mode.all == {}
    alpha3 = client.SchedulingV1alpha3Api(api).read_namespaced_pod_group("beta-0", "ml")
    assert alpha3.spec.workload_ref.template_name == "workers"
    described = ok(kubectl(kube, "describe", "-n", "ml", "podgroups.v1beta1.scheduling.k8s.io/beta-0"))
    assert "Scheduled" in described.split("Events:")[1], described
    ok(
        kubectl(
            kube,
            "delete",
            "-n",
            "ml",
            "pods/beta-0",
            "pods/beta-1",
            "podgroups.v1beta1.scheduling.k8s.io/beta-0",
            "workloads.v1beta1.scheduling.k8s.io/beta",
            "--wait",
            "--timeout=60s",
        )
    )


TERMINAL_GANG = """
apiVersion: scheduling.k8s.io/v1beta1
kind: Workload
metadata: {name: terminal, namespace: ml}
spec:
  podGroupTemplates: [{name: workers, schedulingPolicy: {gang: {minCount: 2}}}]
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: terminal-0, namespace: ml}
spec:
  workloadRef: {workloadName: terminal, templateName: workers}
  schedulingPolicy: {gang: {minCount: 2}}
""" + "".join(
    f"""---
apiVersion: v1
kind: Pod
metadata: {{name: terminal-{index}, namespace: ml, annotations: {{podway.io/run-seconds: "600"}}}}
spec:
  schedulingGroup: {{podGroupName: terminal-0}}
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: "1"}}}}}}]
"""
    for index in range(2)
)


def _conditions_in(kube: KubeStack, version: str, name: str) -> dict[str, dict[str, Any]]:
    resource = f"podgroups.{version}.scheduling.k8s.io/{name}"
    group = json.loads(ok(kubectl(kube, "get", "-n", "ml", resource, "-o", "json")))
    return {c["type"]: c for c in (group.get("status") or {}).get("conditions") or []}


def test_a_gang_evicted_after_it_was_placed_stays_initially_scheduled_in_v1beta1(kube: KubeStack) -> None:
    """Upstream's PodGroupInitiallyScheduled is terminal once True; Podway's own v1alpha2 PodGroupScheduled
    says the gang waits again, and why."""
    from kubernetes import client, config

    ok(kubectl(kube, "apply", "-f", "-", stdin=TERMINAL_GANG))
    wait = ("wait", "-n", "ml", "podgroup/terminal-0", "--for=condition=PodGroupInitiallyScheduled")
    ok(kubectl(kube, *wait, "--timeout=60s"))
    first = _conditions_in(kube, "v1beta1", "terminal-0")["PodGroupInitiallyScheduled"]
    core = client.CoreV1Api(config.new_client_from_config(config_file=str(kube.kubeconfig)))
    for pod in ("terminal-0", "terminal-1"):
        core.create_namespaced_pod_eviction(
            pod, "ml", client.V1Eviction(metadata=client.V1ObjectMeta(name=pod))
        )

    deadline = time.monotonic() + 60
    alpha2 = _conditions_in(kube, "v1alpha2", "terminal-0")
    while alpha2["PodGroupScheduled"]["status"] == "True" and time.monotonic() < deadline:
        time.sleep(0.2)
        alpha2 = _conditions_in(kube, "v1alpha2", "terminal-0")

    assert (alpha2["PodGroupScheduled"]["status"], alpha2["PodGroupScheduled"]["reason"]) == (
        "False",
        "Disrupted",
    )
    assert "placed anew" in alpha2["PodGroupScheduled"]["message"]
    for version in ("v1beta1", "v1alpha3"):
        shown = _conditions_in(kube, version, "terminal-0")
        assert shown == {"PodGroupInitiallyScheduled": first}, version
    ok(kubectl(kube, *wait, "--timeout=5s"))
    ok(
        kubectl(
            kube,
            "delete",
            "-n",
            "ml",
            "podgroups/terminal-0",
            "workloads/terminal",
            "--wait",
            "--timeout=60s",
        )
    )


def test_discovery_and_explain_as_kubectl_reads_them(kube: KubeStack) -> None:
    resources = ok(kubectl(kube, "api-resources"))
    assert "podgroups" in resources
    assert "resourceclaims" in resources
    explained = ok(kubectl(kube, "explain", "podgroups.spec", "--api-version=scheduling.k8s.io/v1alpha2"))
    assert "schedulingPolicy" in explained


def test_errors_are_the_api_servers(kube: KubeStack) -> None:
    # The namespace exists whichever tests ran before (kubectl reports a missing namespace instead).
    ok(kubectl(kube, "apply", "-f", "-", stdin="apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ml\n"))
    missing = kubectl(kube, "get", "-n", "ml", "pod/nowhere")
    assert 'Error from server (NotFound): pods "nowhere" not found' in missing.stderr
    strict = kubectl(
        kube, "apply", "-f", "-", stdin=POD.format(name="typo", app="x", seconds=1).replace("image:", "imag:")
    )
    assert strict.returncode != 0
    assert "imag" in strict.stderr
    viewer = Tokens.load(kube.data_dir / "pki" / "tokens.csv").token_of(VIEWER.name)
    assert viewer is not None
    assert ok(kubectl(kube, "get", "nodes", "-o", "name", token=viewer))
    forbidden = kubectl(kube, "delete", "-n", "ml", "pod/patched", token=viewer)
    assert (
        'User "viewer" cannot delete resource "pods" in API group "" in the namespace "ml"'
        in forbidden.stderr
    )
    unauthorized = kubectl(kube, "get", "pods", token="not-a-token")
    assert "Unauthorized" in unauthorized.stderr


def test_the_python_client_typed_dynamic_and_a_watch_that_survives_a_restart(kube: KubeStack) -> None:
    from kubernetes import client, config, dynamic, watch

    examples(kube)
    api = config.new_client_from_config(config_file=str(kube.kubeconfig))
    core = client.CoreV1Api(api)
    body = client.V1Pod(
        metadata=client.V1ObjectMeta(
            name="typed", namespace="ml", annotations={"podway.io/run-seconds": "600"}
        ),
        spec=client.V1PodSpec(
            containers=[
                client.V1Container(
                    name="c", image="x", resources=client.V1ResourceRequirements(requests={"cpu": "1"})
                )
            ]
        ),
    )
    created = core.create_namespaced_pod("ml", body)
    with pytest.raises(client.ApiException) as exists:
        core.create_namespaced_pod("ml", body)
    assert exists.value.status == 409
    written = [
        d for path in sorted(EXAMPLES.glob("*.yaml")) for d in yaml.safe_load_all(path.read_text()) if d
    ]
    jobs = sorted(d["metadata"]["name"] for d in written if d["kind"] == "Job")
    assert [j.metadata.name for j in client.BatchV1Api(api).list_namespaced_job("ml").items] == jobs
    assert "gpu.example.com" in {d.metadata.name for d in client.ResourceV1Api(api).list_device_class().items}
    groups = dynamic.DynamicClient(api).resources.get(
        api_version="scheduling.k8s.io/v1alpha2", kind="PodGroup"
    )
    assert "llm-train-worker-0" in {g.metadata.name for g in groups.get(namespace="ml").items}

    # A change of the test's own (the pod may wait for room on a busy stack; its scheduling is not the point).
    core.patch_namespaced_pod("typed", "ml", {"metadata": {"labels": {"seen": "yes"}}})
    before = _watch_pod(
        core,
        watch,
        created.metadata.resource_version,
        until=lambda kind, pod: (pod.metadata.labels or {}).get("seen") == "yes",
    )
    last = before[-1][2]
    for name in reversed(SERVICES):  # the whole stack, the API server first; the bus and database stay
        kube.stop(name)
    kube.start(*SERVICES)
    core = client.CoreV1Api(config.new_client_from_config(config_file=str(kube.kubeconfig)))
    core.delete_namespaced_pod("typed", "ml")
    after = _watch_pod(core, watch, last, until=lambda kind, pod: kind == "DELETED")
    assert after[-1][0] == "DELETED"
    assert all(int(rv) > int(last) for _, _, rv in after), "the resumed watch starts after what it saw"


def _watch_pod(core: Any, watch: Any, since: str, *, until: Any) -> list[tuple[str, str, str]]:
    """(event type, phase, resourceVersion) of pod `typed` from `since` until `until(type, pod)` holds."""
    seen: list[tuple[str, str, str]] = []
    for event in watch.Watch().stream(
        core.list_namespaced_pod,
        "ml",
        field_selector="metadata.name=typed",
        resource_version=since,
        timeout_seconds=60,
    ):
        pod = event["object"]
        seen.append((event["type"], pod.status.phase, pod.metadata.resource_version))
        if until(event["type"], pod):
            break
    return seen


def test_events_whoami_eviction_and_logs(kube: KubeStack) -> None:
    ok(kubectl(kube, "apply", "-f", "-", stdin=POD.format(name="evicted", app="evicted", seconds=600)))
    ok(
        kubectl(
            kube, "wait", "-n", "ml", "pod/evicted", "--for=jsonpath={.status.phase}=Running", "--timeout=60s"
        )
    )
    described = ok(kubectl(kube, "describe", "-n", "ml", "pod/evicted"))
    assert "Started" in described.split("Events:")[1], described
    events = json.loads(
        ok(
            kubectl(
                kube,
                "get",
                "events",
                "-n",
                "ml",
                "--field-selector=involvedObject.name=evicted",
                "-o",
                "json",
            )
        )
    )
    assert {"Scheduled", "Started"} <= {e["reason"] for e in events["items"]}
    stuck = POD.format(name="stuck", app="stuck", seconds=1).replace(
        "spec:\n", "spec:\n  nodeSelector: {kubernetes.io/hostname: no-such-node}\n"
    )
    ok(kubectl(kube, "apply", "-f", "-", stdin=stuck))
    ok(
        kubectl(
            kube,
            "wait",
            "-n",
            "ml",
            "pod/stuck",
            "--for=jsonpath={.status.conditions[0].reason}=Unschedulable",
        )
    )
    waits = ok(kubectl(kube, "describe", "-n", "ml", "pod/stuck")).split("Events:")[1]
    assert "Warning" in waits, waits
    assert "FailedScheduling" in waits, waits
    assert "node affinity/selector" in waits, waits
    whoami = ok(kubectl(kube, "auth", "whoami", "-o", "json"))
    assert json.loads(whoami)["status"]["userInfo"]["username"] == "podway-admin"
    logs = kubectl(kube, "logs", "-n", "ml", "evicted")
    assert logs.returncode != 0
    assert "runs a simulated kubelet, which runs no containers" in logs.stderr
    from kubernetes import client, config

    core = client.CoreV1Api(config.new_client_from_config(config_file=str(kube.kubeconfig)))
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name="evicted", namespace="ml"))
    core.create_namespaced_pod_eviction("evicted", "ml", eviction)
    ok(kubectl(kube, "wait", "-n", "ml", "pod/evicted", "--for=delete", "--timeout=60s"))


def test_the_asyncio_client_lists_creates_and_watches(kube: KubeStack) -> None:
    from kubernetes.aio import client, config, watch

    def pod(name: str) -> Any:
        return client.V1Pod(
            metadata=client.V1ObjectMeta(
                name=name, namespace="ml", annotations={"podway.io/run-seconds": "1"}
            ),
            spec=client.V1PodSpec(
                containers=[
                    client.V1Container(
                        name="c", image="x", resources=client.V1ResourceRequirements(requests={"cpu": "1"})
                    )
                ]
            ),
        )

    async def scenario() -> list[dict[str, str]]:
        api = await config.new_client_from_config(config_file=str(kube.kubeconfig))
        async with api:
            core = client.CoreV1Api(api)
            await core.create_namespaced_pod("ml", pod("aio-first"))
            created = await core.create_namespaced_pod("ml", pod("aio"))
            listed = await core.list_namespaced_pod("ml", limit=1)
            assert len(listed.items) == 1
            assert listed.metadata._continue
            # A change of the test's own after the resourceVersion it watches from (the pod may wait for
            # room on a busy stack: its scheduling is not what this test is about).
            await core.patch_namespaced_pod("aio", "ml", {"metadata": {"labels": {"seen": "yes"}}})
            labels: list[dict[str, str]] = []
            stream = watch.Watch().stream(
                core.list_namespaced_pod,
                "ml",
                field_selector="metadata.name=aio",
                resource_version=created.metadata.resource_version,
                timeout_seconds=60,
            )
            async for event in stream:
                labels.append(event["object"].metadata.labels or {})
                if labels[-1].get("seen") == "yes":
                    break
            return labels

    labels = asyncio.run(scenario())
    assert labels[-1].get("seen") == "yes"


def test_kubectls_typed_commands_send_protobuf_and_are_read_as_sent(kube: KubeStack) -> None:
    created = kubectl(kube, "create", "namespace", "typed", "-v=8")
    assert "Content-Type: application/vnd.kubernetes.protobuf" in created.stderr  # the path under test
    assert ok(created).strip() == "namespace/typed created"
    ok(kubectl(kube, "create", "priorityclass", "typed-high", "--value=0", "--description=zero is a value"))
    ok(kubectl(kube, "create", "job", "typed", "-n", "typed", "--image=busybox", "--", "echo", "hi"))

    priority = json.loads(ok(kubectl(kube, "get", "priorityclass", "typed-high", "-o", "json")))
    assert (priority["value"], priority["description"]) == (0, "zero is a value")
    job = json.loads(ok(kubectl(kube, "get", "job", "typed", "-n", "typed", "-o", "json")))
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert (container["name"], container["image"], container["command"]) == (
        "typed",
        "busybox",
        ["echo", "hi"],
    )
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"

    ok(kubectl(kube, "apply", "-f", "-", stdin=POD.format(name="drained", app="drained", seconds=600)))
    ok(kubectl(kube, "wait", "-n", "ml", "pod/drained", "--for=jsonpath={.status.phase}=Running"))
    node = ok(kubectl(kube, "get", "pod", "drained", "-n", "ml", "-o", "jsonpath={.spec.nodeName}"))
    try:
        # drain evicts through policy/v1 Eviction, sent as protobuf with its DeleteOptions inside.
        # --force: a bare pod has no controller to make it again.
        only = "--pod-selector=app=drained"
        drained = ok(kubectl(kube, "drain", node, "--ignore-daemonsets", "--force", "--timeout=60s", only))
        assert "pod/drained evicted" in drained
    finally:
        ok(kubectl(kube, "uncordon", node))
    ok(kubectl(kube, "wait", "-n", "ml", "pod/drained", "--for=delete", "--timeout=60s"))


def test_namespaces_created_labelled_and_deleted_with_kubectl(kube: KubeStack) -> None:
    ok(kubectl(kube, "create", "namespace", "empty-team"))
    listed = ok(kubectl(kube, "get", "namespaces"))
    assert "empty-team" in listed  # stored: listed while it holds nothing
    ok(kubectl(kube, "label", "namespace", "empty-team", "team=a"))
    labels = json.loads(ok(kubectl(kube, "get", "ns", "empty-team", "-o", "jsonpath={.metadata.labels}")))
    assert labels == {"team": "a", "kubernetes.io/metadata.name": "empty-team"}
    refused = kubectl(kube, "create", "namespace", "Bad.Name")
    assert refused.returncode != 0
    assert 'metadata.name: Invalid value: "Bad.Name": a lowercase RFC 1123 label' in refused.stderr
    missing = kubectl(kube, "get", "namespace", "nothing-here")
    assert 'namespaces "nothing-here" not found' in missing.stderr

    # ml exists because objects are in it; labelling it stores it, with its labels.
    examples(kube)
    ok(kubectl(kube, "label", "namespace", "ml", "owner=ml-team"))
    ml = json.loads(ok(kubectl(kube, "get", "namespace", "ml", "-o", "json")))
    assert ml["metadata"]["labels"]["owner"] == "ml-team"
    assert ml["metadata"]["creationTimestamp"]

    ok(kubectl(kube, "delete", "namespace", "empty-team", "--timeout=60s"))
    gone = kubectl(kube, "get", "namespace", "empty-team")
    assert 'namespaces "empty-team" not found' in gone.stderr

    # A namespace with a running v1.35 gang: its PodGroup is reached twice (as a PodGroup, and as the one made
    # for its Workload's pods) and marked once; the pods are evicted, then everything goes with the namespace.
    doomed = (EXAMPLES / "04-v135-workload.yaml").read_text().replace("namespace: ml", "namespace: doomed")
    ok(kubectl(kube, "apply", "-f", "-", stdin=doomed))
    running = "--for=jsonpath={.status.phase}=Running"
    ok(
        kubectl(
            kube, "wait", "-n", "doomed", "pod/legacy-train-0", "pod/legacy-train-1", running, "--timeout=90s"
        )
    )
    ok(kubectl(kube, "delete", "namespace", "doomed", "--timeout=90s"))  # waits until it is gone
    assert 'namespaces "doomed" not found' in kubectl(kube, "get", "namespace", "doomed").stderr
    assert ok(kubectl(kube, "get", "pods,podgroups,workloads", "-n", "doomed", "-o", "name")) == ""


def _api(kube: KubeStack) -> Any:
    from kubernetes import config

    return config.new_client_from_config(config_file=str(kube.kubeconfig))


def _dynamic(kube: KubeStack) -> Any:
    from kubernetes import dynamic

    return dynamic.DynamicClient(_api(kube))


def _http(
    api: Any, method: str, path: str, query: list[tuple[str, str]] | None = None, body: Any = None
) -> tuple[int, Any, dict[str, Any]]:
    """(status, headers, decoded JSON body) of a raw request through the official client's ApiClient."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    request = api.param_serialize(
        method,
        path,
        query_params=query or [],
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
    )
    response = api.call_api(*request)
    return response.status, response.headers, json.loads(response.read())


def _events_of(kube: KubeStack, name: str, *, reasons: set[str]) -> list[dict[str, Any]]:
    """The events.k8s.io/v1 Events in ml about `name`, once they tell at least `reasons` (the audit log they
    are made from may lag the object a little)."""
    events = _dynamic(kube).resources.get(api_version="events.k8s.io/v1", kind="Event")
    deadline = time.monotonic() + 60
    while True:
        about = [e for e in events.get(namespace="ml").to_dict()["items"] if e["regarding"]["name"] == name]
        if reasons <= {e["reason"] for e in about} or time.monotonic() > deadline:
            return about
        time.sleep(0.2)


def test_events_k8s_io_v1_tell_a_pods_story_in_their_own_shape(kube: KubeStack) -> None:
    ok(kubectl(kube, "apply", "-f", "-", stdin=POD.format(name="storied", app="storied", seconds=1)))
    succeeded = "--for=jsonpath={.status.phase}=Succeeded"
    ok(kubectl(kube, "wait", "-n", "ml", "pod/storied", succeeded, "--timeout=60s"))
    pod = json.loads(ok(kubectl(kube, "get", "-n", "ml", "pod/storied", "-o", "json")))

    story = _events_of(kube, "storied", reasons={"Scheduled", "Started", "Completed"})
    assert {"Scheduled", "Started", "Completed"} <= {e["reason"] for e in story}, story
    created = datetime.fromisoformat(pod["metadata"]["creationTimestamp"])
    for event in story:
        assert (event["apiVersion"], event["kind"]) == ("events.k8s.io/v1", "Event")
        assert event["regarding"] == {
            "kind": "Pod",
            "namespace": "ml",
            "name": "storied",
            "uid": pod["metadata"]["uid"],
        }
        assert event["metadata"]["namespace"] == "ml"
        assert event["type"] == "Normal"
        assert event["note"]
        assert event["reportingController"]
        when = datetime.fromisoformat(event.get("eventTime") or event["deprecatedLastTimestamp"])
        assert when >= created, (when, created)
    (scheduled,) = [e for e in story if e["reason"] == "Scheduled"]
    assert pod["spec"]["nodeName"] in scheduled["note"]

    events = _dynamic(kube).resources.get(api_version="events.k8s.io/v1", kind="Event")
    assert events.get(namespace="ml", name=scheduled["metadata"]["name"]).to_dict() == scheduled

    # The same Events as core/v1 shows them, field for field.
    core = _dynamic(kube).resources.get(api_version="v1", kind="Event")
    as_core = {e["metadata"]["name"]: e for e in core.get(namespace="ml").to_dict()["items"]}
    for event in story:
        same = as_core[event["metadata"]["name"]]
        assert (same["involvedObject"], same["reason"], same["message"], same["type"]) == (
            event["regarding"],
            event["reason"],
            event["note"],
            event["type"],
        )
        assert same["lastTimestamp"] == event["deprecatedLastTimestamp"]

    # Across namespaces: a cluster-scoped object's Events are in `default`, as upstream records them.
    items = events.get().to_dict()["items"]
    assert {e["metadata"]["name"] for e in story} <= {e["metadata"]["name"] for e in items}
    assert all(e["metadata"]["namespace"] == (e["regarding"].get("namespace") or "default") for e in items)
    assert any(not e["regarding"].get("namespace") for e in items), "Nodes were registered, at least"
    ok(kubectl(kube, "delete", "-n", "ml", "pod/storied", "--wait", "--timeout=60s"))


def test_a_pending_pods_failed_scheduling_event_is_listed_and_read_like_any_other(kube: KubeStack) -> None:
    astray = POD.format(name="astray", app="astray", seconds=1).replace(
        "spec:\n", "spec:\n  nodeSelector: {kubernetes.io/hostname: no-such-node}\n"
    )
    ok(kubectl(kube, "apply", "-f", "-", stdin=astray))
    try:
        unschedulable = "--for=jsonpath={.status.conditions[0].reason}=Unschedulable"
        ok(kubectl(kube, "wait", "-n", "ml", "pod/astray", unschedulable, "--timeout=60s"))
        core = _dynamic(kube).resources.get(api_version="v1", kind="Event")
        selected = core.get(namespace="ml", field_selector="involvedObject.name=astray").to_dict()["items"]
        (waiting,) = [e for e in selected if e["reason"] == "FailedScheduling"]
        assert (waiting["type"], waiting["involvedObject"]["name"]) == ("Warning", "astray")
        assert "node affinity/selector" in waiting["message"]
        # A field selector only narrows the list: what it selects is in the namespace's list too.
        listed = {e["metadata"]["name"] for e in core.get(namespace="ml").to_dict()["items"]}
        assert {e["metadata"]["name"] for e in selected} <= listed
        assert core.get(namespace="ml", name=waiting["metadata"]["name"]).reason == "FailedScheduling"
        names = ok(kubectl(kube, "get", "events", "-n", "ml", "-o", "name")).split()
        assert f"event/{waiting['metadata']['name']}" in names
    finally:
        ok(kubectl(kube, "delete", "-n", "ml", "pod/astray", "--wait", "--timeout=60s"))


def test_events_k8s_io_v1_select_an_objects_events_by_regarding_name(kube: KubeStack) -> None:
    # Running for the whole test, so that no Event about them comes between the two lists compared below.
    ok(kubectl(kube, "apply", "-f", "-", stdin=POD.format(name="regarded", app="regarded", seconds=600)))
    ok(kubectl(kube, "apply", "-f", "-", stdin=POD.format(name="disregarded", app="regarded", seconds=600)))
    for name in ("regarded", "disregarded"):
        _events_of(kube, name, reasons={"Scheduled", "Started"})
    api, path = _api(kube), "/apis/events.k8s.io/v1/namespaces/ml/events"
    try:
        code, _, body = _http(api, "GET", path, [("fieldSelector", "regarding.name=regarded")])
        assert code == 200, body
        selected = body["items"]
        assert {e["regarding"]["name"] for e in selected} == {"regarded"}
        assert "Scheduled" in {e["reason"] for e in selected}
        both = "regarding.name=regarded,regarding.kind=Pod"
        code, _, body = _http(api, "GET", "/apis/events.k8s.io/v1/events", [("fieldSelector", both)])
        assert code == 200, body
        assert {e["metadata"]["name"] for e in body["items"]} == {e["metadata"]["name"] for e in selected}
        # core/v1's name for the field is not this version's.
        code, _, body = _http(api, "GET", path, [("fieldSelector", "involvedObject.name=regarded")])
        assert (code, body["message"]) == (400, "field label not supported: involvedObject.name")
    finally:
        ok(kubectl(kube, "delete", "-n", "ml", "pod/regarded", "pod/disregarded", "--wait", "--timeout=60s"))


def test_the_official_clients_events_v1_api_reads_podways_events(kube: KubeStack) -> None:
    from kubernetes import client

    ok(kubectl(kube, "apply", "-f", "-", stdin=POD.format(name="typed-story", app="typed-story", seconds=1)))
    _events_of(kube, "typed-story", reasons={"Scheduled"})
    try:
        listed = client.EventsV1Api(_api(kube)).list_namespaced_event("ml")
        about = [e for e in listed.items if e.regarding is not None and e.regarding.name == "typed-story"]
        assert "Scheduled" in {e.reason for e in about}
        assert all(e.event_time is not None for e in listed.items)
    finally:
        ok(kubectl(kube, "delete", "-n", "ml", "pod/typed-story", "--wait", "--timeout=60s"))


def _served(dyn: Any) -> dict[tuple[str, str], Any]:
    """Every (apiVersion, kind) discovery names, with the dynamic client's resource for it."""
    return {
        (r.group_version, r.kind): r
        for r in dyn.resources.search()
        if r.verbs and not r.kind.endswith("List")  # a resource's list type is found with it
    }


def test_the_dynamic_client_lists_every_kind_in_every_version_podway_serves(kube: KubeStack) -> None:
    from libs.kubeapi.resources import RESOURCES

    examples(kube)  # something of most kinds to list
    served = _served(_dynamic(kube))
    assert set(served) == {(r.group_version, r.kind) for r in RESOURCES}
    written = {
        d["kind"] for path in EXAMPLES.glob("*.yaml") for d in yaml.safe_load_all(path.read_text()) if d
    }
    for (api_version, kind), resource in served.items():
        if "list" not in resource.verbs:
            assert resource.verbs == ["create"], (api_version, kind)  # SelfSubjectReview
            continue
        listed = resource.get().to_dict()
        assert (listed["apiVersion"], listed["kind"]) == (api_version, f"{kind}List")
        assert int(listed["metadata"]["resourceVersion"]) > 0
        assert {(i["apiVersion"], i["kind"]) for i in listed["items"]} <= {(api_version, kind)}
        if kind in written:  # in every version it is served in, whichever it was written in
            assert listed["items"], (api_version, kind)
        if resource.namespaced:
            in_ml = resource.get(namespace="ml").to_dict()
            assert in_ml["kind"] == f"{kind}List"
            assert {i["metadata"]["namespace"] for i in in_ml["items"]} <= {"ml"}


DYNAMIC = """
apiVersion: v1
kind: Namespace
metadata: {name: dynamic-made}
---
apiVersion: v1
kind: Pod
metadata: {name: made, namespace: dynamic, annotations: {podway.io/run-seconds: "600"}}
spec:
  containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
---
apiVersion: v1
kind: Node
metadata: {name: dynamic-made}
spec: {unschedulable: true}
---
apiVersion: batch/v1
kind: Job
metadata: {name: made, namespace: dynamic}
spec:
  template:
    metadata: {annotations: {podway.io/run-seconds: "600"}}
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: dynamic-made}
value: 7
---
apiVersion: scheduling.k8s.io/v1beta1
kind: Workload
metadata: {name: made-v1beta1, namespace: dynamic}
spec:
  podGroupTemplates: [{name: workers, schedulingPolicy: {gang: {minCount: 2}}}]
---
apiVersion: scheduling.k8s.io/v1alpha3
kind: Workload
metadata: {name: made-v1alpha3, namespace: dynamic}
spec:
  podGroupTemplates: [{name: workers, schedulingPolicy: {gang: {minCount: 2}}}]
---
apiVersion: scheduling.k8s.io/v1alpha2
kind: Workload
metadata: {name: made-v1alpha2, namespace: dynamic}
spec:
  podGroupTemplates: [{name: workers, schedulingPolicy: {gang: {minCount: 2}}}]
---
apiVersion: scheduling.k8s.io/v1alpha1
kind: Workload
metadata: {name: made-v1alpha1, namespace: dynamic}
spec:
  podGroups: [{name: workers, policy: {gang: {minCount: 2}}}]
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: made-v1beta1, namespace: dynamic}
spec:
  schedulingPolicy: {gang: {minCount: 2}}
---
apiVersion: scheduling.k8s.io/v1alpha3
kind: PodGroup
metadata: {name: made-v1alpha3, namespace: dynamic}
spec:
  schedulingPolicy: {gang: {minCount: 2}}
---
apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata: {name: made-v1alpha2, namespace: dynamic}
spec:
  schedulingPolicy: {gang: {minCount: 2}}
---
apiVersion: scheduling.k8s.io/v1alpha3
kind: CompositePodGroup
metadata: {name: made, namespace: dynamic}
spec:
  workloadRef: {workloadName: composite, templateName: job}
  schedulingPolicy: {gang: {minGroupCount: 1}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: made.example.com}
spec:
  selectors: [{cel: {expression: 'device.driver == "made.example.com"'}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: made, namespace: dynamic}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: made.example.com}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: made, namespace: dynamic}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: made.example.com}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: dynamic-made}
spec:
  driver: made.example.com
  pool: {name: made, generation: 1, resourceSliceCount: 1}
  nodeName: dynamic-made
  devices: []
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: dynamic-made}
spec: {}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: dynamic-made}
spec: {}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: dynamic-made}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: dynamic-made, resources: [{name: cpu, nominalQuota: "1"}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: made, namespace: dynamic}
spec: {clusterQueue: dynamic-made}
"""
"""One object of every kind a user can create, in every version it is served in (a CompositePodGroup is
made of a Workload's template: `composite`, which the test makes first)."""

COMPOSITE = """
apiVersion: scheduling.k8s.io/v1alpha3
kind: Workload
metadata: {name: composite, namespace: dynamic}
spec:
  compositePodGroupTemplates:
  - name: job
    schedulingPolicy: {gang: {minGroupCount: 1}}
    podGroupTemplates: [{name: driver, schedulingPolicy: {gang: {minCount: 1}}}]
"""


def _gone(resource: Any, name: str, namespace: str | None) -> bool:
    """Whether `get` answers 404 within a minute (a pod or a namespace goes once what it holds has stopped)."""
    from kubernetes.dynamic.exceptions import NotFoundError

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            resource.get(name=name, namespace=namespace)
        except NotFoundError:
            return True
        time.sleep(0.1)
    return False


def test_the_dynamic_client_creates_patches_and_deletes_every_kind_a_user_can_create(kube: KubeStack) -> None:
    dyn = _dynamic(kube)
    served = _served(dyn)
    manifests = [d for d in yaml.safe_load_all(DYNAMIC) if d]
    creatable = {key for key, r in served.items() if {"create", "get", "patch", "delete"} <= set(r.verbs)}
    assert {(m["apiVersion"], m["kind"]) for m in manifests} == creatable

    workloads = served[("scheduling.k8s.io/v1alpha3", "Workload")]
    workloads.create(body=yaml.safe_load(COMPOSITE), namespace="dynamic")
    try:
        for manifest in manifests:
            resource = served[(manifest["apiVersion"], manifest["kind"])]
            name, namespace = manifest["metadata"]["name"], manifest["metadata"].get("namespace")
            what = f"{manifest['kind']} {manifest['apiVersion']}"

            created = resource.create(body=manifest, namespace=namespace)
            assert (created.apiVersion, created.kind, created.metadata.name) == (
                manifest["apiVersion"],
                manifest["kind"],
                name,
            ), what
            read = resource.get(name=name, namespace=namespace)
            assert (read.apiVersion, read.metadata.uid) == (manifest["apiVersion"], created.metadata.uid), (
                what
            )

            patched = resource.patch(
                body={"metadata": {"labels": {"made-by": "dynamic"}}},
                name=name,
                namespace=namespace,
                content_type="application/merge-patch+json",
            )
            assert patched.metadata.labels["made-by"] == "dynamic", what
            assert int(patched.metadata.resourceVersion) > int(read.metadata.resourceVersion), what
            assert resource.get(name=name, namespace=namespace).metadata.labels["made-by"] == "dynamic", what

            resource.delete(name=name, namespace=namespace, body={"propagationPolicy": "Background"})
            assert _gone(resource, name, namespace), what
    finally:
        workloads.delete(name="composite", namespace="dynamic")

    review = served[("authentication.k8s.io/v1", "SelfSubjectReview")].create(
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    )
    assert review.status.userInfo.username == "podway-admin"


DEVICE_CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"


def _with_unknown_field(name: str) -> dict[str, Any]:
    """A DeviceClass with `spec.foo`, which no version of it has."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"foo": "bar", "selectors": [{"cel": {"expression": f'device.driver == "{name}"'}}]},
    }


def _create_validated(api: Any, name: str, validation: str | None) -> tuple[int, list[str], dict[str, Any]]:
    """POST the DeviceClass `name` with `fieldValidation=validation` (none when None): (status, Warning
    headers, body)."""
    query = [("fieldValidation", validation)] if validation else []
    code, headers, body = _http(api, "POST", DEVICE_CLASSES, query, _with_unknown_field(name))
    return code, headers.getlist("Warning"), body


def test_field_validation_strict_refuses_an_unknown_field_naming_it(kube: KubeStack) -> None:
    api = _api(kube)
    code, warnings, body = _create_validated(api, "strict.example.com", "Strict")
    assert (code, body["reason"], warnings) == (400, "BadRequest", [])
    assert body["message"] == (
        'DeviceClass in version "v1" cannot be handled as a DeviceClass: '
        'strict decoding error: unknown field "spec.foo"'
    )
    code, _, body = _http(api, "GET", f"{DEVICE_CLASSES}/strict.example.com")
    assert (code, body["reason"]) == (404, "NotFound")


def test_field_validation_warn_by_default_and_ignore_silently_create_the_object(kube: KubeStack) -> None:
    api = _api(kube)
    answers = {
        validation: _create_validated(api, f"{(validation or 'default').lower()}.example.com", validation)
        for validation in ("Warn", None, "Ignore")
    }
    try:
        for validation, (code, _, body) in answers.items():
            assert (code, body["kind"]) == (201, "DeviceClass"), (validation, body)
        for validation in ("Warn", None):  # upstream's default is Warn
            (warning,) = answers[validation][1]
            assert warning.startswith('299 - "'), warning
            assert "unknown field" in warning, warning
            assert "spec.foo" in warning, warning
        assert answers["Ignore"][1] == []
        code, _, _ = _http(api, "GET", f"{DEVICE_CLASSES}/default.example.com")
        assert code == 200
    finally:
        for validation in answers:
            _http(api, "DELETE", f"{DEVICE_CLASSES}/{(validation or 'default').lower()}.example.com")


def test_an_unknown_field_warning_is_quoted_as_upstream_quotes_it_and_kubectl_shows_it(
    kube: KubeStack,
) -> None:
    api = _api(kube)
    code, warnings, _ = _create_validated(api, "quoted.example.com", "Warn")
    _http(api, "DELETE", f"{DEVICE_CLASSES}/quoted.example.com")
    assert code == 201
    shown = kubectl(
        kube,
        "create",
        "--validate=warn",
        "-f",
        "-",
        stdin=json.dumps(_with_unknown_field("shown.example.com")),
    )
    ok(kubectl(kube, "delete", "deviceclass", "shown.example.com"))
    assert warnings == ['299 - "unknown field \\"spec.foo\\""']
    assert 'Warning: unknown field "spec.foo"' in ok(shown) + shown.stderr


def test_an_unknown_field_taken_with_a_warning_or_ignored_is_dropped_from_the_object(kube: KubeStack) -> None:
    api = _api(kube)
    names = {validation: f"dropped-{validation.lower()}.example.com" for validation in ("Warn", "Ignore")}
    try:
        for validation, name in names.items():
            code, _, created = _create_validated(api, name, validation)
            assert code == 201
            code, _, stored = _http(api, "GET", f"{DEVICE_CLASSES}/{name}")
            assert code == 200
            for shown in (created, stored):
                assert "foo" not in shown["spec"], (validation, shown["spec"])
                assert "f:foo" not in json.dumps(shown["metadata"].get("managedFields")), validation
    finally:
        for name in names.values():
            _http(api, "DELETE", f"{DEVICE_CLASSES}/{name}")

"""Demo step: a gang applied and watched through the Kubernetes API with kubectl (or, where no kubectl is
installed, the official kubernetes Python client), using the kubeconfig the stack wrote."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path
from typing import Any

from libs.demo.steps import Demo, check

NAMESPACE = "kube-demo"
GANG = f"""
apiVersion: scheduling.k8s.io/v1alpha2
kind: Workload
metadata: {{name: kube-gang, namespace: {NAMESPACE}}}
spec:
  podGroupTemplates:
  - name: worker
    schedulingPolicy: {{gang: {{minCount: 2}}}}
    schedulingConstraints: {{topology: [{{key: topology.example.com/rack}}]}}
---
apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata: {{name: kube-gang-worker-0, namespace: {NAMESPACE}}}
spec:
  podGroupTemplateRef: {{workload: {{workloadName: kube-gang, podGroupTemplateName: worker}}}}
  schedulingPolicy: {{gang: {{minCount: 2}}}}
""" + "".join(
    f"""---
apiVersion: v1
kind: Pod
metadata: {{name: kube-gang-{index}, namespace: {NAMESPACE}, annotations: {{podway.io/run-seconds: "20"}}}}
spec:
  schedulingGroup: {{podGroupName: kube-gang-worker-0}}
  containers: [{{name: trainer, image: trainer:v1, resources: {{requests: {{cpu: "4", nvidia.com/gpu: "2"}}}}}}]
"""
    for index in range(2)
)
PODS = ("kube-gang-0", "kube-gang-1")


async def kubernetes_steps(demo: Demo, data_dir: Path) -> None:
    kubeconfig = data_dir / "kubeconfig"
    kubectl = shutil.which("kubectl")

    async def apply_and_watch() -> None:
        check(kubeconfig.exists(), f"the API server wrote no kubeconfig at {kubeconfig}")
        if kubectl is None:
            demo.out("   (no kubectl on PATH: the official kubernetes Python client instead)")
            seen = await asyncio.to_thread(_with_python_client, kubeconfig)
        else:
            seen = await asyncio.to_thread(_with_kubectl, kubectl, kubeconfig, data_dir)
        for line in seen:
            demo.out(f"   {line}")
        running = [line for line in seen if "Running" in line]
        check(len(running) >= len(PODS), f"the watch saw {len(running)} of {len(PODS)} pods running")

    await demo.step(
        f"Kubernetes API: a gang applied and watched with kubectl ({kubeconfig})", apply_and_watch
    )


def _with_kubectl(kubectl: str, kubeconfig: Path, data_dir: Path) -> list[str]:
    base = [kubectl, f"--kubeconfig={kubeconfig}", f"--cache-dir={data_dir / 'kube-cache'}"]
    env = {"HOME": str(data_dir), "PATH": "/usr/bin:/bin:/usr/local/bin"}
    watcher = subprocess.Popen(
        [*base, "get", "pods", "-n", NAMESPACE, "-w", "--output-watch-events"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        applied = subprocess.run(
            [*base, "apply", "-f", "-"], input=GANG, capture_output=True, text=True, env=env, timeout=60
        )
        check(applied.returncode == 0, f"kubectl apply failed: {applied.stderr.strip()}")
        waited = subprocess.run(
            [*base, "wait", "-n", NAMESPACE, "podgroup/kube-gang-worker-0", "--for=condition=PodGroupInitiallyScheduled",
             "--timeout=60s"],
            capture_output=True, text=True, env=env, timeout=90,
        )  # fmt: skip
        check(waited.returncode == 0, f"kubectl wait failed: {waited.stderr.strip()}")
        nodes = subprocess.run(
            [*base, "get", "pods", "-n", NAMESPACE, *PODS, "-o", "jsonpath={.items[*].spec.nodeName}"],
            capture_output=True, text=True, env=env, timeout=60,
        ).stdout.split()  # fmt: skip
        racks = {node.rsplit("-n", 1)[0] for node in nodes}
        check(len(nodes) == len(PODS) and len(racks) == 1, f"the gang is not in one rack: {nodes}")
        return ["$ kubectl apply -f gang.yaml", *applied.stdout.splitlines(), "$ kubectl get pods -w",
                *_lines_until_running(watcher)]  # fmt: skip
    finally:
        watcher.terminate()
        watcher.wait(10)


def _lines_until_running(watcher: subprocess.Popen[str]) -> list[str]:
    assert watcher.stdout is not None
    lines: list[str] = []
    while sum("Running" in line for line in lines) < len(PODS):
        line = watcher.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip())
    return lines


def _with_python_client(kubeconfig: Path) -> list[str]:
    import yaml
    from kubernetes import config, dynamic, watch
    from kubernetes.client import CoreV1Api

    api = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    resources = dynamic.DynamicClient(api).resources  # type: ignore[no-untyped-call]
    for doc in yaml.safe_load_all(GANG):
        resources.get(api_version=doc["apiVersion"], kind=doc["kind"]).create(body=doc, namespace=NAMESPACE)
    lines: list[str] = []
    running: set[str] = set()
    stream = watch.Watch().stream  # type: ignore[no-untyped-call]
    for event in stream(CoreV1Api(api).list_namespaced_pod, NAMESPACE, timeout_seconds=60):  # type: ignore[no-untyped-call]
        pod: Any = event["object"]
        lines.append(
            f"{event['type']:<9} {pod.metadata.name:<14} {pod.status.phase:<10} {pod.spec.node_name}"
        )
        if pod.status.phase == "Running":
            running.add(pod.metadata.name)
        if running >= set(PODS):
            break
    return lines

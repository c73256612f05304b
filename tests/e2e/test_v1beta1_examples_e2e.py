"""Every example in its v1.37 form (deploy/examples/v1beta1) on the stack as processes: applied with
`podway apply -f` as the folder's README says, and written with the official client's typed
`SchedulingV1beta1Api` and `SchedulingV1alpha3Api` calls; each gang is placed and reads back in the version
asked. One stack; each way writes every example in a namespace of its own."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from libs.api.manifests import load_documents
from tests.e2e.test_kubernetes_api_e2e import ROOT, KubeStack, kube  # noqa: F401  (kube: the fixture)

EXAMPLES = ROOT / "deploy" / "examples"
BETA = EXAMPLES / "v1beta1"
SCHEDULED = "PodGroupInitiallyScheduled"


def documents(path: Path) -> list[dict[str, Any]]:
    return load_documents(path.read_text())


def beta_documents() -> list[dict[str, Any]]:
    return [doc for path in sorted(BETA.glob("*.yaml")) for doc in documents(path)]


def podway(stack: KubeStack, *args: str) -> str:
    run = subprocess.run(
        [sys.executable, "-m", "libs.client.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=stack.env,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


@pytest.fixture(scope="module")
def cluster_objects(kube: KubeStack) -> KubeStack:  # noqa: F811
    """The version-independent examples the gangs need: PriorityClasses and DeviceClasses (the claim
    templates of 02-dra.yaml land in `ml`; other namespaces get their own)."""
    podway(kube, "apply", "-f", str(EXAMPLES / "01-priorityclasses.yaml"))
    podway(kube, "apply", "-f", str(EXAMPLES / "02-dra.yaml"))
    return kube


@pytest.fixture(scope="module")
def api(cluster_objects: KubeStack) -> Iterator[Any]:
    from kubernetes import config

    client = config.new_client_from_config(config_file=str(cluster_objects.kubeconfig))
    yield client
    client.close()


def contains(whole: Any, part: Any) -> bool:
    """`part` is in `whole`: what was written reads back, beside the defaults the server filled in."""
    if isinstance(part, dict):
        return isinstance(whole, dict) and all(k in whole and contains(whole[k], v) for k, v in part.items())
    if isinstance(part, list):
        return isinstance(whole, list) and len(whole) == len(part) and all(map(contains, whole, part))
    return bool(whole == part)


def conditions(group: Any) -> dict[str, str]:
    return {c.type: c.status for c in (group.status.conditions if group.status else None) or []}


def wait_until_placed(read: Callable[[str], Any], names: list[str]) -> dict[str, Any]:
    """The PodGroups as read once each shows PodGroupInitiallyScheduled True, or as last read (assert on it)."""
    deadline = time.monotonic() + 60
    groups = {name: read(name) for name in names}
    while (
        any(conditions(g).get(SCHEDULED) != "True" for g in groups.values()) and time.monotonic() < deadline
    ):
        time.sleep(0.1)
        groups = {name: read(name) for name in names}
    return groups


def assert_placed(groups: dict[str, Any]) -> None:
    for name, group in groups.items():
        assert conditions(group).get(SCHEDULED) == "True", f"{name}: {conditions(group)}"


def names_of(kind: str) -> list[str]:
    return [doc["metadata"]["name"] for doc in beta_documents() if doc["kind"] == kind]


def test_every_v1beta1_example_applied_with_the_cli_is_placed_and_reads_back_as_written(
    api: Any, cluster_objects: KubeStack
) -> None:
    from kubernetes import client

    out = podway(cluster_objects, "apply", "-f", str(BETA))

    created = {f"{d['kind'].lower()}/{d['metadata']['name']} created" for d in beta_documents()}
    assert created <= set(out.splitlines()), out
    scheduling = client.SchedulingV1beta1Api(api)
    groups = wait_until_placed(lambda n: scheduling.read_namespaced_pod_group(n, "ml"), names_of("PodGroup"))
    assert_placed(groups)
    for doc in beta_documents():
        if doc["kind"] == "PodGroup":
            read = api.sanitize_for_serialization(groups[doc["metadata"]["name"]])
        elif doc["kind"] == "Workload":
            read = api.sanitize_for_serialization(
                scheduling.read_namespaced_workload(doc["metadata"]["name"], "ml")
            )
        else:
            continue
        assert read["apiVersion"] == "scheduling.k8s.io/v1beta1"
        assert contains(read["spec"], doc["spec"]), (read["spec"], doc["spec"])


def typed(api: Any, doc: dict[str, Any], model: str) -> Any:
    """The document as the client's model `model`, which must say all of it."""
    written = api.deserialize(json.dumps(doc), model, "application/json")
    assert api.sanitize_for_serialization(written) == doc, (
        f"{model} cannot say all of {doc['metadata']['name']}"
    )
    return written


@pytest.mark.parametrize("version", ["v1beta1", "v1alpha3"])
def test_every_v1beta1_example_written_with_the_typed_client_is_placed_in_that_version(
    api: Any, version: str
) -> None:
    from kubernetes import client

    namespace = f"{version}-client"
    model_version = version.capitalize()
    scheduling = getattr(client, f"Scheduling{model_version}Api")(api)
    for doc in documents(EXAMPLES / "02-dra.yaml"):
        if doc["kind"] == "ResourceClaimTemplate":
            doc["metadata"]["namespace"] = namespace
            template = typed(api, doc, "V1ResourceClaimTemplate")
            client.ResourceV1Api(api).create_namespaced_resource_claim_template(namespace, template)
    create = {
        "Workload": (scheduling.create_namespaced_workload, f"{model_version}Workload"),
        "PodGroup": (scheduling.create_namespaced_pod_group, f"{model_version}PodGroup"),
        "Pod": (client.CoreV1Api(api).create_namespaced_pod, "V1Pod"),
        # The one version with CompositePodGroups, whichever version its Workload and PodGroups are in.
        "CompositePodGroup": (
            client.SchedulingV1alpha3Api(api).create_namespaced_composite_pod_group,
            "V1alpha3CompositePodGroup",
        ),
    }
    written = {}
    for doc in beta_documents():
        doc["metadata"]["namespace"] = namespace
        if doc["kind"] in ("Workload", "PodGroup"):
            doc["apiVersion"] = f"scheduling.k8s.io/{version}"
        call, model = create[doc["kind"]]
        call(namespace, typed(api, doc, model))
        written[(doc["kind"], doc["metadata"]["name"])] = doc

    groups = wait_until_placed(
        lambda n: scheduling.read_namespaced_pod_group(n, namespace), names_of("PodGroup")
    )

    assert_placed(groups)
    composites = client.SchedulingV1alpha3Api(api)
    for name in names_of("CompositePodGroup"):
        composite = composites.read_namespaced_composite_pod_group(name, namespace)
        assert type(composite).__name__ == "V1alpha3CompositePodGroup"
        held = {c.type: c.status for c in composite.status.conditions or []}
        assert held.get("CompositePodGroupInitiallyScheduled") == "True", held
    for name, group in groups.items():
        read = api.sanitize_for_serialization(group)
        assert type(group).__name__ == f"{model_version}PodGroup"
        assert read["apiVersion"] == f"scheduling.k8s.io/{version}"
        assert contains(read["spec"], written[("PodGroup", name)]["spec"]), read["spec"]
    for name in names_of("Workload"):
        read = api.sanitize_for_serialization(scheduling.read_namespaced_workload(name, namespace))
        assert read["apiVersion"] == f"scheduling.k8s.io/{version}"
        assert contains(read["spec"], written[("Workload", name)]["spec"]), read["spec"]

"""deploy/examples/v1beta1 keeps in step with deploy/examples: each v1beta1 example is what `podway convert
--to v1beta1` makes of the example of the same name, and every example without one holds nothing a version
changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from libs.api import annotations as podway
from libs.api.conversion import documents_as
from libs.api.manifests import load_documents

EXAMPLES = Path(__file__).resolve().parents[3] / "deploy" / "examples"
BETA = EXAMPLES / "v1beta1"
V135_BOOKKEEPING = (podway.WORKLOAD_REF_NAME, podway.WORKLOAD_REF_POD_GROUP)
"""What converting a v1.35 pod records of its workloadRef; a pod written for v1.37 has no workloadRef."""


def documents(path: Path) -> list[dict[str, Any]]:
    return load_documents(path.read_text())


def by_object(docs: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Documents by kind, namespace and name, without the v1.35 bookkeeping (order is not meaning)."""
    found = {}
    for doc in docs:
        metadata = dict(doc["metadata"])
        kept = {
            k: v for k, v in (metadata.pop("annotations", None) or {}).items() if k not in V135_BOOKKEEPING
        }
        doc = {**doc, "metadata": {**metadata, **({"annotations": kept} if kept else {})}}
        found[(doc["kind"], metadata.get("namespace", ""), metadata["name"])] = doc
    return found


def says_something_versioned(doc: dict[str, Any]) -> bool:
    spec = doc.get("spec") or {}
    scheduling_kind = doc["apiVersion"].startswith("scheduling.k8s.io/") and doc["kind"] != "PriorityClass"
    return scheduling_kind or "schedulingGroup" in spec or "workloadRef" in spec


EXAMPLE_FILES = sorted(EXAMPLES.glob("[0-9]*.yaml"))


@pytest.mark.parametrize(
    "example", [p for p in EXAMPLE_FILES if (BETA / p.name).exists()], ids=lambda p: p.name
)
def test_the_v1beta1_example_is_its_counterpart_converted(example: Path) -> None:
    converted, _ = documents_as(documents(example), "scheduling.k8s.io/v1beta1")

    assert by_object(documents(BETA / example.name)) == by_object(converted)


def test_every_example_that_a_version_changes_has_its_v1beta1_form() -> None:
    versioned = {p.name for p in EXAMPLE_FILES if any(says_something_versioned(d) for d in documents(p))}

    assert versioned == {p.name for p in BETA.glob("*.yaml")}
    assert versioned == {
        "03-gang-workload.yaml",
        "04-v135-workload.yaml",
        "06-dra-numa-gang.yaml",
        "09-composite-job.yaml",
    }


def test_the_v1beta1_readme_names_every_example_that_is_the_same_in_every_version() -> None:
    readme = (BETA / "README.md").read_text()
    independent = {p.name for p in EXAMPLE_FILES} - {p.name for p in BETA.glob("*.yaml")}

    assert {name for name in independent if f"`{name}`" in readme} == independent


def test_the_v1beta1_examples_say_nothing_in_an_older_version() -> None:
    docs = [doc for path in sorted(BETA.glob("*.yaml")) for doc in documents(path)]
    versions = {doc["apiVersion"] for doc in docs if doc["kind"] in ("Workload", "PodGroup")}

    assert versions == {"scheduling.k8s.io/v1beta1"}
    assert not [doc for doc in docs if "workloadRef" in (doc.get("spec") or {}) and doc["kind"] == "Pod"]

"""The host a process-runtime agent registers: labelled with its runtime, tainted as `kubectl taint` writes a
taint, and a bad taint refused before anything starts."""

from __future__ import annotations

import pytest

from libs.api.manifests import validate_document
from services.node_agent.host import host_manifests, parse_taint
from services.node_agent.main import parse_settings


def node_of(**options: object) -> dict:
    defaults: dict[str, object] = {
        "node_name": "host-0",
        "labels_file": None,
        "devices_file": None,
        "reserved_cpu_m": 100,
        "reserved_memory_mi": 256,
        "limits_condition": {"reason": "Rlimits", "message": ""},
    }
    docs = host_manifests(**{**defaults, **options})  # type: ignore[arg-type]
    return next(doc for doc in docs if doc["kind"] == "Node")


def test_a_taint_is_read_as_kubectl_taint_writes_it():
    assert parse_taint("podway.io/runtime=process:NoSchedule") == {
        "key": "podway.io/runtime",
        "value": "process",
        "effect": "NoSchedule",
    }
    assert parse_taint("dedicated:NoExecute") == {"key": "dedicated", "effect": "NoExecute"}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("dedicated", "invalid taint spec: dedicated"),
        ("=x:NoSchedule", "invalid taint spec: =x:NoSchedule"),
        ("dedicated=x:Sometimes", "invalid taint effect: Sometimes, unsupported taint effect"),
    ],
)
def test_a_malformed_taint_is_refused_in_kubectls_words(spec: str, message: str):
    with pytest.raises(ValueError, match=message):
        parse_taint(spec)


def test_the_hosts_node_says_its_runtime_and_carries_the_taints_it_was_given():
    node = node_of(taints=["podway.io/runtime=process:NoSchedule"])

    assert node["metadata"]["labels"]["podway.io/runtime"] == "process"
    assert node["spec"]["taints"] == [
        {"key": "podway.io/runtime", "value": "process", "effect": "NoSchedule"}
    ]
    assert validate_document(node).ok


def test_an_untainted_host_registers_no_taints():
    assert "taints" not in node_of()["spec"]


def test_the_agent_takes_repeated_taints_and_refuses_a_bad_one_before_starting(
    capsys: pytest.CaptureFixture[str],
):
    settings = parse_settings(["--runtime", "process", "--taint", "a=b:NoSchedule", "--taint", "c:NoExecute"])

    assert settings.node_taints == ["a=b:NoSchedule", "c:NoExecute"]
    with pytest.raises(SystemExit):
        parse_settings(["--runtime", "process", "--taint", "a=b"])
    assert "invalid taint spec: a=b" in capsys.readouterr().err

"""What a write's body becomes before admission sees it."""

from __future__ import annotations

from typing import Any

from libs.kubeapi.resources import lookup
from services.api_server.requests import in_target
from services.api_server.routes import Target

PODS = lookup("", "v1", "pods")


def target() -> Target:
    assert PODS is not None
    return Target(PODS, "ml", "p")


def pod(label: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"note": label}},
        "spec": {},
    }


def test_a_lone_surrogate_becomes_the_replacement_character_as_gos_decoder_makes_it() -> None:
    written = in_target(pod("a\ud800b"), target())

    assert written["metadata"]["labels"] == {"note": "a\ufffdb"}
    assert written["metadata"]["namespace"] == "ml"


def test_a_document_without_one_is_written_as_sent() -> None:
    sent = pod("ünïcødé ☃")

    written = in_target(sent, target())

    assert written["metadata"]["labels"] is sent["metadata"]["labels"]

"""What a write's body becomes before admission sees it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from libs.kubeapi.resources import lookup
from services.api_server.backend import request_id
from services.api_server.requests import in_target, now_rfc3339
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


def test_request_ids_are_unique_in_a_process_and_across_processes() -> None:
    first, second = request_id(), request_id()
    other = subprocess.run(
        [sys.executable, "-c", "from services.api_server.backend import request_id; print(request_id())"],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[3],
    ).stdout.strip()

    assert first != second
    assert first.rsplit("-", 1)[0] == second.rsplit("-", 1)[0]  # this process's prefix
    assert other.rsplit("-", 1)[0] != first.rsplit("-", 1)[0]  # a restart or a second replica: its own


def test_metadata_time_follows_the_clock_to_the_second(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1_800_000_000.2]
    monkeypatch.setattr(time, "time", lambda: now[0])  # what requests.py reads
    first = now_rfc3339()
    now[0] += 0.5
    same_second = now_rfc3339()
    now[0] += 1
    later = now_rfc3339()

    assert first == same_second == "2027-01-15T08:00:00Z"
    assert later == "2027-01-15T08:00:01Z"

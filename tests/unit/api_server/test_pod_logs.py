"""`pods/log`'s choices, worded as the API server words them."""

from __future__ import annotations

import pytest

from services.api_server.answers import Refused
from services.api_server.pod_logs import chosen_container, log_dir, tail


def _pod(*names: str, status: dict | None = None) -> dict:
    return {
        "metadata": {"name": "p"},
        "spec": {"nodeName": "n1", "containers": [{"name": n} for n in names]},
        "status": status or {},
    }


def test_one_container_is_chosen_for_the_caller_several_must_be_named() -> None:
    assert chosen_container(_pod("main"), None) == "main"
    with pytest.raises(Refused) as refused:
        chosen_container(_pod("a", "b"), None)
    assert (
        refused.value.answer["message"]
        == "a container name must be specified for pod p, choose one of: [a b]"
    )


def test_tail_lines_then_limit_bytes() -> None:
    text = "one\ntwo\nthree\n"
    assert tail(text, 2, None) == "two\nthree\n"
    assert tail(text, 0, None) == ""
    assert tail(text, None, 5) == "one\nt"
    assert tail(text, 1, 3) == "thr"


def test_a_simulated_pod_has_no_logs_and_a_pod_on_another_host_says_where_they_are() -> None:
    with pytest.raises(Refused) as simulated:
        log_dir(_pod("main"))
    assert "runs a simulated kubelet" in simulated.value.answer["message"]
    with pytest.raises(Refused) as elsewhere:
        log_dir(_pod("main", status={"podwayRuntime": {"logDir": "/nonexistent/podway/logs"}}))
    assert elsewhere.value.answer["code"] == 404
    assert "run `podway logs p` there" in elsewhere.value.answer["message"]

"""The process runtime's decisions, as kubelet makes them."""

from __future__ import annotations

import pytest

from libs.core.kubelet.downward import EnvError, PodPlace, command_line, container_env
from libs.core.kubelet.phases import ContainerEnd, pod_end
from libs.core.kubelet.rendezvous import (
    free_pod_ip,
    gang_members,
    members_file,
    rendezvous_env,
    visible_devices,
)
from libs.core.kubelet.restarts import BackOff, RestartPolicy, init_restarts, restart_delay, restarts

PLACE = PodPlace("host-0", "127.0.1.7", "127.0.0.1", {"cpu": "1900m", "memory": "1Gi"})
POD = {
    "metadata": {"name": "w-0", "namespace": "ml", "uid": "u1", "labels": {"team": "a"}, "annotations": {}},
    "spec": {
        "containers": [
            {"name": "c", "resources": {"limits": {"cpu": "500m"}, "requests": {"memory": "64Mi"}}}
        ]
    },
}


def end(code: int, reason: str = "") -> ContainerEnd:
    return ContainerEnd("c", code, "t0", "t1", reason)


@pytest.mark.parametrize(
    ("policy", "code", "again"),
    [
        (RestartPolicy.ALWAYS, 0, True),
        (RestartPolicy.ALWAYS, 1, True),
        (RestartPolicy.ON_FAILURE, 0, False),
        (RestartPolicy.ON_FAILURE, 2, True),
        (RestartPolicy.NEVER, 2, False),
    ],
)
def test_a_container_restarts_as_its_pods_restart_policy_says(policy: RestartPolicy, code: int, again: bool):
    assert restarts(policy, code) is again


def test_a_failed_init_container_is_retried_unless_the_pod_never_restarts():
    assert init_restarts(RestartPolicy.ALWAYS, 1)
    assert init_restarts(RestartPolicy.ON_FAILURE, 1)
    assert not init_restarts(RestartPolicy.NEVER, 1)
    assert not init_restarts(RestartPolicy.ALWAYS, 0)


def test_crash_back_off_doubles_from_ten_seconds_to_five_minutes_and_resets_after_ten_minutes_of_running():
    back_off = BackOff()
    assert [restart_delay(back_off, n, ran_s=1) for n in range(1, 8)] == [10, 20, 40, 80, 160, 300, 300]
    assert restart_delay(back_off, 6, ran_s=600) == 10


def test_a_pod_succeeds_when_every_container_exited_zero_and_fails_with_the_first_failure():
    assert pod_end([end(0), end(0)]).phase == "Succeeded"
    failed = pod_end([end(0), end(3)])
    assert (failed.phase, failed.reason, failed.message) == (
        "Failed",
        "Error",
        "container c exited with code 3",
    )
    init = pod_end([], init_failed=end(128, "RunContainerError"))
    assert (init.phase, init.reason) == ("Failed", "RunContainerError")


def test_the_downward_api_resolves_fields_and_resources_as_kubelet_does():
    container = {
        **POD["spec"]["containers"][0],  # type: ignore[index]
        "env": [
            {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "TEAM", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['team']"}}},
            {"name": "MISSING", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['x']"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
            {
                "name": "MEM",
                "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}},
            },
            {
                "name": "REQ",
                "valueFrom": {"resourceFieldRef": {"resource": "requests.memory", "divisor": "1Mi"}},
            },
            {"name": "SA", "valueFrom": {"fieldRef": {"fieldPath": "spec.serviceAccountName"}}},
            {"name": "HELLO", "value": "$(NAME) on $(NODE) $$(NAME) $(UNDEFINED)"},
        ],
        "command": ["echo", "$(HELLO)"],
    }
    env = container_env(POD, container, PLACE, {"NODE": "host-0"})
    assert {k: env[k] for k in ("NAME", "TEAM", "MISSING", "IP", "CPU", "MEM", "REQ", "SA")} == {
        "NAME": "w-0",
        "TEAM": "a",
        "MISSING": "",
        "IP": "127.0.1.7",
        "CPU": "1",
        "MEM": "1024",
        "REQ": "64",
        "SA": "default",
    }
    assert command_line(container, env) == ["echo", "w-0 on host-0 $(NAME) $(UNDEFINED)"]


def test_an_unsupported_field_reference_says_what_kubelet_says():
    container = {
        "name": "c",
        "env": [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.nothing"}}}],
    }
    with pytest.raises(EnvError, match=r'field label not supported: "spec\.nothing"'):
        container_env(POD, container, PLACE, {})


def test_pods_get_distinct_loopback_addresses_and_a_gang_ranks_by_completion_index():
    assert free_pod_ip([]) == "127.0.1.1"
    assert free_pod_ip(["127.0.1.1", "127.0.1.3"]) == "127.0.1.2"
    members = gang_members([("w-1", 1, "127.0.1.2"), ("w-0", 0, "127.0.1.1"), ("solo", None, "127.0.1.3")])
    assert members_file(members) == "0 w-0 127.0.1.1\n1 w-1 127.0.1.2\n2 solo 127.0.1.3\n"
    env = rendezvous_env(members, "w-1", "/p/members")
    assert env == {
        "MASTER_ADDR": "127.0.1.1",
        "MASTER_PORT": "29500",
        "RANK": "1",
        "WORLD_SIZE": "3",
        "PODWAY_GANG_MEMBERS": "/p/members",
    }


def test_allocated_gpus_are_handed_over_by_index():
    assert (
        visible_devices({"gpu.example.com": ["gpu-3", "node-a/gpu-0"], "fabric.example.com": ["fabric"]})
        == "0,3"
    )
    assert visible_devices({}) == ""

"""`podway delete` waits for what it deleted, on a clock the test moves: kubectl's lines, its exit codes."""

from __future__ import annotations

from typing import Any

from libs.client.deletion import Target, delete_all
from libs.events.rpc import ApplyReply, ObjectResult


class FakeClient:
    """Deletes by a script: outcome per name; objects being deleted are gone after `gone_after` looks."""

    def __init__(self, outcomes: dict[str, str], gone_after: int) -> None:
        self.outcomes = outcomes
        self.gone_after = gone_after
        self.looks = 0
        self.graces: list[int | None] = []

    async def delete(
        self, kind: str, name: str, namespace: str | None = None, *, grace_seconds: int | None = None
    ) -> ApplyReply:
        self.graces.append(grace_seconds)
        outcome = self.outcomes[name]
        refused = {"reason": "Conflict"} if outcome == "rejected" else None
        message = f'Operation cannot be fulfilled on {kind.lower()}s "{name}"' if refused else ""
        result = ObjectResult(
            kind=kind, namespace=namespace, name=name, outcome=outcome, message=message, status=refused
        )
        return ApplyReply(request_id="r", results=[result])

    async def get(
        self, kind: str, name: str | None = None, namespace: str | None = None
    ) -> list[dict[str, Any]]:
        self.looks += 1
        return [] if self.looks > self.gone_after else [{"metadata": {"name": name}}]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


async def run(client: FakeClient, targets: list[Target], **options: Any) -> tuple[int, list[str], list[str]]:
    out: list[str] = []
    err: list[str] = []
    clock = Clock()
    code = await delete_all(
        client,  # type: ignore[arg-type]
        targets,
        out=out.append,
        err=err.append,
        clock=clock,
        sleep=clock.sleep,
        **{"wait": True, "timeout_s": 60.0, **options},
    )
    return code, out, err


JOB = Target("Job", "finetune", "ml")


async def test_delete_waits_until_an_object_being_deleted_is_gone():
    client = FakeClient({"finetune": "pending"}, gone_after=3)

    code, out, err = await run(client, [JOB])

    assert (code, out, err) == (0, ['job.batch "finetune" deleted'], [])
    assert client.looks == 4


async def test_delete_gives_up_when_the_time_is_up_and_says_on_what():
    client = FakeClient({"finetune": "pending"}, gone_after=10_000)

    code, _, err = await run(client, [JOB], timeout_s=1.0)

    assert code == 1
    assert err == ["error: timed out waiting for the condition on jobs/finetune"]


async def test_delete_without_waiting_returns_at_once():
    client = FakeClient({"finetune": "pending"}, gone_after=10_000)

    code, out, _ = await run(client, [JOB], wait=False)

    assert (code, out, client.looks) == (0, ['job.batch "finetune" deleted'], 0)


async def test_deleting_what_does_not_exist_is_an_error_in_kubectls_words():
    client = FakeClient({"ghost": "not_found", "x": "deleted"}, gone_after=0)

    code, out, err = await run(client, [Target("Pod", "ghost", "ml"), Target("PodGroup", "x", "ml")])

    assert code == 1
    assert err == ['Error from server (NotFound): pods "ghost" not found']
    assert out == ['podgroup.scheduling.k8s.io "x" deleted']


async def test_a_refused_delete_is_an_error_not_a_deletion():
    code, out, err = await run(
        FakeClient({"ml": "rejected", "finetune": "deleted"}, 0), [Target("Namespace", "ml", None), JOB]
    )

    assert code == 1
    assert out == ['job.batch "finetune" deleted']
    assert err == ['Error from server (Conflict): Operation cannot be fulfilled on namespaces "ml"']


async def test_a_grace_period_given_reaches_every_delete():
    client = FakeClient({"finetune": "deleted", "other": "deleted"}, gone_after=0)

    await run(client, [JOB, Target("Pod", "other", "ml")], grace_seconds=5)
    await run(client, [JOB])

    assert client.graces == [5, 5, None]


def test_podway_delete_reads_kubectls_grace_period_flag():
    from libs.client.cli import build_parser

    given = build_parser("delete").parse_args(["delete", "pod", "p", "--grace-period", "3"])
    default = build_parser("delete").parse_args(["delete", "pod", "p"])

    assert (given.grace_period, default.grace_period) == (3, -1)

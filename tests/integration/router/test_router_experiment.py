"""A feature's A/B split ends by evidence: the concluding feedback is audited and all traffic goes to the winner."""

from __future__ import annotations

from libs.core.routing import parse_policy
from libs.emulators import RunningEmulators
from libs.events.catalogue import EventType
from libs.events.inference import RouterExperimentConcluded
from libs.providers import Provider
from libs.router import EventBuffer, ManualClock, Router
from libs.router.example_policy import example_policy_document
from tests.integration.router.conftest import ask


async def test_feedback_ends_the_split_and_every_request_then_goes_to_the_winner(
    emulators: RunningEmulators, providers: dict[str, Provider], events: EventBuffer, clock: ManualClock
) -> None:
    document = example_policy_document(emulators.bedrock_url, emulators.vertex_url)
    document["features"]["search-answer"]["experiment"] = {"confidence": 0.95, "min_feedback": 30}
    router = Router(parse_policy(document), providers, clock=clock, event_sink=events)
    before = {(await router.infer(ask(request_id=f"a-{i}"))).route_index for i in range(40)}
    assert before == {0, 1}, "the 90/10 split sends some requests each way"
    for _ in range(60):
        router.record_feedback("search-answer", "gemini-flash", 0.2)
        router.record_feedback("search-answer", "claude-haiku", 0.9)
    (concluded,) = events.of_type(EventType.ROUTER_EXPERIMENT_CONCLUDED)
    payload = RouterExperimentConcluded.model_validate(concluded.payload)
    assert payload.feature == "search-answer"
    assert payload.winner_route_index == 1
    assert payload.winner_models == ["claude-haiku", "gemini-flash"]
    counts = [arm.feedback_count for arm in payload.arms]
    assert min(counts) >= 30, "not before each route has its minimum of feedback"
    assert payload.arms[1].lower > payload.arms[0].upper
    assert router.experiment_winners() == {"search-answer": 1}
    after = [await router.infer(ask(request_id=f"b-{i}")) for i in range(20)]
    assert {result.route_index for result in after} == {1}
    assert {result.model for result in after} == {"claude-haiku"}

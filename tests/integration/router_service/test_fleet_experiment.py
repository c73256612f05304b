"""An A/B experiment is the fleet's, on the real bus: router processes that each heard one route's feedback
conclude together, the conclusion is audited once, and a process started after it routes to the winner."""

from __future__ import annotations

from libs.events.catalogue import EventType
from libs.events.inference import FeedbackReport
from libs.router import InferRequest, Router
from services.llm_router.experiments import SharedExperiments
from tests.integration.router_service.conftest import (
    CLAUDE_FIRST,
    GEMINI_FIRST,
    RouterStack,
    StackFactory,
)
from tests.unit.router_service.test_prompt_recording import PROMPT

EXPERIMENT = {
    "routes": [{"weight": 9, "models": GEMINI_FIRST}, {"weight": 1, "models": CLAUDE_FIRST}],
    "experiment": {"confidence": 0.95, "min_feedback": 30},
}


def router_of(stack: RouterStack) -> tuple[Router, SharedExperiments]:
    assert stack.service.router is not None
    assert stack.service.experiments is not None
    return stack.service.router, stack.service.experiments


async def conclusions(stack: RouterStack) -> int:
    await stack.service.flush_audit()
    return len(
        [e for e in await stack.story("policy") if e.envelope.type == EventType.ROUTER_EXPERIMENT_CONCLUDED]
    )


async def test_the_fleet_concludes_once_and_a_later_process_routes_to_the_winner(
    make_stack: StackFactory,
) -> None:
    first = await make_stack(feature=EXPERIMENT, instance="0")
    second = await make_stack(feature=EXPERIMENT, instance="1")
    (first_router, first_shared), (second_router, second_shared) = router_of(first), router_of(second)
    for _ in range(40):  # each process is given feedback for one route only
        first_router.record_feedback("search-answer", "gemini-flash", 0.1)
        second_router.record_feedback("search-answer", "claude-haiku", 0.95)
    assert first_router.experiment_winners() == second_router.experiment_winners() == {}
    for _ in range(2):  # the passes the processes' loops make: share, conclude, store
        await first_shared.sync()
        await second_shared.sync()
    await first_shared.sync()
    assert first_router.experiment_winners() == second_router.experiment_winners() == {"search-answer": 1}
    await first.service.flush_audit()
    assert await conclusions(second) == 1
    status = await second.router.status()
    (experiment,) = status.experiments
    assert experiment.winner_route_index == 1
    assert [arm.feedback_count for arm in experiment.arms] == [40, 40], (
        "the fleet's feedback, as one process sees it"
    )

    await first.service.stop()
    later = await make_stack(feature=EXPERIMENT, instance="0")  # the first process, restarted
    later_router, _ = router_of(later)
    assert later_router.experiment_winners() == {"search-answer": 1}
    answers = [await later_router.infer(InferRequest("search-answer", PROMPT)) for _ in range(10)]
    assert {(answer.route_index, answer.model) for answer in answers} == {(1, "claude-haiku")}
    (experiment,) = later_router.experiments()
    assert experiment.own_tally().counts == (40, 0), "its tally from before the restart"
    assert await conclusions(later) == 1


async def test_feedback_for_an_answer_another_process_gave_is_recorded_for_its_model(
    make_stack: StackFactory,
) -> None:
    answering = await make_stack(instance="0")
    other = await make_stack(instance="1")
    answering_router, _ = router_of(answering)
    answer = await answering_router.infer(InferRequest("search-answer", PROMPT, request_id="req-elsewhere"))
    await answering.service.stop()  # its audit is written; only the other process serves feedback now
    recorded = await other.router.feedback(FeedbackReport(request_id="req-elsewhere", score=0.8))
    assert (recorded.recorded, recorded.feature, recorded.model) == (True, "search-answer", answer.model)
    board = await other.router.scoreboard()
    [row] = [r for r in board.rows if r.model == answer.model]
    assert (row.feedback_count, row.feedback_mean) == (1, 0.8)

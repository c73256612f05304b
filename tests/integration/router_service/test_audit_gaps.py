"""The checker of lost audit rows: answers still buffered when a router process dies have no audit row, and
`audit_gaps` names exactly those from the callers' request ids."""

from __future__ import annotations

from libs.client.audit_gaps import audit_gaps
from tests.integration.router_service.conftest import StackFactory, ask


async def test_answers_not_yet_flushed_are_the_ones_reported_missing(make_stack: StackFactory):
    # A flush window longer than the test: only the explicit flush writes.
    stack = await make_stack(router_flush_interval_s=3600)
    flushed = [(await stack.router.infer(ask(request_id=f"kept-{i}"))).request_id for i in range(3)]
    await stack.service.flush_audit()
    buffered = [(await stack.router.infer(ask(request_id=f"lost-{i}"))).request_id for i in range(2)]

    gaps = await audit_gaps(stack.database_url, [*flushed, *buffered, flushed[0]])

    assert gaps.answered == 5
    assert gaps.missing == buffered
    assert gaps.audited == 3

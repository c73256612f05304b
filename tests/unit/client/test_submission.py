"""`podway submit --wait`: each submitted Job is answered from the event stream, admitted then Complete or
Failed, or refused; events of other requests and other objects are not taken for its answer."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from libs.client.submission import Submissions, SubmittedJob
from libs.core.admission.jobs import newly_finished
from libs.events.admission import JobAdmitted, JobFinished, ObjectRejected
from libs.events.envelope import Envelope, EventPayload

T0 = datetime(2026, 12, 3, tzinfo=UTC)


def envelope(payload: EventPayload) -> Envelope:
    return Envelope.wrap(payload, producer="admission", correlation_id="c", occurred_at=T0)


def admitted(
    name: str, request_id: str, uid: str, status: dict[str, Any] | None = None, outcome: str = "created"
) -> Envelope:
    manifest = {"kind": "Job", "metadata": {"name": name}, "status": status or {}}
    return envelope(
        JobAdmitted(
            kind="Job",
            api_version="batch/v1",
            namespace="ml",
            name=name,
            uid=uid,
            outcome=outcome,
            resource_version=1,
            object=manifest,
            request_id=request_id,
        )
    )


def finished(uid: str, condition: str, reason: str = "") -> Envelope:
    return envelope(JobFinished(namespace="ml", name="x", uid=uid, condition=condition, reason=reason))


def two_jobs() -> Submissions:
    return Submissions([SubmittedJob("ml", "a", "req-a"), SubmittedJob("ml", "b", "req-b")])


def test_each_job_is_followed_from_its_admission_to_its_terminal_condition():
    jobs = two_jobs()

    lines = [
        *jobs.heard(admitted("a", "req-a", "uid-a")),
        *jobs.heard(admitted("b", "req-b", "uid-b")),
        *jobs.heard(finished("uid-a", "Complete")),
    ]
    assert not jobs.done
    lines += jobs.heard(finished("uid-b", "Failed", "BackoffLimitExceeded"))

    assert [(line.text, line.error) for line in lines] == [
        ("job.batch/a created", False),
        ("job.batch/b created", False),
        ("job.batch/a Complete", False),
        ("job.batch/b Failed (BackoffLimitExceeded)", True),
    ]
    assert jobs.done
    assert [job.name for job in jobs.failed] == ["b"]


def test_a_refusal_answers_only_the_job_of_its_request():
    jobs = two_jobs()
    other = ObjectRejected(kind="Job", name="a", message="other request", request_id="req-z")
    pod = ObjectRejected(kind="Pod", name="a-0", message="a pod of it", request_id="req-a")
    refused = ObjectRejected(kind="Job", name="a", message='The Job "a" is invalid:', request_id="req-a")

    lines = [line for p in (other, pod, refused) for line in jobs.heard(envelope(p))]

    assert [(line.text, line.error) for line in lines] == [('The Job "a" is invalid:', True)]
    assert [job.name for job in jobs.failed] == ["a"]
    assert not jobs.done


def test_a_job_submitted_again_after_it_finished_is_answered_by_its_admission():
    jobs = Submissions([SubmittedJob("ml", "a", "req-a")])
    status = {"conditions": [{"type": "Complete", "status": "True"}]}

    lines = jobs.heard(admitted("a", "req-a", "uid-a", status, outcome="unchanged"))

    assert [line.text for line in lines] == ["job.batch/a unchanged", "job.batch/a Complete"]
    assert jobs.done


def test_job_finished_is_announced_once_when_the_terminal_condition_appears():
    complete = {"conditions": [{"type": "Complete", "status": "True"}]}

    assert newly_finished({}, complete) == {"type": "Complete", "status": "True"}
    assert newly_finished(complete, complete) is None
    assert newly_finished({}, {"active": 3}) is None

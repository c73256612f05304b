"""Following submitted Jobs through the event stream: each is answered (admitted or refused), then, once
admitted, finishes Complete or Failed. What `podway submit --wait` prints and decides its exit code from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from libs.api.jobs import terminal_condition
from libs.events.admission import JobAdmitted, JobFinished, ObjectRejected
from libs.events.envelope import Envelope
from libs.events.registry import parse_payload

Outcome = Literal["Complete", "Failed", "Refused"]


@dataclass
class SubmittedJob:
    """One Job published as `job.submitted`, and what has been heard of it."""

    namespace: str
    name: str
    request_id: str
    uid: str | None = None
    outcome: Outcome | None = None

    @property
    def ref(self) -> str:
        return f"job.batch/{self.name}"


@dataclass(frozen=True)
class Line:
    """A line to print; `error` lines go to stderr."""

    text: str
    error: bool = False


class Submissions:
    """The Jobs of one `podway submit`, followed until each has its outcome."""

    def __init__(self, jobs: list[SubmittedJob]) -> None:
        self.jobs = jobs
        self._by_request = {job.request_id: job for job in jobs}

    @property
    def done(self) -> bool:
        """Whether every Job has its outcome."""
        return all(job.outcome is not None for job in self.jobs)

    @property
    def failed(self) -> list[SubmittedJob]:
        """The Jobs refused or Failed."""
        return [job for job in self.jobs if job.outcome in ("Failed", "Refused")]

    @property
    def pending(self) -> list[SubmittedJob]:
        """The Jobs still waiting for their outcome."""
        return [job for job in self.jobs if job.outcome is None]

    def heard(self, envelope: Envelope) -> list[Line]:
        """Take one event into account; the lines it makes to print."""
        if envelope.type not in (JobAdmitted.TYPE, ObjectRejected.TYPE, JobFinished.TYPE):
            return []
        payload = parse_payload(envelope)
        if isinstance(payload, JobAdmitted):
            return self._admitted(payload)
        if isinstance(payload, ObjectRejected):
            return self._refused(payload)
        if isinstance(payload, JobFinished):
            return self._finished(payload)
        return []

    def _admitted(self, payload: JobAdmitted) -> list[Line]:
        job = self._by_request.get(payload.request_id or "")
        if job is None or job.name != payload.name or job.outcome is not None:
            return []
        job.uid = payload.uid
        lines = [Line(f"Warning: {warning}", error=True) for warning in payload.warnings]
        lines.append(Line(f"{job.ref} {payload.outcome}"))
        # A Job submitted again after it finished keeps its terminal condition: no job.finished follows.
        finished = terminal_condition(payload.object.get("status") or {})
        if finished is not None:
            lines += self._finish(job, finished["type"], str(finished.get("reason") or ""))
        return lines

    def _refused(self, payload: ObjectRejected) -> list[Line]:
        job = self._by_request.get(payload.request_id or "")
        if job is None or payload.kind != "Job" or payload.name != job.name or job.outcome is not None:
            return []
        job.outcome = "Refused"
        return [Line(payload.message, error=True)]

    def _finished(self, payload: JobFinished) -> list[Line]:
        job = next((j for j in self.jobs if j.uid == payload.uid and j.outcome is None), None)
        return [] if job is None else self._finish(job, payload.condition, payload.reason)

    def _finish(self, job: SubmittedJob, condition: str, reason: str) -> list[Line]:
        job.outcome = "Complete" if condition == "Complete" else "Failed"
        detail = f" ({reason})" if reason else ""
        return [Line(f"{job.ref} {job.outcome}{detail}", error=job.outcome == "Failed")]

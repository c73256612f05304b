"""The demo's admission steps: validate offline, apply the examples, reject and audit, refuse immutable changes."""

from __future__ import annotations

import copy

from libs.api.manifests import validate_document
from libs.client.describe import event_line
from libs.client.output import render
from libs.demo.steps import Demo, check, example, wait_for


async def admission_steps(demo: Demo) -> None:
    client, out = demo.client, demo.out

    async def validate_offline() -> None:
        bad = validate_document(example("invalid/bad-workload.yaml")[0])
        out(bad.message)
        check(not bad.ok and len(bad.errors) == 5, "the invalid Workload must report its five errors at once")

    async def apply_examples() -> None:
        docs = [
            d
            for name in ("01-priorityclasses.yaml", "02-dra.yaml", "03-gang-workload.yaml")
            for d in example(name)
        ]
        reply = await client.apply(docs)
        for result in reply.results:
            out(f"   {result.kind}/{result.name}: {result.outcome}")
        # The node agent installed the DeviceClasses of its drivers already, as a DRA driver does.
        check(
            all(
                r.outcome == "created" or (r.kind, r.outcome) == ("DeviceClass", "unchanged")
                for r in reply.results
            ),
            "every example object must be created (DeviceClasses may exist already)",
        )
        groups = await client.get("PodGroup", "llm-train-worker-0", "ml")
        check(groups[0]["spec"]["priority"] == 1000, "priority must be resolved from the PriorityClass")

    async def convert_v135() -> None:
        reply = await client.apply(example("04-v135-workload.yaml"))
        for warning in dict.fromkeys(reply.warnings):
            out(f"   warning: {warning}")
        check(bool(reply.warnings), "a v1.35 manifest must be answered with a warning")
        pods = await client.get("Pod", namespace="ml")
        legacy = [p for p in pods if p["metadata"]["name"].startswith("legacy-train")]
        check(
            {p["spec"]["schedulingGroup"]["podGroupName"] for p in legacy} == {"legacy-train-workers"},
            "workloadRef must become schedulingGroup naming the implied PodGroup",
        )

    async def submit_job() -> None:
        (job,) = example("05-indexed-job.yaml")
        request_id = await client.submit_job(job)
        out(f"   published job.submitted (request {request_id})")
        pods = await wait_for(
            lambda: client.get("Pod", namespace="ml"),
            lambda items: sum(p["metadata"]["name"].startswith("finetune-worker-0-") for p in items) == 8,
        )
        gang = sorted(p["metadata"]["name"] for p in pods if p["metadata"]["name"].startswith("finetune-"))
        out(f"   pods: {', '.join(gang)}")
        check(len(gang) == 8, "the Indexed Job must expand into 8 gang pods")
        workloads = await client.get("Workload", "finetune", "ml")
        template = workloads[0]["spec"]["podGroupTemplates"][0]
        check(template["schedulingPolicy"]["gang"]["minCount"] == 8, "minCount must equal parallelism")

    async def reject_invalid() -> None:
        reply = await client.apply(example("invalid/bad-workload.yaml"))
        out(reply.results[0].message)
        check(reply.results[0].outcome == "rejected", "the invalid manifest must be rejected")
        story = await client.events(correlation_id=reply.request_id)
        check(
            [e["type"] for e in story.events] == ["object.rejected"], "the rejection must be in the audit log"
        )

    async def reject_immutable_change() -> None:
        doc = copy.deepcopy(next(d for d in example("03-gang-workload.yaml") if d["kind"] == "Workload"))
        # minCount may change (elastic gangs); the topology constraint may not.
        doc["spec"]["podGroupTemplates"][0]["schedulingConstraints"] = {
            "topology": [{"key": "topology.example.com/block"}]
        }
        reply = await client.apply([doc])
        out(reply.results[0].message)
        check("field is immutable" in reply.results[0].message, "a Workload spec change must be refused")

    async def show_story() -> None:
        story = await client.events(podgroup="ml/finetune-worker-0")
        for event in story.events:
            out("   " + event_line(event))
        types = [e["type"] for e in story.events]
        check(
            types.count("pod.admitted") == 8 and "podgroup.admitted" in types,
            "the PodGroup story is incomplete",
        )
        out(render("PodGroup", await client.get("PodGroup", namespace="ml"), "table"))

    async def apply_again() -> None:
        reply = await client.apply(example("03-gang-workload.yaml"))
        check({r.outcome for r in reply.results} == {"unchanged"}, "re-applying must change nothing")
        out(f"   {len(reply.results)} objects unchanged")

    await demo.step(
        "Validate offline: every error of a manifest at once, in the API server's words", validate_offline
    )
    await demo.step("Apply PriorityClasses, DeviceClasses, claim templates and a v1.36 gang", apply_examples)
    await demo.step("Apply a v1.35 manifest: converted to v1alpha2 with a warning", convert_v135)
    await demo.step("Submit an Indexed Job as an event: Workload + PodGroup + 8 Pods", submit_job)
    await demo.step("Reject an invalid manifest; the rejection is audited", reject_invalid)
    await demo.step("Refuse a change to an immutable Workload", reject_immutable_change)
    await demo.step("Tell one PodGroup's story from the audit log", show_story)
    await demo.step("Apply again: nothing changes", apply_again)

"""The NATS permissions: the deployed config is rendered from them, and they cover what the code does."""

from pathlib import Path

from libs.events.catalogue import EventType, RpcSubject
from libs.messaging.permissions import USERS, emitted_subjects, render, user
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService
from services.dra_allocator.app import DraAllocatorService
from services.llm_router.app import WORK_CONSUMER
from services.node_agent.app import NodeAgentService
from services.node_agent.settings import NodeAgentSettings
from services.scheduler.app import SchedulerService

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "deploy" / "nats" / "nats-server.conf"


def test_the_deployed_config_is_rendered_from_the_permissions():
    assert CONFIG.read_text() == render(), (
        "deploy/nats/nats-server.conf is stale: python -m libs.messaging.permissions > deploy/nats/nats-server.conf"
    )


def test_every_event_type_may_be_published_by_some_user():
    emitted = {event for u in USERS for event in u.emits}
    assert set(EventType) - emitted == set()


def test_every_rpc_subject_is_served_by_one_user_in_its_queue_group_and_called_by_the_client():
    for subject in RpcSubject:
        servers = [
            u.name
            for u in USERS
            for s in u.serves
            if subject == s.subject or subject.startswith(s.subject[:-1])
        ]
        assert len(servers) == 1, (subject, servers)
        assert subject in user("client").calls


def test_each_service_user_owns_the_durables_its_service_creates(tmp_path: Path):
    settings = PodwaySettings(
        nats_url="nats://127.0.0.1:4222", database_url=f"sqlite+aiosqlite:///{tmp_path}/x.db"
    )
    admission = AdmissionService(settings)
    agent = NodeAgentService(NodeAgentSettings(**settings.model_dump()), manifests=[])

    def durables(name: str) -> set[str]:
        return {d.name for d in user(name).durables}

    assert {c.name for c in admission.consumers} == durables("admission")
    assert {agent.consumer.name} == durables("node_agent")
    assert {SchedulerService.name} == durables("scheduler")
    assert {DraAllocatorService.name} == durables("dra_allocator")
    assert {WORK_CONSUMER} == durables("llm_router")


def test_durables_and_dead_letter_subjects_belong_to_one_user_each():
    names = [d.name for u in USERS for d in u.durables]
    assert len(names) == len(set(names))


def test_a_relay_follows_its_users_events_and_no_user_means_no_limit():
    assert emitted_subjects("node_agent") == {
        "podway.events.pods.running",
        "podway.events.pods.succeeded",
        "podway.events.pods.failed",
        "podway.events.object.deleted",
    }
    assert emitted_subjects(None) is None
    assert emitted_subjects("someone-else") is None


def test_only_the_migrate_user_creates_or_changes_streams():
    for u in USERS:
        changes = [s for s in u.publish() if s.startswith(("$JS.API.STREAM.CREATE", "$JS.API.STREAM.UPDATE"))]
        assert bool(changes) == (u.name == "migrate"), u.name
        assert not [
            s for s in u.publish() if "DELETE" in s or "PURGE" in s or s in ("$JS.API.>", "$JS.>", ">")
        ]

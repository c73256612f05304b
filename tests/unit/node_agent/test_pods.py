"""The node agent's pod timers: pods finish when their run time is up, once, unless stopped first."""

from services.node_agent.pods import SimulatedPod, SimulatedPods


def running(uid: str, finishes_at: float | None) -> SimulatedPod:
    return SimulatedPod(uid, "ml", uid, "node-a", None, finishes_at)


def test_pods_finish_when_their_time_is_up_and_only_once():
    runtime = SimulatedPods()
    runtime.run([running("late", 20.0), running("early", 10.0)])

    assert runtime.due(5.0) == []
    assert [pod.uid for pod in runtime.due(15.0)] == ["early"]
    assert runtime.next_finish() == 20.0
    assert [pod.uid for pod in runtime.due(25.0)] == ["late"]
    assert runtime.due(100.0) == []


def test_a_stopped_pod_never_finishes():
    runtime = SimulatedPods()
    runtime.run([running("evicted", 10.0)])

    assert runtime.stop("evicted") is not None
    assert runtime.due(100.0) == []
    assert runtime.next_finish() is None


def test_a_pod_without_a_run_time_runs_until_it_is_stopped():
    runtime = SimulatedPods()
    runtime.run([running("forever", None)])

    assert runtime.due(1e12) == []
    assert "forever" in runtime


def test_a_pod_started_again_finishes_on_its_new_time():
    runtime = SimulatedPods()
    runtime.run([running("restarted", 10.0)])
    runtime.run([running("restarted", 30.0)])

    assert runtime.due(15.0) == []
    assert [pod.uid for pod in runtime.due(30.0)] == ["restarted"]

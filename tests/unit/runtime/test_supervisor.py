import sys
import time

from libs.runtime.health import beat, health_file
from libs.runtime.supervisor import ServiceSpec, Supervisor

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]
CRASHER = [sys.executable, "-c", "import sys; sys.exit(3)"]


def _wait_exit(supervisor: Supervisor, name: str) -> None:
    proc = supervisor.children[name].process
    assert proc is not None
    proc.wait(10)


def test_a_crashed_service_is_restarted_and_a_crash_loop_backs_off(tmp_path):
    supervisor = Supervisor([ServiceSpec("crasher", CRASHER, beats=False)], tmp_path)
    supervisor.start_all(now=0.0)
    _wait_exit(supervisor, "crasher")

    assert supervisor.poll(now=1.0) == ["crasher"]
    _wait_exit(supervisor, "crasher")
    # The second crash came quickly after the restart, so the next start waits for the backoff.
    assert supervisor.poll(now=1.1) == []
    assert supervisor.children["crasher"].next_start_at > 1.1
    assert supervisor.poll(now=supervisor.children["crasher"].next_start_at) == ["crasher"]
    assert supervisor.children["crasher"].restarts == 2
    supervisor.stop_all()


def test_a_service_that_stops_beating_is_killed_and_restarted(tmp_path):
    wall = {"now": 1000.0}
    supervisor = Supervisor(
        [ServiceSpec("silent", SLEEPER)],
        tmp_path,
        health_timeout_s=5,
        startup_grace_s=2,
        wall_clock=lambda: wall["now"],
    )
    supervisor.start_all(now=0.0)
    first_pid = supervisor.children["silent"].pid
    beat(health_file(tmp_path, "silent"), now=1000.0)

    wall["now"] = 1003.0
    assert supervisor.poll(now=3.0) == []

    wall["now"] = 1010.0
    assert supervisor.poll(now=10.0) == ["silent"]
    assert supervisor.children["silent"].pid != first_pid
    supervisor.stop_all()


def test_stop_all_terminates_every_child(tmp_path):
    supervisor = Supervisor([ServiceSpec("a", SLEEPER), ServiceSpec("b", SLEEPER)], tmp_path)
    supervisor.start_all(now=time.monotonic())
    supervisor.stop_all(timeout_s=5)
    assert all(not child.running() for child in supervisor.children.values())
    assert supervisor.poll(now=time.monotonic() + 100) == []

"""The CLI loads only what its verb needs: `podway --help` and the read verbs never load the asyncio clients,
pydantic, CEL or the cloud SDKs."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from libs.client import cli, quick
from libs.events.catalogue import EVENTS_PREFIX, RpcSubject
from libs.events.rpc import EventsRequest, GetRequest

HEAVY = (
    "faststream",
    "nats",
    "aiobotocore",
    "botocore",
    "google.cloud.aiplatform",
    "cel",
    "pydantic",
    "yaml",
)


def loaded_after(code: str) -> list[str]:
    probe = f"import sys\n{code}\nimport json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return [m for m in json.loads(out) if any(m == h or m.startswith(h + ".") for h in HEAVY)]


@pytest.mark.parametrize(
    "code",
    [
        "import libs.client.cli",
        "import libs.client.cli as c; c.build_parser('')",
        "import libs.client.cli as c; c.build_parser('get'); c.build_parser('events'); c.build_parser('top')",
        "import libs.client.quick, libs.client.usage, libs.client.selectors, libs.client.describe",
    ],
)
def test_the_cli_and_its_read_path_import_no_heavy_library(code):
    assert loaded_after(code) == []


def test_a_write_verb_still_loads_its_libraries_when_it_runs():
    # The probe is honest: the modules the read path avoids are the ones the asyncio client loads.
    assert {"faststream", "nats", "pydantic"} <= set(loaded_after("import libs.client.client"))


def test_the_verb_table_matches_what_the_modules_register():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    registered = {action.dest: action.help for action in sub._choices_actions}
    assert registered == {verb: text for verb, (_, text) in cli.VERBS.items()}


def test_help_lists_every_verb(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert all(f"    {verb}" in out for verb in cli.VERBS)


def test_the_read_path_speaks_the_admission_contract():
    assert quick.ADMISSION_GET == RpcSubject.ADMISSION_GET
    assert quick.ADMISSION_EVENTS == RpcSubject.ADMISSION_EVENTS
    assert f"{EVENTS_PREFIX}.>" == quick.EVENTS_SUBJECTS
    sent: list[tuple[str, bytes]] = []

    class Recorder:
        def request(self, subject: str, payload: bytes, *, timeout_s: float) -> bytes:
            sent.append((subject, payload))
            return b'{"items": [], "events": [], "last_seq": 0}'

    client = quick.ReadClient("nats://127.0.0.1:1")
    client._nats = Recorder()  # type: ignore[assignment]
    client.get("Pod", "p", "ml")
    client.get("Node", all_namespaces=True)
    client.events(podgroup="ml/g", after_seq=4)
    assert GetRequest.model_validate_json(sent[0][1]) == GetRequest(kind="Pod", namespace="ml", name="p")
    assert GetRequest.model_validate_json(sent[1][1]).namespace == ""
    assert EventsRequest.model_validate_json(sent[2][1]) == EventsRequest(podgroup="ml/g", after_seq=4)


def test_the_url_comes_from_the_flag_the_environment_or_the_running_stack(tmp_path, monkeypatch):
    monkeypatch.delenv("PODWAY_NATS_URL", raising=False)
    monkeypatch.setenv("PODWAY_NATS_USER", "client")
    monkeypatch.setenv("PODWAY_NATS_PASSWORD", "p@ss")
    assert quick.nats_url_for("nats://h:4222", None) == "nats://client:p%40ss@h:4222"
    monkeypatch.delenv("PODWAY_NATS_USER")
    monkeypatch.delenv("PODWAY_NATS_PASSWORD")
    with pytest.raises(quick.StackNotFound, match="no running stack"):
        quick.nats_url_for(None, tmp_path)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "stack.json").write_text(
        json.dumps({"pid": 1, "nats_url": "nats://x:1", "database_url": "d", "data_dir": "", "started_at": 0})
    )
    assert quick.nats_url_for(None, tmp_path) == "nats://x:1"  # pid 1 is alive


def test_a_name_after_the_flags_is_taken_as_kubectl_takes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from libs.client.commands import objects

    seen: list[tuple[str, str | None, str | None]] = []
    monkeypatch.setattr(
        objects, "cmd_get", lambda args: seen.append((args.kind, args.name, args.namespace)) or 0
    )
    assert cli.main(["get", "podgroups", "-n", "ml", "llm-train"]) == 0
    assert cli.main(["get", "podgroups", "llm-train", "-n", "ml"]) == 0
    assert seen == [("podgroups", "llm-train", "ml")] * 2
    with pytest.raises(SystemExit):
        cli.main(["get", "podgroups", "-n", "ml", "one", "two"])

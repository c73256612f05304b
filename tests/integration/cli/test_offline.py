"""`podway validate` and `podway convert`, offline, as a user runs them."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.integration.cli.conftest import EXAMPLES, podway

INVALID = {
    "bad-workload.yaml": [
        'The Workload "BAD_NAME" is invalid:',
        '* metadata.name: Invalid value: "BAD_NAME": a lowercase RFC 1123 subdomain must consist of lower case '
        "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        "* spec.podGroupTemplates[0].schedulingPolicy.gang.minCount: Required value",
        '* spec.podGroupTemplates[0].disruptionMode: Unsupported value: "Everything": supported values: "Pod", '
        '"PodGroup"',
        "* spec.podGroupTemplates[1].schedulingPolicy.gang.minCount: Invalid value: -3: must be greater than or "
        "equal to 1",
        '* spec.podGroupTemplates[1].name: Duplicate value: "a"',
    ],
    "bad-pod.yaml": [
        'The Pod "Trainer_0" is invalid:',
        '* metadata.annotations[podway.io/run-seconds]: Invalid value: "-5": must be a non-negative number',
        "* spec.containers[0].image: Required value",
        '* spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0',
        "* spec.schedulingGroup.podGroupName: Required value",
    ],
    "bad-job.yaml": [
        'The Job "finetune" is invalid:',
        '* metadata.annotations[podway.io/gang-restart]: Unsupported value: "Sometimes": supported values: '
        '"Always", "Never"',
        "* spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
        '* spec.completionMode: Unsupported value: "Sequential": supported values: "NonIndexed", "Indexed"',
        '* spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: "OnFailure", "Never"',
    ],
}


def test_every_invalid_example_is_listed_here():
    assert sorted(p.name for p in (EXAMPLES / "invalid").glob("*.yaml")) == sorted(INVALID)


@pytest.mark.parametrize("name", sorted(INVALID))
def test_validate_prints_every_error_of_an_invalid_manifest_in_the_api_servers_words_and_exits_1(name: str):
    run = podway("validate", "-f", str(EXAMPLES / "invalid" / name))

    assert run.code == 1
    lines = run.out.splitlines()
    assert lines[0] == INVALID[name][0]
    for line in INVALID[name][1:]:
        assert line in lines


def test_validate_answers_a_kubernetes_status_with_o_json():
    run = podway("validate", "-f", str(EXAMPLES / "invalid" / "bad-job.yaml"), "-o", "json")

    assert run.code == 1
    status = json.loads(run.out)
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Invalid", 422)
    assert {c["field"] for c in status["details"]["causes"]} >= {"spec.parallelism", "spec.completionMode"}


def test_validate_accepts_a_directory_of_valid_manifests():
    run = podway("validate", "-f", str(EXAMPLES / "05-indexed-job.yaml"))

    assert (run.code, run.out.strip()) == (0, "job/finetune valid")


def test_validate_reads_standard_input_with_f_dash_as_kubectl_does():
    manifest = (EXAMPLES / "05-indexed-job.yaml").read_text()

    valid = podway("validate", "-f", "-", stdin=manifest)
    broken = podway("validate", "-f", "-", stdin="kind: [unclosed")
    empty = podway("validate", "-f", "-", stdin="")

    assert (valid.code, valid.out.strip()) == (0, "job/finetune valid")
    assert broken.code == 1
    assert broken.err.startswith("error: error parsing STDIN:")
    assert (empty.code, empty.err.strip()) == (1, "error: no objects passed to validate")


def test_validate_of_a_missing_file_says_so_and_exits_1():
    run = podway("validate", "-f", str(EXAMPLES / "nowhere.yaml"))

    assert run.code == 1
    assert "does not exist" in run.err


def test_convert_prints_v135_manifests_as_v1alpha2_with_warnings():
    run = podway("convert", "-f", str(EXAMPLES / "04-v135-workload.yaml"))

    assert run.code == 0
    assert "scheduling.k8s.io/v1alpha2" in run.out
    assert "workloadRef" not in run.out
    assert "schedulingGroup:\n    podGroupName: legacy-train-workers" in run.out
    assert "podway.io/workload-ref-name: legacy-train" in run.out
    assert "kind: PodGroup" in run.out
    assert "Warning: scheduling.k8s.io/v1alpha1 Workload is deprecated" in run.err


def test_convert_to_v1beta1_and_back_gives_the_same_manifests(tmp_path):
    beta = podway("convert", "-f", str(EXAMPLES), "--to", "v1beta1")
    assert beta.code == 0, beta.err
    assert "apiVersion: scheduling.k8s.io/v1alpha2" not in beta.out
    assert "workloadRef:\n    workloadName: llm-train\n    templateName: worker" in beta.out
    assert "disruptionMode:\n    all: {}" in beta.out
    (tmp_path / "beta.yaml").write_text(beta.out)

    back = podway("convert", "-f", str(tmp_path / "beta.yaml"), "--to", "scheduling.k8s.io/v1alpha2")
    direct = podway("convert", "-f", str(EXAMPLES))

    assert back.code == direct.code == 0
    assert list(yaml.safe_load_all(back.out)) == list(yaml.safe_load_all(direct.out))


def test_convert_to_a_version_without_the_kind_keeps_it_and_says_so():
    run = podway("convert", "-f", str(EXAMPLES / "03-gang-workload.yaml"), "--to", "v1alpha1")

    assert run.code == 0
    assert "apiVersion: scheduling.k8s.io/v1alpha1\nkind: Workload" in run.out
    assert "apiVersion: scheduling.k8s.io/v1alpha2\nkind: PodGroup" in run.out
    assert "Warning: PodGroup llm-train-worker-0: scheduling.k8s.io/v1alpha1 has no PodGroup" in run.err


def test_convert_to_an_unknown_version_is_refused():
    run = podway("convert", "-f", str(EXAMPLES / "03-gang-workload.yaml"), "--to", "v2")

    assert run.code == 1
    assert (
        "error: --to v2: not a scheduling.k8s.io version Podway serves (v1alpha1, v1alpha2, v1alpha3, v1beta1)"
        in run.err
    )


POD = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\nspec:\n  containers: [{name: c, image: x}]\n"


def test_apply_refuses_a_file_with_a_key_set_twice_as_kubectl_words_it(tmp_path):
    path = tmp_path / "pod.yaml"
    path.write_text(POD + "metadata:\n  name: b\n")

    run = podway("apply", "-f", str(path), "--nats-url", "nats://127.0.0.1:1")

    assert run.code == 1
    assert run.err.splitlines() == [
        f"error: error parsing {path}: error converting YAML to JSON: yaml: unmarshal errors:",
        '  line 7: key "metadata" already set in map',
    ]


@pytest.mark.parametrize("text", ["", "# only a comment\n---\n# and another\n"], ids=["empty", "comments"])
def test_apply_of_a_file_without_objects_says_no_objects_passed(tmp_path, text):
    path = tmp_path / "empty.yaml"
    path.write_text(text)

    run = podway("apply", "-f", str(path), "--nats-url", "nats://127.0.0.1:1")

    assert (run.code, run.err.strip()) == (1, "error: no objects passed to apply")


def test_apply_refuses_bytes_that_are_not_utf8_naming_the_file_and_offset(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(POD.replace("name: a", "name: caf\xe9").encode("latin-1"))

    run = podway("apply", "-f", str(path), "--nats-url", "nats://127.0.0.1:1")

    offset = POD.index("name: a") + len("name: caf")
    assert (run.code, run.err.strip()) == (1, f"error: error parsing {path}: invalid UTF-8 at byte {offset}")
    assert "Traceback" not in run.err


def test_validate_refuses_unknown_fields_unless_told_to_warn(tmp_path):
    job = (EXAMPLES / "05-indexed-job.yaml").read_text().replace("parallelism:", "paralelism:")
    path = tmp_path / "job.yaml"
    path.write_text(job)

    strict = podway("validate", "-f", str(path))
    warned = podway("validate", "-f", str(path), "--validate=warn")
    wrong = podway("validate", "-f", str(path), "--validate=maybe")

    assert (strict.code, strict.out.strip()) == (
        1,
        'Job in version "v1" cannot be handled as a Job: strict decoding error: unknown field "spec.paralelism"',
    )
    assert (warned.code, warned.out.strip()) == (0, "job/finetune valid")
    assert warned.err.strip() == 'Warning: unknown field "spec.paralelism"'
    assert wrong.code == 2
    assert 'invalid - validate option "maybe"' in wrong.err


@pytest.mark.parametrize(
    ("url", "said"),
    [
        (
            "mysql://admin:hunter2@db/podway",
            "podway up: database URL 'mysql://admin:***@db/podway': Podway stores",
        ),
        ("not a url", "podway up: database URL: not a URL; Podway stores its state in PostgreSQL"),
    ],
)
def test_up_refuses_a_database_it_cannot_store_in_before_starting_anything(tmp_path, url, said):
    run = podway("up", "--data-dir", str(tmp_path / "stack"), "--database-url", url, "--detach")

    assert run.code == 2
    assert run.err.startswith(said)
    assert "hunter2" not in run.err
    assert not (tmp_path / "stack" / "podway-up.log").exists()

"""CEL device selectors: compiled once, bounded at admission, evaluated against devices."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from libs.api import device_selectors
from libs.api.device_selectors import (
    MAX_EXPRESSION_LENGTH,
    SelectorCompileError,
    SelectorRuntimeError,
    compile_selector,
    device_for_cel,
    evaluate_selector,
    macro_nesting_depth,
    selector_context,
)
from libs.api.manifests import parse_object
from tests.unit.api.builders import (
    error_lines,
    make_claim_template,
    make_device_class,
    make_request,
    make_slice,
)

EXPRESSION = "spec.selectors[0].cel.expression"


@pytest.fixture
def h200():
    resource_slice = parse_object(
        make_slice(
            devices=[
                {
                    "name": "gpu-0",
                    "attributes": {
                        "model": {"string": "H200"},
                        "numaNode": {"int": 0},
                        "mig": {"bool": False},
                        "fabric.example.com/rack": {"string": "r07"},
                    },
                    "capacity": {"memory": {"value": "141Gi"}, "cores": {"value": "1"}},
                    "allowMultipleAllocations": True,
                }
            ]
        )
    )
    return device_for_cel("gpu.example.com", resource_slice.spec.devices[0])


def test_devices_are_seen_by_domain_with_numeric_capacity(h200):
    assert h200 == {
        "driver": "gpu.example.com",
        "attributes": {
            "gpu.example.com": {"model": "H200", "numaNode": 0, "mig": False},
            "fabric.example.com": {"rack": "r07"},
        },
        "capacity": {"gpu.example.com": {"memory": 141 * 2**30, "cores": 1}},
        "allowMultipleAllocations": True,
    }


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('device.driver == "gpu.example.com"', True),
        ('device.attributes["gpu.example.com"].model == "H200"', True),
        ('device.attributes["gpu.example.com"].numaNode == 1', False),
        ('device.attributes["fabric.example.com"].rack == "r07"', True),
        ("device.allowMultipleAllocations", True),
        ('device.capacity["gpu.example.com"].memory.compareTo(quantity("80Gi")) >= 0', True),
        ('device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("200Gi"))', False),
        ('device.capacity["gpu.example.com"].cores.isLessThan(quantity("1500m"))', True),
        ('"model" in device.attributes["gpu.example.com"]', True),
        ('device.attributes["gpu.example.com"].all(k, k != "")', True),
    ],
)
def test_selectors_evaluate_against_a_device(h200, expression, expected):
    assert evaluate_selector(compile_selector(expression), h200) is expected


def test_a_prepared_context_is_reused_across_selectors(h200):
    context = selector_context(h200)
    assert evaluate_selector(compile_selector('device.driver == "gpu.example.com"'), context)
    assert not evaluate_selector(compile_selector("!device.allowMultipleAllocations"), context)


def test_programs_are_compiled_once_per_expression():
    expression = 'device.driver == "cached.example.com"'
    assert compile_selector(expression) is compile_selector(expression)
    assert device_selectors._PROGRAMS[expression] is compile_selector(expression)


def test_missing_attribute_is_a_runtime_error(h200):
    with pytest.raises(SelectorRuntimeError, match="CEL runtime error"):
        evaluate_selector(compile_selector('device.attributes["other.example.com"].model == "x"'), h200)


def test_non_boolean_result_is_a_runtime_error(h200):
    with pytest.raises(SelectorRuntimeError, match="must be a bool"):
        evaluate_selector(compile_selector("device.driver"), h200)


def test_compile_failure_is_a_validation_error():
    lines = error_lines(make_device_class("gpu.example.com", "device.driver =="))
    assert lines == [
        f'{EXPRESSION}: Invalid value: "device.driver ==": compilation failed: ERROR: <input>:1:17: Syntax error: '
        "mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, "
        "NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}"
    ]


def test_undeclared_variables_fail_to_compile():
    assert error_lines(
        make_device_class("gpu.example.com", 'device.driver == "a" && gpu.model == "H200"')
    ) == [
        f'{EXPRESSION}: Invalid value: "device.driver == \\"a\\" && gpu.model == \\"H200\\"": compilation '
        "failed: ERROR: <input>:1:25: undeclared reference to 'gpu' (in container '')"
    ]


def test_expressions_longer_than_10_ki_characters_are_rejected():
    expression = "device.driver == " + '"' + "x" * MAX_EXPRESSION_LENGTH + '"'
    assert error_lines(make_device_class("gpu.example.com", expression)) == [
        f"{EXPRESSION}: Too long: may not be more than 10240 bytes"
    ]


def test_macros_nested_three_deep_are_rejected():
    expression = 'device.attributes["a"].all(x, device.attributes["b"].exists(y, device.attributes["c"].map(z, z).size() > 0))'
    assert error_lines(make_device_class("gpu.example.com", expression)) == [
        f"{EXPRESSION}: Forbidden: too complex: comprehension macros (all, exists, exists_one, map, filter) nested "
        "3 deep, at most 2 allowed"
    ]


def test_request_selectors_are_checked_at_their_own_path():
    request = make_request(selectors=[{"cel": {"expression": "device.driver ="}}])
    lines = error_lines(make_claim_template(requests=[request]))
    assert lines[0].startswith(
        'spec.spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: "device.driver =": '
        "compilation failed: ERROR: <input>:1:15: Syntax error:"
    )


def test_compile_selector_raises_with_a_reason():
    with pytest.raises(SelectorCompileError) as caught:
        compile_selector("[1].all(a, [1].all(b, [1].all(c, true)))")
    assert caught.value.reason == "too_complex"


@pytest.mark.parametrize(
    ("expression", "depth"),
    [
        ('device.driver == "x"', 0),
        ("l.all(x, x > 0)", 1),
        ("l.map(x, x).filter(y, y > 1).exists(z, true)", 1),
        ("l.all(x, m.exists(y, y == x))", 2),
        ("l.exists_one(x, m.all(y, n.filter(z, z).size() > 0))", 3),
        ('l.all(x, ".exists(" == x)', 1),
        ("l.all(x, [m.exists(y, y)][0])", 2),
        ("all(x) && exists(y)", 0),
    ],
)
def test_macro_nesting_is_measured_on_tokens(expression, depth):
    assert macro_nesting_depth(expression) == depth


@given(st.integers(min_value=0, max_value=6))
def test_nesting_depth_counts_each_level(levels):
    expression = "true"
    for level in range(levels):
        expression = f"l{level}.all(v{level}, {expression})"
    assert macro_nesting_depth(expression) == levels


def test_compile_errors_keep_only_the_error_lines_even_for_multi_line_expressions():
    expression = 'device.driver == "ERROR: x"\n&& )'
    assert error_lines(make_device_class("gpu.example.com", expression)) == [
        f'{EXPRESSION}: Invalid value: "device.driver == \\"ERROR: x\\"\\n&& )": compilation failed: '
        "ERROR: <input>:2:4: Syntax error: mismatched input ')' expecting {'[', '{', '(', '.', '-', '!', 'true', "
        "'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}"
    ]

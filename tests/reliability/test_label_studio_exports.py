"""Malformed Label Studio exports: one `error:` naming the user's file (issue 25, fault 15).

``labels import --format label-studio`` ended in a traceback on eight shapes
(a dict instead of a list, deep nesting, wrong types), named fieldtrust's
private copy of the file instead of the user's, and called two tasks for one
item "other writers kept changing the same rows".
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rel_store import QA_LEAD, WEEK

from fieldtrust.cli.main import cli
from tests.conftest import file_fingerprint


@pytest.fixture
def tasks(populated: Path, tmp_path: Path) -> list[dict[str, Any]]:
    """The populated store's sample as Label Studio tasks."""
    out = tmp_path / "tasks.json"
    result = CliRunner().invoke(cli, ["--db", str(populated), "sample", "--week", WEEK,
                                      "--format", "label-studio", "--out", str(out),
                                      "--as", QA_LEAD])
    assert result.exit_code == 0, result.output
    data: list[dict[str, Any]] = json.loads(out.read_text())
    return data


def annotation(verdict: Any = "correct", **changed: Any) -> dict[str, Any]:
    """One annotation as Label Studio exports it, with ``changed`` fields replaced."""
    made = {"id": 11, "completed_by": {"id": 3, "email": "ana@example.org"},
            "created_at": "2026-11-30T10:00:00Z", "lead_time": 2.5, "was_cancelled": False,
            "result": [{"from_name": "verdict", "to_name": "value", "type": "choices",
                        "value": {"choices": [verdict]}}]}
    made.update(changed)
    return made


def export(tasks: list[dict[str, Any]], *annotations: Any, **data: Any) -> list[dict[str, Any]]:
    """The first tasks, one per annotation list given, their data updated with ``data``."""
    out = copy.deepcopy(tasks[: len(annotations)])
    for number, (task, given) in enumerate(zip(out, annotations, strict=True), start=1):
        task.update(id=number, annotations=given)
        task["data"].update(data)
    return out


def _text(verdict: str, name: str, text: Any) -> dict[str, Any]:
    return annotation(verdict, result=[
        {"from_name": "verdict", "value": {"choices": [verdict]}},
        {"from_name": name, "value": {"text": text}}])


#: Each malformed export, and what its one message says.
SHAPES: dict[str, tuple[Any, str]] = {
    "an object, not a list": (lambda t: {"tasks": t}, "a Label Studio JSON export is a list"),
    "nested 100,000 deep": (lambda t: "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    "a task that is a string": (lambda t: ["task"], "row 1 (task None): not a fieldtrust task"),
    "annotations an object": (lambda t: export(t, {"a": 1}),
                              "row 1 (task 1): annotations is an object, not a list"),
    "an annotation that is text": (lambda t: export(t, ["hello"]),
                                   "row 1 (task 1): annotation 1 is text, not an object"),
    "result an object": (lambda t: export(t, [annotation(result={"a": 1})]),
                         "row 1 (task 1): annotation 1: result is an object, not a list"),
    "a result that is text": (lambda t: export(t, [annotation(result=["x"])]),
                              "row 1 (task 1): annotation 1: result 1 is text, not an object"),
    "value text": (lambda t: export(t, [annotation(result=[{"from_name": "verdict",
                                                            "value": "correct"}])]),
                   "row 1 (task 1): annotation 1: result 1: value is text, not an object"),
    "choices text": (lambda t: export(t, [annotation(result=[{"from_name": "verdict",
                                                              "value": {"choices": "correct"}}])]),
                     "row 1 (task 1): annotation 1: result 1: choices is text, not a list"),
    "a choice that is an object": (lambda t: export(t, [annotation({"a": 1})]),
                                   "row 1 (task 1): annotation 1: result 1: choice 1 is an"
                                   " object, not text"),
    "a sample id that is a list": (lambda t: export(t, [annotation()], sample_id=[1]),
                                   "row 1 (task 1): sample_id is a list, not text"),
    "an extraction id that is an object": (
        lambda t: export(t, [annotation()], extraction_id={"a": 1}),
        "row 1 (task 1): extraction_id is an object, not text"),
    "completed_by a list": (lambda t: export(t, [annotation(completed_by=[1, 2])]),
                            "row 1 (task 1): annotation 1: completed_by is a list, not an"
                            " object or a user id"),
    "lead_time text": (lambda t: export(t, [annotation(lead_time="fast")]),
                       "row 1 (task 1): annotation 1: lead_time is text, not a number"),
    "was_cancelled text": (lambda t: export(t, [annotation(was_cancelled="no")]),
                           "row 1 (task 1): annotation 1: was_cancelled is text, not true or"
                           " false"),
    "two tasks for one item": (
        lambda t: [*export(t, [annotation()]),
                   {**copy.deepcopy(t[0]), "id": 2,
                    "annotations": [annotation(completed_by={"email": "ben@example.org"})]}],
        "row 2 (task 2): extraction"),
    "a bad time, on the second task": (  # the third annotation, of the second task
        lambda t: export(t, [annotation(), annotation(completed_by={"id": 4},
                                                      created_at="2026-11-30T11:00:00Z")],
                         [annotation(created_at="yesterday")]),
        "row 2 (task 2), column labeled_at: 'yesterday' is not an ISO 8601 timestamp"),
    "not UTF-8": (lambda t: b'[{"data": "\xe9"}]', "cannot read as a Label Studio JSON export"),
    "null": (lambda t: None, "a Label Studio JSON export is a list of tasks"),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_malformed_export_is_one_error_naming_the_users_file(
    shape: str, tasks: list[dict[str, Any]], populated: Path, tmp_path: Path
) -> None:
    make, said = SHAPES[shape]
    body = make(tasks)
    path = tmp_path / "project-1-export.json"
    if isinstance(body, bytes):
        path.write_bytes(body)
    else:
        path.write_text(body if isinstance(body, str) else json.dumps(body), encoding="utf-8")
    before = file_fingerprint(populated)
    result = CliRunner().invoke(cli, ["--db", str(populated), "labels", "import", str(path),
                                      "--format", "label-studio", "--as", QA_LEAD])
    assert result.exit_code == 2, (result.output, result.exc_info)
    assert result.stderr.startswith("error: project-1-export.json: rejected"), result.stderr
    assert said in result.stderr, result.stderr
    assert "fieldtrust-input-" not in result.stderr and "annotations.jsonl" not in result.stderr
    assert "other writers" not in result.stderr
    assert file_fingerprint(populated) == before


def test_a_well_formed_export_still_imports(tasks: list[dict[str, Any]], populated: Path,
                                           tmp_path: Path) -> None:
    body = export(tasks, [annotation(), annotation(
        "incorrect", completed_by={"id": 4, "email": "ben@example.org"},
        created_at="2026-11-30T11:00:00Z")], [annotation("unclear", lead_time=None)])
    body[1]["annotations"][0]["result"].append(
        {"from_name": "error_detail", "value": {"text": ["smudged"]}})
    path = tmp_path / "export.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    # Label Studio's e-mails mapped to the store's reviewers, as a team's import does.
    result = CliRunner().invoke(cli, ["--db", str(populated), "labels", "import", str(path),
                                      "--format", "label-studio", "--as", QA_LEAD,
                                      "--reviewer-map", "ana@example.org=ana",
                                      "--reviewer-map", "ben@example.org=ben"])
    assert result.exit_code == 0, result.output
    assert "3 rows read; added 3 new labels" in result.output

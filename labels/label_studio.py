"""The Label Studio round trip, with the standard library only: tasks out, an export back.

Teams that already label in Label Studio keep doing so; fieldtrust adds what
Label Studio keeps for its Enterprise edition (agreement between reviewers, a
tamper-evident history of who labelled what).

* :func:`write_tasks` writes a sample's items as Label Studio tasks (JSON),
  each carrying the extraction id, sample id, cell, inclusion probability,
  the value, where it came from (document uri, page, excerpt) and the
  marker ``fieldtrust_task`` in ``data``. With the pages written by
  :mod:`fieldtrust.labels.label_studio_pages`, ``data.image`` is the URL of
  the value's page and the value's box comes as a pre-annotation
  (a ``RectangleLabels`` prediction), so the annotator sees the document as
  on the review page. The stated confidence is left out unless asked for: an
  annotator who sees it anchors on it.
* :func:`label_config` is the matching labelling config: the page with the
  box, the verdict as choices in the review page's words with hotkeys
  1 / 2 / 3, then what the document holds, the corrected value and an error
  type that show only when "Incorrect" is picked
  (:mod:`fieldtrust.labels.verdict_rule`).
* :func:`export_rows` reads a Label Studio JSON export (a list of tasks with
  their annotations) into label rows for :func:`fieldtrust.labels.label_import.import_labels`:
  every annotation that was not cancelled becomes one label (the annotator's
  e-mail, else ``label-studio-user-ID``, as reviewer, until the import's
  reviewer map names the store user; ``updated_at`` as the label time;
  ``lead_time`` kept). A task's first annotation is its primary
  review and a second one a blind double review, so agreement and
  adjudication work as for labels recorded in the dashboard. Cancelled
  (skipped) annotations are counted and left out. A task that is not
  fieldtrust's is refused, by its row in the export.

Label Studio's formats: https://labelstud.io/guide/export (JSON), /guide/tasks
(task data), /tags/choices (``visibleWhen``, ``hotkey``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

import pyarrow as pa
from fieldtrust.labels.verdict_rule import CORRECTION_CHOICES, VERDICT_CHOICES, error_choices
from fieldtrust.store.files import OutputKind, file_head, write_output

from fieldtrust.errors import InputError, ValidationError

#: Set in every task fieldtrust writes; an export task without it is not ours.
TASK_MARKER = "fieldtrust_task"

#: Item columns that go into a task's ``data`` (confidence only on request).
TASK_COLUMNS = (
    "extraction_id", "sample_id", "cell", "inclusion_prob", "doc_id", "doc_type",
    "form_version", "field", "value",
)
#: Where the value came from, in ``data`` when the items have it (shown as text).
LOCATION_TEXT = ("document_uri", "page", "source_excerpt")
#: The label of the pre-annotated box around the value.
BOX_LABEL = "extracted value"


#: The words of every choice the config shows, to what is stored.
CHOICE_CODES = {c.label: c.value for c in (*VERDICT_CHOICES, *CORRECTION_CHOICES,
                                              *error_choices()) if c.value is not None}

#: Most annotations fieldtrust reads per task: a primary and a blind second review.
MAX_REVIEWS = 2
_ROUNDS = ("primary", "second")


@dataclass(frozen=True)
class TaskPage:
    """The page image of one task: the URL the Label Studio server reads, and its size."""

    url: str
    width: int
    height: int


def task_data(
    row: dict[str, Any], *, show_confidence: bool = False, page: TaskPage | None = None
) -> dict[str, Any]:
    """The ``data`` of one task: the item's columns, where the value came from, the page
    image's URL (empty without one), the marker, confidence only if shown."""
    data = {name: row.get(name) for name in TASK_COLUMNS}
    data["value"] = "" if data["value"] is None else str(data["value"])
    for name in LOCATION_TEXT:
        data[name] = "" if row.get(name) is None else str(row[name])
    data["image"] = page.url if page is not None else ""
    if show_confidence:
        data["confidence"] = row.get("confidence")
    data[TASK_MARKER] = 1
    return data


#: The model_version of the box pre-annotation, by which a task list of ours is known again.
_BOX_MODEL = "fieldtrust location"


def box_prediction(row: dict[str, Any], page: TaskPage) -> list[dict[str, Any]]:
    """The value's box as a pre-annotation (Label Studio's percent of the image), if stored."""
    box = [row.get(f"bbox_{c}") for c in ("x0", "y0", "x1", "y1")]
    if None in box:
        return []
    x0, y0, x1, y1 = (float(v) for v in box)  # type: ignore[arg-type]
    region = {
        "id": "value", "from_name": "value_box", "to_name": "page", "type": "rectanglelabels",
        "original_width": page.width, "original_height": page.height, "image_rotation": 0,
        "value": {"x": 100 * x0, "y": 100 * y0, "width": 100 * (x1 - x0),
                  "height": 100 * (y1 - y0), "rotation": 0, "rectanglelabels": [BOX_LABEL]},
    }
    # No score: a number beside the box would anchor the annotator as the confidence does.
    return [{"model_version": _BOX_MODEL, "result": [region]}]


def write_tasks(
    items: pa.Table, path: str | os.PathLike[str], *, show_confidence: bool = False,
    force: bool = False, protect: Iterable[str | os.PathLike[str]] = (),
    pages: dict[str, TaskPage] | None = None,
) -> int:
    """Write ``items`` (``sampling.samples.sample_items``) as a Label Studio task list; the count.

    ``pages`` (:func:`fieldtrust.labels.label_studio_pages.write_pages`) gives
    each item's page image by extraction id; its box becomes a pre-annotation.
    Written by ``store.files.write_output``: over an existing file only when
    it is a task list fieldtrust wrote (not an export holding annotations),
    or with ``force``; never over a path in ``protect``.
    """
    missing = [c for c in TASK_COLUMNS if c not in items.column_names]
    if missing:
        raise InputError(f"items lack column {missing[0]!r}; pass sample_items(...) output")
    tasks = []
    for row in items.to_pylist():
        page = (pages or {}).get(str(row["extraction_id"]))
        task: dict[str, Any] = {"data": task_data(row, show_confidence=show_confidence,
                                                  page=page)}
        if page is not None and box_prediction(row, page):
            task["predictions"] = box_prediction(row, page)
        tasks.append(task)
    write_output(path, json.dumps(tasks, indent=1, ensure_ascii=False), TASKS_FILE,
                 force=force, protect=protect)
    return len(tasks)


def _is_tasks_file(path: Path) -> bool:
    """Whether ``path`` is a task list as :func:`write_tasks` writes it (no annotations)."""
    if not file_head(path, 1).startswith(b"["):
        return False
    text = file_head(path, _LARGEST_TASKS_FILE + 1)
    if len(text) > _LARGEST_TASKS_FILE:
        return False
    try:
        tasks = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return isinstance(tasks, list) and all(
        isinstance(t, dict) and list(t) in (["data"], ["data", "predictions"])
        and isinstance(t["data"], dict) and t["data"].get(TASK_MARKER) == 1
        and _only_our_predictions(t.get("predictions", []))
        for t in tasks
    )


def _only_our_predictions(predictions: object) -> bool:
    """Whether a task's predictions are only the box pre-annotation :func:`box_prediction`
    writes (an annotator's work lives in ``annotations``, which no task list of ours has)."""
    return isinstance(predictions, list) and all(
        isinstance(p, dict) and p.get("model_version") == _BOX_MODEL for p in predictions)


def write_label_config(
    path: str | os.PathLike[str], *, show_confidence: bool = False, force: bool = False,
    protect: Iterable[str | os.PathLike[str]] = (),
) -> None:
    """Write :func:`label_config` to ``path`` (``store.files.write_output``).

    An existing file is replaced only when it is one of fieldtrust's configs
    as written (an edited one is someone's work), or with ``force``.
    """
    write_output(path, label_config(show_confidence=show_confidence), LABEL_CONFIG_FILE,
                 force=force, protect=protect)


def _is_label_config(path: Path) -> bool:
    return file_head(path, 1 << 16) in {
        label_config(show_confidence=shown).encode() for shown in (False, True)
    }


#: A task list is a sample's worth of items; a larger file is taken as someone else's.
_LARGEST_TASKS_FILE = 256 << 20

#: The task list :func:`write_tasks` writes, and the config :func:`write_label_config` writes.
TASKS_FILE = OutputKind("Label Studio task list", _is_tasks_file)
LABEL_CONFIG_FILE = OutputKind("Label Studio labelling config", _is_label_config)


def label_config(*, show_confidence: bool = False) -> str:
    """The labelling config matching :func:`write_tasks` (Label Studio's XML).

    The choices are the review page's (:mod:`fieldtrust.labels.verdict_rule`),
    in its words; :func:`export_rows` reads the words back as stored values.
    """
    verdicts = "\n".join(
        f"    <Choice value={quoteattr(c.label)} hotkey={quoteattr(c.key)}/>"
        for c in VERDICT_CHOICES
    )
    corrections = "\n".join(f"      <Choice value={quoteattr(c.label)}/>"
                            for c in CORRECTION_CHOICES if c.value is not None)
    kinds = "\n".join(f"      <Choice value={quoteattr(c.label)}/>"
                      for c in error_choices() if c.value is not None)
    confidence = '\n  <Text name="confidence" value="stated confidence: $confidence"/>' \
        if show_confidence else ""
    incorrect = quoteattr(next(c.label for c in VERDICT_CHOICES if c.value == "incorrect"))
    return f"""<View>
  <Header value="$doc_type / $field (form $form_version, document $doc_id)"/>
  <Text name="value" value="$value"/>{confidence}
  <Text name="source" value="page $page of $document_uri: $source_excerpt"/>
  <Image name="page" value="$image" zoom="true" zoomControl="true"/>
  <RectangleLabels name="value_box" toName="page">
    <Label value={quoteattr(BOX_LABEL)} background="red"/>
  </RectangleLabels>
  <Choices name="verdict" toName="value" choice="single" required="true" showInline="true">
{verdicts}
  </Choices>
  <View visibleWhen="choice-selected" whenTagName="verdict" whenChoiceValue={incorrect}>
    <Header value="What the document holds (leave unpicked: not recorded)"/>
    <Choices name="corrected_status" toName="value" choice="single" showInline="true">
{corrections}
    </Choices>
    <Header value="Corrected value (for 'The document says' or 'Something else')"/>
    <TextArea name="corrected_value" toName="value" maxSubmissions="1" editable="true"/>
    <Header value="Error type (leave unpicked: not recorded)"/>
    <Choices name="error_type" toName="value" choice="single">
{kinds}
    </Choices>
    <TextArea name="error_detail" toName="value" maxSubmissions="1"
              placeholder="detail (needed for Other)"/>
  </View>
</View>
"""


@dataclass(frozen=True)
class ExportRows:
    """Label rows read from an export, and the annotations left out as cancelled."""

    rows: list[dict[str, Any]]
    cancelled: int


def export_rows(path: str | os.PathLike[str], *, source: str | None = None) -> ExportRows:
    """Read a Label Studio JSON export into label rows (columns of ``labels import``).

    Row numbers in errors count the export's tasks from 1; each label row
    carries its task's (``task_row``, ``task_id``), so the import's own
    messages count tasks too.
    ``source`` names the file in messages (default: its name).

    Raises
    ------
    ValidationError
        The file is not a JSON list of tasks; a task is not fieldtrust's (no
        ``fieldtrust_task`` marker or no extraction id), has a part of the
        wrong shape (annotations that are not a list, a choice that is not
        text...), repeats another task's item, or has more than two
        annotations that were not cancelled.
    """
    source = source or Path(path).name
    try:
        tasks = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValidationError(source, [f"cannot read as a Label Studio JSON export: {exc}"]) \
            from exc
    except RecursionError as exc:
        raise ValidationError(source, [
            "nested too deeply to be a Label Studio JSON export; is it the right file?"
        ]) from exc
    if not isinstance(tasks, list):
        raise ValidationError(source, ["a Label Studio JSON export is a list of tasks"])
    problems: list[str] = []
    rows: list[dict[str, Any]] = []
    cancelled = 0
    items: dict[str, int] = {}  # extraction id -> the row of the task that has it
    for number, task in enumerate(tasks, start=1):
        task_id = task.get("id") if isinstance(task, dict) else None
        where = f"row {number} (task {task_id})"
        try:
            data, kept, skipped = _task_parts(task)
        except _Shape as exc:
            problems.append(f"{where}: {exc}")
            continue
        cancelled += skipped
        if len(kept) > MAX_REVIEWS:
            problems.append(
                f"{where}: {len(kept)} annotations; fieldtrust keeps"
                f" a primary and one blind second review per item: delete the extra ones"
            )
            continue
        extraction_id = data["extraction_id"]
        if kept and extraction_id in items:
            problems.append(
                f"{where}: extraction {extraction_id} is also the item of row"
                f" {items[extraction_id]}; each item has one task: delete the repeated task,"
                " or move its annotations to the first one"
            )
            continue
        if kept:
            items[extraction_id] = number
        kept.sort(key=lambda a: (str(a.get("created_at")), str(a.get("id") or 0)))
        for review_round, annotation in zip(_ROUNDS, kept, strict=False):
            rows.append({**_label_row(data, annotation, review_round),
                         "task_row": number, "task_id": task_id})
    if problems:
        raise ValidationError(source, problems[:20], len(problems))
    return ExportRows(rows, cancelled)


class _Shape(ValueError):
    """A part of a task that is not what Label Studio exports (the message says which)."""


def _kind(value: object) -> str:
    """What a JSON value is, as messages name it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    return "a list" if isinstance(value, list) else "text"


def _expect(value: object, kinds: tuple[type, ...], name: str, wanted: str) -> None:
    """Refuse ``value`` unless it is one of ``kinds`` (true and false are no numbers)."""
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise _Shape(f"{name} is {_kind(value)}, not {wanted}")


def _task_parts(task: object) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """A task's data, its annotations that count, and how many were cancelled."""
    data = task.get("data") if isinstance(task, dict) else None
    if not isinstance(task, dict) or not isinstance(data, dict) or not data.get(TASK_MARKER) \
            or not data.get("extraction_id"):
        raise _Shape(
            f"not a fieldtrust task (its data has no {TASK_MARKER} marker or no"
            " extraction_id); export only the project made from `fieldtrust sample --format"
            " label-studio`"
        )
    _expect(data["extraction_id"], (str,), "extraction_id", "text")
    if data.get("sample_id") is not None:
        _expect(data["sample_id"], (str,), "sample_id", "text")
    annotations = task.get("annotations")
    if annotations is None:
        return data, [], 0
    _expect(annotations, (list,), "annotations", "a list")
    kept, cancelled = [], 0
    for index, annotation in enumerate(annotations, start=1):
        _expect(annotation, (dict,), f"annotation {index}", "an object")
        try:
            _check_annotation(annotation)
        except _Shape as exc:
            raise _Shape(f"annotation {index}: {exc}") from None
        if annotation.get("was_cancelled"):
            cancelled += 1
        else:
            kept.append(annotation)
    return data, kept, cancelled


def _check_annotation(annotation: dict[str, Any]) -> None:
    """Refuse an annotation whose parts are not the types Label Studio exports."""
    for name, kinds, wanted in (
        ("was_cancelled", (bool,), "true or false"),
        ("lead_time", (int, float), "a number"),
        ("created_at", (str,), "text"),
    ):
        if annotation.get(name) is not None:
            _expect(annotation[name], kinds, name, wanted)
    who = annotation.get("completed_by")
    if who is not None:
        _expect(who, (dict, int, str), "completed_by", "an object or a user id")
        if isinstance(who, dict):
            for key in ("email", "id"):
                if who.get(key) is not None:
                    _expect(who[key], (str, int), f"completed_by.{key}", "text or a number")
    results = annotation.get("result")
    if results is None:
        return
    _expect(results, (list,), "result", "a list")
    for index, result in enumerate(results, start=1):
        where = f"result {index}"
        _expect(result, (dict,), where, "an object")
        if result.get("from_name") is not None:
            _expect(result["from_name"], (str,), f"{where}: from_name", "text")
        value = result.get("value")
        if value is None:
            continue
        _expect(value, (dict,), f"{where}: value", "an object")
        for key, item_name in (("choices", "choice"), ("text", "text")):
            given = value.get(key)
            if given is None or (key == "text" and isinstance(given, str)):
                continue
            _expect(given, (list,), f"{where}: {key}", "a list")
            for number, item in enumerate(given, start=1):
                _expect(item, (str,), f"{where}: {item_name} {number}", "text")


def _label_row(
    data: dict[str, Any], annotation: dict[str, Any], review_round: str
) -> dict[str, Any]:
    """One annotation as a label row; what the annotator left empty stays None."""
    picked: dict[str, Any] = {}
    for result in annotation.get("result") or []:
        value = result.get("value") or {}
        if value.get("choices"):
            picked[result.get("from_name")] = value["choices"][0]
        elif value.get("text"):
            text = value["text"]
            picked[result.get("from_name")] = text[0] if isinstance(text, list) else text
    return {
        "extraction_id": str(data["extraction_id"]),
        "sample_id": data.get("sample_id") or None,
        "verdict": _code(picked.get("verdict")),
        "corrected_value": picked.get("corrected_value") or None,
        "corrected_status": _code(picked.get("corrected_status")),
        "error_type": _code(picked.get("error_type")),
        "error_detail": picked.get("error_detail") or None,
        "reviewer": _annotator(annotation.get("completed_by")),
        # The verdict as last edited: an annotation changed in Label Studio keeps its
        # created_at, and an older export must not read as the newer verdict.
        "labeled_at": annotation.get("updated_at") or annotation.get("created_at"),
        "review_round": review_round,
        "lead_time_seconds": annotation.get("lead_time"),
    }


#: How an annotator known only by their Label Studio user id is named until mapped.
_USER_PREFIX = "label-studio-user-"


def user_key(user: int) -> str:
    """The reviewer name of Label Studio user ``user`` before the reviewer map."""
    return f"{_USER_PREFIX}{user}"


def user_id(name: str) -> int | None:
    """The Label Studio user id of a name :func:`user_key` made, else None."""
    rest = name.removeprefix(_USER_PREFIX)
    return int(rest) if rest != name and rest.isdigit() else None


def _annotator(completed_by: object) -> str:
    """The annotator's e-mail when the export has it, else ``label-studio-user-ID``."""
    if isinstance(completed_by, dict):
        email = completed_by.get("email")
        if email:
            return str(email)
        completed_by = completed_by.get("id")
    return f"{_USER_PREFIX}{completed_by}"


def _code(picked: object) -> object:
    """A choice as stored: the config shows the form's words ('Unreadable' is unclear)."""
    return CHOICE_CODES.get(picked, picked) if isinstance(picked, str) else picked

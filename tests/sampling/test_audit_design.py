from __future__ import annotations

import json
from pathlib import Path

import pytest
from fieldtrust.sampling.design import Design, load_design

from fieldtrust.errors import InputError


def test_defaults_follow_stats_md() -> None:
    design = Design()
    assert design.bands == (0.0, 0.5, 0.8, 0.9, 0.95, 1.0)
    assert design.band_labels == (
        "[0.00,0.50)",
        "[0.50,0.80)",
        "[0.80,0.90)",
        "[0.90,0.95)",
        "[0.95,1.00]",
    )
    assert (design.new_version_weeks, design.boost, design.double_review_share) == (2, 5.0, 0.10)
    assert design.rate(new_version=True) == pytest.approx(design.base_rate * 5)


def test_rate_of_new_versions_never_exceeds_one() -> None:
    assert Design(base_rate=0.5, boost=5).rate(new_version=True) == 1.0


def test_canonical_json_is_stable_across_spellings() -> None:
    a = Design(base_rate=1, minimum=20.0, bands=[0, 0.5, 1])  # type: ignore[arg-type]
    b = Design.from_mapping({"bands": (0.0, 0.5, 1.0), "minimum": 20, "base_rate": 1.0})
    assert a.canonical_json() == b.canonical_json()
    assert a.sha256() == b.sha256()
    assert Design(minimum=21).sha256() != Design(minimum=20).sha256()
    assert Design.from_json(a.canonical_json()) == a
    assert " " not in a.canonical_json()
    assert list(json.loads(a.canonical_json())) == sorted(json.loads(a.canonical_json()))


def test_unusual_edges_keep_their_precision_in_labels() -> None:
    assert Design(bands=(0, 0.975, 1)).band_labels == ("[0.00,0.975)", "[0.975,1.00]")


def test_load_toml_with_design_table(tmp_path: Path) -> None:
    path = tmp_path / "d.toml"
    path.write_text("[design]\nbase_rate = 0.02\nminimum = 20\ncap = 200\nbudget = 1500\n")
    design = load_design(path)
    assert (design.base_rate, design.minimum, design.cap, design.budget) == (0.02, 20, 200, 1500)
    assert design.bands == Design().bands


def test_load_toml_top_level_and_json(tmp_path: Path) -> None:
    toml = tmp_path / "d.toml"
    toml.write_text("boost = 3\nbands = [0, 0.9, 1]\n")
    js = tmp_path / "d.json"
    js.write_text(json.dumps({"boost": 3, "bands": [0, 0.9, 1]}))
    assert load_design(toml) == load_design(js) == Design(boost=3, bands=(0, 0.9, 1))


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"bands": [0.1, 1]}, r"must start at 0 and end at 1"),
        ({"bands": [0, 0.8, 0.5, 1]}, r"strictly increasing"),
        ({"bands": [0]}, r"at least two edges"),
        ({"bands": "0,1"}, r"not a list"),
        ({"base_rate": 0}, r"base_rate = 0.0 must be in \(0, 1\]"),
        ({"base_rate": "lots"}, r"base_rate = 'lots' is not a number"),
        ({"minimum": 1}, r"minimum = 1: use at least 2"),
        ({"minimum": 2.5}, r"minimum = 2.5 is not a whole number"),
        ({"cap": 5, "minimum": 10}, r"cap = 5 is below minimum = 10"),
        ({"boost": 0.5}, r"boost = 0.5 must be at least 1"),
        ({"budget": 0}, r"budget = 0 must be at least 1"),
        ({"double_review_share": 1.5}, r"double_review_share = 1.5 must be in \[0, 1\]"),
        ({"prior_error": 0.9}, r"prior_error = 0.9 must be in \(0, 0.5\]"),
        ({"new_version_weeks": -1}, r"new_version_weeks = -1 must be 0 or more"),
        ({"bse_rate": 0.1}, r"unknown key 'bse_rate'; known keys: allocation, bands, base_rate"),
        ({"base_rate": True}, r"base_rate = True is not a number"),
    ],
)
def test_invalid_designs_say_what_to_fix(values: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        Design.from_mapping(values, source="my.toml")


def test_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[design]\nminimum = 1\n")
    with pytest.raises(InputError, match=r"bad.toml: minimum = 1"):
        load_design(path)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("d.toml", "minimum = [", r"not valid TOML"),
        ("d.json", "{", r"not valid JSON"),
        ("d.json", "[1, 2]", r"expected a JSON object"),
        ("d.yaml", "minimum: 3", r"use a .toml or .json file"),
    ],
)
def test_unreadable_files(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        load_design(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"does not exist"):
        load_design(tmp_path / "nope.toml")

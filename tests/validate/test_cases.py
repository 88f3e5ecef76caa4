"""Validation cases: one-line loading errors, and the shipped file agrees with its sources."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from heterosim.errors import UserError
from heterosim.validate.cases import load_cases, select_cases
from heterosim.validate.predict import case_experiment
from heterosim.validate.report import result_row
from heterosim.validate.runner import case_lines

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "validation" / "cases.yaml"

GOOD = {
    "id": "c1",
    "group": "g",
    "kind": "iteration_time",
    "source": "somewhere",
    "compare": {"quantity": "iteration_time_s"},
    "measured": {"iteration_time_s": 1.5},
    "experiment": {
        "model": "gpt3-6.7b",
        "training": {"global_batch": 8},
        "parallel": {"dp": 8},
        "cluster": {
            "host_types": {"h": {"gpu": "H100", "gpus": 8, "nics": 8, "nic_speed": "400Gbps"}},
            "hosts": [{"type": "h", "count": 1}],
        },
    },
}


def write(tmp_path: Path, cases) -> Path:
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump({"cases": cases}))
    return path


def error_of(tmp_path: Path, cases) -> str:
    with pytest.raises(UserError) as info:
        load_cases(write(tmp_path, cases))
    message = str(info.value)
    assert "\n" not in message
    return message


def mutate(**changes):
    case = copy.deepcopy(GOOD)
    for key, value in changes.items():
        node = case
        parts = key.split(".")
        for part in parts[:-1]:
            node = node[part]
        if value is None:
            del node[parts[-1]]
        else:
            node[parts[-1]] = value
    return case


def test_good_case_loads(tmp_path):
    (case,) = load_cases(write(tmp_path, [GOOD]))
    assert case.id == "c1" and case.measured == 1.5 and case.quantity == "iteration_time_s"
    assert not case.ci and not case.calibration


@pytest.mark.parametrize(
    "changes, expected",
    [
        ({"kind": "speed"}, "cases[0] (c1).kind: expected one of"),
        ({"measured.iteration_time_s": None}, "cases[0] (c1).measured.iteration_time_s"),
        ({"measured.iteration_time_s": -2}, "measured.iteration_time_s"),
        ({"compare.quantity": "busbw_GBps"}, "does not go with kind"),
        (
            {"compare.quantity": "tflops_per_gpu", "measured": {"tflops_per_gpu": 100}},
            "compare.flop_convention",
        ),
        ({"experiment": None}, "cases[0] (c1).experiment: missing required key"),
        ({"experiment": "run.yaml"}, "cases[0] (c1).experiment: expected an experiment mapping"),
        ({"flags": "DER"}, "flags: expected a list"),
        ({"colour": "red"}, "colour"),
        ({"not_modelled": "overlap"}, "cases[0] (c1).not_modelled: expected a list"),
        (
            {"not_modelled": [{"what": "overlap"}]},
            "cases[0] (c1).not_modelled[0]: expected {what: TEXT, source: TEXT}",
        ),
        ({"not_modelled": [{"what": "x", "source": " "}]}, "not_modelled[0]"),
    ],
)
def test_malformed_case_is_one_line_error_naming_case_and_key(tmp_path, changes, expected):
    message = error_of(tmp_path, [mutate(**changes)])
    assert expected in message
    assert str(tmp_path / "cases.yaml") in message


def test_not_modelled_mechanisms_reach_the_results_and_the_printed_case(tmp_path):
    entry = {"what": "TP overlap", "source": "launcher config"}
    (case,) = load_cases(write(tmp_path, [mutate(not_modelled=[entry])]))
    assert case.not_modelled == (entry,)
    row = result_row(case, None, None)
    assert row["not_modelled"] == [entry]
    row["error_pct"] = 1.0
    assert "      not modelled: TP overlap" in case_lines(case, row, show_budget=False)
    (plain,) = load_cases(write(tmp_path, [GOOD]))
    assert plain.not_modelled == () and not any("not modelled" in x for x in case_lines(plain, row))


def test_shipped_cases_run_with_the_tp_overlap_their_configs_enable():
    cases = {c.id: c for c in load_cases(SHIPPED)}
    with_overlap = {
        i for i, c in cases.items() if (c.experiment or {}).get("parallel", {}).get("tp_comm_overlap")
    }
    nemo = {
        "nemo2407-h100-fp8-llama2-70b-64",
        "nemo2407-h100-fp8-gpt3-20b-64",
        "nemo2407-h100-fp8-nemotron3-8b-64",
        "nemo2407-h100-fp8-nemotron3-22b-64",
    }
    mbridge = {f"mbridge-{rel}-h100-llama3-70b-64" for rel in ("2509", "2511", "2602")}
    titan = {i for i in cases if i.startswith("torchtitan-") and "async" in i}  # async TP stated
    assert len(titan) == 8
    assert with_overlap == nemo | mbridge | titan
    for i in nemo:
        assert "tag 24.07" in cases[i].assumed["parallel.tp_comm_overlap"]["why"]
        assert not any("ub_tp_comm_overlap" in e["what"] for e in cases[i].not_modelled)
    for i in mbridge:
        assert "userbuffers" in cases[i].assumed["parallel.tp_comm_overlap"]["why"]
    for i in nemo | mbridge:  # Transformer Engine userbuffers: the default method
        assert "tp_comm_overlap_method" not in cases[i].experiment["parallel"]
    for i in titan:
        assert "async TP stated" in cases[i].assumed["parallel.tp_comm_overlap"]["why"]
        assert cases[i].experiment["parallel"]["tp_comm_overlap_method"] == "torch_async_tp"
        assert any("SymmetricMemory" in e["what"] for e in cases[i].not_modelled)


def test_duplicate_ids_and_empty_list_are_errors(tmp_path):
    assert "duplicate id 'c1'" in error_of(tmp_path, [GOOD, GOOD])
    assert "non-empty list" in error_of(tmp_path, [])


def test_selection_by_group_only_ci_and_gpus(tmp_path):
    big = mutate(id="c2", group="h")
    big["experiment"]["cluster"]["hosts"][0]["count"] = 4
    big["experiment"]["parallel"]["dp"] = 32  # a valid experiment: cases are checked when read
    big["experiment"]["training"]["global_batch"] = 32
    cases = load_cases(write(tmp_path, [GOOD, big]))
    chosen, skipped = select_cases(cases, max_gpus=16)
    assert [c.id for c in chosen] == ["c1"] and [c.id for c, _ in skipped] == ["c2"]
    assert [c.id for c in select_cases(cases, groups=["h"])[0]] == ["c2"]
    assert select_cases(cases, ci=True)[0] == []
    with pytest.raises(UserError, match="unknown case id"):
        select_cases(cases, only=["nope"])
    with pytest.raises(UserError, match="unknown group"):
        select_cases(cases, groups=["nope"])


def test_shipped_cases_load_and_parse():
    cases = load_cases(SHIPPED)
    assert len({c.id for c in cases}) == len(cases) > 40
    assert any(c.ci for c in cases)
    for case in cases:
        assert case.source
        if case.experiment is not None:
            case_experiment(case)  # validates the experiment (raises UserError otherwise)


def test_shipped_experiments_match_published_configuration():
    """Every published, stated value reaches the simulated experiment unchanged."""
    data = yaml.safe_load(SHIPPED.read_text())
    for entry in data["cases"]:
        if entry["kind"] == "collective_busbw":
            continue
        pub, exp = entry["published"], case_experiment(load_one(entry))
        assert (exp.parallel.tp, exp.parallel.pp, exp.parallel.dp) == (
            pub["parallel"]["tp"],
            pub["parallel"]["pp"],
            pub["parallel"]["dp"],
        ), entry["id"]
        assert exp.cluster.world_size == pub["cluster"]["gpus"], entry["id"]
        m = pub["model"]
        assert (exp.model.hidden, exp.model.layers, exp.model.heads, exp.model.ffn) == (
            m["hidden"],
            m["layers"],
            m["heads"],
            m["ffn"],
        ), entry["id"]
        t = pub["training"]
        assert (exp.training.global_batch, exp.training.seq_len) == (t["global_batch"], t["seq_len"])
        for key in ("micro_batch", "dtype", "recompute"):
            if t[key] is not None:
                assert getattr(exp.training, key) == t[key], (entry["id"], key)
            else:
                assert f"training.{key}" in entry["assumed"], (entry["id"], key)
        if m["vocab"] is not None and "model.vocab" not in entry["assumed"]:
            assert exp.model.vocab == m["vocab"]
        elif m["vocab"] is not None:  # replaced on purpose, with the reason
            assert entry["assumed"]["model.vocab"]["why"], entry["id"]


def load_one(entry):
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "one.yaml"
        path.write_text(yaml.safe_dump({"cases": [entry]}))
        return load_cases(path)[0]

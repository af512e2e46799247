"""How a run was made: what each results file recorded (model, command line, versions, data), shown on its page."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from hvcu_tasks.results.run_record import run_record
from hvcu_tasks.results.runs import ReportError, read_runs

FINGERPRINT = "sha256:" + "ab" * 32
COMMIT = "0123456789abcdef0123456789abcdef01234567"
FILE = Path("/runs/ctx/model-a/20261202_093830_results.json")


def identity(family: str, short: str) -> dict:
    """A hub data identity as the toolkit's task hook records it (shape of a real results file)."""
    return {
        "aspects": {"metaphor": 1},
        "family": family,
        "fingerprint": FINGERPRINT,
        "kind": "hub",
        "layout": "parquet",
        "location": "Chime316/HVCU-Bench",
        "requested_revision": None,
        "revision": COMMIT,
        "samples": 1,
        "scheme": "hvcu-data/1",
    }


def results_json(model_args: str = "model=gpt-4o,api_key=[REDACTED],num_concurrent=8") -> dict:
    """A results file of a context run (copied from the shape lmms-eval 0.7.3 writes), toolkit version recorded."""
    tasks = {"impl": "implication", "aesth": "aesthetic", "affect": "affective"}
    configs = {
        f"hvcu_bench_context_{short}": {
            "task": f"hvcu_bench_context_{short}",
            "metadata": {
                "version": 1.0,
                "hvcu_data_identity": identity(family, short),
                "hvcu_toolkit_version": "0.1.0",
                "hvcu_lmms_eval_version": "0.7.3",
            },
        }
        for short, family in tasks.items()
    }
    cli = {
        "config": "",
        "model": "hvcu_context",
        "tasks": "hvcu_bench_context",
        "model_args": model_args,
        "num_fewshot": None,
        "batch_size": 1,
        "output_path": "/runs/ctx",
        "limit": None,
        "offset": 0,
        "log_samples": True,
        "wandb_log_samples": False,
        "swanlab_log_samples": False,
        "system_instruction": None,
        "apply_chat_template": False,
        "gen_kwargs": "",
        "verbosity": "INFO",
        "wandb_args": "",
        "swanlab_args": "",
        "hf_hub_log_args": ",output_path=/runs/ctx",
        "seed": [0, 1234, 1234, 1234],
    }
    return {
        "results": {task: {"alias": task, "acc_full,none": 50.0} for task in configs},
        "configs": configs,
        "config": {
            "model": "hvcu_context",
            "model_args": model_args,
            "model_backend": "hvcu_tasks.lmms.models.wrapper.ContextWrapper (chat)",
            "batch_size": 1,
            "limit": None,
            "gen_kwargs": "",
            "resolved_cli_args": cli,
        },
        "git_hash": "fb4f211",
        "lmms_eval_version": "main@fb4f2110",
        "date": "20261202_093830",
        "model_name": "gpt-4o",
    }


MODEL_IDENTITY = {
    "backend": "openai",
    "args": {"model_version": "gpt-4o", "base_url": "https://api.example.com/v1"},
    "resolved": {"model_version": "gpt-4o", "base_url": "https://api.example.com/v1"},
    "endpoint": "https://api.example.com/v1/",
    "request_cache": {"identity": "0f" * 16, "run": "20261202T093830-ab12"},
}
"""A model identity as hvcu_context records it for an API backend whose request cache was on."""


def with_identity(data: dict, identity: object = MODEL_IDENTITY) -> dict:
    """A results file whose every task's config recorded `identity` as its model identity."""
    for config in data["configs"].values():
        config["metadata"]["hvcu_model_identity"] = copy.deepcopy(identity)
    return data


def older_json() -> dict:
    """A results file from before the toolkit recorded identities and versions (and before resolved_cli_args)."""
    data = results_json()
    for config in data["configs"].values():
        config["metadata"] = {"version": 1.0}
    del data["config"]["resolved_cli_args"], data["git_hash"], data["model_name"]
    return data


# ---------------------------------------------------------------- the record


def test_the_record_names_the_model_as_lmms_eval_recorded_it() -> None:
    record = run_record(results_json(), FILE)
    assert (record.file, record.model, record.model_name) == (FILE, "hvcu_context", "gpt-4o")
    assert record.model_args == "model=gpt-4o,api_key=[REDACTED],num_concurrent=8"
    assert record.model_backend == "hvcu_tasks.lmms.models.wrapper.ContextWrapper (chat)"


def test_the_record_holds_the_versions_and_the_date() -> None:
    record = run_record(results_json(), FILE)
    assert (record.lmms_eval_version, record.git_hash, record.toolkit_version) == ("main@fb4f2110", "fb4f211", "0.1.0")
    assert record.date == "20261202_093830"


def test_the_record_lists_the_tasks_run() -> None:
    record = run_record(results_json(), FILE)
    assert record.tasks == ("hvcu_bench_context_aesth", "hvcu_bench_context_affect", "hvcu_bench_context_impl")


def test_the_record_holds_each_tasks_fingerprint_and_source() -> None:
    (aesth, _affect, _impl) = run_record(results_json(), FILE).data
    assert (aesth.task, aesth.family, aesth.fingerprint) == ("hvcu_bench_context_aesth", "aesthetic", FINGERPRINT)
    assert (aesth.source, aesth.revision, aesth.samples) == ("hub Chime316/HVCU-Bench@0123456789ab", COMMIT, 1)


def test_the_command_line_is_rebuilt_from_the_recorded_arguments() -> None:
    record = run_record(results_json(), FILE)
    assert record.command == (
        "lmms-eval --model hvcu_context --model_args 'model=gpt-4o,api_key=[REDACTED],num_concurrent=8' "
        "--tasks hvcu_bench_context --batch_size 1 --log_samples --output_path /runs/ctx"
    )


def test_the_command_line_quotes_what_a_shell_would_split() -> None:
    data = results_json("model=a b,pretrained=x")
    data["config"]["resolved_cli_args"]["limit"] = 5
    record = run_record(data, FILE)
    assert record.command == (
        "lmms-eval --model hvcu_context --model_args 'model=a b,pretrained=x' --tasks hvcu_bench_context "
        "--batch_size 1 --limit 5 --log_samples --output_path /runs/ctx"
    )


def test_a_limit_lmms_eval_recorded_as_a_float_is_given_as_a_whole_number() -> None:
    data = results_json()
    data["config"]["resolved_cli_args"]["limit"] = 2.0
    assert " --limit 2 " in run_record(data, FILE).command


def test_the_recorded_arguments_leave_out_unset_values_and_logging_integrations() -> None:
    args = dict(run_record(results_json(), FILE).cli_args)
    assert args["offset"] == "0" and args["verbosity"] == "INFO" and args["seed"] == "[0, 1234, 1234, 1234]"
    assert not {"wandb_args", "swanlab_log_samples", "hf_hub_log_args", "limit", "gen_kwargs"} & set(args)
    assert "apply_chat_template" not in args  # false: the flag was not given


def test_a_secret_lmms_eval_left_in_the_model_args_is_redacted() -> None:
    data = results_json("model=m,api_key=sk-live-123,hf_token=hf_abc,base_url=http://bob:pw@host:8000/v1")
    record = run_record(data, FILE)
    assert record.model_args == "model=m,api_key=[REDACTED],hf_token=[REDACTED],base_url=http://host:8000/v1"
    assert "sk-live-123" not in record.command and "hf_abc" not in record.command and "pw@" not in record.command
    assert "sk-live-123" not in dict(record.cli_args)["model_args"]


def test_settings_named_like_a_credential_stay_visible() -> None:
    data = results_json("model=m,max_new_tokens=512,keyframes=8,extra_headers=Bearer-x")
    record = run_record(data, FILE)
    assert record.model_args == "model=m,max_new_tokens=512,keyframes=8,extra_headers=[REDACTED]"
    identity = {"backend": "openai", "args": {"max_new_tokens": 512, "auth": "Bearer-x"}}
    shown = run_record(with_identity(results_json(), identity), FILE).model_identity
    assert shown == {"backend": "openai", "args": {"max_new_tokens": 512, "auth": "[REDACTED]"}}


def test_an_older_file_gives_a_record_with_what_it_holds() -> None:
    record = run_record(older_json(), FILE)
    assert (record.toolkit_version, record.git_hash, record.model_name, record.cli_args) == (None, None, None, ())
    assert [(d.fingerprint, d.source, d.revision) for d in record.data] == [(None, None, None)] * 3


def test_an_older_file_rebuilds_the_command_from_its_config() -> None:
    record = run_record(older_json(), FILE)
    assert record.command == (
        "lmms-eval --model hvcu_context --model_args 'model=gpt-4o,api_key=[REDACTED],num_concurrent=8' "
        "--tasks hvcu_bench_context_aesth,hvcu_bench_context_affect,hvcu_bench_context_impl --batch_size 1"
    )


def test_a_file_without_a_model_has_no_command() -> None:
    data = older_json()
    del data["config"]["model"]
    assert run_record(data, FILE).command is None


def test_model_args_over_two_lines_are_refused_naming_file_and_field() -> None:
    data = results_json("model=m\nrm -rf /")
    with pytest.raises(ReportError, match=r"^/runs/ctx/model-a/\S+_results.json: field config.model_args: .*U\+000A"):
        run_record(data, FILE)


def test_a_lmms_eval_version_that_is_not_text_is_refused_naming_the_field() -> None:
    data = results_json()
    data["lmms_eval_version"] = {"v": 1}
    with pytest.raises(ReportError, match=r"_results.json: field lmms_eval_version: expected text, got dict"):
        run_record(data, FILE)


def test_a_toolkit_version_that_is_not_text_is_refused_naming_the_task() -> None:
    data = results_json()
    data["configs"]["hvcu_bench_context_impl"]["metadata"]["hvcu_toolkit_version"] = 1
    with pytest.raises(
        ReportError, match=r"field configs.hvcu_bench_context_impl.metadata.hvcu_toolkit_version: expected text"
    ):
        run_record(data, FILE)


def test_recorded_arguments_that_are_not_an_object_are_refused() -> None:
    data = results_json()
    data["config"]["resolved_cli_args"] = ["--model", "x"]
    with pytest.raises(ReportError, match=r"field config.resolved_cli_args: expected an object, got list"):
        run_record(data, FILE)


def test_a_system_instruction_over_lines_is_kept_escaped_in_the_recorded_arguments() -> None:
    data = results_json()
    data["config"]["resolved_cli_args"]["system_instruction"] = "Be brief.\nAnswer with a letter."
    record = run_record(data, FILE)
    assert dict(record.cli_args)["system_instruction"] == '"Be brief.\\nAnswer with a letter."'
    assert "--system_instruction 'Be brief.\nAnswer with a letter.'" in record.command


def test_the_record_holds_the_model_identity_hvcu_context_recorded() -> None:
    assert run_record(with_identity(results_json()), FILE).model_identity == MODEL_IDENTITY


def test_a_file_without_a_model_identity_has_none() -> None:
    assert run_record(results_json(), FILE).model_identity is None


def test_a_secret_named_field_of_the_model_identity_is_redacted() -> None:
    hostile = {"backend": "openai", "args": {"model_version": "m", "api_key": "sk-live-123"}}
    identity = run_record(with_identity(results_json(), hostile), FILE).model_identity
    assert identity == {"backend": "openai", "args": {"model_version": "m", "api_key": "[REDACTED]"}}


def test_a_url_user_in_the_model_identity_is_redacted() -> None:
    hostile = {"backend": "openai", "endpoint": "http://bob:pw@host:8000/v1"}
    identity = run_record(with_identity(results_json(), hostile), FILE).model_identity
    assert identity == {"backend": "openai", "endpoint": "http://host:8000/v1"}


def test_a_model_identity_that_is_not_an_object_is_refused_naming_the_task() -> None:
    with pytest.raises(
        ReportError,
        match=r"_results.json: field configs.hvcu_bench_context_aesth.metadata.hvcu_model_identity: expected an object",
    ):
        run_record(with_identity(results_json(), ["openai"]), FILE)


def test_a_model_identity_with_a_value_over_two_lines_is_refused_naming_the_field() -> None:
    with pytest.raises(
        ReportError, match=r"field configs.hvcu_bench_context_aesth.metadata.hvcu_model_identity.backend"
    ):
        run_record(with_identity(results_json(), {"backend": "openai\nrm -rf /"}), FILE)


def test_tasks_that_recorded_different_model_identities_are_refused_naming_both() -> None:
    data = with_identity(results_json())
    data["configs"]["hvcu_bench_context_impl"]["metadata"]["hvcu_model_identity"] = {"backend": "vllm"}
    with pytest.raises(ReportError, match=r"hvcu_bench_context_aesth and hvcu_bench_context_impl recorded different"):
        run_record(data, FILE)


# ---------------------------------------------------------------- read_runs


def test_read_runs_keeps_one_record_per_results_file(tmp_path: Path) -> None:
    base = results_json()
    base["configs"] = {t.replace("_context", ""): c for t, c in base["configs"].items()}
    base["results"] = {t.replace("_context", ""): v for t, v in base["results"].items()}
    for name, data in {"base": base, "context": results_json()}.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "20261202_093830_results.json").write_text(json.dumps(data))
    (model,) = read_runs([tmp_path / "base", tmp_path / "context"])
    assert [r.file for r in model.records] == [
        tmp_path / "base" / "20261202_093830_results.json",
        tmp_path / "context" / "20261202_093830_results.json",
    ]


def test_the_record_does_not_change_the_parsed_json() -> None:
    data = results_json("model=m,api_key=sk-1")
    before = copy.deepcopy(data)
    run_record(data, FILE)
    assert data == before


# ---------------------------------------------------------------- the installed lmms-eval release


def test_the_record_holds_the_installed_lmms_eval_release_the_tasks_recorded() -> None:
    assert run_record(results_json(), FILE).lmms_eval_release == "0.7.3"


def test_a_file_written_before_the_release_was_recorded_has_none() -> None:
    assert run_record(older_json(), FILE).lmms_eval_release is None


# ---------------------------------------------------------------- a key in the query of a URL

KEYED_URL = "http://127.0.0.1:8000/v1?api-key=SECRET"


def test_a_key_in_the_query_of_a_url_is_not_in_the_model_args() -> None:
    record = run_record(results_json(f"model=m,base_url={KEYED_URL}"), FILE)
    assert record.model_args == "model=m,base_url=http://127.0.0.1:8000/v1"


def test_a_key_in_the_query_of_a_url_is_not_in_the_command_line() -> None:
    record = run_record(results_json(f"model=m,base_url={KEYED_URL}"), FILE)
    assert "--model_args model=m,base_url=http://127.0.0.1:8000/v1 --tasks" in record.command


def test_a_key_in_the_query_of_a_url_is_not_in_the_recorded_arguments() -> None:
    record = run_record(results_json(f"model=m,base_url={KEYED_URL}"), FILE)
    assert dict(record.cli_args)["model_args"] == "model=m,base_url=http://127.0.0.1:8000/v1"


def test_a_key_in_the_query_of_a_url_is_not_in_the_model_identity() -> None:
    hostile = {"backend": "openai", "args": {"base_url": KEYED_URL + "#frag"}}
    identity = run_record(with_identity(results_json(), hostile), FILE).model_identity
    assert identity == {"backend": "openai", "args": {"base_url": "http://127.0.0.1:8000/v1"}}


# ---------------------------------------------------------------- paths, shown from the runs folder

RUNS = (Path("/runs/ctx"),)
"""The runs folder given to `hvcu report` (FILE lies in it)."""


def test_the_results_file_is_shown_from_the_runs_folder() -> None:
    assert run_record(results_json(), FILE, RUNS).shown_file() == "ctx/model-a/20261202_093830_results.json"


def test_the_output_path_in_the_runs_folder_is_shown_from_it() -> None:
    record = run_record(results_json(), FILE, RUNS)
    assert record.command.endswith("--log_samples --output_path ctx")
    assert dict(record.cli_args)["output_path"] == "ctx"


def test_a_path_inside_the_runs_folder_is_shown_below_its_name() -> None:
    record = run_record(results_json("model=m,predictions=/runs/ctx/replies/p.jsonl"), FILE, RUNS)
    assert record.model_args == "model=m,predictions=ctx/replies/p.jsonl"


def test_a_path_outside_the_runs_folder_is_shown_by_its_base_name() -> None:
    record = run_record(results_json("model=m,pretrained=/home/alice/checkpoints/qwen-lora"), FILE, RUNS)
    assert record.model_args == "model=m,pretrained=qwen-lora"


def test_the_home_folder_itself_is_shown_as_outside_the_runs_folder() -> None:
    record = run_record(results_json(f"model=m,cache_dir={os.path.expanduser('~')}"), FILE, RUNS)
    assert record.model_args == "model=m,cache_dir=<outside the runs folder>"


def test_a_local_data_folder_outside_the_runs_folder_is_shown_by_its_base_name() -> None:
    data = results_json()
    data["configs"]["hvcu_bench_context_aesth"]["metadata"]["hvcu_data_identity"] |= {
        "kind": "local",
        "location": "/home/alice/data/hvcu-copy",
        "revision": None,
    }
    (aesth, _affect, _impl) = run_record(data, FILE, RUNS).data
    assert aesth.source == "hvcu-copy"


def test_a_path_in_the_model_identity_is_shown_by_its_base_name() -> None:
    local = {"backend": "qwen2_5_vl", "args": {"pretrained": "/home/alice/ckpt/step-900"}}
    identity = run_record(with_identity(results_json(), local), FILE, RUNS).model_identity
    assert identity == {"backend": "qwen2_5_vl", "args": {"pretrained": "step-900"}}

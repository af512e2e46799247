"""lmms-eval's own backends hand the engine whole rounds (issue 25): routing, the stand-in vLLM engine, the CLI.

The slow tests run the real `lmms-eval --model vllm` against the stand-in engine in tests/standins/vllm (put
first on PYTHONPATH) and count its calls from its log; expected counts are worked out from the smoke sample:
15 samples (5 + 4 + 6), so 45 base requests, 15 context chains of 3 rounds, 45 blind, 180 circular (4
rotations) and 45 gold-context requests.
"""

from __future__ import annotations

import glob
import json
import math
import os
import subprocess
from pathlib import Path

import pytest
from conftest import BIN, REPO, run_lmms_eval
from fake_openai import FakeOpenAI
from lmms_eval.api.instance import Instance

from hvcu_tasks.lmms import context, plugin
from hvcu_tasks.lmms.models import routing

STANDINS = REPO / "tests" / "standins"
HINT = "pass --batch_size 64 (or more) to hand it whole rounds"


# ------------------------------------------------------------------ the stand-in engine


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Put the stand-in vLLM under lmms-eval's vllm backends (in this process) and log its calls to a file."""
    import lmms_eval.models.chat.vllm as chat_vllm
    import lmms_eval.models.simple.vllm as simple_vllm
    from standins import vllm as standin

    monkeypatch.setattr(simple_vllm, "LLM", standin.LLM)
    monkeypatch.setattr(simple_vllm, "SamplingParams", standin.SamplingParams)
    monkeypatch.setattr(chat_vllm, "SamplingParams", standin.SamplingParams)
    monkeypatch.setenv(standin.LOG_ENV, str(tmp_path / "engine.jsonl"))
    for name in (standin.CALL_COST_ENV, standin.CONVERSATION_COST_ENV, standin.SLEEP_ENV):
        monkeypatch.delenv(name, raising=False)
    return standin


def engine_calls(log: Path) -> list[dict]:
    """Return the stand-in engine's call records."""
    return [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []


def test_the_stand_in_engine_has_vllms_chat_signature_and_cost_model(engine, tmp_path, monkeypatch) -> None:
    import inspect

    # vLLM's LLM.chat parameters (docs.vllm.ai, "LLM.chat"), typed here from its documentation
    assert list(inspect.signature(engine.LLM.chat).parameters) == [
        "self",
        "messages",
        "sampling_params",
        "use_tqdm",
        "lora_request",
        "chat_template",
        "chat_template_content_format",
        "add_generation_prompt",
        "continue_final_message",
        "tools",
        "chat_template_kwargs",
        "mm_processor_kwargs",
    ]
    monkeypatch.setenv(engine.CALL_COST_ENV, "0.5")
    monkeypatch.setenv(engine.CONVERSATION_COST_ENV, "0.005")
    llm = engine.LLM(model="m", tensor_parallel_size=1)
    chat = [{"role": "user", "content": "q"}]
    other = [{"role": "user", "content": "another q"}]
    out = llm.chat([chat, other], [engine.SamplingParams(max_tokens=4)] * 2)
    again = llm.chat(chat, engine.SamplingParams(temperature=0))  # one conversation, one params
    assert [o.outputs[0].text for o in out][0] == again[0].outputs[0].text  # same conversation, same reply
    assert all(o.outputs[0].text for o in out)
    records = engine_calls(tmp_path / "engine.jsonl")
    assert [r["conversations"] for r in records] == [2, 1]
    assert [r["modelled_s"] for r in records] == pytest.approx([0.51, 0.505])
    with pytest.raises(TypeError):
        engine.SamplingParams(max_new_tokens=4)  # not a vLLM field
    with pytest.raises(ValueError):
        llm.chat([chat, other], [engine.SamplingParams()])
    assert llm.get_metrics() == []


# ------------------------------------------------------------------ routing in one process


def chain_doc(i: int) -> dict:
    return {"sample_id": f"s{i}", "rounds": 3}


def chain_messages(doc, round_idx=None, previous_output=None, previous_round_info=None):
    """The multi-round protocol: 3 rounds, each a chat that shows the earlier replies as assistant turns."""

    def chat(replies: list) -> list[dict]:
        turns = []
        for r, reply in enumerate(replies):
            turns += [
                {"role": "user", "content": [{"type": "text", "text": f"{doc['sample_id']} q{r}"}]},
                {"role": "assistant", "content": [{"type": "text", "text": str(reply)}]},
            ]
        return turns + [{"role": "user", "content": [{"type": "text", "text": f"{doc['sample_id']} q{len(replies)}"}]}]

    if round_idx is None:
        return chat([])
    if round_idx >= doc["rounds"]:
        return None, True, previous_output, previous_round_info
    return chat(list(previous_output)), False, previous_output, previous_round_info


def chain_requests(task: str, n: int) -> list[Instance]:
    return [
        Instance(
            request_type="generate_until_multi_round",
            arguments=("ctx", chain_messages, {"max_new_tokens": 8, "temperature": 0, "until": []}, i, task, "test"),
            idx=0,
            metadata={"task": task, "doc_id": i, "repeats": 1},
        )
        for i in range(n)
    ]


def vllm_model(batch_size: int):
    """Build lmms-eval's chat vllm backend as lmms-eval resolves it (through the plugin's hook)."""
    from lmms_eval.models import get_model

    model = get_model("vllm")(model="stand-in", batch_size=batch_size)
    model.task_dict = {
        name: {"test": [chain_doc(i) for i in range(10)]} for name in ("hvcu_bench_context_x", "other_task")
    }
    return model


def test_lmms_eval_resolves_the_routed_backends_to_the_round_driver(monkeypatch) -> None:
    from lmms_eval.models import get_model
    from lmms_eval.models.chat.openai import OpenAICompatible
    from lmms_eval.models.chat.vllm import VLLM
    from lmms_eval.models.simple.vllm import VLLM as SimpleVLLM

    routed = get_model("vllm")
    assert routed is not VLLM and issubclass(routed, VLLM) and routed._hvcu_routed
    assert routed.__name__ == "VLLM" and routed.__module__ == "lmms_eval.models.chat.vllm"  # results name it as before
    assert get_model("vllm") is routed
    assert get_model("openai") is OpenAICompatible  # not routed: it still needs the wrapper
    assert get_model("vllm", force_simple=True) is SimpleVLLM
    monkeypatch.setenv("HVCU_NO_ROUND_ROUTING", "1")
    assert get_model("vllm") is VLLM


def test_the_lmms_eval_internals_routing_relies_on_are_still_there() -> None:
    """Fails loudly when lmms-eval changes what plugin.install_route_hook and models/routing.py rely on."""
    import inspect

    import lmms_eval.evaluator as evaluator
    import lmms_eval.models as models
    from lmms_eval.models.chat.vllm import VLLM
    from lmms_eval.models.registry_v2 import ModelRegistryV2

    assert ModelRegistryV2.get_model_class._hvcu_hook  # installed by the entry point
    assert tuple(inspect.signature(ModelRegistryV2.get_model_class.__wrapped__).parameters) == (
        "self",
        "model_name",
        "force_simple",
    )
    assert "MODEL_REGISTRY_V2.get_model_class(model_name" in inspect.getsource(models.get_model)
    assert "models.get_model(model, force_simple).create_from_arg_string(" in inspect.getsource(
        evaluator.simple_evaluate
    )
    source = inspect.getsource(VLLM.generate_until)
    for needle in ("self.batch_size_per_gpu", "self._run_tp_synced(", "self.make_one_request"):
        assert needle in source, needle
    assert "self.task_dict[task][split][doc_id]" in inspect.getsource(VLLM.make_one_request)
    for model_id in routing.ROUTED_BACKENDS:
        manifest = models.get_model_manifest(model_id)
        assert manifest.chat_class_path.startswith(f"lmms_eval.models.chat.{model_id}."), manifest


def test_round_chunks_are_multiples_of_the_batch_size_holding_at_least_64_documents() -> None:
    assert [routing.round_chunk(b) for b in (1, 4, 48, 64, 100)] == [64, 64, 96, 64, 100]


def test_vllm_gets_each_round_of_hvcu_chains_in_ceil_n_over_batch_calls(engine, tmp_path) -> None:
    model = vllm_model(batch_size=4)
    requests = chain_requests("hvcu_bench_context_x", 10)
    routed = model.generate_until_multi_round(requests)
    calls = engine_calls(tmp_path / "engine.jsonl")
    assert [c["conversations"] for c in calls] == [4, 4, 2] * 3  # ceil(10 / 4) = 3 calls per round, 3 rounds
    assert [c["user_turns"][0] for c in calls] == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    one_at_a_time = type(model).__mro__[1].generate_until_multi_round(model, chain_requests("hvcu_bench_context_x", 10))
    assert routed == one_at_a_time and all(len(r) == 3 for r in routed)


def test_other_tasks_keep_lmms_evals_own_multi_round_loop(engine, tmp_path) -> None:
    model = vllm_model(batch_size=4)
    mixed = (
        chain_requests("other_task", 2)[:1]
        + chain_requests("hvcu_bench_context_x", 2)
        + chain_requests("other_task", 2)[1:]
    )
    replies = model.generate_until_multi_round(mixed)
    calls = [c["conversations"] for c in engine_calls(tmp_path / "engine.jsonl")]
    assert calls == [2, 2, 2] + [1] * 6  # ours: one call of 2 per round; the other task: 2 docs x 3 rounds, alone
    assert replies[1:3] == model.generate_until_multi_round(chain_requests("hvcu_bench_context_x", 2))
    alone = type(model).__mro__[1].generate_until_multi_round(model, [mixed[0], mixed[3]])
    assert [replies[0], replies[3]] == alone


def test_vllm_at_batch_size_1_says_once_how_to_feed_the_engine(engine, monkeypatch, capsys) -> None:
    monkeypatch.setattr(routing, "_hinted", set())
    model = vllm_model(batch_size=1)
    model.generate_until_multi_round(chain_requests("hvcu_bench_context_x", 3))
    model.generate_until_multi_round(chain_requests("hvcu_bench_context_x", 3))
    err = capsys.readouterr().err
    assert err.count(HINT) == 1, err
    assert "--model vllm runs with batch_size 1" in err
    monkeypatch.setattr(routing, "_hinted", set())
    vllm_model(batch_size=8).generate_until_multi_round(chain_requests("hvcu_bench_context_x", 3))
    assert HINT not in capsys.readouterr().err


def hint_lines(err: str) -> list[str]:
    """Return the hint lines of stderr, each as it shows after the last carriage return (a progress bar's redraw)."""
    return [line.rsplit("\r", 1)[-1] for line in err.splitlines() if "hvcu: --model" in line]


def test_the_hint_counts_engine_calls_one_per_conversation_per_round(engine, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(routing, "_hinted", set())
    vllm_model(batch_size=1).generate_until_multi_round(chain_requests("hvcu_bench_context_x", 5))
    assert len(engine_calls(tmp_path / "engine.jsonl")) == 15  # 5 chains x 3 rounds, one conversation each
    assert hint_lines(capsys.readouterr().err) == [
        "hvcu: --model vllm runs with batch_size 1, so each engine call (LLM.chat) gets one conversation "
        "(15 calls for 5 HVCU chains of 3 rounds); pass --batch_size 64 (or more) to hand it whole rounds"
    ]


def test_under_the_wrapper_the_hint_names_the_wrapper_command(engine, tmp_path, monkeypatch, capsys) -> None:
    from lmms_eval.models import get_model

    monkeypatch.setattr(routing, "_hinted", set())
    wrapper = get_model("hvcu_context")(inner="vllm", model="stand-in", batch_size=1, cache="off")
    wrapper.task_dict.update({"hvcu_bench_context_x": {"test": [chain_doc(i) for i in range(10)]}})
    wrapper.generate_until_multi_round(chain_requests("hvcu_bench_context_x", 5))
    wrapper.generate_until_multi_round(chain_requests("hvcu_bench_context_x", 5))
    assert len(engine_calls(tmp_path / "engine.jsonl")) == 30
    assert hint_lines(capsys.readouterr().err) == [
        "hvcu: --model hvcu_context --model_args inner=vllm runs with batch_size 1, so each engine call (LLM.chat) "
        "gets one conversation (15 calls for 5 HVCU chains of 3 rounds); pass --batch_size 64 (or more) to hand it "
        "whole rounds"
    ]


def test_the_hint_starts_on_its_own_line_under_an_open_progress_bar(monkeypatch, capsys) -> None:
    import sys
    from types import SimpleNamespace

    from tqdm import tqdm

    monkeypatch.setattr(routing, "_hinted", set())
    with tqdm(total=3, desc="Model Responding", file=sys.stderr) as bar:
        bar.update(1)
        routing.hint_once(SimpleNamespace(batch_size_per_gpu=1, rank=0), "vllm", chain_requests("hvcu_bench_x", 3))
    (line,) = hint_lines(capsys.readouterr().err)
    assert line.startswith("hvcu: --model vllm runs with batch_size 1"), line


def test_hugging_face_backends_at_batch_size_1_get_the_hint_too_except_llava_hf(monkeypatch, capsys) -> None:
    from types import SimpleNamespace

    monkeypatch.setattr(routing, "_hinted", set())
    one = SimpleNamespace(batch_size_per_gpu=1, rank=0)
    for model_id in ("qwen2_5_vl", "qwen3_vl", "llava_hf"):
        routing.hint_once(one, model_id, chain_requests("hvcu_bench_context_x", 4), 3)
        routing.hint_once(one, model_id, chain_requests("hvcu_bench_x", 4))  # once per process and model
    routing.hint_once(SimpleNamespace(batch_size_per_gpu=8, rank=0), "qwen2_5_vl", chain_requests("hvcu_bench_x", 4))
    assert hint_lines(capsys.readouterr().err) == [
        f"hvcu: --model {model_id} runs with batch_size 1, so each generate call decodes one conversation "
        "(12 calls for 4 HVCU chains of 3 rounds); pass --batch_size 8 (or as many as fit in GPU memory) to decode "
        "them in batches"
        for model_id in ("qwen2_5_vl", "qwen3_vl")
    ]


def kwargs_of(name: str) -> dict:
    """Return a task template's lmms_eval_specific_kwargs, read from the YAML file."""
    import yaml

    text = (plugin.TASKS_DIR / name).read_text()
    return yaml.safe_load(text.replace("!function", ""))["lmms_eval_specific_kwargs"]


OWN = "_context_template_yaml"
GOLD = "_context_gold_template_yaml"


def test_the_context_tasks_mark_each_backend_by_its_model_id() -> None:
    own, gold = kwargs_of(OWN), kwargs_of(GOLD)
    assert own["default"] == gold["default"] == {"multi_round": "unsupported"}
    for backend in ("vllm", "hvcu_context"):
        assert own[backend] == gold[backend] == {"multi_round": "native", "backend": backend}
    for backend in ("qwen2_5_vl", "qwen3_vl", "llava_hf"):
        assert own[backend] == {"multi_round": "routed", "backend": backend}
        assert gold[backend] == {"multi_round": "native", "backend": backend}  # single-round multi-turn chats


def test_qwen3_vl_and_llava_hf_resolve_to_routed_chat_classes_and_their_marks_pass() -> None:
    from lmms_eval.models import get_model
    from lmms_eval.models.chat.llava_hf import LlavaHf
    from lmms_eval.models.chat.qwen3_vl import Qwen3_VL

    for model_id, own_class in (("qwen3_vl", Qwen3_VL), ("llava_hf", LlavaHf)):
        cls = get_model(model_id)
        assert cls is not own_class and issubclass(cls, own_class) and cls._hvcu_routed, model_id
        assert cls.__name__ == own_class.__name__ and cls.__module__ == own_class.__module__
        assert cls.generate_until_multi_round is not own_class.generate_until_multi_round
        context.require_native(kwargs_of(OWN)[model_id])
        context.require_native(kwargs_of(GOLD)[model_id])
        assert getattr(get_model(model_id, force_simple=True), "_hvcu_routed", False) is False
        get_model(model_id)  # leave the chat class as the latest resolution


@pytest.mark.parametrize("template", [OWN, GOLD])
@pytest.mark.parametrize("model_id", ["vllm", "qwen2_5_vl"])
def test_force_simple_is_refused_for_the_context_settings(template: str, model_id: str) -> None:
    from lmms_eval.models import get_model

    get_model(model_id, force_simple=True)
    try:
        with pytest.raises(context.UnsupportedBackend) as caught:
            context.require_native(kwargs_of(template)[model_id])
    finally:
        get_model(model_id)
    message = str(caught.value)
    assert "--force_simple" in message and f"--model hvcu_context --model_args inner={model_id}," in message
    context.require_native(kwargs_of(template)[model_id])  # the chat class again


@pytest.mark.usefixtures("lmms_eval_tasks_indexed_once")
def test_force_simple_gold_context_stops_the_run_before_any_engine_call(engine, tmp_path) -> None:
    from lmms_eval.evaluator import simple_evaluate
    from lmms_eval.models import get_model
    from lmms_eval.tasks import TaskManager

    try:
        with pytest.raises(context.UnsupportedBackend, match="--force_simple"):
            simple_evaluate(
                model="vllm",
                model_args="model=stand-in",
                tasks=["hvcu_bench_context_gold_sample_aesth"],
                force_simple=True,
                task_manager=TaskManager(model_name="vllm"),
            )
    finally:
        get_model("vllm")
    assert engine_calls(tmp_path / "engine.jsonl") == []


def test_routed_marks_fail_clearly_when_the_hook_is_not_installed(monkeypatch) -> None:
    from lmms_eval.models.registry_v2 import ModelRegistryV2

    monkeypatch.setattr(ModelRegistryV2, "get_model_class", ModelRegistryV2.get_model_class.__wrapped__)
    with pytest.raises(context.UnsupportedBackend) as caught:
        context.require_native(kwargs_of(OWN)["qwen2_5_vl"])
    message = str(caught.value)
    assert "registry is not hooked" in message and "hvcu-toolkit is not installed" in message
    assert "--model hvcu_context --model_args inner=qwen2_5_vl," in message
    context.require_native(kwargs_of(OWN)["vllm"])  # lmms-eval's own vllm loop runs the rounds
    context.require_native(kwargs_of(GOLD)["qwen2_5_vl"])  # single-round chats: lmms-eval's own chat class


def test_routed_marks_fail_clearly_when_routing_is_opted_out(monkeypatch) -> None:
    from lmms_eval.models import get_model

    monkeypatch.setenv("HVCU_NO_ROUND_ROUTING", "1")
    try:
        get_model("qwen2_5_vl")
        with pytest.raises(context.UnsupportedBackend, match="HVCU_NO_ROUND_ROUTING=1 turns routing off") as caught:
            context.require_native(kwargs_of(OWN)["qwen2_5_vl"])
        assert "--model hvcu_context --model_args inner=qwen2_5_vl," in str(caught.value)
        context.require_native(kwargs_of(OWN)["vllm"])
    finally:
        monkeypatch.delenv("HVCU_NO_ROUND_ROUTING")
        get_model("qwen2_5_vl")
    context.require_native(kwargs_of(OWN)["qwen2_5_vl"])


def test_routed_marks_fail_clearly_when_a_plugin_replaced_the_class(monkeypatch) -> None:
    import lmms_eval.models.chat.llava_hf as chat_llava
    from lmms_eval.models import get_model

    class LlavaHf(chat_llava.LlavaHf):
        """Someone else's llava_hf chat class."""

    monkeypatch.setattr(chat_llava, "LlavaHf", LlavaHf)
    try:
        assert get_model("llava_hf") is LlavaHf
        with pytest.raises(context.UnsupportedBackend, match="another plugin replaced it") as caught:
            context.require_native(kwargs_of(OWN)["llava_hf"])
        assert "--model hvcu_context --model_args inner=llava_hf," in str(caught.value)
    finally:
        monkeypatch.undo()
        get_model("llava_hf")


def test_routed_marks_fail_clearly_for_a_model_not_built_through_the_registry(monkeypatch) -> None:
    monkeypatch.delitem(plugin.RESOLVED, "qwen3_vl", raising=False)
    with pytest.raises(context.UnsupportedBackend, match="not built through lmms-eval's model registry"):
        context.require_native(kwargs_of(OWN)["qwen3_vl"])


# ------------------------------------------------------------------ through the real CLI (slow)


def cli_run(tmp_path: Path, name: str, args: list[str], env: dict | None = None) -> tuple[dict, list[dict], Path]:
    """Run `lmms-eval --model vllm` on the stand-in engine; return the results, the engine calls and the run folder."""
    out = tmp_path / name
    out.mkdir()
    log = out / "engine.jsonl"
    run_env = {"PYTHONPATH": str(STANDINS), "HVCU_VLLM_STANDIN_LOG": str(log), **(env or {})}
    results = run_lmms_eval(
        ["--model", "vllm", "--model_args", "model=stand-in", *args, "--log_samples"], out / "out", env=run_env
    )
    return results, engine_calls(log), out / "out"


def samples_by_task(out: Path) -> dict[str, list[dict]]:
    """Return every task's logged samples (sorted by doc_id)."""
    found = {}
    for path in glob.glob(str(out / "**" / "*_samples_*.jsonl"), recursive=True):
        task = Path(path).name.split("_samples_", 1)[1].removesuffix(".jsonl")
        found[task] = sorted(
            (json.loads(line) for line in Path(path).read_text().splitlines()), key=lambda s: s["doc_id"]
        )
    return found


def refused_cli_run(tmp_path: Path, args: list[str], env: dict[str, str]) -> tuple[int, list[str]]:
    """Run the real `lmms-eval` CLI as a user would (default verbosity, stdout and stderr in one pipe)."""
    proc = subprocess.run(
        [str(BIN / "lmms-eval"), *args, "--tasks", "hvcu_bench_context_sample", "--output_path", str(tmp_path / "out")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **env},
        timeout=600,
        cwd=tmp_path,
    )
    return proc.returncode, [line for line in proc.stdout.splitlines() if line.strip()]


@pytest.mark.slow
def test_force_simple_on_the_context_setting_exits_1_with_the_fix_as_the_last_line(tmp_path: Path) -> None:
    log = tmp_path / "engine.jsonl"
    env = {"PYTHONPATH": str(STANDINS), "HVCU_VLLM_STANDIN_LOG": str(log)}
    args = ["--model", "vllm", "--model_args", "model=stand-in", "--force_simple"]
    code, lines = refused_cli_run(tmp_path, args, env)
    assert code == 1, "\n".join(lines[-30:])  # a CI job must not read the refusal as success
    assert lines[-1].startswith("error: the HVCU-Bench context settings send multi-turn chats")
    assert lines[-1].endswith("--model hvcu_context --model_args inner=vllm,<that model's args>")
    assert not any("Traceback" in line for line in lines)
    assert engine_calls(log) == [] and not glob.glob(str(tmp_path / "out" / "**" / "*_results.json"), recursive=True)


@pytest.mark.slow
def test_openai_on_the_context_setting_exits_1_with_the_wrapper_as_the_last_line(tmp_path: Path) -> None:
    with FakeOpenAI(lambda body: "A") as server:
        args = ["--model", "openai", "--model_args", f"model_version=fake-vlm,base_url={server.base_url}"]
        code, lines = refused_cli_run(tmp_path, args, {"OPENAI_API_KEY": "x"})
    assert code == 1, "\n".join(lines[-30:])
    assert lines[-1].startswith("error: the HVCU-Bench context setting needs a model that holds multi-turn chats")
    assert "Wrap it: --model hvcu_context --model_args inner=<model>,<that model's args>" in lines[-1]
    assert not any("Traceback" in line for line in lines)
    assert server.requests == [] and not glob.glob(str(tmp_path / "out" / "**" / "*_results.json"), recursive=True)


EVERY_SETTING = "hvcu_bench_sample,hvcu_bench_context_sample,hvcu_analysis_sample"
SINGLE_ROUND = 45 + 45 + 180 + 45  # base, blind, circular, gold context: one generate_until batch


@pytest.mark.slow
def test_vllm_batch_64_gets_whole_rounds_with_the_one_at_a_time_paths_results(tmp_path: Path) -> None:
    args = ["--batch_size", "64", "--tasks", EVERY_SETTING]
    routed, calls, out = cli_run(tmp_path, "routed", args)
    before, before_calls, before_out = cli_run(tmp_path, "one_at_a_time", args, {"HVCU_NO_ROUND_ROUTING": "1"})

    rounds = [c for c in calls if c["conversations"] == 15]
    single = [c for c in calls if c not in rounds]
    assert sorted(c["conversations"] for c in single) == [59, 64, 64, 64, 64]  # ceil(315 / 64) = 5 calls
    assert sum(c["conversations"] for c in single) == SINGLE_ROUND
    assert [sorted(set(c["user_turns"])) for c in rounds] == [[1], [2], [3]]  # context: 3 rounds, one call each
    assert len(calls) == 8
    # the one-at-a-time path (lmms-eval's own loop): the same single-round calls, every context round alone
    assert sorted(c["conversations"] for c in before_calls) == [1] * 45 + [59, 64, 64, 64, 64]

    assert routed["results"] == before["results"] and routed["groups"] == before["groups"]
    got, want = samples_by_task(out), samples_by_task(before_out)
    assert set(got) == set(want) and len(got) == 3 + 3 + 3 + 3 + 3  # every family of every setting
    assert got == want
    replies = [s["filtered_resps"] for s in got["hvcu_bench_context_sample_impl"]]
    assert all(len(r) == 3 for r in replies) and len(replies) == 5


@pytest.mark.slow
def test_vllm_without_batch_size_says_once_how_to_feed_the_engine(tmp_path: Path) -> None:
    out = tmp_path / "plain"
    out.mkdir()
    log = out / "engine.jsonl"
    env = {"PYTHONPATH": str(STANDINS), "HVCU_VLLM_STANDIN_LOG": str(log)}
    args = ["--model", "vllm", "--model_args", "model=stand-in"]
    run = run_lmms_eval(
        [*args, "--tasks", "hvcu_bench_sample_aesth,hvcu_bench_context_sample_aesth"], out / "out", env, False
    )
    assert run["results"], run["output"][-3000:]
    assert run["output"].count(HINT) == 1, run["output"][-3000:]
    assert [c["conversations"] for c in engine_calls(log)] == [1] * (12 + 4 * 3)  # batch size 1: as asked


def replies_by_task(results: dict) -> dict[str, list]:
    """Return every task's logged replies in doc_id order (simple_evaluate(log_samples=True))."""
    return {
        task: [s["filtered_resps"] for s in sorted(samples, key=lambda s: s["doc_id"])]
        for task, samples in results["samples"].items()
    }


@pytest.mark.slow
@pytest.mark.usefixtures("lmms_eval_tasks_indexed_once")
def test_qwen2_5_vl_runs_the_context_setting_with_batched_rounds(tiny_qwen: Path, monkeypatch) -> None:
    from lmms_eval.evaluator import simple_evaluate
    from lmms_eval.models.chat.qwen2_5_vl import Qwen2_5_VL
    from lmms_eval.tasks import TaskManager

    sizes: list[int] = []
    own = Qwen2_5_VL.generate_until

    def counted(self, requests):
        sizes.append(len(requests))
        return own(self, requests)

    monkeypatch.setattr(Qwen2_5_VL, "generate_until", counted)
    args = f"pretrained={tiny_qwen},device=cpu,device_map=cpu"
    results = simple_evaluate(
        model="qwen2_5_vl",
        model_args=args,
        tasks=["hvcu_bench_context_sample"],
        batch_size=4,
        log_samples=True,
        task_manager=TaskManager(model_name="qwen2_5_vl"),
    )
    assert sizes == [15, 15, 15]  # one call per round over all 15 chains (the model splits it 4 at a time)
    chains = {t: results["results"][t]["n_chains,none"] for t in results["results"] if t.endswith(("_impl", "_aesth"))}
    assert chains == {"hvcu_bench_context_sample_impl": 5, "hvcu_bench_context_sample_aesth": 4}
    assert math.isfinite(results["results"]["hvcu_bench_context_sample"]["acc_full,none"])

    sizes.clear()
    wrapped = simple_evaluate(
        model="hvcu_context",
        model_args=f"inner=qwen2_5_vl,{args},cache=off",
        tasks=["hvcu_bench_context_sample"],
        batch_size=4,
        log_samples=True,
        task_manager=TaskManager(model_name="hvcu_context"),
    )
    assert sizes == [15, 15, 15]  # the wrapper's chunk (64 documents) holds the same 15 chains
    got, want = replies_by_task(results), replies_by_task(wrapped)
    assert len(got) == 3 and all(len(r[0]) == 3 for replies in got.values() for r in replies)  # [[L1, L2, L3]]
    assert got == want  # the routed backend and the wrapper give the same replies, byte for byte
    assert results["results"] == wrapped["results"]


@pytest.mark.slow
@pytest.mark.usefixtures("lmms_eval_tasks_indexed_once")
def test_qwen2_5_vl_runs_the_gold_context_with_the_gold_turns_and_refuses_force_simple(tiny_qwen, monkeypatch) -> None:
    from lmms_eval.evaluator import simple_evaluate
    from lmms_eval.models import get_model
    from lmms_eval.models.chat.qwen2_5_vl import Qwen2_5_VL
    from lmms_eval.tasks import TaskManager

    shown: list[tuple[list[str], list[str]]] = []  # (assistant turns sent, gold letters of the earlier levels)
    own = Qwen2_5_VL.generate_until

    def seen(self, requests):
        for request in requests:
            _ctx, doc_to_messages, _gen, doc_id, task, split = request.args
            doc = self.task_dict[task][split][doc_id]
            turns = [m for m in doc_to_messages(doc) if m["role"] == "assistant"]
            sent = [part["text"] for m in turns for part in m["content"] if part["type"] == "text"]
            shown.append((sent, list(doc["answers"][: list(doc["levels"]).index(doc["level"])])))
        return own(self, requests)

    monkeypatch.setattr(Qwen2_5_VL, "generate_until", seen)
    args = f"pretrained={tiny_qwen},device=cpu,device_map=cpu"
    task = "hvcu_bench_context_gold_sample_aesth"
    manager = TaskManager(model_name="qwen2_5_vl")
    results = simple_evaluate(model="qwen2_5_vl", model_args=args, tasks=[task], batch_size=4, task_manager=manager)
    assert len(shown) == 12  # 4 samples x 3 levels, one single-round request each
    assert sorted(len(sent) for sent, _gold in shown) == [0] * 4 + [1] * 4 + [2] * 4
    assert all(sent == gold for sent, gold in shown)  # the earlier turns are the gold letters
    assert results["results"][task]["n_chains,none"] == 4

    shown.clear()
    try:
        with pytest.raises(context.UnsupportedBackend, match="--force_simple"):
            simple_evaluate(
                model="qwen2_5_vl",
                model_args=args,
                tasks=[task],
                force_simple=True,
                task_manager=TaskManager(model_name="qwen2_5_vl"),
            )
    finally:
        get_model("qwen2_5_vl")
    assert shown == []


@pytest.mark.slow
@pytest.mark.usefixtures("lmms_eval_tasks_indexed_once")
def test_openai_still_needs_the_wrapper_for_the_context_setting(monkeypatch) -> None:
    from lmms_eval.evaluator import simple_evaluate
    from lmms_eval.tasks import TaskManager

    monkeypatch.setenv("OPENAI_API_KEY", "x")
    with pytest.raises(context.UnsupportedBackend, match="--model hvcu_context --model_args inner="):
        simple_evaluate(
            model="openai",
            model_args="model_version=x,base_url=http://127.0.0.1:9/v1",
            tasks=["hvcu_bench_context_sample_impl"],
            task_manager=TaskManager(model_name="openai"),
        )


def test_a_routed_mark_without_its_model_id_is_refused() -> None:
    with pytest.raises(context.UnsupportedBackend, match="must name its model id under 'backend'"):
        context.require_native({"multi_round": "routed"})

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
from pathlib import Path

import pytest
from conftest import REPO, run_lmms_eval
from lmms_eval.api.instance import Instance

from hvcu_tasks import context, plugin
from hvcu_tasks.models import routing

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


def test_the_context_tasks_mark_the_routed_backends_and_the_opt_out_says_so(monkeypatch) -> None:
    import yaml

    def kwargs_of(name: str) -> dict:
        text = (plugin.TASKS_DIR / name).read_text()
        return yaml.safe_load(text.replace("!function", ""))["lmms_eval_specific_kwargs"]

    own = kwargs_of("_context_template_yaml")
    assert own["default"] == {"multi_round": "unsupported"} and own["vllm"] == {"multi_round": "native"}
    gold = kwargs_of("_context_gold_template_yaml")
    for backend in ("qwen2_5_vl", "qwen3_vl", "llava_hf"):
        assert own[backend] == {"multi_round": "routed"}, backend
        assert gold[backend] == {"multi_round": "native"}, backend  # single-round requests with multi-turn chats
    context.require_native({"multi_round": "routed"})
    monkeypatch.setenv("HVCU_NO_ROUND_ROUTING", "1")
    with pytest.raises(context.UnsupportedBackend, match="HVCU_NO_ROUND_ROUTING") as caught:
        context.require_native({"multi_round": "routed"})
    assert "--model hvcu_context --model_args inner=" in str(caught.value)
    context.require_native({"multi_round": "native"})


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


@pytest.mark.slow
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
    results = simple_evaluate(
        model="qwen2_5_vl",
        model_args=f"pretrained={tiny_qwen},device=cpu,device_map=cpu",
        tasks=["hvcu_bench_context_sample"],
        batch_size=4,
        task_manager=TaskManager(model_name="qwen2_5_vl"),
    )
    assert sizes == [15, 15, 15]  # one call per round over all 15 chains (the model splits it 4 at a time)
    chains = {t: results["results"][t]["n_chains,none"] for t in results["results"] if t.endswith(("_impl", "_aesth"))}
    assert chains == {"hvcu_bench_context_sample_impl": 5, "hvcu_bench_context_sample_aesth": 4}
    assert math.isfinite(results["results"]["hvcu_bench_context_sample"]["acc_full,none"])


@pytest.mark.slow
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

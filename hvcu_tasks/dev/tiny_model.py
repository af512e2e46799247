"""Build tiny random VLMs (Qwen2.5-VL, Qwen3-VL, LLaVA, LLaVA-NeXT) on disk, offline: their answers are noise.

They prove that a path works (loading, chat template, images, generation), never a score; built in seconds on a CPU.
"""

from __future__ import annotations

from pathlib import Path

SPECIAL_TOKENS = (
    "<|endoftext|> <|im_start|> <|im_end|> <|vision_start|> <|vision_end|> <|image_pad|> <|video_pad|>".split()
)

TEMPLATES = Path(__file__).resolve().parent
"""Where the chat templates lie: qwen_chat_template.jinja and llava_chat_template.jinja."""

_TRAINING_TEXT = [
    "The answer is A. The answer is B. The answer is C. The answer is D.",
    "What does the image show? Options: A. B. C. D.",
    "You are a helpful assistant that answers multiple-choice questions based on images.",
]


def _byte_level_bpe(special_tokens: list[str], unk: str | None = None):  # -> tokenizers.Tokenizer
    """Train a small byte-level BPE over a few prompt-like strings, with the full byte alphabet."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=unk))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=special_tokens,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_TRAINING_TEXT, trainer=trainer)
    return tok


def chat_template(name: str) -> str:
    """Return the text of a chat template beside this module ("qwen" or "llava")."""
    return (TEMPLATES / f"{name}_chat_template.jinja").read_text(encoding="utf-8")


def build_tokenizer():  # -> transformers.PreTrainedTokenizerFast
    """Train a byte-level BPE with Qwen's special tokens and wrap it as a Qwen2 tokenizer."""
    from transformers import Qwen2TokenizerFast

    tok = _byte_level_bpe(SPECIAL_TOKENS)
    fast = Qwen2TokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        bos_token=None,
    )
    fast.chat_template = chat_template("qwen")
    return fast


LM_SIZES = dict(
    hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2
)
"""The tiny language model of every builder (Qwen's text model, LLaVA's Llama)."""
QWEN_VISION = {"hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "out_hidden_size": 64}
"""The tiny vision tower both Qwen-VL builders share (each adds its depth and own fields)."""


def _qwen_config(config_class: type, tokenizer, vision: dict, **text: object):  # -> transformers.PretrainedConfig
    """Return a tiny Qwen-VL config: Qwen's text model (plus `text`), QWEN_VISION plus `vision`, the token ids."""
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}
    return config_class(
        text_config={
            "vocab_size": len(tokenizer),
            **LM_SIZES,
            "max_position_embeddings": 4096,
            "rope_parameters": rope,
            "pad_token_id": ids["<|endoftext|>"],
            **text,
        },
        vision_config={**QWEN_VISION, **vision},
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )


def _build(out: Path, seed: int, make_tokenizer, make_model, make_processor) -> Path:
    """Seed, build tokenizer, model (make_model(tokenizer)) and processor, and save them to `out`."""
    import torch

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    tokenizer = make_tokenizer()
    model = make_model(tokenizer)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    make_processor(tokenizer).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def build_qwen2_5_vl(out: Path, seed: int = 0) -> Path:
    """Write a tiny Qwen2.5-VL model, tokenizer and processor to `out` and return it."""
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    def model(tokenizer):
        vision = {"depth": 1, "fullatt_block_indexes": [0], "window_size": 56}
        ids = {"bos_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id}
        return Qwen2_5_VLForConditionalGeneration(_qwen_config(Qwen2_5_VLConfig, tokenizer, vision, **ids))

    def processor(tokenizer):
        return Qwen2_5_VLProcessor(
            image_processor=Qwen2VLImageProcessor(min_pixels=56 * 56, max_pixels=112 * 112),
            tokenizer=tokenizer,
            video_processor=Qwen2VLVideoProcessor(min_pixels=56 * 56, max_pixels=112 * 112),
            chat_template=tokenizer.chat_template,
        )

    return _build(out, seed, build_tokenizer, model, processor)


def build_qwen3_vl(out: Path, seed: int = 0) -> Path:
    """Write a tiny Qwen3-VL model, tokenizer and processor to `out` and return it."""
    from transformers import (
        Qwen2VLImageProcessor,
        Qwen3VLConfig,
        Qwen3VLForConditionalGeneration,
        Qwen3VLProcessor,
        Qwen3VLVideoProcessor,
    )

    def model(tokenizer):
        vision = {"depth": 2, "num_position_embeddings": 64, "deepstack_visual_indexes": [1]}
        return Qwen3VLForConditionalGeneration(_qwen_config(Qwen3VLConfig, tokenizer, vision, head_dim=16))

    def processor(tokenizer):
        pixels = {"shortest_edge": 64 * 64, "longest_edge": 128 * 128}
        return Qwen3VLProcessor(
            image_processor=Qwen2VLImageProcessor(size=pixels, patch_size=16),
            tokenizer=tokenizer,
            video_processor=Qwen3VLVideoProcessor(size=pixels, patch_size=16),
            chat_template=tokenizer.chat_template,
        )

    return _build(out, seed, build_tokenizer, model, processor)


def _llava_tokenizer():  # -> transformers.PreTrainedTokenizerFast
    """Return a byte-level BPE with the LLaVA special tokens (`<image>` included) and the USER:/ASSISTANT: template."""
    from transformers import PreTrainedTokenizerFast

    specials = ["<unk>", "<s>", "</s>", "<pad>", "<image>"]
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=_byte_level_bpe(specials, unk="<unk>"),
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        extra_special_tokens={"image_token": "<image>"},
    )
    tokenizer.chat_template = chat_template("llava")
    return tokenizer


def _build_llava(out: Path, seed: int, classes: tuple, image_processor, **config: object) -> Path:
    """Write a tiny LLaVA-family model of `classes` (config, model, processor): CLIP vision tower, Llama LM."""
    from transformers import CLIPVisionConfig, LlamaConfig

    config_class, model_class, processor_class = classes

    def model(tokenizer):
        text = LlamaConfig(
            vocab_size=len(tokenizer),
            **LM_SIZES,
            max_position_embeddings=2048,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
        vision = CLIPVisionConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            image_size=28,
            patch_size=14,
        )
        return model_class(
            config_class(
                vision_config=vision,
                text_config=text,
                image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
                vision_feature_select_strategy="default",
                vision_feature_layer=-1,
                **config,
            )
        )

    def processor(tokenizer):
        return processor_class(
            image_processor=image_processor,
            tokenizer=tokenizer,
            patch_size=14,
            vision_feature_select_strategy="default",
            num_additional_image_tokens=1,
            chat_template=tokenizer.chat_template,
        )

    return _build(out, seed, _llava_tokenizer, model, processor)


def build_llava(out: Path, seed: int = 0) -> Path:
    """Write a tiny LLaVA (CLIP vision tower + Llama LM) with tokenizer and processor to `out`."""
    from transformers import CLIPImageProcessor, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor

    image_processor = CLIPImageProcessor(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28})
    classes = (LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor)
    return _build_llava(out, seed, classes, image_processor)


# Any-resolution grid of the tiny LLaVA-NeXT: tiles of the 28-pixel CLIP input, at most 2 x 2.
LLAVA_NEXT_PINPOINTS = [[28, 28], [28, 56], [56, 28], [56, 56]]


def build_llava_next(out: Path, seed: int = 0) -> Path:
    """Write a tiny LLaVA-NeXT (anyres CLIP tower + Llama LM) with tokenizer and processor to `out`."""
    from transformers import (
        LlavaNextConfig,
        LlavaNextForConditionalGeneration,
        LlavaNextImageProcessor,
        LlavaNextProcessor,
    )

    image_processor = LlavaNextImageProcessor(
        size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28}, image_grid_pinpoints=LLAVA_NEXT_PINPOINTS
    )
    classes = (LlavaNextConfig, LlavaNextForConditionalGeneration, LlavaNextProcessor)
    return _build_llava(
        out, seed, classes, image_processor, image_grid_pinpoints=LLAVA_NEXT_PINPOINTS, image_seq_length=4
    )

"""The ``transformers`` backend: a local checkpoint, batched greedy generation on one device."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from analysis.llm.backends.base import (
    BatchContext,
    Completion,
    GenerationSettings,
    Request,
    item_seed,
)

log = logging.getLogger(__name__)

BATCHING = ("auto", "static", "continuous")


class TransformersBackend:
    """Generate with ``AutoModelForCausalLM``: continuous batching or length-sorted batches.

    Parameters
    ----------
    model : str
        A local checkpoint directory (or a hub ID already in the local cache: nothing is downloaded
        when ``HF_HUB_OFFLINE=1``).
    settings : GenerationSettings
        Decoding settings; ``settings.batch_size`` prompts go through one ``generate()`` call.
    device : str
        ``"auto"`` (CUDA when available, else CPU), ``"cpu"``, ``"cuda"``, ``"cuda:1"`` …
    dtype : str
        ``"auto"`` (bfloat16 on CUDA, float32 on CPU), ``"bfloat16"``, ``"float16"``, ``"float32"``.
    attn_implementation : str
        ``"sdpa"`` by default; mitigation methods that read attention weights need ``"eager"``.
    revision, gguf_file : str, optional
        Passed to ``from_pretrained`` (``gguf_file`` loads a GGUF checkpoint; needs ``gguf``).
    generate_kwargs : dict, optional
        Extra keyword arguments for every ``model.generate`` call (e.g. ``num_beams``).
    static_cache : bool
        Pre-allocate the key/value cache (``cache_implementation="static"``). On CUDA,
        ``transformers`` then compiles the decode step with ``torch.compile`` and replays it as
        a CUDA graph: the first batch pays the compilation, a batch of a second size one more
        (47 s and 79 s for an 8B model on an H100; a third took none), and every later step
        saves the per-kernel launch overhead that dominates small batches (docs/benchmarks.md).
        It changes float rounding only, like the batch size, so it is recorded in the manifest
        and left out of the resume key.
    batching : str
        ``"auto"`` (default): continuous batching on CUDA wherever it decodes exactly as a
        static batch would (greedy, no logits processors, no extra ``generate`` arguments, no
        static cache, no subclass generating its own batches), static batches otherwise.
        ``"static"``: always length-sorted, left-padded ``generate()`` batches of
        ``settings.batch_size``. ``"continuous"``: always ``transformers``' continuous batching
        (paged attention; a request joins as soon as another finishes, so no step is spent on
        padding or on finished rows); refused with the reason where it cannot apply. On a
        1,000-review mix with outputs of up to 500 tokens (median 90) it was 1.4× the static
        batches of 64 on an H100 (docs/benchmarks.md). Like the batch size it changes float
        rounding only: recorded in the manifest, left out of the resume key.

    Notes
    -----
    Extension points for mitigation methods: ``settings.logits_processors`` (factories called
    once per batch with a :class:`BatchContext`), ``generate_kwargs``, and
    :meth:`generate_batch`, which a subclass may override (e.g. to generate several candidates
    with attention outputs and re-rank them). ``self.model`` and ``self.tokenizer`` are public.
    """

    name = "transformers"

    def __init__(
        self,
        model: str,
        settings: GenerationSettings | None = None,
        *,
        device: str = "auto",
        dtype: str = "auto",
        attn_implementation: str = "sdpa",
        revision: str | None = None,
        gguf_file: str | None = None,
        generate_kwargs: dict[str, Any] | None = None,
        static_cache: bool = False,
        batching: str = "auto",
    ) -> None:
        if batching not in BATCHING:
            raise ValueError(f"batching must be one of {', '.join(BATCHING)}; got {batching!r}")
        self.model_id = model
        self.settings = settings or GenerationSettings()
        self.device_spec = device
        self.dtype_spec = dtype
        self.attn_implementation = attn_implementation
        self.revision = revision
        self.gguf_file = gguf_file
        self.generate_kwargs = dict(generate_kwargs or {})
        self.static_cache = static_cache
        self.batching = batching
        self._model: Any = None
        self._tokenizer: Any = None
        self._device: str | None = None
        self._fits = 1  # the largest batch known to fit (lowered after CUDA OOM)

    @classmethod
    def from_loaded(
        cls, model: Any, tokenizer: Any, settings: GenerationSettings | None = None, **kwargs: Any
    ) -> TransformersBackend:
        """Wrap an already loaded model and tokenizer (benchmarks, random-weight models)."""
        backend = cls(getattr(model, "name_or_path", "") or "in-memory", settings, **kwargs)
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        backend._model, backend._tokenizer = model, tokenizer
        backend._device = str(next(model.parameters()).device)
        backend._dtype_name = str(next(model.parameters()).dtype).removeprefix("torch.")
        return backend

    @property
    def model(self) -> Any:
        """The loaded ``PreTrainedModel`` (loaded on first use)."""
        self.load()
        return self._model

    @property
    def tokenizer(self) -> Any:
        """The loaded tokenizer, left-padding, with a pad token."""
        self.load()
        return self._tokenizer

    def _resolved(self) -> tuple[str, str]:
        """The device and dtype name that ``"auto"`` stands for on this machine."""
        if self._model is not None and self._device is not None:
            return self._device, self._dtype_name
        import torch

        device = self.device_spec
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype_name = self.dtype_spec
        if dtype_name == "auto":
            dtype_name = "bfloat16" if device.startswith("cuda") else "float32"
        return device, dtype_name

    def output_settings(self) -> dict[str, Any]:
        """The loading choices that change outputs: part of the resume key and the manifest.

        The checkpoint's revision, the GGUF file (another quantization is another model), the
        resolved dtype, the attention implementation and extra ``generate`` arguments (e.g.
        ``num_beams``). The device and batch size are left out on purpose (a resumed run may
        continue on another machine; they change only float rounding); the manifest records
        them.
        """
        return {
            "revision": self.revision,
            "gguf_file": self.gguf_file,
            "dtype": self._resolved()[1],
            "attn_implementation": self.attn_implementation,
            "generate_kwargs": dict(sorted(self.generate_kwargs.items())),
        }

    def load(self) -> None:
        """Load tokenizer and model now (otherwise on first use)."""
        if self._model is not None:
            return
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device, dtype_name = self._resolved()
        dtype = getattr(torch, dtype_name)
        kwargs: dict[str, Any] = {"revision": self.revision}
        if self.gguf_file:
            kwargs["gguf_file"] = self.gguf_file
        tokenizer = AutoTokenizer.from_pretrained(self.model_id, **kwargs)
        # Decoder-only models must be left-padded in a batch, or new tokens follow pad tokens.
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        model = AutoModelForCausalLM.from_pretrained(
            self.model_id, dtype=dtype, attn_implementation=self.attn_implementation, **kwargs
        )
        model.to(device)
        model.eval()
        self._model, self._tokenizer, self._device = model, tokenizer, device
        self._dtype_name = dtype_name

    def format_prompt(self, messages: Sequence[dict[str, str]]) -> str:
        """Render chat messages with the model's chat template (or a plain layout without one).

        Prompts are tokenized without special tokens (a chat template writes its own BOS), so
        the plain layout of a checkpoint without a template starts with the tokenizer's BOS
        token itself: base models are trained on sequences that begin with it.
        """
        return format_messages(self.tokenizer, messages)

    def _generation_config(self) -> Any:
        from transformers import GenerationConfig

        s = self.settings
        base = self.model.generation_config
        eos = base.eos_token_id if base.eos_token_id is not None else self.tokenizer.eos_token_id
        # A fresh config rather than the checkpoint's: instruct checkpoints ship sampling defaults
        # (temperature 0.6, top_p 0.9) that would silently override greedy decoding.
        # Sampling is done by :class:`_RowSampler` (one generator per item), so the config itself
        # is greedy: argmax then picks the one token the sampler left.
        return GenerationConfig(
            max_new_tokens=s.max_new_tokens,
            min_new_tokens=s.min_new_tokens,
            do_sample=False,
            temperature=None,
            top_p=None,
            top_k=None,
            eos_token_id=eos,
            pad_token_id=self.tokenizer.pad_token_id,
            bos_token_id=base.bos_token_id,
            cache_implementation="static" if self.static_cache else None,
        )

    def continuous_refusals(self) -> list[str]:
        """Why continuous batching would not decode as the static path does (empty: it would).

        ``transformers``' continuous batching runs its own decoding loop: it drops logits
        processors it does not know, samples from one generator rather than one per item, and
        takes no ``generate`` arguments, so every setting that relies on those keeps the
        static path.
        """
        s = self.settings
        reasons = []
        if s.logits_processors:
            reasons.append("logits processors steer decoding (a decoding-time mitigation)")
        if s.do_sample:
            reasons.append("sampling draws from one generator per item")
        if s.min_new_tokens:
            reasons.append("min_new_tokens is set")
        if self.generate_kwargs:
            reasons.append(f"extra generate arguments ({', '.join(sorted(self.generate_kwargs))})")
        if self.static_cache:
            reasons.append("the static cache belongs to the static path")
        attn = self.attn_implementation
        if attn not in ("sdpa", "eager") and not attn.startswith("flash"):
            reasons.append(f"attention implementation {attn!r} has no paged variant")
        if type(self).generate_batch is not TransformersBackend.generate_batch:
            reasons.append(f"{type(self).__name__} generates its own batches")
        return reasons

    def batching_mode(self) -> str:
        """``"continuous"`` or ``"static"``: what ``generate`` will do with these settings."""
        reasons = self.continuous_refusals()
        if self.batching == "continuous":
            if reasons:
                raise ValueError("continuous batching cannot be used here: " + "; ".join(reasons))
            return "continuous"
        if self.batching == "static" or reasons:
            return "static"
        return "continuous" if self._resolved()[0].startswith("cuda") else "static"

    def generate(self, requests: Iterable[Request]) -> Iterator[tuple[Request, Completion]]:
        """Yield completions as they finish: continuous batching, or static batches.

        Static batches go longest prompts first: sorting by length keeps padding (wasted
        compute) small, and putting the longest batch first makes an out-of-memory error happen
        at once. On CUDA OOM the batch is split in two, and later batches are no larger than the
        largest that fitted. Continuous batching sizes its paged cache to the free memory.
        """
        from transformers import set_seed

        reqs = list(requests)
        if not reqs:
            return
        tok = self.tokenizer
        # Sampling draws from one generator per item (item_seed); this seeds anything else.
        set_seed(self.settings.seed)
        prompts = [self.format_prompt(r.messages) for r in reqs]
        if self.batching_mode() == "continuous":
            yield from self._generate_continuous(reqs, prompts)
            return
        lengths = [len(ids) for ids in tok(prompts, add_special_tokens=False)["input_ids"]]
        order = sorted(range(len(reqs)), key=lambda i: -lengths[i])
        self._fits = max(1, self.settings.batch_size)
        start = 0
        while start < len(order):
            idx = order[start : start + self._fits]
            start += len(idx)
            yield from self._generate_split([reqs[i] for i in idx], [prompts[i] for i in idx])

    def _generate_split(
        self, reqs: list[Request], prompts: list[str]
    ) -> Iterator[tuple[Request, Completion]]:
        import torch

        try:
            completions = self.generate_batch(reqs, prompts)
        except torch.cuda.OutOfMemoryError:
            if len(reqs) == 1:
                raise
            torch.cuda.empty_cache()
            half = len(reqs) // 2
            self._fits = min(self._fits, len(reqs) - half)
            log.warning("CUDA out of memory at batch %d; splitting", len(reqs))
            yield from self._generate_split(reqs[:half], prompts[:half])
            yield from self._generate_split(reqs[half:], prompts[half:])
            return
        yield from zip(reqs, completions, strict=True)

    def _generate_continuous(
        self, reqs: list[Request], prompts: list[str]
    ) -> Iterator[tuple[Request, Completion]]:
        """Every request into one continuous-batching manager; yield each as it finishes."""
        tok, model = self.tokenizer, self.model
        ids = tok(prompts, add_special_tokens=False)["input_ids"]
        by_key = {r.key: r for r in reqs}
        config = self._generation_config()
        eos = config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos])
        s = self.settings
        with model.continuous_batching_context_manager(
            generation_config=config,
            continuous_batching_config=continuous_cache_config(
                self._resolved()[0], ids, s.max_new_tokens, max(1, s.batch_size)
            ),
            block=True,
            timeout=60,
        ) as manager:
            for r, prompt in zip(reqs, ids, strict=True):
                manager.add_request(
                    prompt, request_id=r.key, max_new_tokens=self.settings.max_new_tokens
                )
            left = len(reqs)
            while left:
                result = manager.get_result(timeout=1)
                if result is None:
                    if not manager.is_running():
                        raise RuntimeError(
                            f"continuous batching stopped with {left} of {len(reqs)} requests "
                            "unfinished; rerun to resume, or use static batches (--batching static)"
                        )
                    continue
                if not result.is_finished():
                    continue
                left -= 1
                req = by_key[result.request_id]
                n_in = len(result.prompt_ids)
                if result.error:
                    yield req, Completion("", n_in, 0, error=str(result.error))
                    continue
                row = list(result.generated_tokens)
                n_out = next((i + 1 for i, t in enumerate(row) if t in eos_ids), len(row))
                text = tok.decode(row[:n_out], skip_special_tokens=True).strip()
                yield req, Completion(text, n_in, n_out)

    def generate_batch(self, reqs: Sequence[Request], prompts: Sequence[str]) -> list[Completion]:
        """Run one ``model.generate`` call on a left-padded batch and decode the new tokens."""
        import torch
        from transformers import LogitsProcessorList

        tok, model = self.tokenizer, self.model
        enc = tok(list(prompts), return_tensors="pt", padding=True, add_special_tokens=False)
        enc = enc.to(self._device)
        ctx = BatchContext(reqs, enc["input_ids"], enc["attention_mask"], tok, model)
        processors = LogitsProcessorList(f(ctx) for f in self.settings.logits_processors)
        if self.settings.do_sample:
            # Last, after every mitigation processor: it draws the token from what they left.
            seeds = [item_seed(self.settings.seed, r.key) for r in reqs]
            processors.append(
                row_sampler(seeds, self.settings.temperature, self.settings.top_p, self._device)
            )
        with torch.inference_mode():
            out = model.generate(
                **enc,
                generation_config=self._generation_config(),
                logits_processor=processors,
                **self.generate_kwargs,
            )
        sequences = out.sequences if hasattr(out, "sequences") else out
        new = sequences[:, enc["input_ids"].shape[1] :].cpu()
        n_prompt = enc["attention_mask"].sum(dim=1).tolist()
        eos = self._generation_config().eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos])
        completions = []
        for row, n_in in zip(new.tolist(), n_prompt, strict=True):
            n_out = next((i + 1 for i, t in enumerate(row) if t in eos_ids), len(row))
            text = tok.decode(row[:n_out], skip_special_tokens=True).strip()
            completions.append(Completion(text, int(n_in), n_out))
        return completions

    def info(self) -> dict[str, Any]:
        """Describe model, revision, dtype, device and attention for the manifest."""
        import torch
        import transformers

        loaded = self._model is not None  # a run with nothing to do never loads the model
        return {
            "backend": self.name,
            "model": self.model_id,
            "model_revision": self.revision or (_local_revision(self.model_id) if loaded else None),
            "gguf_file": self.gguf_file,
            "dtype": self._dtype_name if loaded else self.dtype_spec,
            "device": self._device if loaded else self.device_spec,
            "device_name": (
                torch.cuda.get_device_name(self._device)
                if self._device and self._device.startswith("cuda")
                else "cpu"
            ),
            "attn_implementation": self.attn_implementation,
            "batch_size": self.settings.batch_size,
            "static_cache": self.static_cache,
            "batching": self.batching_mode(),
            "generate_kwargs": self.generate_kwargs,
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        }


def continuous_cache_config(
    device: str, prompt_ids: Sequence[Sequence[int]], max_new_tokens: int, rows: int
) -> Any:
    """The ``ContinuousBatchingConfig`` of a continuous-batching run on ``device``.

    On CUDA None: ``transformers`` sizes the paged cache to the GPU's free memory. Elsewhere a
    cache for the ``rows`` longest requests at once, as a static batch would hold: sized to free
    memory, a CPU run takes most of the machine's RAM (14 GB for a 2-layer model here).
    """
    if device.startswith("cuda"):
        return None
    from transformers import ContinuousBatchingConfig

    page = 256
    totals = sorted((len(p) + max_new_tokens for p in prompt_ids), reverse=True)[:rows]
    return ContinuousBatchingConfig(
        page_size=page,
        num_blocks=sum(-(-n // page) for n in totals),
        max_batch_tokens=max(512, max(map(len, prompt_ids))),
    )


def format_messages(tokenizer: Any, messages: Sequence[dict[str, str]]) -> str:
    """Render chat messages as :meth:`TransformersBackend.format_prompt` does, for any tokenizer.

    Mitigation processors that prompt the model themselves (the explanation step of the
    Local-Explanation Guard) lay out their prompts exactly as the engine does.
    """
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(
            list(messages), tokenize=False, add_generation_prompt=True
        )
    text = "\n\n".join(m["content"] for m in messages) + "\n\n"
    bos = getattr(tokenizer, "bos_token", None)
    return bos + text if bos and not text.startswith(bos) else text


def row_sampler(seeds: Sequence[int], temperature: float, top_p: float, device: str | None) -> Any:
    """A logits processor that samples each row with its own ``torch.Generator``.

    Temperature and nucleus (top-p) filtering are applied as ``transformers`` does, then one
    token per row is drawn from the softmax with that row's generator; every other token is set
    to ``-inf``, so greedy search takes the drawn one. Batched sampling in ``generate`` uses one
    global generator, so a row's tokens would depend on its batch and on earlier batches.
    """
    import torch
    from transformers import LogitsProcessor

    class _RowSampler(LogitsProcessor):
        def __init__(self) -> None:
            self.generators = [
                torch.Generator(device=device or "cpu").manual_seed(int(s)) for s in seeds
            ]

        def __call__(self, input_ids: Any, scores: Any) -> Any:
            logits = scores.float()
            if temperature and temperature > 0 and temperature != 1.0:
                logits = logits / temperature
            if top_p is not None and top_p < 1.0:
                ordered, index = torch.sort(logits, descending=True, dim=-1)
                cumulative = ordered.softmax(dim=-1).cumsum(dim=-1)
                # Remove tokens once the mass before them reaches top_p (the first one stays).
                remove = (cumulative - ordered.softmax(dim=-1)) >= top_p
                remove = remove.scatter(1, index, remove)
                logits = logits.masked_fill(remove, float("-inf"))
            probs = logits.softmax(dim=-1)
            out = torch.full_like(scores, float("-inf"))
            for row, generator in enumerate(self.generators):
                token = torch.multinomial(probs[row], 1, generator=generator)
                out[row, token] = 0.0
            return out

    return _RowSampler()


def _local_revision(model_id: str) -> str | None:
    """Identify a checkpoint: the hub commit when known, else a hash of the local files' sizes.

    A hub ID is looked up in the local hub cache only (nothing is downloaded here), whose
    snapshot folders are named by their commit.
    """
    path = Path(model_id)
    if not path.is_dir():
        from huggingface_hub import snapshot_download

        try:
            return Path(snapshot_download(model_id, local_files_only=True)).name
        except (OSError, ValueError):  # not in the cache, or not a hub ID: unknown
            return None
    listing = sorted((p.name, p.stat().st_size) for p in path.iterdir() if p.is_file())
    digest = hashlib.sha256(json.dumps(listing).encode()).hexdigest()[:16]
    return f"local-{digest}"

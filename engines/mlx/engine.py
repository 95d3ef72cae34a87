"""The in-process MLX engine: one thread owns the model; streams are queues from it."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from functools import partial

from ..base import Engine, EngineInfo, Example, Message, Turn, read_examples
from ..block_policy import AUTO, BLOCKS, START_BLOCK, Memory
from ..errors import EngineBusy, EngineError, EngineNotReady
from ..events import Done, Event
from ..options import GenerationOptions
from .conversations import ConversationCache, ConversationCaches
from .cuda import KernelChoice
from .drafter_search import DrafterSearch
from .generation import TurnGeneration
from .images import TurnImages, shas, vision_note
from .loading import LoadedModel, load_drafter, load_model
from .model_thread import model_thread
from .own_loop import OwnLoop, PrefixSnapshot
from . import qwen35
from .prompts import PromptBuilder, copy_tokenizer
from .qwen35 import exact_cache_entries
from .tool_markup import CallReader, ToolMarkup, tool_markup
from .verify_cost import quantized_verify
from .vlm_loop import VlmLoop

log = logging.getLogger(__name__)
NO_DRAFTER = "none"
# Model types whose layers engines/mlx/stepper.py runs (a sparse feed-forward block through mlx-vlm's own).
OWN_LOOP_MODELS = ("qwen3_5", "qwen3_5_moe")


class MlxEngine(Engine):
    name = "mlx"

    def __init__(self, model: str, drafter: str | None = None, drafters: DrafterSearch | None = None,
                 kernels: KernelChoice = KernelChoice()):
        """``drafter``: a folder or hub id, ``"none"``, or None for the model's bundled MTP head (or, without
        one, the head ``drafters`` finds). ``kernels``: which of specchat's CUDA kernels the own loop runs."""
        super().__init__()
        self.kernels = kernels
        self.model_spec = model
        self.drafter_spec = drafter
        self.drafters = drafters
        # All MLX work runs on the process's one MLX thread: MLX streams belong to the thread that made them.
        self._thread = model_thread()
        self._loaded: LoadedModel | None = None
        self._prompts: PromptBuilder | None = None
        # The web threads' own copy of the tokenizer and template (prompt_size), so they never share the
        # model thread's; one caller at a time.
        self._sizing: PromptBuilder | None = None
        self._sizing_lock = threading.Lock()
        self._loop_note: str | None = None  # the own loop could not run on this mlx-vlm: why, for the presenter
        self._verify_ratio: float | None = None  # quantized body on a CPU: a 4-row product / a 1-row one
        self._vision_note: str | None = None  # why the loaded model cannot see; None when it can
        self._markup: ToolMarkup | None = None  # the model's tool-call format; None when it calls no tools
        self._tools_note: str | None = None  # why it calls no tools
        self._apc = None
        self._apc_entries: int | None = None
        self._primed_system: str | None = None
        self._decoder = None  # specchat's own loop on this model (and its MTP head)
        self._no_own_loop: str | None = None  # why the own loop cannot run this model
        self._stop_ids: set[int] = set()
        self._prefix: PrefixSnapshot | None = None  # the system prompt's state for the own loop
        self._conversations = ConversationCaches()
        self._auto = Memory()  # draft_block_size "auto": round times on this model, acceptance per conversation
        self._examples: tuple[Example, ...] = ()  # the model folder's examples.json
        # The settings hand-off: the newest settings not yet prepared for, and whether an unload has begun (then
        # nothing is prepared any more). Written on the callers' threads, read on the model thread: under the lock.
        self._wanted: GenerationOptions | None = None
        self._unloading = False
        self._wanted_lock = threading.Lock()

    def info(self) -> EngineInfo:
        loaded, status = self._loaded, self._status
        notes = [note for note in (loaded.drafter_note if loaded else None, self._loop_note) if note]
        return EngineInfo(
            name=self.name,
            model=self.model_spec,
            drafter=loaded.drafter_name if loaded else None,
            drafter_note=" ".join(notes) or None,
            state=status.state,
            message=status.message,
            progress=status.progress,
            examples=self._examples if loaded else (),
            decode_loop_reason=self._no_own_loop if loaded else None,
            quantized_verify_ratio=self._verify_ratio if loaded else None,
            vision=loaded is not None and self._vision_note is None,
            vision_note=self._vision_note if loaded else None,
            tools=loaded is not None and self._markup is not None,
        )

    def load(self, options: GenerationOptions) -> None:
        with self._wanted_lock:
            self._unloading = False  # an unload from now on stops the warm-up
        self._thread.submit(self._load, options).result()

    def _load(self, options: GenerationOptions) -> None:
        try:
            self._set_state("loading", "loading the model", 0.1)
            loaded = load_model(self.model_spec)
            if self.drafter_spec != NO_DRAFTER:
                self._set_state("loading", "loading the drafter", 0.6)
                # Building one from a base model's head can take a while: the header says what is going on.
                search = replace(self.drafters or DrafterSearch(),
                                 report=lambda step: self._set_state("loading", step, 0.6))
                load_drafter(loaded, self.drafter_spec, search)
            self._set_state("loading", "checking specchat's decode loop against the model", 0.7)
            note = vision_note(loaded)
            prompts = PromptBuilder(loaded, vision=note is None)
            sizing = PromptBuilder(copy_tokenizer(loaded), vision=note is None)
            markup, tools_note = tool_markup(loaded, prompts)
            self._examples = read_examples(loaded.path)
            decoder, stop_ids, no_own_loop, loop_note = own_decoder(loaded, prompts, self.kernels)
            if loop_note:
                log.warning("%s", loop_note)
            elif no_own_loop:
                log.warning("decode loop: mlx-vlm's for every reply, as %s", no_own_loop)
            else:
                log.info("decode loop: specchat's own (decode_loop: mlx-vlm in the settings switches)")
            ratio, verify_note = quantized_verify(loaded)
            with self._sizing_lock:
                self._loaded, self._prompts, self._sizing = loaded, prompts, sizing
                self._decoder, self._stop_ids, self._no_own_loop = decoder, stop_ids, no_own_loop
                self._loop_note = " ".join(note for note in (loop_note, verify_note) if note) or None
                self._verify_ratio = ratio
                self._vision_note = note
                self._markup, self._tools_note = markup, tools_note
            self._set_state("loading", "warming up", 0.8)
            self._prepare(options)
            self._set_state("ready", "")
        except Exception as exc:
            log.exception("loading %s failed", self.model_spec)
            message = exc.message if isinstance(exc, EngineError) else f"{type(exc).__name__}: {exc}"
            self._set_state("error", f"Could not load {self.model_spec}: {message}")

    def prepare(self, options: GenerationOptions) -> None:
        """Settings changed: rebuild the prefix cache or prime a new system prompt, off the caller's thread."""
        with self._wanted_lock:
            if self._loaded is None or self._unloading:
                return
            self._wanted = options
        self._in_background(self._prepare_latest)

    def _prepare_latest(self) -> None:
        """A burst of settings changes warms up once, for the newest: earlier jobs find it taken."""
        with self._wanted_lock:
            options, self._wanted = self._wanted, None
        if options is not None:
            self._prepare(options)

    def _in_background(self, work, *args) -> None:
        """Run ``work`` on the model thread without waiting; a failure is logged, never lost."""
        def report(future) -> None:
            error = None if future.cancelled() else future.exception()
            if error is not None:
                log.error("engine mlx: %s failed", work.__name__.strip("_"), exc_info=error)

        self._thread.submit(work, *args).add_done_callback(report)

    def _prepare(self, options: GenerationOptions) -> None:
        from mlx_vlm import apc

        with self._wanted_lock:
            if self._unloading:  # an unload has begun during the load: nothing left to prepare for
                return
        if not options.prefix_cache:
            if self._apc is not None or self._prefix is not None:
                self._apc, self._apc_entries, self._primed_system, self._prefix = None, None, None, None
        elif self._apc is None or self._apc_entries != options.prefix_cache_entries:
            self._apc = apc.APCManager(overrides={"checkpoint_entries": options.prefix_cache_entries})
            self._apc_entries, self._primed_system = options.prefix_cache_entries, None
        warmed = self._primed_system != options.system_prompt
        if warmed:
            self._warm_up(options)
        if options.draft_block_size == AUTO and self._decoder is not None and self._decoder.drafter is not None:
            if self._auto.ready is None:
                self._auto.ready = set()
                self._in_background(self._warm_next_block, self._auto.ready, self._warm_up_ids(options))
            if warmed:
                self._auto.ready.add(START_BLOCK)  # the warm-up compiled it

    def _warm_next_block(self, ready: set[int], ids: list[int]) -> None:
        """Compile the steps of the next block auto may pick, one block a job: a reply asked for meanwhile waits
        for one block at most, and auto picks only compiled blocks (engines/block_policy.py)."""
        with self._wanted_lock:
            if self._unloading or self._auto.ready is not ready or self._decoder is None:
                return  # unloaded or reloaded since: that model's blocks are no concern any more
        left = sorted((k for k in BLOCKS if k not in ready), key=lambda k: (abs(k - START_BLOCK), k))
        if not left:
            return
        started = time.perf_counter()
        self._decoder.warm_up(self._decoder.new_state(), ids, left[0])
        ready.add(left[0])
        log.debug("auto: block %d compiled in %.1f s", left[0], time.perf_counter() - started)
        if len(left) > 1:
            self._in_background(self._warm_next_block, ready, ids)

    def _warm_up_ids(self, options: GenerationOptions) -> list[int]:
        return self._prompts.system_prefix_ids(options.system_prompt) or self._prompts.encode("hello")

    def _warm_up(self, options: GenerationOptions) -> None:
        """Compile the graphs and store the system prompt's prefix in the prefix caches."""
        import mlx.core as mx
        from mlx_vlm import stream_generate

        ids = self._warm_up_ids(options)
        for _ in stream_generate(
            self._loaded.model, self._loaded.processor, "", input_ids=mx.array([ids]),
            max_tokens=1, apc_manager=self._apc,
        ):
            pass
        self._prefix = None
        if self._decoder is not None:
            prefix = PrefixSnapshot(ids, self._decoder.new_state())
            block = START_BLOCK if options.draft_block_size == AUTO else options.draft_block_size
            self._decoder.warm_up(prefix.state, ids, block)
            if options.prefix_cache:
                self._prefix = prefix
        self._primed_system = options.system_prompt

    def _check_startable(self, turn: Turn) -> None:
        status = self._status
        if self._loaded is None or status.state != "ready":
            raise EngineNotReady(f"The model is not ready ({status.state}: {status.message}). Wait for it to load.")
        if turn.tools and self._markup is None:
            raise EngineError(self._tools_note, code="no_tools")
        super()._check_startable(turn)  # a turn with images on a model that cannot see

    def _stream(self, turn: Turn) -> Iterator[Event]:
        events: queue.SimpleQueue[Event] = queue.SimpleQueue()
        self._thread.submit(self._generate, turn, events.put)
        return self._drain(turn, events)

    @staticmethod
    def _drain(turn: Turn, events: queue.SimpleQueue) -> Iterator[Event]:
        try:
            while True:
                event = events.get()
                yield event
                if isinstance(event, Done):
                    return
        finally:
            turn.cancel.set()  # the consumer is gone: stop at the next token

    def _generate(self, turn: Turn, emit) -> None:
        done = Done("error", error_code="internal", error_message="The reply ended unexpectedly.")
        cid = turn.conversation_id
        try:
            entry, input_ids = self._turn_input(turn)
            self._check_context(len(input_ids))
            loop = self._loop(turn)
            images = self._turn_images(turn)
            calls = CallReader(self._markup, entry.tools) if entry.tools else None
            generation = TurnGeneration(self._loaded, self._prompts, entry, turn, emit, loop, images, calls)
            done = generation.run(input_ids)
            entry.images = images.shas
            if generation.cache_stale:
                self._conversations.drop(cid)  # the library's cache moved past the stored ids
            else:
                entry.messages = len(turn.messages) + (0 if turn.continued else 1)
                entry.closed = done.finish_reason in ("stop", "tool_calls")  # both end at the model's stop token
                self._conversations.put(cid, entry)
        except EngineError as exc:
            done = Done("error", error_code=exc.code, error_message=exc.message)
        except Exception as exc:
            log.exception("generation failed")
            self._conversations.drop(cid)
            done = Done("error", error_code="generation_failed",
                        error_message=f"Generation failed: {exc}. The conversation is kept; try again.")
        finally:
            emit(done)

    def _context_limit(self) -> int | None:
        loaded = self._loaded
        if loaded is None:
            return None
        limit = (loaded.config.get("text_config") or loaded.config).get("max_position_embeddings")
        return limit if isinstance(limit, int) else None

    def prompt_size(self, messages: list[Message], options: GenerationOptions,
                    continued: bool = False) -> tuple[int, int] | None:
        """The prompt as a fresh render of ``messages`` would be (a cached next turn falls back to that
        when its own ids, which keep past reasoning, would not fit)."""
        with self._sizing_lock:
            prompts, limit = self._sizing, self._context_limit()
            if prompts is None or limit is None:
                return None
            thinking = options.reasoning_budget > 0
            render = prompts.continuation_ids if continued else prompts.conversation_ids
            return len(render(options.system_prompt, messages, thinking)), limit

    def _check_context(self, prompt_tokens: int) -> None:
        """Refuse, before any work, a prompt the model cannot hold."""
        limit = self._context_limit()
        if limit is not None and prompt_tokens >= limit:
            raise EngineError(
                f"The conversation is {prompt_tokens} tokens; this model holds at most {limit}. "
                "Start a new chat, or send a shorter message.", code="context_length")

    def divergence_margin(self, messages: list[Message], options: GenerationOptions, off: Message,
                          on: Message) -> float | None:
        """One forward of the target over the prompt and the replies' common tokens, on the model thread (the
        replies' text encoded again, which gives the tokens the model chose where it writes its tokenizer's
        own encoding). None without the own loop's target, for replies alike, with images (the forward here
        is the text's only), or if it fails."""
        if self._decoder is None or self._prompts is None or self._prompts.images_of(messages):
            return None
        try:
            return self._thread.submit(self._margin, messages, options, off, on).result()
        except Exception:
            log.exception("the logit margin where two replies part could not be computed")
            return None

    def _margin(self, messages: list[Message], options: GenerationOptions, off: Message, on: Message) -> float | None:
        import mlx.core as mx

        thinking = options.reasoning_budget > 0
        ours, theirs = (self._prompts.continuation_ids(options.system_prompt, [*messages, reply], thinking)
                        for reply in (off, on))
        if ours == theirs:
            return None
        common = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
        target = self._decoder.target
        hidden = target.prefill(target.new_caches(), ours[:common], options.prefill_step_size)
        first, second = mx.topk(target.head(hidden[:, -1:]).astype(mx.float32).reshape(-1), 2).tolist()
        return round(abs(first - second), 6)

    def _loop(self, turn: Turn):
        """specchat's own loop unless the settings ask for mlx-vlm's or the model or drafter needs it."""
        reason = self._vlm_reason(turn.options)
        if reason is None:
            options = turn.options
            auto = options.speculative and options.draft_block_size == AUTO and self._decoder.drafter is not None
            return OwnLoop(self._decoder, self._stop_ids, self._prefix,
                           self._auto.policy(turn.conversation_id) if auto else None)
        return VlmLoop(self._apc, reason)

    def _vlm_reason(self, options: GenerationOptions) -> str | None:
        """Why a reply with ``options`` runs on mlx-vlm's loop (the stats say it); None for specchat's."""
        if options.decode_loop == "mlx-vlm":
            return "the settings ask for mlx-vlm's loop"
        if self._decoder is None:
            return self._no_own_loop
        if options.speculative and self._loaded.drafter is not None and self._decoder.drafter is None:
            return f"the drafter is not an MTP head ({self._loaded.drafter_kind}): mlx-vlm's loop runs it"
        return None

    def _turn_images(self, turn: Turn) -> TurnImages:
        """The images ``turn``'s prompt holds, in order, with their placeholder counts."""
        prompts = self._prompts
        images = prompts.images_of(turn.messages)
        return TurnImages(images, tuple(prompts.images.token_count(image) for image in images), prompts.image_token,
                          prompts.images)

    @staticmethod
    def _offered(turn: Turn) -> tuple[dict, ...]:
        """The tools ``turn``'s prompt offers: none for ``tool_choice`` "none", the one it names, else all."""
        choice = turn.tool_choice
        if choice == "none":
            return ()
        if isinstance(choice, dict):
            name = (choice.get("function") or {}).get("name")
            return tuple(tool for tool in turn.tools if tool.get("function", {}).get("name") == name)
        return tuple(turn.tools)

    def _turn_input(self, turn: Turn) -> tuple[ConversationCache, list[int]]:
        """The conversation's cache entry and the prompt's ids: the cached ids extended by the new turn (or by
        the results of the reply's calls) when the entry holds this conversation's earlier messages, their
        images by content and the same tools too, else a fresh render (with a new entry)."""
        from mlx_vlm.generate import PromptCacheState

        options, messages, tools = turn.options, turn.messages, self._offered(turn)
        thinking = options.reasoning_budget > 0
        entry = self._conversations.get(turn.conversation_id)
        usable = (entry is not None and entry.system_prompt == options.system_prompt and entry.ids
                  and entry.tools == tools)
        results = tool_results(messages)
        if usable:  # images of one size are the same ids: the entry must hold these very images
            seen = messages if turn.continued else messages[: len(messages) - max(results, 1)]
            usable = entry.images == shas(self._prompts.images_of(seen))
        if turn.continued:
            if usable and entry.messages == len(messages) and not entry.closed:
                return entry, entry.ids  # the reply's own tokens, not a re-encoding of its text
            entry = ConversationCache(options.system_prompt, PromptCacheState(), tools=tools)
            return entry, self._prompts.continuation_ids(options.system_prompt, messages, thinking, tools)
        ids = None
        if usable and results and entry.messages == len(messages) - results:
            ids = self._prompts.tool_result_ids(entry.ids, entry.closed, options.system_prompt, messages, results,
                                                thinking, tools)
        elif usable and not results and entry.messages == len(messages) - 1:
            ids = self._prompts.next_turn_ids(entry.ids, entry.closed, messages[-1].content, thinking,
                                              self._prompts.images_of(messages[-1:]))
        limit = self._context_limit()
        if ids is not None and (limit is None or len(ids) < limit):
            return entry, ids
        # The cached ids keep past reasoning, which a fresh render leaves out: that may still fit.
        entry = ConversationCache(options.system_prompt, PromptCacheState(), tools=tools)
        return entry, self._prompts.conversation_ids(options.system_prompt, messages, thinking, tools)

    def reset_cache(self, deep: bool = False) -> dict:
        if self.busy:
            raise EngineBusy("A reply is being generated. Stop it or wait, then reset the cache.")
        return self._thread.submit(self._reset_cache).result()

    def _reset_cache(self) -> dict:
        import mlx.core as mx

        freed = self._conversations.clear()
        if self._apc is not None:
            snap = self._apc.stats_snapshot()
            freed["bytes"] += int(snap.get("resident_bytes", 0) or 0)
            freed["entries"] += int(snap.get("pool_used", 0) or 0) + exact_cache_entries(self._apc)
            self._apc.clear()
        if self._prefix is not None:
            freed["bytes"] += self._prefix.state.nbytes()
            freed["entries"] += 1
        self._primed_system, self._prefix = None, None
        mx.clear_cache()
        return freed

    def forget(self, conversation_id: str) -> None:
        self._in_background(self._conversations.drop, conversation_id)
        self._in_background(self._auto.forget, conversation_id)

    def unload(self) -> None:
        with self._wanted_lock:  # settings changes queued before this find nothing to prepare
            self._unloading, self._wanted = True, None
        self.cancel_all()
        self._thread.submit(self._unload).result()

    def _unload(self) -> None:
        import mlx.core as mx

        self._conversations.clear()
        if self._apc is not None:
            self._apc.clear()
        self._apc = self._prefix = None
        with self._sizing_lock:
            self._loaded = self._prompts = self._sizing = self._decoder = None
        self._auto.ready = None  # a next load compiles its blocks anew
        mx.clear_cache()  # the thread and its streams stay for the next engine (model_thread.py)
        self._set_state("error", "unloaded")


def tool_results(messages: list[Message]) -> int:
    """How many tool results end ``messages`` (the next step of a reply that made calls; 0 for a new turn)."""
    count = 0
    while count < len(messages) and messages[-1 - count].role == "tool":
        count += 1
    return count


def own_decoder(loaded: LoadedModel, prompts: PromptBuilder | None = None, kernels: KernelChoice = KernelChoice()):
    """specchat's own loop for this model, with the MTP head when that is the drafter, its products on
    ``kernels`` where specchat's CUDA kernels apply, checked against mlx-vlm's forward (qwen35.py).

    Returns (decoder, stop ids, None, None); (None, ∅, why, None) for a model family the loop does not run;
    (None, ∅, why, note) when this mlx-vlm's internals are not what the loop was written against.
    """
    from mlx_vlm.utils import resolve_eos_token_ids

    from .decoding import Decoder

    model_type = getattr(getattr(loaded.model, "config", None), "model_type", None)
    if model_type not in OWN_LOOP_MODELS:
        return None, set(), f"{model_type}: the own loop runs Qwen 3.5 models (qwen3_5, qwen3_5_moe) only", None
    drafter = loaded.drafter if loaded.drafter_kind == "mtp" else None
    stop = resolve_eos_token_ids(loaded.model.config.eos_token_id, loaded.tokenizer)
    try:
        ids = (prompts.encode(qwen35.CHECK_TEXT) if prompts is not None
               else list(loaded.tokenizer.encode(qwen35.CHECK_TEXT, add_special_tokens=False)))
        decoder = qwen35.check(partial(Decoder, kernels=kernels), loaded.model, drafter, ids)
    except qwen35.Unavailable as exc:
        reason = f"own loop unavailable with mlx-vlm {qwen35.library_version()}: {exc}"
        return None, set(), reason, f"{reason}; using mlx-vlm's loop."
    return decoder, set(stop), None, None

"""A conversation longer than the model's context drops its oldest turns, says so, and keeps the engine's cache
valid: with the fake engine (a word is a token) and the real MLX engine on the tiny model with a short context."""

import json
import shutil

import pytest

from engines import GenerationOptions, Message
from engines.fake import ANSWER, FakeEngine
from tests.support.servers import LiveServer
from tests.support.wsclient import WsClient, texts
from webapp.conversations.window import FILL, Window, fit, reply_room

CONTEXT_WORDS = 60


def words(messages) -> int:
    return sum(len(m.content.split()) for m in messages)


def chat_turns(ws, count: int, first: int = 0) -> list[tuple[dict, list[dict]]]:
    return [ws.chat(f"m{first + i}", f"question {first + i}") for i in range(count)]


@pytest.fixture
def short_fake(fake_server):
    fake_server.engine.context_words = CONTEXT_WORDS
    fake_server.host.update_settings({"reasoning_budget": 0, "max_tokens": 64})
    return fake_server


def test_the_oldest_turns_are_dropped_whole_and_the_reply_says_how_many(short_fake):
    engine, options = short_fake.engine, short_fake.host.settings.current
    room = reply_room(options, CONTEXT_WORDS)
    with WsClient(short_fake.ws_url) as ws:
        conversation = ws.hello["conversation"]
        replies = chat_turns(ws, 8)
    starts = [frames[0] for _, frames in replies]
    dropped = [start["dropped_turns"] for start in starts]
    assert dropped[0] == 0 and dropped[-1] > 0 and dropped == sorted(dropped)
    for (done, _), start, turn in zip(replies, starts, engine.turns):
        assert done["finish_reason"] == "stop" and done["stats"]["dropped_turns"] == start["dropped_turns"]
        sent = turn.messages
        # The newest turns, whole, from a user message on, ending with this turn's question; they fit.
        assert sent[0].role == "user" and sent[0].content == f"question {start['dropped_turns']}"
        assert sent[-1].content == f"question {len([u for u in sent if u.role == 'user']) + start['dropped_turns'] - 1}"
        assert words(sent) + room <= CONTEXT_WORDS
    # A drop goes well below the limit, so the next turns extend the same engine conversation.
    first_drop = dropped.index(next(d for d in dropped if d > 0))
    assert words(engine.turns[first_drop].messages) <= (CONTEXT_WORDS - room) * FILL
    assert engine.turns[first_drop + 1].conversation_id == engine.turns[first_drop].conversation_id
    assert engine.turns[first_drop].conversation_id != engine.turns[first_drop - 1].conversation_id
    assert dropped[first_drop + 1] == dropped[first_drop]
    # Stored with the reply, so a reload can say so too.
    stored = short_fake.host.store.conversation(conversation)
    replies_stored = [m for m in stored["messages"] if m["role"] == "assistant"]
    assert [m["stats"]["dropped_turns"] for m in replies_stored] == dropped
    assert len(stored["messages"]) == 16  # nothing is deleted: the model just no longer sees it


def test_a_conversation_that_fits_drops_nothing(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        replies = chat_turns(ws, 3)
    assert [frames[0]["dropped_turns"] for _, frames in replies] == [0, 0, 0]
    assert len(fake_server.engine.turns[-1].messages) == 5


def test_a_single_message_longer_than_the_context_is_refused(short_fake):
    with WsClient(short_fake.ws_url) as ws:
        chat_turns(ws, 2)
        done, frames = ws.chat("long", "word " * CONTEXT_WORDS)
        assert done["finish_reason"] == "error" and done["error"]["code"] == "context_length"
        assert str(CONTEXT_WORDS) in done["error"]["message"] and texts(frames, "answer") == ""
        # Only the message itself was sent (every older turn dropped), and the next turn works.
        assert [m.content for m in short_fake.engine.turns[-1].messages] == ["word " * CONTEXT_WORDS]
        assert ws.chat("after", "short again")[0]["finish_reason"] == "stop"


def test_regenerate_and_continue_fit_the_context_too(short_fake):
    engine = short_fake.engine
    with WsClient(short_fake.ws_url) as ws:
        chat_turns(ws, 6)
        ws.send({"type": "regenerate", "id": "again"})
        done, frames = ws.until("done", id="again")
        assert frames[0]["dropped_turns"] > 0 and words(engine.turns[-1].messages) < CONTEXT_WORDS
        engine.holds = [3]
        ws.send({"type": "chat", "id": "stopped", "text": "question 7"})
        ws.until("start", id="stopped")
        ws.send({"type": "stop", "id": "stopped"})
        assert ws.until("done", id="stopped")[0]["finish_reason"] == "cancelled"
        engine.holds = []  # a stop that came before the pause leaves it for the next reply
        ws.send({"type": "continue", "id": "more"})
        done, frames = ws.until("done", id="more")
        assert done["finish_reason"] == "stop" and frames[0]["dropped_turns"] > 0
        sent = engine.turns[-1].messages
        assert engine.turns[-1].continued and sent[-1].role == "assistant" and sent[0].role == "user"


class Measured(FakeEngine):
    """A fake engine whose prompt sizes are counted, to check the fit asks few of them."""

    def __init__(self):
        super().__init__()
        self.context_words, self.asked = 1000, 0

    def prompt_size(self, messages, options, continued=False):
        self.asked += 1
        return super().prompt_size(messages, options, continued)


def test_fit_searches_the_start_in_few_measures_and_never_drops_the_last_turn():
    engine = Measured()
    messages, ids = [], []
    for i in range(200):
        messages += [Message("user", "ask " * 9), Message("assistant", "answer " * 10)]
        ids += [f"u{i}", f"a{i}"]
    messages.append(Message("user", "last question"))
    ids.append("last")
    options = GenerationOptions(reasoning_budget=0, max_tokens=100)
    sent, window = fit(engine, messages, ids, options)
    assert engine.asked <= 10
    assert words(sent) <= (1000 - 100) * FILL < words(sent) + 19  # the fewest turns dropped to get there
    assert window == Window(ids[2 * window.dropped], window.dropped) and sent[-1].content == "last question"
    # From that window on, a grown conversation keeps its start while it fits.
    grown = messages + [Message("assistant", "answer"), Message("user", "next")]
    again, kept = fit(engine, grown, ids + ["a", "next"], options, previous=window)
    assert kept == window and again == sent + grown[-2:]
    # Only the last message, when nothing else fits.
    alone, _ = fit(engine, messages[:-1] + [Message("user", "word " * 2000)], ids, options)
    assert alone == [Message("user", "word " * 2000)]


def test_an_engine_that_cannot_measure_gets_every_message():
    engine = FakeEngine()
    messages = [Message("user", "word " * 5000), Message("assistant", ANSWER), Message("user", "hi")]
    assert fit(engine, messages, ["a", "b", "c"], GenerationOptions()) == (messages, Window())


# The real MLX engine, on the tiny model with a short context.

MLX_CONTEXT = 320


@pytest.fixture(scope="module")
def short_model(tiny_model, tmp_path_factory):
    """The tiny checkpoint, told it holds only ``MLX_CONTEXT`` positions."""
    folder = tmp_path_factory.mktemp("short") / "tiny-short"
    shutil.copytree(tiny_model, folder)
    config = json.loads((folder / "config.json").read_text())
    config["text_config"]["max_position_embeddings"] = MLX_CONTEXT
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.fixture(scope="module")
def short_mlx(short_model, tmp_path_factory):
    from engines.mlx.engine import MlxEngine

    server = LiveServer(MlxEngine(str(short_model)), tmp_path_factory.mktemp("data"))
    server.host.update_settings({"reasoning_budget": 0, "max_tokens": 24, "temperature": 0.0})
    yield server
    server.stop()
    server.engine.unload()


@pytest.mark.slow
def test_mlx_drops_the_oldest_turns_and_re_reads_the_shortened_history(short_mlx):
    engine = short_mlx.engine
    options = short_mlx.host.settings.current
    with WsClient(short_mlx.ws_url) as ws:
        replies = [ws.chat(f"m{i}", f"Tell me about the number {i} and what comes after it, please.")
                   for i in range(12)]
    dropped = [frames[0]["dropped_turns"] for _, frames in replies]
    assert all(done["finish_reason"] in ("stop", "length") for done, _ in replies), [d for d, _ in replies]
    assert dropped[0] == 0 and dropped[-1] > 0 and dropped == sorted(dropped)
    for done, _ in replies:
        assert done["stats"]["prompt_tokens"] < MLX_CONTEXT
    # A turn after a drop re-reads the shortened history (nothing cached); the next one extends it.
    first_drop = next(i for i, d in enumerate(dropped) if d)
    after = replies[first_drop][0]["stats"]
    assert after["cached_tokens"] < after["prompt_tokens"] // 2
    if dropped[first_drop + 1] == dropped[first_drop]:
        following = replies[first_drop + 1][0]["stats"]
        assert following["cached_tokens"] >= after["prompt_tokens"]
    assert engine.prompt_size([Message("user", "hi")], options)[1] == MLX_CONTEXT


@pytest.mark.slow
def test_mlx_refuses_a_single_message_longer_than_the_context(short_mlx):
    with WsClient(short_mlx.ws_url) as ws:
        ws.chat("before", "hello there")
        done, frames = ws.chat("long", "seven " * MLX_CONTEXT)
        assert done["finish_reason"] == "error" and done["error"]["code"] == "context_length"
        assert str(MLX_CONTEXT) in done["error"]["message"]
        assert ws.chat("after", "hello again")[0]["finish_reason"] in ("stop", "length")


@pytest.mark.slow
def test_mlx_with_thinking_falls_back_to_a_fresh_render_when_the_cached_turns_outgrow_the_context(short_mlx):
    """The cached ids keep every past thinking block, which a fresh render of the history leaves out: a next
    turn that extends them past the context re-reads the history instead of failing."""
    short_mlx.host.update_settings({"reasoning_budget": 48, "max_tokens": 8})
    try:
        with WsClient(short_mlx.ws_url) as ws:
            replies = [ws.chat(f"t{i}", f"Count from {i} to {i + 3}.") for i in range(10)]
    finally:
        short_mlx.host.update_settings({"reasoning_budget": 0, "max_tokens": 24})
    assert [done["finish_reason"] for done, _ in replies if done["finish_reason"] == "error"] == []
    thought = [done["stats"]["thinking_tokens"] for done, _ in replies]
    assert sum(thought) > MLX_CONTEXT  # the cached thinking alone outgrows the context
    # Some turn re-read its history although it dropped no more turns than the one before.
    dropped = [frames[0]["dropped_turns"] for _, frames in replies]
    rereads = [i for i in range(1, len(replies)) if dropped[i] == dropped[i - 1]
               and replies[i][0]["stats"]["cached_tokens"] < replies[i - 1][0]["stats"]["prompt_tokens"]]
    assert rereads, [(d, r[0]["stats"]["prompt_tokens"], r[0]["stats"]["cached_tokens"])
                     for d, r in zip(dropped, replies)]

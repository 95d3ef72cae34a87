"""The conversation store: schema versions, trees of messages, search, recovery of replies left streaming."""

import sqlite3

import pytest

from webapp.conversations import store as store_module
from webapp.conversations.store import MIGRATIONS, Store, StoreError, now, title_of


def message(id, parent, role="user", content="hello", **fields):
    return {"id": id, "parent": parent, "role": role, "content": content, "thinking": "", "created_at": now(),
            **fields}


def exchange(store, conversation, user_text, answer="an answer", parent=None, n=0):
    user = message(f"u{n}", parent, content=user_text)
    reply = message(f"a{n}", f"u{n}", "assistant", answer, finish_reason="stop", stats={"tokens": 3},
                    settings={"speculative": True, "draft_block_size": 4})
    store.add(conversation, [user, reply], current=reply["id"])
    return reply["id"]


def test_a_fresh_store_is_wal_at_the_latest_version(tmp_path):
    Store(tmp_path).close()
    db = sqlite3.connect(tmp_path / "specchat.db")
    assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_an_older_database_is_migrated_forward_and_keeps_its_conversations(tmp_path, monkeypatch):
    old = Store(tmp_path)
    exchange(old, "c1", "kept across upgrades")
    old.close()
    step = "CREATE TABLE upgraded (x INTEGER);"
    monkeypatch.setattr(store_module, "MIGRATIONS", [*MIGRATIONS, step])
    upgraded = Store(tmp_path)
    assert [m["content"] for m in upgraded.messages("c1")] == ["kept across upgrades", "an answer"]
    upgraded.close()
    db = sqlite3.connect(tmp_path / "specchat.db")
    assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) + 1
    assert db.execute("SELECT count(*) FROM upgraded").fetchone()[0] == 0


def test_a_newer_database_is_refused_in_one_line_and_left_as_it_was(tmp_path):
    path = tmp_path / "specchat.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE future (x)")
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 5}")
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.raises(StoreError) as info:
        Store(tmp_path)
    message = str(info.value)
    assert "\n" not in message and "newer specchat" in message and str(len(MIGRATIONS) + 5) in message
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["specchat.db"]  # no journal or WAL file made


def test_a_file_that_is_not_a_database_is_refused_in_one_line(tmp_path):
    (tmp_path / "specchat.db").write_bytes(b"not a database at all, just some text " * 100)
    with pytest.raises(StoreError) as info:
        Store(tmp_path)
    assert "\n" not in str(info.value) and "not a usable specchat database" in str(info.value)


def test_a_conversation_is_a_tree_and_a_branch_is_its_path_to_a_leaf():
    store = Store(None)
    first = exchange(store, "c1", "What is 2 + 3?", "5")
    # Regenerated: a second reply to the same user message; edited: a second first message.
    store.add("c1", [message("a0b", "u0", "assistant", "five", finish_reason="stop")], current="a0b")
    store.add("c1", [message("u0b", None, content="What is 2 + 4?")], current="u0b")
    tree = store.conversation("c1")
    assert tree["title"] == "What is 2 + 3?" and tree["current"] == "u0b"
    assert [(m["id"], m["parent"]) for m in tree["messages"]] == [
        ("u0", None), ("a0", "u0"), ("a0b", "u0"), ("u0b", None)]
    assert [m["content"] for m in store.branch("c1", first)] == ["What is 2 + 3?", "5"]
    assert [m["content"] for m in store.branch("c1", "a0b")] == ["What is 2 + 3?", "five"]
    assert store.branch("c1", None) == []
    reply = tree["messages"][1]
    assert set(reply) == {"id", "parent", "role", "content", "thinking", "finish_reason", "stats", "settings",
                          "created_at", "images", "tool_calls"}
    assert reply["stats"] == {"tokens": 3} and reply["settings"]["draft_block_size"] == 4


def test_a_streaming_reply_left_behind_reads_interrupted_with_what_it_had_said(tmp_path):
    store = Store(tmp_path)
    store.add("c1", [message("u0", None), message("a0", "u0", "assistant", "")], current="a0")
    store.save_reply("c1", "a0", "half an ans", "some thought")
    # The process dies here: the reply is never finished.
    reopened = Store(tmp_path)
    assert reopened.interrupted == 1
    reply = reopened.messages("c1")[1]
    assert (reply["content"], reply["thinking"], reply["finish_reason"]) == (
        "half an ans", "some thought", "interrupted")
    assert reopened.messages("c1")[0]["finish_reason"] is None  # user messages have none


def test_search_matches_whole_words_and_prefixes_in_titles_and_messages():
    store = Store(None)
    exchange(store, "fox", "Tell me about the quick brown fox", "Foxes are canids.")
    exchange(store, "tea", "How do I brew tea?", "Boil water, then steep the leaves.")
    exchange(store, "both", "Unrelated title", "A fox drinking tea.")

    def found(q):
        return sorted(c["id"] for c in store.search(q))

    assert found("fox") == ["both", "fox"]
    assert found("bro") == ["fox"]  # a prefix
    assert found("steep leaves") == ["tea"]  # every word, in any order
    assert found("fox tea") == ["both"]
    assert found("rown") == []  # not the middle of a word
    assert found("unrelated") == ["both"]  # the title
    assert found('"fox" (tea*') == ["both"]  # FTS5 syntax in a query is plain text, never an error
    assert found("?!") == []
    store.rename("tea", "Oolong notes")
    assert found("oolong") == ["tea"] and found("brew") == ["tea"]
    store.save_reply("fox", "a0", "Vulpes vulpes", "")
    assert found("canids") == [] and found("vulpes") == ["fox"]
    store.delete("fox")
    assert found("fox") == ["both"] and found("vulpes") == []


def test_the_list_is_newest_first_and_pages_with_before():
    store = Store(None)
    for n in range(5):
        exchange(store, f"c{n}", f"question {n}")
    listed = store.search(limit=2)
    assert [c["id"] for c in listed] == ["c4", "c3"]
    assert listed[0]["message_count"] == 2 and listed[0]["title"] == "question 4"
    rest = store.search(limit=10, before=listed[-1]["updated_at"])
    assert [c["id"] for c in rest] == ["c2", "c1", "c0"]
    exchange(store, "c0", "again", parent="a0", n=1)  # a new turn moves it to the top
    assert [c["id"] for c in store.search(limit=1)] == ["c0"]
    assert store.search(limit=1)[0]["message_count"] == 4


def test_titles_are_the_first_line_cut_short():
    assert title_of("\n  First line  \nsecond") == "First line"
    long = title_of("x" * 200)
    assert len(long) == 80 and long.endswith("…")

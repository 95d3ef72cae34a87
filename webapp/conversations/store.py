"""Stored conversations: one SQLite database in the data folder, each conversation a tree of messages.

Writes are short transactions on one connection (WAL, ``synchronous=NORMAL``:
a commit is an append to the log, not a disk flush, and survives a killed
process), so a reply can be saved while it streams without slowing it down.
The schema is versioned with ``PRAGMA user_version``; an older database is
migrated forward on open, a newer one is refused before anything is written.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson

FILE_NAME = "specchat.db"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"  # UTC, fixed width: text order is time order
TITLE_CHARS = 80

# Each entry upgrades the schema by one version; user_version counts those applied.
MIGRATIONS = [
    """
    CREATE TABLE conversations (
        n INTEGER PRIMARY KEY,  -- a stable rowid for the full-text index
        id TEXT NOT NULL UNIQUE,
        title TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        current TEXT
    );
    CREATE INDEX conversations_by_update ON conversations(updated_at);
    CREATE TABLE messages (
        seq INTEGER PRIMARY KEY,  -- insertion order: a parent always comes before its children
        conversation INTEGER NOT NULL REFERENCES conversations(n) ON DELETE CASCADE,
        id TEXT NOT NULL,
        parent TEXT,
        role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
        content TEXT NOT NULL,
        thinking TEXT NOT NULL,
        finish_reason TEXT,  -- null while the reply streams
        stats TEXT,
        settings TEXT,
        created_at TEXT NOT NULL,
        UNIQUE (conversation, id)
    );
    CREATE INDEX messages_streaming ON messages(finish_reason) WHERE finish_reason IS NULL;
    CREATE VIRTUAL TABLE message_text USING fts5(
        content, content='messages', content_rowid='seq', tokenize='unicode61 remove_diacritics 2',
        prefix='2 3');
    CREATE TRIGGER message_added AFTER INSERT ON messages BEGIN
        INSERT INTO message_text(rowid, content) VALUES (new.seq, new.content);
    END;
    CREATE TRIGGER message_removed AFTER DELETE ON messages BEGIN
        INSERT INTO message_text(message_text, rowid, content) VALUES ('delete', old.seq, old.content);
    END;
    CREATE TRIGGER message_changed AFTER UPDATE OF content ON messages BEGIN
        INSERT INTO message_text(message_text, rowid, content) VALUES ('delete', old.seq, old.content);
        INSERT INTO message_text(rowid, content) VALUES (new.seq, new.content);
    END;
    CREATE VIRTUAL TABLE title_text USING fts5(
        title, content='conversations', content_rowid='n', tokenize='unicode61 remove_diacritics 2',
        prefix='2 3');
    CREATE TRIGGER title_added AFTER INSERT ON conversations BEGIN
        INSERT INTO title_text(rowid, title) VALUES (new.n, new.title);
    END;
    CREATE TRIGGER title_removed AFTER DELETE ON conversations BEGIN
        INSERT INTO title_text(title_text, rowid, title) VALUES ('delete', old.n, old.title);
    END;
    CREATE TRIGGER title_changed AFTER UPDATE OF title ON conversations BEGIN
        INSERT INTO title_text(title_text, rowid, title) VALUES ('delete', old.n, old.title);
        INSERT INTO title_text(rowid, title) VALUES (new.n, new.title);
    END;
    """,
    # Images: each stored once, known by its content; a message lists its own in order.
    """
    CREATE TABLE attachments (
        id TEXT PRIMARY KEY,
        sha256 TEXT NOT NULL,
        mime TEXT NOT NULL,
        width INTEGER NOT NULL,
        height INTEGER NOT NULL,
        data BLOB NOT NULL,
        uploaded_at TEXT NOT NULL  -- its latest upload: one that no message holds yet is kept a while
    );
    CREATE TABLE message_images (
        message INTEGER NOT NULL REFERENCES messages(seq) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        attachment TEXT NOT NULL REFERENCES attachments(id),
        PRIMARY KEY (message, position)
    );
    CREATE INDEX message_images_by_attachment ON message_images(attachment);
    """,
    # Tool calls: a reply's calls, each with where in its text it happened (webapp/conversations/tool_steps.py).
    """
    ALTER TABLE messages ADD COLUMN tool_calls TEXT;
    """,
]
UNSENT_KEPT = timedelta(days=1)  # an uploaded image no message holds is freed after this
ATTACHMENT_FIELDS = ("id", "sha256", "mime", "width", "height")

MESSAGE_FIELDS = ("id", "parent", "role", "content", "thinking", "finish_reason", "stats", "settings", "created_at",
                  "tool_calls")
JSON_FIELDS = ("stats", "settings", "tool_calls")
_COLUMNS = ", ".join(MESSAGE_FIELDS)


class StoreError(Exception):
    """The database cannot be used; the message is one line saying why and what to do."""


def now() -> str:
    return datetime.now(timezone.utc).strftime(TIME_FORMAT)


def parse_time(text: str) -> datetime:
    """A stored timestamp (raises ValueError for anything else)."""
    return datetime.strptime(text, TIME_FORMAT).replace(tzinfo=timezone.utc)


def new_id() -> str:
    return uuid.uuid4().hex


def title_of(text: str) -> str:
    """A conversation's title: the first line of its first message, cut short."""
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1].rstrip() + "…"


def search_query(q: str) -> str | None:
    """An FTS5 query matching messages that hold every word of ``q``, each whole or as a prefix;
    None when ``q`` has no words. Words are quoted, so FTS5 syntax in ``q`` is plain text."""
    words = re.findall(r"\w+", q)
    return " ".join(f'"{word}"*' for word in words) if words else None


class Store:
    """Conversations and their messages; safe to use from any thread."""

    def __init__(self, data_dir: Path | None):
        """Open (creating or upgrading) ``data_dir/specchat.db``; in memory without a data folder."""
        self.path = Path(data_dir) / FILE_NAME if data_dir else None
        self._lock = threading.Lock()
        self._last_update = ""
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(str(self.path or ":memory:"), isolation_level=None,
                                       check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"Cannot open the conversation store {self.path}: {exc}.") from None
        try:
            self._open()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise StoreError(f"{self.path} is not a usable specchat database ({exc}): move it aside, or start "
                             "with another --data-dir.") from None
        except StoreError:
            self._db.close()
            raise

    def _open(self) -> None:
        # The version is checked before anything is written: a newer database must stay as it was.
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            raise StoreError(f"{self.path} was written by a newer specchat (schema {version}; this one knows up "
                             f"to {len(MIGRATIONS)}): upgrade specchat, or start with another --data-dir.")
        if self.path is not None:
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        for step in range(version, len(MIGRATIONS)):
            with self._transaction():
                for statement in _statements(MIGRATIONS[step]):
                    self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version = {step + 1}")
        self.interrupted = self._mark_interrupted()
        self._free_unsent()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            yield self._db

    def _mark_interrupted(self) -> int:
        """Replies left streaming by a process that died keep what they had said, as ``interrupted``."""
        with self._transaction() as db:
            return db.execute("UPDATE messages SET finish_reason = 'interrupted' "
                              "WHERE finish_reason IS NULL AND role = 'assistant'").rowcount

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _stamp(self) -> str:
        """An update time later than any before, so the newest-first list has no ties to page over."""
        stamp = now()
        if stamp <= self._last_update:
            stamp = (parse_time(self._last_update) + timedelta(microseconds=1)).strftime(TIME_FORMAT)
        self._last_update = stamp
        return stamp

    # Reading

    def head(self, conversation: str) -> dict | None:
        """``{id, title, created_at, updated_at, current}``, or None for an unknown id."""
        with self._reading() as db:
            row = db.execute("SELECT id, title, created_at, updated_at, current FROM conversations WHERE id = ?",
                             (conversation,)).fetchone()
        return dict(zip(("id", "title", "created_at", "updated_at", "current"), row)) if row else None

    def messages(self, conversation: str) -> list[dict]:
        """Every message of every branch, parents before children."""
        with self._reading() as db:
            rows = db.execute(
                f"SELECT m.seq, {', '.join('m.' + f for f in MESSAGE_FIELDS)} FROM messages m "
                "JOIN conversations c ON c.n = m.conversation WHERE c.id = ? ORDER BY m.seq", (conversation,),
            ).fetchall()
            images: dict[int, list[str]] = {}
            for seq, attachment in db.execute(
                "SELECT i.message, i.attachment FROM message_images i JOIN messages m ON m.seq = i.message "
                "JOIN conversations c ON c.n = m.conversation WHERE c.id = ? ORDER BY i.message, i.position",
                (conversation,),
            ):
                images.setdefault(seq, []).append(attachment)
        return [{**_message(row[1:]), "images": images.get(row[0], [])} for row in rows]

    def conversation(self, conversation: str) -> dict | None:
        head = self.head(conversation)
        return head and {**head, "messages": self.messages(conversation)}

    def branch(self, conversation: str, leaf: str | None) -> list[dict]:
        """The messages from the first to ``leaf`` (none for None)."""
        by_id = {m["id"]: m for m in self.messages(conversation)}
        path = []
        while leaf is not None and leaf in by_id:
            path.append(by_id[leaf])
            leaf = by_id[leaf]["parent"]
        return path[::-1]

    def search(self, q: str = "", limit: int = 50, before: str | None = None) -> list[dict]:
        """Conversations newest first (updated before ``before``), those matching ``q`` when given."""
        where, args = ["(:before IS NULL OR c.updated_at < :before)"], {"before": before, "limit": limit}
        if q.strip():
            args["q"] = search_query(q)
            if args["q"] is None:
                return []
            where.append("c.n IN (SELECT m.conversation FROM message_text JOIN messages m ON m.seq = "
                         "message_text.rowid WHERE message_text MATCH :q "
                         "UNION SELECT rowid FROM title_text WHERE title_text MATCH :q)")
        with self._reading() as db:
            rows = db.execute(
                "SELECT c.id, c.title, c.created_at, c.updated_at, "
                "(SELECT count(*) FROM messages m WHERE m.conversation = c.n) FROM conversations c "
                f"WHERE {' AND '.join(where)} ORDER BY c.updated_at DESC LIMIT :limit", args,
            ).fetchall()
        keys = ("id", "title", "created_at", "updated_at", "message_count")
        return [dict(zip(keys, row)) for row in rows]

    # Writing

    def add(self, conversation: str, messages: list[dict], current: str, title: str | None = None) -> None:
        """Add ``messages`` (parents first) and make ``current`` the branch on screen; the conversation is
        created with its first message, titled after it unless ``title`` is given."""
        stamp = self._stamp()
        with self._transaction() as db:
            n = self._number(db, conversation)
            if n is None:
                first = next((m["content"] for m in messages if m["role"] == "user"), "")
                n = db.execute(
                    "INSERT INTO conversations (id, title, created_at, updated_at, current) VALUES (?, ?, ?, ?, ?)",
                    (conversation, title_of(first) if title is None else title, messages[0]["created_at"],
                     stamp, current),
                ).lastrowid
            else:
                db.execute("UPDATE conversations SET updated_at = ?, current = ? WHERE n = ?", (stamp, current, n))
            _insert(db, n, messages)

    def save_reply(self, conversation: str, message: str, content: str, thinking: str) -> None:
        """What a streaming reply has said so far."""
        with self._transaction() as db:
            db.execute("UPDATE messages SET content = ?, thinking = ? WHERE id = ? AND conversation = "
                       "(SELECT n FROM conversations WHERE id = ?)", (content, thinking, message, conversation))

    def save_tool_calls(self, conversation: str, message: str, calls: list[dict]) -> None:
        """A streaming reply's calls so far, as they change."""
        with self._transaction() as db:
            db.execute("UPDATE messages SET tool_calls = ? WHERE id = ? AND conversation = "
                       "(SELECT n FROM conversations WHERE id = ?)", (_json(calls), message, conversation))

    def finish_reply(self, conversation: str, message: str, content: str, thinking: str, finish_reason: str,
                     stats: dict | None, tool_calls: list[dict] | None = None) -> None:
        stamp = self._stamp()
        with self._transaction() as db:
            n = self._number(db, conversation)
            db.execute("UPDATE messages SET content = ?, thinking = ?, finish_reason = ?, stats = ?, "
                       "tool_calls = coalesce(?, tool_calls) WHERE conversation = ? AND id = ?",
                       (content, thinking, finish_reason, _json(stats), _json(tool_calls or None), n, message))
            db.execute("UPDATE conversations SET updated_at = ? WHERE n = ?", (stamp, n))

    def set_current(self, conversation: str, current: str | None) -> None:
        with self._transaction() as db:
            db.execute("UPDATE conversations SET current = ? WHERE id = ?", (current, conversation))

    def rename(self, conversation: str, title: str) -> bool:
        with self._transaction() as db:
            return db.execute("UPDATE conversations SET title = ? WHERE id = ?", (title, conversation)).rowcount > 0

    def delete(self, conversation: str) -> bool:
        """Delete a conversation, and the images only it held (unless uploaded again since, for a message
        still being written)."""
        with self._transaction() as db:
            held = db.execute(
                "SELECT i.attachment, max(m.created_at) FROM message_images i JOIN messages m ON m.seq = i.message "
                "JOIN conversations c ON c.n = m.conversation WHERE c.id = ? GROUP BY i.attachment", (conversation,),
            ).fetchall()
            deleted = db.execute("DELETE FROM conversations WHERE id = ?", (conversation,)).rowcount > 0
            db.executemany(
                "DELETE FROM attachments WHERE id = ? AND uploaded_at <= ? "
                "AND NOT EXISTS (SELECT 1 FROM message_images WHERE attachment = attachments.id)", held)
        return deleted

    # Images

    def put_attachment(self, attachment) -> None:
        """Store an ``images.Attachment`` (once: the same content again only renews its upload time)."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO attachments (id, sha256, mime, width, height, data, uploaded_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET uploaded_at = excluded.uploaded_at",
                (attachment.id, attachment.sha256, attachment.mime, attachment.width, attachment.height,
                 attachment.data, now()),
            )

    def attachments(self, ids: list[str], data: bool = True) -> dict[str, dict]:
        """The stored images among ``ids``, by id: ``id, sha256, mime, width, height, bytes`` (and ``data``)."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}
        columns = ", ".join(ATTACHMENT_FIELDS) + ", length(data)" + (", data" if data else "")
        with self._reading() as db:
            rows = db.execute(f"SELECT {columns} FROM attachments WHERE id IN ({', '.join('?' * len(ids))})",
                              ids).fetchall()
        keys = (*ATTACHMENT_FIELDS, "bytes", *(("data",) if data else ()))
        return {row[0]: dict(zip(keys, row)) for row in rows}

    def _free_unsent(self) -> None:
        """Images uploaded long ago that no message holds (the user never sent them) are freed."""
        cutoff = (datetime.now(timezone.utc) - UNSENT_KEPT).strftime(TIME_FORMAT)
        with self._transaction() as db:
            db.execute("DELETE FROM attachments WHERE uploaded_at < ? "
                       "AND NOT EXISTS (SELECT 1 FROM message_images WHERE attachment = attachments.id)", (cutoff,))

    def create(self, title: str, created_at: str, current: str | None, messages: list[dict]) -> str:
        """A new conversation holding ``messages`` as given (an import); returns its id."""
        conversation, stamp = new_id(), self._stamp()
        with self._transaction() as db:
            n = db.execute(
                "INSERT INTO conversations (id, title, created_at, updated_at, current) VALUES (?, ?, ?, ?, ?)",
                (conversation, title, created_at, stamp, current),
            ).lastrowid
            _insert(db, n, messages)
        return conversation

    @staticmethod
    def _number(db: sqlite3.Connection, conversation: str) -> int | None:
        row = db.execute("SELECT n FROM conversations WHERE id = ?", (conversation,)).fetchone()
        return row[0] if row else None


def _statements(script: str) -> list[str]:
    """A migration's statements, one by one: ``executescript`` would commit half a migration on failure."""
    statements, pending = [], ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    return [s for s in statements if s]


def _json(value) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def _insert(db: sqlite3.Connection, n: int, messages: list[dict]) -> None:
    """Messages of conversation ``n``, each with its images (ids of stored attachments) in order."""
    for message in messages:
        seq = db.execute(
            f"INSERT INTO messages (conversation, {_COLUMNS}) VALUES (?, {', '.join('?' * len(MESSAGE_FIELDS))})",
            (n, *_row(message)),
        ).lastrowid
        db.executemany("INSERT INTO message_images (message, position, attachment) VALUES (?, ?, ?)",
                       [(seq, position, id) for position, id in enumerate(message.get("images") or ())])


def _row(message: dict) -> tuple:
    return tuple(_json(message.get(f) or None) if f == "tool_calls" else _json(message.get(f)) if f in JSON_FIELDS
                 else message.get(f) for f in MESSAGE_FIELDS)


def _message(row: tuple) -> dict:
    message = dict(zip(MESSAGE_FIELDS, row))
    for key in JSON_FIELDS:
        if message[key] is not None:
            message[key] = orjson.loads(message[key])
    message["tool_calls"] = message["tool_calls"] or []
    return message

// Wires the socket's frames (protocol v1) to the views, and the views' actions back to the socket.

import { Composer } from "@app/composer.js";
import { Conversation } from "@app/conversation.js";
import { EnginePanel } from "@app/engine.js";
import { EnginePicker } from "@app/engine-picker.js";
import { formatBytes, formatCount } from "@app/format.js";
import { SettingsPane } from "@app/settings.js";
import { Connection, socketUrl } from "@app/socket.js";

const PROTOCOL = 1;

const $ = (selector) => document.querySelector(selector);

let connected = false; // a hello arrived on the current socket
let everConnected = false;
let engineInfo = null;
let current = null; // the AssistantTurn in flight, if any
// The server keeps a conversation (and a reply in flight) while its tab reconnects. A reload starts
// afresh, as the page no longer shows the earlier messages.
let conversationId = null;

const banner = $("#banner");
const cacheStatus = $("#cache-status");
const connectionEl = $("#connection");
const connectionText = connectionEl.querySelector(".connection-text");
const reconnectButton = $("#reconnect");
const newChatButton = $("#new-chat");
const resetCacheButton = $("#reset-cache");
const deepResetField = $("#deep-reset-field");
const deepReset = $("#deep-reset");

const conversation = new Conversation($("#log"), (text) => composer.insert(text));
const engine = new EnginePanel($("#engine"));
const settings = new SettingsPane({
  form: $("#settings"),
  error: $("#settings-error"),
  status: $("#settings-status"),
  send: (values) => connection.send({ type: "settings", values }),
});
const picker = new EnginePicker({
  form: $("#engine-form"),
  error: $("#engine-error"),
  send: (spec) => connection.send({ type: "switch_engine", spec }),
});
const composer = new Composer({
  form: $("#composer"),
  prompt: $("#prompt"),
  send: $("#send"),
  stop: $("#stop"),
  hint: $("#composer-hint"),
  onSend: sendChat,
  onStop: stopReply,
});
const connection = new Connection(() => socketUrl(conversationId), {
  onFrame: (frame) => handlers[frame.type]?.(frame),
  onStatus: showConnection,
  onMalformed: () => showBanner("The server sent a message this page could not read; it was ignored."),
});

function rememberConversation(id) {
  conversationId = id ?? null;
}

function newId() {
  return `m${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
}

function sendChat(text) {
  const id = newId();
  if (!connection.send({ type: "chat", id, text })) return false;
  conversation.addUser(id, text);
  current = conversation.startTurn(id, text);
  refresh();
  return true;
}

function stopReply() {
  if (!current || !connection.send({ type: "stop", id: current.id })) return;
  current.stopping();
  composer.stopping();
}

function settle(turn) {
  if (turn === current && !turn.active) {
    current = null;
    refresh();
  }
}

/** Enable what can be done now, and say why sending cannot when it cannot. */
function refresh() {
  let blocked = null;
  if (!connected) {
    blocked = everConnected
      ? "Not connected. Anything you type stays here until the connection is back."
      : "Connecting to the server…";
  } else if (engineInfo.state === "loading" || engineInfo.state === "starting") {
    blocked = "The model is loading…";
  } else if (engineInfo.state === "error") {
    blocked = "The engine could not start; see the message at the top.";
  }
  composer.set({ streaming: current !== null, blocked });
  settings.setEnabled(connected);
  newChatButton.disabled = !connected;
  resetCacheButton.disabled = !connected;
}

function showBanner(text) {
  banner.querySelector(".banner-text").textContent = text;
  banner.hidden = false;
}

let countdown = 0;

function showConnection({ state, retryAt }) {
  clearInterval(countdown);
  connectionEl.dataset.state = state;
  reconnectButton.hidden = state !== "closed";
  if (state === "connecting") {
    connectionText.textContent = "Connecting…";
  } else if (state === "open") {
    connectionText.textContent = "Connected";
  } else {
    const tick = () => {
      const seconds = Math.max(0, Math.ceil((retryAt - Date.now()) / 1000));
      connectionText.textContent = `Disconnected · retrying in ${seconds} s`;
    };
    tick();
    countdown = setInterval(tick, 1000);
    lost();
  }
}

/** The socket closed: nothing in flight may vanish silently. */
function lost() {
  if (!connected) return;
  connected = false;
  if (current) {
    current.interrupt();
    current = null;
  }
  engine.unknown("offline");
  refresh();
}

const handlers = {
  hello(frame) {
    if (frame.protocol !== PROTOCOL) {
      showBanner(`The server speaks protocol ${frame.protocol} and this page speaks ${PROTOCOL}. Reload the page.`);
    }
    // A conversation the server no longer has restarts its memory here: say so.
    if (!frame.resumed && everConnected && !conversation.empty) {
      conversation.note("Reconnected. The model does not see the messages above this line.");
    }
    rememberConversation(frame.conversation);
    everConnected = true;
    connected = true;
    engineInfo = frame.engine;
    engine.update(engineInfo);
    picker.update(frame.spec, frame.choices);
    deepResetField.hidden = !frame.deep_reset;
    settings.update(frame.settings);
    refresh();
  },
  engine(frame) {
    engineInfo = frame.engine;
    engine.update(engineInfo);
    picker.update(frame.spec, frame.choices);
    deepResetField.hidden = !frame.deep_reset;
    refresh();
  },
  settings(frame) {
    settings.update(frame.values);
  },
  start(frame) {
    let turn = conversation.turn(frame.id);
    if (turn && !turn.active) {
      // A resumed conversation replays its latest reply: rebuild it, and follow it if still running.
      turn = conversation.restartTurn(frame.id);
      current = turn;
      refresh();
    }
    turn?.started();
  },
  thinking(frame) {
    conversation.turn(frame.id)?.addThinking(frame.text);
  },
  answer(frame) {
    conversation.turn(frame.id)?.addAnswer(frame.text);
  },
  stats(frame) {
    conversation.turn(frame.id)?.updateStats(frame.stats);
  },
  done(frame) {
    const turn = conversation.turn(frame.id);
    if (!turn) return;
    turn.done(frame);
    settle(turn);
  },
  new_chat(frame) {
    rememberConversation(frame.conversation);
  },
  cache_reset(frame) {
    const { prompt_tokens: tokens, entries, bytes, message } = frame.freed;
    const size = bytes ? ` (${formatBytes(bytes)})` : "";
    // An engine that cannot count what it freed (a remote server) says so in `message`.
    cacheStatus.textContent =
      message ??
      (entries === 0
        ? "The cache was already empty."
        : `Freed ${formatCount(tokens)} prompt tokens in ${formatCount(entries)} ${entries === 1 ? "entry" : "entries"}${size}.`);
  },
  error(frame) {
    if (frame.code === "invalid_settings") {
      settings.rejected(frame.message);
      return;
    }
    if (frame.code === "invalid_engine") {
      picker.rejected(frame.message);
      return;
    }
    const turn = frame.id == null ? undefined : conversation.turn(frame.id);
    if (!turn) {
      showBanner(frame.message);
      return;
    }
    // A Stop that crossed the reply's end in flight is refused as unknown; nothing went wrong.
    if (!turn.active && frame.code === "unknown_id") return;
    turn.fail(frame.code, frame.message);
    settle(turn);
  },
};

newChatButton.addEventListener("click", () => {
  if (current) connection.send({ type: "stop", id: current.id });
  if (!connection.send({ type: "new_chat" })) return;
  current = null;
  conversation.clear();
  cacheStatus.textContent = "";
  refresh();
  $("#prompt").focus();
});

resetCacheButton.addEventListener("click", () => {
  const deep = !deepResetField.hidden && deepReset.checked;
  if (connection.send({ type: "reset_cache", deep })) cacheStatus.textContent = "Resetting…";
});

reconnectButton.addEventListener("click", () => connection.retryNow());
banner.querySelector(".banner-close").addEventListener("click", () => (banner.hidden = true));

// The settings pane sits beside the chat on wide screens and over it on narrow ones,
// where it starts closed.
const settingsToggle = $("#settings-toggle");
function showSettings(open) {
  document.body.dataset.settings = open ? "open" : "closed";
  settingsToggle.setAttribute("aria-expanded", String(open));
}
settingsToggle.addEventListener("click", () => showSettings(document.body.dataset.settings !== "open"));
const narrow = matchMedia("(max-width: 960px)");
narrow.addEventListener("change", () => showSettings(!narrow.matches));
showSettings(!narrow.matches);

refresh();
connection.connect();
$("#prompt").focus();

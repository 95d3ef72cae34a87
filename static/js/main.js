// Wires the socket's frames (protocol v1) to the views, and the views' actions back to the socket.

import { Baseline } from "@app/baseline.js";
import { Composer } from "@app/composer.js";
import { Conversation } from "@app/conversation.js";
import { bindTintToggle } from "@app/drafted-tint.js";
import { EnginePanel } from "@app/engine.js";
import { EnginePicker } from "@app/engine-picker.js";
import { formatBytes, formatCount, formatRate } from "@app/format.js";
import { RaceView } from "@app/race.js";
import { SettingsPane } from "@app/settings.js";
import { Connection, socketUrl } from "@app/socket.js";
import { SWEEP_BLOCKS, SweepView } from "@app/sweep.js";

const PROTOCOL = 1;

const $ = (selector) => document.querySelector(selector);

let connected = false; // a hello arrived on the current socket
let everConnected = false;
let engineInfo = null;
let current = null; // the AssistantTurn, RaceView or SweepView in flight, if any
let settingsValues = {};
const baseline = new Baseline();
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
const baselineStatus = $("#baseline-status");
const calibrateButton = $("#calibrate");
const calibrateError = $("#calibrate-error");

const conversation = new Conversation($("#log"), {
  onResend: (text) => composer.insert(text),
  onRace: (text) => startRace(text, composer.runs),
  judge: judgeReply,
});
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
  race: $("#race"),
  runs: $("#race-runs"),
  sweep: $("#sweep"),
  hint: $("#composer-hint"),
  onSend: sendChat,
  onRace: startRace,
  onSweep: startSweep,
  onStop: stopReply,
});
bindTintToggle($("#tint-drafted"), $("#tint-drafted-hint"));
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

/** Race `text` with the drafter off and on, `runs` times each way; false when it could not start. */
function startRace(text, runs) {
  if (current || !connected) return false;
  const id = newId();
  if (!connection.send({ type: "race", id, text, runs })) return false;
  conversation.addUser(id, text);
  current = conversation.addItem(new RaceView(id, text, runs, {
    context: () => ({ engine: engineInfo, settings: settingsValues }),
    onFinished: (raceDone) => {
      baseline.fromRace(raceDone);
      baselineStatus.textContent = baseline.describe();
    },
  }));
  refresh();
  return true;
}

/** Run `text` at every block size of the sweep; false when it could not start. */
function startSweep(text) {
  if (current || !connected) return false;
  const id = newId();
  if (!connection.send({ type: "sweep", id, text, blocks: SWEEP_BLOCKS })) return false;
  conversation.addUser(id, text);
  current = conversation.addItem(new SweepView(id, text, { onApply: applyBlock }));
  refresh();
  return true;
}

/** Block 1 is the drafter off; any other size turns it on at that size. */
function applyBlock(block) {
  const values = block === 1 ? { speculative: false } : { speculative: true, draft_block_size: block };
  return connection.send({ type: "settings", values });
}

/** A finished reply's notice when its drafter-on rate fell below the drafter-off baseline. */
function judgeReply(stats) {
  const verdict = baseline.judge(stats);
  if (!verdict) return null;
  const source = verdict.source === "race" ? "measured by the last race" : "measured on this machine";
  const text =
    `Drafting is not paying off: ${formatRate(verdict.on)} tok/s with the drafter, ` +
    `${formatRate(verdict.off)} tok/s without it (${source}). Try a smaller draft block.`;
  const block = settingsValues.draft_block_size;
  let action;
  if (block > 2) action = { label: `Use block ${block - 1}`, run: () => applyBlock(block - 1) };
  else if (block === 2) action = { label: "Turn the drafter off", run: () => applyBlock(1) };
  return { text, action };
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
  for (const button of document.querySelectorAll(".race-again")) button.disabled = current !== null || Boolean(blocked);
  settings.setEnabled(connected);
  newChatButton.disabled = !connected;
  resetCacheButton.disabled = !connected;
  calibrateButton.disabled = !connected || current !== null || Boolean(blocked) || baselineStatus.textContent.startsWith("Measuring");
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
    learnBaseline(frame);
    picker.update(frame.spec, frame.choices);
    deepResetField.hidden = !frame.deep_reset;
    settingsValues = frame.settings ?? {};
    settings.update(frame.settings);
    refresh();
  },
  engine(frame) {
    engineInfo = frame.engine;
    engine.update(engineInfo);
    learnBaseline(frame);
    picker.update(frame.spec, frame.choices);
    deepResetField.hidden = !frame.deep_reset;
    refresh();
  },
  settings(frame) {
    settingsValues = frame.values ?? {};
    settings.update(frame.values);
  },
  start(frame) {
    const item = conversation.item(frame.id);
    if (item) {
      // A reconnect that resumes the conversation carries on with a race or sweep in flight.
      if (item.el.dataset.state === "interrupted" && item.resume) {
        item.resume();
        current = item;
        refresh();
      }
      item.frame(frame);
      return;
    }
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
    if (itemFrame(frame)) return;
    conversation.turn(frame.id)?.addThinking(frame.text, frame.rounds);
  },
  answer(frame) {
    if (itemFrame(frame)) return;
    conversation.turn(frame.id)?.addAnswer(frame.text, frame.rounds, frame.draft_spans);
  },
  stats(frame) {
    if (itemFrame(frame)) return;
    conversation.turn(frame.id)?.updateStats(frame.stats);
  },
  done(frame) {
    if (itemFrame(frame)) return;
    const turn = conversation.turn(frame.id);
    if (!turn) return;
    turn.done(frame);
    settle(turn);
  },
  race_done: finishItem,
  sweep_done: finishItem,
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
    const turn = frame.id == null ? undefined : conversation.turn(frame.id) ?? conversation.item(frame.id);
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

/** Hand a race's or sweep's frame to its view; false when `frame` is not one of theirs. */
function itemFrame(frame) {
  const item = frame.id == null ? undefined : conversation.item(frame.id);
  if (!item) return false;
  item.frame(frame);
  return true;
}

function finishItem(frame) {
  const item = conversation.item(frame.id);
  if (!item) return;
  item.frame(frame);
  settle(item);
}

/** The server's drafter-off rate for this engine and model, where it sends one. */
function learnBaseline(frame) {
  baseline.setEngine(frame.engine);
  const value = frame.baseline ?? frame.engine?.baseline;
  if (value != null) baseline.fromServer(value);
  baselineStatus.textContent = baseline.describe();
}

calibrateButton.addEventListener("click", async () => {
  calibrateButton.disabled = true;
  calibrateError.hidden = true;
  baselineStatus.textContent = "Measuring the drafter-off speed…";
  try {
    await baseline.calibrate();
  } catch (error) {
    calibrateError.textContent = error.message;
    calibrateError.hidden = false;
  } finally {
    baselineStatus.textContent = baseline.describe();
    refresh();
  }
});

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

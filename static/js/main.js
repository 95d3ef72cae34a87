// Wires the socket's frames (protocol v1) to the views, and the views' actions back to the socket.

import { conversationPath, request } from "@app/api.js";
import { adviceText, adviseBlock, Baseline, costText } from "@app/baseline.js";
import { busyText } from "@app/busy.js";
import { Calibration } from "@app/calibration.js";
import { Composer } from "@app/composer.js";
import { Conversation } from "@app/conversation.js";
import { bindTintToggle } from "@app/drafted-tint.js";
import { Drawers } from "@app/drawers.js";
import { EnginePanel } from "@app/engine.js";
import { EnginePicker } from "@app/engine-picker.js";
import { Examples } from "@app/examples.js";
import { formatBytes, formatCount, formatRate } from "@app/format.js";
import { History } from "@app/history.js";
import { QuickBar } from "@app/quick-bar.js";
import { RaceView } from "@app/race.js";
import { idFromUrl, showInUrl } from "@app/routing.js";
import { SettingsPane } from "@app/settings.js";
import { Connection, socketUrl } from "@app/socket.js";
import { SWEEP_BLOCKS, SweepView } from "@app/sweep.js";
import { Tree } from "@app/tree.js";

const PROTOCOL = 1;

const $ = (selector) => document.querySelector(selector);

let connected = false; // a hello arrived on the current socket
let everConnected = false;
let engineInfo = null;
let current = null; // the AssistantTurn, RaceView or SweepView in flight, if any
let settingsValues = {};
const baseline = new Baseline();
// The server keeps a conversation (and a reply in flight) while its tab reconnects, and stores it from its
// first message on: the URL names it, and a reload draws it from the store and follows a reply in flight.
let conversationId = idFromUrl();
let needDraw = conversationId !== null; // the next hello opens a conversation to draw from the store
const tree = new Tree(); // the open conversation as stored (refetched after each reply)
let leaf = null; // the last message of the branch on screen: a chat without `parent` follows it
let drawToken = 0;
let held = null; // frames that arrive while a stored conversation is being drawn
let wasLocked = null;

const banner = $("#banner");
const cacheStatus = $("#cache-status");
const connectionEl = $("#connection");
const connectionText = connectionEl.querySelector(".connection-text");
const reconnectButton = $("#reconnect");
const newChatButton = $("#new-chat");
const resetCacheButton = $("#reset-cache");
const deepResetField = $("#deep-reset-field");
const deepReset = $("#deep-reset");
const calibrateButton = $("#calibrate");

const conversation = new Conversation($("#log"), $("#jump"), {
  onResend: (text) => composer.insert(text),
  onRace: (user) => startRace(user.text, composer.runs, user),
  judge: judgeReply,
  onEdit: editMessage,
  onRegenerate: regenerate,
  onContinue: continueReply,
  onSelect: selectBranch,
  streaming: () => current !== null,
});
const history = new History({
  root: $("#history"),
  onOpen: (id) => openConversation(id),
  onLeave: () => startNewChat(),
  current: () => conversationId,
});
const engine = new EnginePanel($("#engine"));
const settings = new SettingsPane({
  form: $("#settings"),
  error: $("#settings-error"),
  status: $("#settings-status"),
  send: (values) => connection.send({ type: "settings", values }),
});
const quickBar = new QuickBar({
  root: $("#quick-bar"),
  apply: (values) => settings.change(values),
  resetCache: () => resetCache(),
});
const picker = new EnginePicker({
  form: $("#engine-form"),
  error: $("#engine-error"),
  list: $("#model-list"),
  status: $("#model-status"),
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
const calibration = new Calibration({
  baseline, button: calibrateButton, status: $("#baseline-status"), error: $("#calibrate-error"), onChange: refresh,
});
bindTintToggle($("#tint-drafted"), $("#tint-drafted-hint"));
// The model's example prompts sit in the empty state, so they go once the conversation has a message.
const examples = new Examples($("#examples"), { onPick: (text) => !locked() && !blockedReason() && sendChat(text) });
const connection = new Connection(() => socketUrl(conversationId), {
  onFrame: (frame) => (held && frame.type !== "hello" ? held.push(frame) : handlers[frame.type]?.(frame)),
  onStatus: showConnection,
  onMalformed: () => showBanner("The server sent a message this page could not read; it was ignored."),
});

function rememberConversation(id) {
  conversationId = id ?? null;
}

/** Open stored conversation `id` in this tab: a new socket names it, and the hello draws it. */
function openConversation(id, push = true) {
  drawers.closeOverlays();
  if (id === conversationId && !needDraw) return;
  drawToken += 1;
  held = null;
  current = null;
  connected = false;
  conversation.clear();
  tree.clear();
  leaf = null;
  rememberConversation(id);
  needDraw = true;
  showInUrl(id, push);
  history.render();
  refresh();
  connection.reopen();
}

/** Draw the stored conversation `id`, holding the socket's frames (a reply in flight) until it is drawn. */
async function drawStored(id) {
  const token = ++drawToken;
  held ??= [];
  let data = null;
  let failure = null;
  try {
    data = await request(conversationPath(id));
  } catch (error) {
    // 404: not stored yet (no message sent), or deleted meanwhile: an empty conversation.
    if (error.status !== 404) failure = error;
  }
  if (token !== drawToken) return;
  const frames = held;
  held = null;
  if (data) {
    tree.load(data);
    leaf = data.current;
    conversation.showBranch(tree);
  }
  if (failure) conversation.note(`This conversation could not be loaded: ${failure.message}`);
  for (const frame of frames) handlers[frame.type]?.(frame);
  history.render();
  refresh();
}

/** Fetch the open conversation's tree again (new branches, what produced each reply) and the list. */
async function syncTree() {
  const id = conversationId;
  let data = null;
  try {
    data = await request(conversationPath(id));
  } catch (error) {
    // 404: not stored (a reply refused before it started), nothing to update; anything else is said here.
    if (error.status !== 404) conversation.note(`This conversation could not be refreshed: ${error.message}`);
  }
  if (data && id === conversationId) {
    tree.load(data);
    conversation.update(tree, locked());
  }
  history.refresh();
}

function locked() {
  return current !== null || !connected;
}

function newId() {
  return `m${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
}

function sendChat(text) {
  const id = newId();
  if (!connection.send({ type: "chat", id, text })) return false;
  conversation.addUser(id, text);
  conversation.sentAfter(id, leaf);
  current = conversation.startTurn(id, text);
  refresh();
  return true;
}

/** Send `user`'s message again as `text`: a new branch beside it (the old one is kept). */
function editMessage(user, text) {
  if (current || blockedReason()) return false;
  const id = newId();
  if (!connection.send({ type: "chat", id, text, parent: user.parent })) return false;
  conversation.truncateFrom(user);
  conversation.addUser(id, text);
  conversation.sentAfter(id, user.parent);
  current = conversation.startTurn(id, text);
  refresh();
  return true;
}

/** Answer `turn`'s message again, with the current settings: a sibling of `turn`. */
function regenerate(turn) {
  if (current || blockedReason() || !turn.message) return;
  const id = newId();
  if (!connection.send({ type: "regenerate", id, message: turn.message })) return;
  conversation.truncateFrom(turn);
  current = conversation.startTurn(id, turn.prompt);
  refresh();
}

/** Go on with `turn`, an unfinished last reply: the continuation streams into the same message. */
function continueReply(turn) {
  if (current || blockedReason() || !turn.message) return;
  const id = newId();
  if (!connection.send({ type: "continue", id })) return;
  current = conversation.continueTurn(turn, id);
  refresh();
}

/** Show the branch through message `id` (the arrows); `selected` answers, and the branch is redrawn. */
function selectBranch(id) {
  if (current || !connected) return;
  connection.send({ type: "select", message: id });
}

/**
 * Race `text` with the drafter off and on, `runs` times each way; false when it could not start.
 * Raced again from a past message (`beside`), it becomes a new branch beside that message, as an edit
 * does, so both lanes see the history that message saw; otherwise it follows the current branch.
 */
function startRace(text, runs, beside = null) {
  if (current || !connected) return false;
  const id = newId();
  const inPlace = beside !== null && beside.parent !== undefined;
  const frame = { type: "race", id, text, runs, ...(inPlace ? { parent: beside.parent } : {}) };
  if (!connection.send(frame)) return false;
  if (inPlace) conversation.truncateFrom(beside);
  conversation.addUser(id, text);
  conversation.sentAfter(id, inPlace ? beside.parent : leaf);
  current = conversation.addItem(raceView(id, text, runs));
  refresh();
  return true;
}

function raceView(id, text, runs) {
  return new RaceView(id, text, runs, {
    context: () => ({ engine: engineInfo, settings: settingsValues }),
    onFinished: (raceDone) => {
      baseline.fromRace(raceDone);
      calibration.describe();
    },
  });
}

/**
 * The first frame of a race or sweep that a reloaded page is sent again: its view takes the place of the
 * stored reply it writes to, gets every frame from the lanes' start, then the rest live.
 */
function adoptContest(frame) {
  const prompt = tree.get(frame.parent)?.content ?? "";
  const view = frame.lane != null
    ? raceView(frame.id, prompt, frame.runs ?? 1)
    : new SweepView(frame.id, prompt, { onApply: applyBlock });
  conversation.adoptItem(view, frame.message);
  current = view;
  refresh();
  view.frame(frame);
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

/** A finished reply's notice when its drafter-on rate fell below the drafter-off baseline beyond the noise. */
function judgeReply(stats) {
  const verdict = baseline.judge(stats);
  if (!verdict) return null;
  const source = verdict.source === "race" ? "measured by the last race" : "measured on this machine";
  const block = settingsValues.draft_block_size;
  const advice = adviseBlock({ block, on: verdict.on, off: verdict.off, byDepth: stats.acceptance_by_depth,
    sweep: baseline.sweep });
  const text =
    `Drafting is not paying off: ${formatRate(verdict.on)} tok/s with the drafter, ` +
    `${formatRate(verdict.off)} tok/s without it (${source}): slower by more than the ` +
    `${Math.round(verdict.noise * 100)}% two measurements of one speed can differ by. ${adviceText(advice, block)}` +
    (costText(engineInfo) ? ` ${costText(engineInfo)}` : "") + (verdict.busy ? ` ${busyText(verdict.busy)}` : "");
  const action = advice.block > 1
    ? { label: `Use block ${advice.block}`, run: () => applyBlock(advice.block) }
    : { label: "Turn the drafter off", run: () => applyBlock(1) };
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

/** Why nothing can be sent right now (disconnected, model loading), or null. */
function blockedReason() {
  if (!connected) {
    return everConnected
      ? "Not connected. Anything you type stays here until the connection is back."
      : "Connecting to the server…";
  }
  if (engineInfo.state === "loading" || engineInfo.state === "starting") return "The model is loading…";
  if (engineInfo.state === "error") return "The engine could not start; see the message at the top.";
  return null;
}

/** Why this model does not run on specchat's own loop, where the engine says (older engines do not). */
function loopNote(engine) {
  const reason = engine?.decode_loop_reason;
  if (!reason) return null;
  const other = engine.decode_loop && engine.decode_loop !== "specchat";
  const loop = other ? `${engine.decode_loop}'s loop` : "another loop";
  return `Runs on ${loop}, not specchat's own: ${reason}.`;
}

/** Enable what can be done now, and say why sending cannot when it cannot. */
function refresh() {
  const blocked = blockedReason();
  const noDrafter = engineInfo?.drafter_note ?? null;
  composer.set({ streaming: current !== null, blocked, noDrafter });
  settings.setDrafterNote(noDrafter);
  settings.setLoopNote(loopNote(engineInfo));
  examples.setEnabled(current === null && !blocked);
  if (locked() !== wasLocked) {
    wasLocked = locked();
    conversation.update(tree, wasLocked);
  }
  for (const button of document.querySelectorAll(".race-again")) {
    button.disabled = current !== null || Boolean(blocked) || Boolean(noDrafter);
  }
  settings.setEnabled(connected);
  quickBar.setEnabled(connected);
  newChatButton.disabled = !connected;
  resetCacheButton.disabled = !connected;
  calibrateButton.disabled = !connected || current !== null || Boolean(blocked) || calibration.running;
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
    const asked = conversationId;
    if (needDraw && asked && frame.conversation !== asked) {
      conversation.note("That conversation could not be opened (it was deleted, or it is open in another tab): this is a new chat.");
    } else if (!frame.resumed && everConnected && !conversation.empty) {
      // A conversation the server no longer has restarts its memory here: say so.
      conversation.note("Reconnected. The model does not see the messages above this line.");
    }
    rememberConversation(frame.conversation);
    showInUrl(frame.resumed ? frame.conversation : null);
    const draw = needDraw && frame.resumed;
    needDraw = false;
    if (draw) drawStored(frame.conversation);
    else history.render();
    everConnected = true;
    connected = true;
    engineInfo = frame.engine;
    engine.update(engineInfo);
    examples.show(engineInfo.examples);
    learnBaseline(frame);
    picker.update(frame.spec, frame.choices);
    deepResetField.hidden = !frame.deep_reset;
    settingsValues = frame.settings ?? {};
    settings.update(frame.settings);
    quickBar.update(frame.settings);
    examples.setBudget(settingsValues.reasoning_budget);
    refresh();
  },
  engine(frame) {
    engineInfo = frame.engine;
    engine.update(engineInfo);
    examples.show(engineInfo.examples);
    learnBaseline(frame);
    picker.update(frame.spec, frame.choices);
    deepResetField.hidden = !frame.deep_reset;
    refresh();
  },
  settings(frame) {
    settingsValues = frame.values ?? {};
    settings.update(frame.values);
    quickBar.settled(frame.values);
    examples.setBudget(settingsValues.reasoning_budget);
  },
  start(frame) {
    if (frame.message) {
      leaf = frame.message;
      showInUrl(conversationId);
      // The conversation is stored from its first message on, a race's or sweep's too: list it now.
      if (!history.items.some((item) => item.id === conversationId)) history.refresh();
    }
    const item = conversation.item(frame.id);
    if (item) {
      conversation.started(null, frame);
      // A reconnect that resumes the conversation carries on with a race or sweep in flight.
      if (item.el.dataset.state === "interrupted" && item.resume) {
        item.resume();
        current = item;
        refresh();
      }
      item.frame(frame);
      return;
    }
    // A race or sweep this page did not start (it was reloaded meanwhile) is drawn again from its frames.
    if (frame.lane != null || frame.block != null) {
      adoptContest(frame);
      return;
    }
    let turn = conversation.turnFor(frame);
    if (turn && !turn.active) {
      // A resumed conversation replays its latest reply: rebuild it, and follow it if still running.
      turn = conversation.restartTurn(turn, frame.id);
      current = turn;
      refresh();
    } else if (!turn) {
      // A reply on another branch than the one on screen is not shown; one the page has not drawn yet is.
      if (tree.get(frame.message)) return;
      turn = conversation.startTurn(frame.id, "");
      current = turn;
      refresh();
    }
    conversation.started(turn, frame);
    turn.started(frame);
  },
  thinking(frame) {
    if (itemFrame(frame)) return;
    conversation.turnFor(frame)?.addThinking(frame.text, frame.rounds);
  },
  answer(frame) {
    if (itemFrame(frame)) return;
    conversation.turnFor(frame)?.addAnswer(frame.text, frame.rounds, frame.draft_spans);
  },
  stats(frame) {
    if (itemFrame(frame)) return;
    conversation.turnFor(frame)?.updateStats(frame.stats);
  },
  done(frame) {
    if (itemFrame(frame)) return;
    const turn = conversation.turnFor(frame);
    if (!turn) return;
    turn.done(frame);
    settle(turn);
    syncTree();
    if (baseline.needsCalibration(turn.stats)) calibration.measure(true).then((measured) => measured && turn.judgeSpeed());
  },
  race_done: finishItem,
  sweep_done(frame) {
    baseline.fromSweep(frame); // its rows advise a block when drafting does not pay
    finishItem(frame);
  },
  new_chat(frame) {
    rememberConversation(frame.conversation);
    history.render();
  },
  selected(frame) {
    leaf = frame.current;
    drawStored(conversationId);
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
    quickBar.note(cacheStatus.textContent);
  },
  error(frame) {
    if (frame.code === "invalid_settings") {
      settings.rejected(frame.message);
      quickBar.update(settingsValues);
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
  if (item) {
    item.frame(frame);
    settle(item);
    syncTree();
  } else if (frame.message && !tree.get(frame.message)) {
    drawStored(conversationId); // a race or sweep of another page ended: draw what it stored
  }
}

/** The server's drafter-off rate for this engine and model, where it sends one. */
function learnBaseline(frame) {
  baseline.setEngine(frame.engine);
  const value = frame.baseline ?? frame.engine?.baseline;
  if (value != null) baseline.fromServer(value);
  calibration.describe();
}

/** A new conversation in this tab; the one it leaves stays stored. */
function startNewChat() {
  drawers.closeOverlays();
  if (current) connection.send({ type: "stop", id: current.id });
  if (!connection.send({ type: "new_chat" })) return;
  current = null;
  conversation.clear();
  tree.clear();
  leaf = null;
  showInUrl(null, true);
  cacheStatus.textContent = "";
  refresh();
  $("#prompt").focus();
}

newChatButton.addEventListener("click", startNewChat);

addEventListener("popstate", () => {
  const id = idFromUrl();
  if (id) openConversation(id, false);
  else if (!conversation.empty) startNewChat();
});

function resetCache() {
  const deep = !deepResetField.hidden && deepReset.checked;
  if (connection.send({ type: "reset_cache", deep })) cacheStatus.textContent = "Resetting…";
}

resetCacheButton.addEventListener("click", resetCache);

reconnectButton.addEventListener("click", () => connection.retryNow());
banner.querySelector(".banner-close").addEventListener("click", () => (banner.hidden = true));

const drawers = new Drawers($("#scrim"), {
  history: { toggle: $("#history-toggle"), el: $("#history"), narrow: matchMedia("(max-width: 1100px)") },
  settings: { toggle: $("#settings-toggle"), el: $("#settings-panel"), narrow: matchMedia("(max-width: 960px)") },
});

// Escape closes a drawer, else stops the reply, wherever focus is (fields that use Escape themselves,
// like a title being renamed, take it first).
document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape" || event.defaultPrevented || event.isComposing) return;
  if (drawers.closeOverlays()) {
    event.preventDefault();
  } else if (current) {
    event.preventDefault();
    stopReply();
  }
});

refresh();
history.refresh();
request("/api/settings/schema").then(({ schema }) => schema, (error) => error).then((schema) => {
  settings.setSchema(schema);
  quickBar.setSchema(schema instanceof Error ? null : schema);
});
connection.connect();
$("#prompt").focus();

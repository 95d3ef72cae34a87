// Wires the socket's frames (protocol v1) to the views, and the views' actions back to the socket.

import { request } from "@app/api.js";
import { pageActions } from "@app/actions.js";
import { AttachmentTray } from "@app/attachments.js";
import { Baseline } from "@app/baseline.js";
import { Calibration } from "@app/calibration.js";
import { Composer } from "@app/composer.js";
import { ConnectionStatus } from "@app/connection-status.js";
import { Conversation } from "@app/conversation.js";
import { bindTintToggle } from "@app/drafted-tint.js";
import { Drawers } from "@app/drawers.js";
import { EnginePanel } from "@app/engine.js";
import { EnginePicker } from "@app/engine-picker.js";
import { Examples } from "@app/examples.js";
import { frameHandlers } from "@app/frames.js";
import { History } from "@app/history.js";
import { Lightbox } from "@app/lightbox.js";
import { QuickBar } from "@app/quick-bar.js";
import { idFromUrl, showInUrl } from "@app/routing.js";
import { SettingsPane } from "@app/settings.js";
import { storedConversation } from "@app/stored.js";
import { Connection, socketUrl } from "@app/socket.js";
import { Tree } from "@app/tree.js";

const $ = (selector) => document.querySelector(selector);

// What the page knows and has in flight, shared with the frame handlers (frames.js).
const app = {
  connected: false, // a hello arrived on the current socket
  everConnected: false,
  engineInfo: null,
  api: null, // {answering, waiting}: the OpenAI-compatible API's requests for the model
  current: null, // the AssistantTurn, RaceView or SweepView in flight, if any
  settingsValues: {},
  // The server keeps a conversation (and a reply in flight) while its tab reconnects, and stores it from its
  // first message on: the URL names it, and a reload draws it from the store and follows a reply in flight.
  conversationId: idFromUrl(),
  needDraw: false, // the next hello opens a conversation to draw from the store
  leaf: null, // the last message of the branch on screen: a chat without `parent` follows it
  drawToken: 0,
  held: null, // frames that arrive while a stored conversation is being drawn
  wasLocked: null,
};
app.needDraw = app.conversationId !== null;
const baseline = new Baseline();
const tree = new Tree(); // the open conversation as stored (refetched after each reply)

const banner = $("#banner");
const cacheStatus = $("#cache-status");
const reconnectButton = $("#reconnect");
const connectionStatus = new ConnectionStatus({ el: $("#connection"), reconnect: reconnectButton });
const newChatButton = $("#new-chat");
const resetCacheButton = $("#reset-cache");
const deepResetField = $("#deep-reset-field");
const deepReset = $("#deep-reset");
const calibrateButton = $("#calibrate");

const conversation = new Conversation($("#log"), $("#jump"), {
  onResend: (text, images) => composer.insert(text, images),
  onRace: (user) => actions.startRace(user.text, composer.runs, user),
  judge: (stats) => actions.judgeReply(stats),
  onEdit: (user, text, images) => actions.editMessage(user, text, images),
  onRegenerate: (turn) => actions.regenerate(turn),
  onContinue: (turn) => actions.continueReply(turn),
  onSelect: (id) => actions.selectBranch(id),
  onApprove: (call, decision) => connection.send({ type: "tool_approval", call, decision }),
  streaming: () => app.current !== null,
});
const history = new History({
  root: $("#history"),
  onOpen: (id) => openConversation(id),
  onLeave: () => startNewChat(),
  current: () => app.conversationId,
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
const lightbox = new Lightbox($("#lightbox"), $("#log"));
const attachments = new AttachmentTray({
  zone: $("#composer"),
  prompt: $("#prompt"),
  button: $("#attach"),
  input: $("#attach-file"),
  tray: $("#attach-tray"),
  error: $("#attach-error"),
  onChange: (change) => composer.attachmentsChanged(change),
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
  attachments,
  onSend: (text, images) => actions.sendChat(text, images),
  onRace: (text, runs, images) => actions.startRace(text, runs, null, images),
  onSweep: (text, images) => actions.startSweep(text, images),
  onStop: () => actions.stopReply(),
});
const calibration = new Calibration({
  baseline, button: calibrateButton, status: $("#baseline-status"), error: $("#calibrate-error"), onChange: refresh,
});
bindTintToggle($("#tint-drafted"), $("#tint-drafted-hint"));
// The model's example prompts sit in the empty state, so they go once the conversation has a message.
const examples = new Examples($("#examples"), {
  onPick: (text) => !locked() && !blockedReason() && actions.sendChat(text),
});
const connection = new Connection(() => socketUrl(app.conversationId), {
  onFrame: (frame) => (app.held && frame.type !== "hello" ? app.held.push(frame) : handlers[frame.type]?.(frame)),
  onStatus: (status) => {
    connectionStatus.show(status);
    if (status.state !== "connecting" && status.state !== "open") lost();
  },
  onMalformed: () => showBanner("The server sent a message this page could not read; it was ignored."),
});

const { drawStored, syncTree } = storedConversation(app, {
  conversation, history, tree, locked, refresh, handle: (frame) => handlers[frame.type]?.(frame),
});
const actions = pageActions(app, {
  baseline, calibration, composer, connection, conversation, tree, blockedReason, refresh,
});
const handlers = frameHandlers(app, {
  baseline, calibration, conversation, history, engine, examples, picker, settings, quickBar, tree, cacheStatus,
  deepResetField, adoptContest: actions.adoptContest, drawStored, refresh, rememberConversation, settle, showBanner,
  syncTree,
});

function rememberConversation(id) {
  app.conversationId = id ?? null;
}

/** Open stored conversation `id` in this tab: a new socket names it, and the hello draws it. */
function openConversation(id, push = true) {
  drawers.closeOverlays();
  if (id === app.conversationId && !app.needDraw) return;
  app.drawToken += 1;
  app.held = null;
  app.current = null;
  app.connected = false;
  conversation.clear();
  tree.clear();
  app.leaf = null;
  rememberConversation(id);
  app.needDraw = true;
  showInUrl(id, push);
  history.render();
  refresh();
  connection.reopen();
}

function locked() {
  return app.current !== null || !app.connected;
}

function settle(turn) {
  if (turn === app.current && !turn.active) {
    app.current = null;
    refresh();
  }
}

/** Why nothing can be sent right now (disconnected, model loading), or null. */
function blockedReason() {
  if (!app.connected) {
    return app.everConnected
      ? "Not connected. Anything you type stays here until the connection is back."
      : "Connecting to the server…";
  }
  if (app.engineInfo.state === "loading" || app.engineInfo.state === "starting") return "The model is loading…";
  if (app.engineInfo.state === "error") return "The engine could not start; see the message at the top.";
  if (app.api?.answering && app.current === null) {
    const waiting = app.api.waiting ? ` (${app.api.waiting} more waiting)` : "";
    return `The model is answering a request from the API${waiting}: send when it is done.`;
  }
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
  const noDrafter = app.engineInfo?.drafter_note ?? null;
  composer.set({ streaming: app.current !== null, blocked, noDrafter });
  // Whether the model can see: until the engine says, the reason nothing can be sent stands for why not.
  attachments.setVision(app.engineInfo?.vision === true, app.engineInfo?.vision_note ?? blocked);
  settings.setDrafterNote(noDrafter);
  settings.setLoopNote(loopNote(app.engineInfo));
  examples.setEnabled(app.current === null && !blocked);
  if (locked() !== app.wasLocked) {
    app.wasLocked = locked();
    conversation.update(tree, app.wasLocked);
  }
  for (const button of document.querySelectorAll(".race-again")) {
    button.disabled = app.current !== null || Boolean(blocked) || Boolean(noDrafter);
  }
  settings.setEnabled(app.connected);
  quickBar.setEnabled(app.connected);
  newChatButton.disabled = !app.connected;
  resetCacheButton.disabled = !app.connected;
  calibrateButton.disabled = !app.connected || app.current !== null || Boolean(blocked) || calibration.running;
}

function showBanner(text) {
  banner.querySelector(".banner-text").textContent = text;
  banner.hidden = false;
}

/** The socket closed: nothing in flight may vanish silently. */
function lost() {
  if (!app.connected) return;
  app.connected = false;
  if (app.current) {
    app.current.interrupt();
    app.current = null;
  }
  engine.unknown("offline");
  refresh();
}

/** A new conversation in this tab; the one it leaves stays stored. */
function startNewChat() {
  drawers.closeOverlays();
  if (app.current) connection.send({ type: "stop", id: app.current.id });
  if (!connection.send({ type: "new_chat" })) return;
  app.current = null;
  conversation.clear();
  tree.clear();
  app.leaf = null;
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
  if (event.key !== "Escape" || event.defaultPrevented || event.isComposing || lightbox.isOpen) return;
  if (drawers.closeOverlays()) {
    event.preventDefault();
  } else if (app.current) {
    event.preventDefault();
    actions.stopReply();
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

// What the page sends: messages, edits, regenerations and continuations, branch choices, races and sweeps,
// stops and block changes, each drawn at once and handed the view its frames will go to.

import { mostDrafted, slowReplyNotice } from "@app/baseline.js";
import { RaceView } from "@app/race.js";
import { SWEEP_BLOCKS, SweepView } from "@app/sweep.js";

/**
 * The page's actions. `app` is what the page knows and has in flight (main.js), which they change; `page`
 * the socket, the views and `blockedReason`/`refresh` from main.js.
 */
export function pageActions(app, page) {
  const { baseline, calibration, composer, connection, conversation, tree, blockedReason, refresh } = page;

  function newId() {
    return `m${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
  }

  /** A frame's `images`: only where there are some, so a text message's frame stays as it was. */
  function withImages(frame, images) {
    return images.length ? { ...frame, images } : frame;
  }

  /** Send `text` with `images` (attachment ids; the text may be empty when there are some). */
  function sendChat(text, images = []) {
    const id = newId();
    if (!connection.send(withImages({ type: "chat", id, text }, images))) return false;
    conversation.addUser(id, text, images);
    conversation.sentAfter(id, app.leaf);
    app.current = conversation.startTurn(id, text, images);
    refresh();
    return true;
  }

  /** Send `user`'s message again as `text` with `images`: a new branch beside it (the old one is kept). */
  function editMessage(user, text, images) {
    if (app.current || blockedReason()) return false;
    const id = newId();
    if (!connection.send(withImages({ type: "chat", id, text, parent: user.parent }, images))) return false;
    conversation.truncateFrom(user);
    conversation.addUser(id, text, images);
    conversation.sentAfter(id, user.parent);
    app.current = conversation.startTurn(id, text, images);
    refresh();
    return true;
  }

  /** Answer `turn`'s message again, with the current settings: a sibling of `turn`. */
  function regenerate(turn) {
    if (app.current || blockedReason() || !turn.message) return;
    const id = newId();
    if (!connection.send({ type: "regenerate", id, message: turn.message })) return;
    conversation.truncateFrom(turn);
    app.current = conversation.startTurn(id, turn.prompt, turn.images);
    refresh();
  }

  /** Go on with `turn`, an unfinished last reply: the continuation streams into the same message. */
  function continueReply(turn) {
    if (app.current || blockedReason() || !turn.message) return;
    const id = newId();
    if (!connection.send({ type: "continue", id })) return;
    app.current = conversation.continueTurn(turn, id);
    refresh();
  }

  /** Show the branch through message `id` (the arrows); `selected` answers, and the branch is redrawn. */
  function selectBranch(id) {
    if (app.current || !app.connected) return;
    connection.send({ type: "select", message: id });
  }

  /**
   * Race `text` and `images` with the drafter off and on, `runs` times each way; false when it could not start.
   * Raced again from a past message (`beside`), it becomes a new branch beside that message, as an edit
   * does, so both lanes see the history that message saw, and its images; otherwise it follows the current
   * branch.
   */
  function startRace(text, runs, beside = null, images = beside?.images ?? []) {
    if (app.current || !app.connected) return false;
    const id = newId();
    const inPlace = beside !== null && beside.parent !== undefined;
    const frame = { type: "race", id, text, runs, ...(inPlace ? { parent: beside.parent } : {}) };
    if (!connection.send(withImages(frame, images))) return false;
    if (inPlace) conversation.truncateFrom(beside);
    conversation.addUser(id, text, images);
    conversation.sentAfter(id, inPlace ? beside.parent : app.leaf);
    app.current = conversation.addItem(raceView(id, text, runs));
    refresh();
    return true;
  }

  function raceView(id, text, runs) {
    return new RaceView(id, text, runs, {
      context: () => ({ engine: app.engineInfo, settings: app.settingsValues }),
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
    app.current = view;
    refresh();
    view.frame(frame);
  }

  /** Run `text` and `images` at every block size of the sweep; false when it could not start. */
  function startSweep(text, images = []) {
    if (app.current || !app.connected) return false;
    const id = newId();
    if (!connection.send(withImages({ type: "sweep", id, text, blocks: SWEEP_BLOCKS }, images))) return false;
    conversation.addUser(id, text, images);
    app.current = conversation.addItem(new SweepView(id, text, { onApply: applyBlock }));
    refresh();
    return true;
  }

  /** Block 1 is the drafter off; any other size turns it on at that size. */
  function applyBlock(block) {
    const values = block === 1 ? { speculative: false } : { speculative: true, draft_block_size: block };
    return connection.send({ type: "settings", values });
  }

  /** A finished reply's notice when drafting did not pay off, with the change it advises. */
  function judgeReply(stats) {
    // On "auto", judged at the block it drafted at most; a reply it ran without drafting has nothing to advise.
    const setting = app.settingsValues.draft_block_size;
    const block = setting === "auto" ? mostDrafted(stats.block_history) : setting;
    if (block == null) return null;
    const notice = slowReplyNotice(baseline, stats, block, app.engineInfo);
    if (!notice) return null;
    const action = notice.block > 1
      ? { label: `Use block ${notice.block}`, run: () => applyBlock(notice.block) }
      : { label: "Turn the drafter off", run: () => applyBlock(1) };
    return { text: notice.text, action };
  }

  function stopReply() {
    if (!app.current || !connection.send({ type: "stop", id: app.current.id })) return;
    app.current.stopping();
    composer.stopping();
  }

  return {
    sendChat, editMessage, regenerate, continueReply, selectBranch, startRace, adoptContest, startSweep, applyBlock,
    judgeReply, stopReply,
  };
}

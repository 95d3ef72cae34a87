// The socket's frames (protocol v1), each handed to the views it concerns.

import { formatBytes, formatCount } from "@app/format.js";
import { showInUrl } from "@app/routing.js";

const PROTOCOL = 1;

/**
 * Each frame type's handler, by type. `app` is what the page knows and has in flight (main.js), which the
 * frames change; `page` its views and the actions the frames need.
 */
export function frameHandlers(app, page) {
  const {
    baseline, calibration, conversation, history, engine, examples, picker, settings, quickBar, tree, cacheStatus,
    deepResetField, adoptContest, drawStored, refresh, rememberConversation, settle, showBanner, syncTree,
  } = page;

  const handlers = {
    hello(frame) {
      if (frame.protocol !== PROTOCOL) {
        showBanner(`The server speaks protocol ${frame.protocol} and this page speaks ${PROTOCOL}. ` +
          "Reload the page.");
      }
      const asked = app.conversationId;
      if (app.needDraw && asked && frame.conversation !== asked) {
        conversation.note("That conversation could not be opened (it was deleted, or it is open in another tab): " +
          "this is a new chat.");
      } else if (!frame.resumed && app.everConnected && !conversation.empty) {
        // A conversation the server no longer has restarts its memory here: say so.
        conversation.note("Reconnected. The model does not see the messages above this line.");
      }
      rememberConversation(frame.conversation);
      showInUrl(frame.resumed ? frame.conversation : null);
      const draw = app.needDraw && frame.resumed;
      app.needDraw = false;
      if (draw) drawStored(frame.conversation);
      else history.render();
      app.everConnected = true;
      app.connected = true;
      showEngine(frame);
      app.settingsValues = frame.settings ?? {};
      settings.update(frame.settings);
      quickBar.update(frame.settings);
      examples.setBudget(app.settingsValues.reasoning_budget);
      refresh();
    },
    engine(frame) {
      showEngine(frame);
      refresh();
    },
    settings(frame) {
      app.settingsValues = frame.values ?? {};
      settings.update(frame.values);
      quickBar.settled(frame.values);
      examples.setBudget(app.settingsValues.reasoning_budget);
    },
    start(frame) {
      if (frame.message) {
        app.leaf = frame.message;
        showInUrl(app.conversationId);
        // The conversation is stored from its first message on, a race's or sweep's too: list it now.
        if (!history.items.some((item) => item.id === app.conversationId)) history.refresh();
      }
      const item = conversation.item(frame.id);
      if (item) {
        conversation.started(null, frame);
        // A reconnect that resumes the conversation carries on with a race or sweep in flight.
        if (item.el.dataset.state === "interrupted" && item.resume) {
          item.resume();
          app.current = item;
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
        app.current = turn;
        refresh();
      } else if (!turn) {
        // A reply on another branch than the one on screen is not shown; one the page has not drawn yet is.
        if (tree.get(frame.message)) return;
        turn = conversation.startTurn(frame.id, "");
        app.current = turn;
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
    tool_call(frame) {
      conversation.turnFor(frame)?.toolCall(frame);
    },
    tool_result(frame) {
      conversation.turnFor(frame)?.toolResult(frame);
    },
    stats(frame) {
      if (itemFrame(frame)) return;
      showAutoBlock(frame.stats);
      conversation.turnFor(frame)?.updateStats(frame.stats);
    },
    done(frame) {
      if (itemFrame(frame)) return;
      showAutoBlock(frame.stats);
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
      app.leaf = frame.current;
      drawStored(app.conversationId);
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
        quickBar.update(app.settingsValues);
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

  /** A chat reply's `auto_block`, the block draft_block_size "auto" runs at now, in the quick bar and the pane. */
  function showAutoBlock(stats) {
    quickBar.autoChose(stats?.auto_block);
    settings.setAutoBlock(stats?.auto_block);
  }

  function finishItem(frame) {
    const item = conversation.item(frame.id);
    if (item) {
      item.frame(frame);
      settle(item);
      syncTree();
    } else if (frame.message && !tree.get(frame.message)) {
      drawStored(app.conversationId); // a race or sweep of another page ended: draw what it stored
    }
  }

  /** The server's drafter-off rate for this engine and model, where it sends one. */
  // The engine, its picker and its examples, as a hello or an engine frame tells them.
  function showEngine(frame) {
    app.engineInfo = frame.engine;
    app.api = frame.api ?? null;
    engine.update(app.engineInfo);
    examples.show(app.engineInfo.examples);
    learnBaseline(frame);
    picker.update(frame.spec, frame.choices);
    deepResetField.hidden = !frame.deep_reset;
  }

  function learnBaseline(frame) {
    baseline.setEngine(frame.engine);
    const value = frame.baseline ?? frame.engine?.baseline;
    if (value != null) baseline.fromServer(value);
    calibration.describe();
  }

  return handlers;
}

// A finished reply's actions row (branch arrows, Copy, Continue, Regenerate, Edit & resend) and its notes:
// how it ended, what the model did not see, and each note's element.

import { branchNav } from "@app/branch-nav.js";
import { copyText } from "@app/clipboard.js";
import { element } from "@app/dom.js";

// How a reply may end and still be continued (`continue {id}`) in the same message.
export const CONTINUABLE = ["cancelled", "length", "interrupted"];

const FINISH_NOTES = {
  cancelled: "stopped",
  length: "cut at max tokens",
  interrupted: "Interrupted: specchat stopped before this reply finished.",
};

/** The note on a reply whose conversation no longer fits the model's context (`dropped_turns` turns left out). */
export function droppedNote(count) {
  const turns = count === 1 ? "oldest turn" : `${count} oldest turns`;
  return `The model did not see this conversation's ${turns}: the conversation is longer than its context.`;
}

/** The note on how a reply ended (`reason`), if any: its `error` ({message, code}), or that it was stopped,
 * cut at max tokens or interrupted. */
export function addEndNote(turn, reason, error) {
  if (reason === "error") turn.addNote("error", error?.message || "The reply failed.", error?.code);
  else if (FINISH_NOTES[reason]) turn.addNote(reason, FINISH_NOTES[reason]);
}

/** A reply's text-link action; `label` names what it acts on for assistive technology. */
function actionButton(text, { label, title, disabled = false, className = "", onClick } = {}) {
  const button = element("button", `link-button ${className}`.trim());
  button.type = "button";
  button.textContent = text;
  if (label) button.setAttribute("aria-label", label);
  if (title) button.title = title;
  button.disabled = disabled;
  if (onClick) button.addEventListener("click", onClick);
  return button;
}

/**
 * Branch arrows, Copy and Regenerate for a finished answer; Continue when it is the branch's last
 * message and ended unfinished; "Edit & resend" when the reply failed or was cut off by the network.
 */
export function renderTurnActions(turn) {
  const buttons = [];
  const nav = turn.message && branchNav(turn.message, turn.siblings, "answer", turn.onSelect, turn.locked);
  if (nav) buttons.push(nav);
  if (turn.answer) {
    const copy = actionButton("Copy", { label: "Copy answer" });
    copy.addEventListener("click", () => copyText(copy, turn.answer, turn.answerEl));
    buttons.push(copy);
  }
  if (turn.continuable) {
    buttons.push(actionButton("Continue", {
      label: "Continue reply", title: "Go on with this reply where it stopped, in this same message",
      disabled: turn.locked, className: "continue-reply", onClick: () => turn.onContinue(turn),
    }));
  }
  if (turn.message && turn.onRegenerate) {
    buttons.push(actionButton("Regenerate", {
      label: "Regenerate answer",
      title: "Answer this message again, with the current settings; this answer is kept",
      disabled: turn.locked, onClick: () => turn.onRegenerate(turn),
    }));
  }
  if (["failed", "interrupted"].includes(turn.el.dataset.state) || turn.el.dataset.finish === "error") {
    buttons.push(actionButton("Edit & resend", { onClick: () => turn.onResend(turn.prompt, turn.images) }));
  }
  turn.actionsEl.replaceChildren(...buttons);
  turn.actionsEl.hidden = buttons.length === 0;
}

/** A reply's note; an `action` ({label, run}) is a button in it, pressed once. */
export function noteElement({ kind, text, code, action }) {
  const note = element("p", `note note-${kind}`);
  note.dataset.kind = kind;
  note.setAttribute("role", kind === "error" ? "alert" : "status");
  note.textContent = kind === "error" ? `Error: ${text}` : text;
  if (code) note.title = code;
  if (action) {
    const button = element("button", "link-button note-action");
    button.type = "button";
    button.textContent = action.label;
    button.addEventListener("click", () => {
      action.run();
      button.disabled = true;
    }, { once: true });
    note.append(" ", button);
  }
  return note;
}

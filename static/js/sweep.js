// "Find the best block size": one prompt run at draft block sizes 1 (drafter off) to 6 and at "auto" (the
// engine picks the block as it goes), drawn as a chart as each block finishes, with an offer to use the fastest.

import { busyText } from "@app/busy.js";
import { ContestCard } from "@app/contest-card.js";
import { element } from "@app/dom.js";
import { formatRate } from "@app/format.js";
import { saveMarkdownReceipt } from "@app/receipt.js";
import { schedule } from "@app/render.js";
import { MEASURE_TOKENS } from "@app/stats.js";
import { renderSweepChart, rowRate } from "@app/sweep-chart.js";

export const SWEEP_BLOCKS = [1, 2, 3, 4, 5, 6, "auto"];

export class SweepView extends ContestCard {
  /**
   * @param {string} id the sweep id
   * @param {string} prompt
   * @param {{onApply: (block: number) => boolean}} hooks `onApply` sets the block size (block 1
   *   turns the drafter off) and says whether the change went out.
   */
  constructor(id, prompt, { onApply }) {
    super(id, { className: "sweep", label: "Block size sweep", title: "Best draft block size", noun: "sweep" });
    this.prompt = prompt;
    this.onApply = onApply;
    this.blocks = SWEEP_BLOCKS;
    this.rows = new Map(); // block -> row, as blocks finish
    this.best = null;
    this.result = null; // the `sweep_done` frame
    this.chartEl = element("div", "sweep-chart-box");
    this.body(this.chartEl);
    this.running = "";
    this.dirty = true;
    schedule(this);
  }

  get active() {
    return ["waiting", "running", "stopping"].includes(this.el.dataset.state);
  }

  /** Any frame with this sweep's id. */
  frame(frame) {
    switch (frame.type) {
      case "start":
        return this.blockStart(frame);
      case "stats":
        return this.blockStats(frame);
      case "done":
        return this.blockDone(frame);
      case "sweep_done":
        return this.finish(frame);
    }
  }

  resume() {
    this.el.dataset.state = "running";
  }

  /** `start` of one block's run. */
  blockStart(frame) {
    if (!this.active) return;
    if (this.el.dataset.state === "waiting") this.el.dataset.state = "running";
    const index = this.blocks.indexOf(frame.block);
    const where = index >= 0 ? ` (${index + 1} of ${this.blocks.length})` : "";
    this.running = `${frame.block === "auto" ? "Auto" : `Block ${frame.block}`}${frame.block === 1 ? ", drafter off" : ""}${where}`;
    if (this.el.dataset.state !== "stopping") this.setStatus(`${this.running}…`);
  }

  /** Live numbers of the block running now, once there are enough tokens to mean something. */
  blockStats(frame) {
    const stats = frame.stats ?? {};
    if (this.el.dataset.state !== "running" || stats.tok_s == null || (stats.tokens ?? 0) < MEASURE_TOKENS) return;
    this.setStatus(`${this.running}: ${formatRate(stats.tok_s)} tok/s…`);
  }

  /** `done` of one block's run: its bar appears. */
  blockDone(frame) {
    const stats = frame.stats ?? {};
    if (frame.finish_reason === "cancelled" || frame.finish_reason === "error" || stats.tok_s == null) return;
    this.rows.set(frame.block, {
      block: frame.block, tok_s: stats.tok_s, acceptance: stats.acceptance ?? null,
      mean_accepted: stats.mean_accepted ?? null,
    });
    this.dirty = true;
    schedule(this);
  }

  /** `sweep_done`: the server's rows replace the ones gathered from the blocks' `done` frames. */
  finish(frame) {
    if (!this.active) return;
    const reason = frame.finish_reason ?? "stop";
    this.el.dataset.state = "done";
    this.el.dataset.finish = reason;
    this.result = frame;
    if (Array.isArray(frame.rows)) {
      this.rows = new Map(frame.rows.map((row) => [row.block, row]));
    }
    const rows = [...this.rows.values()].filter((row) => rowRate(row) != null);
    this.best = frame.best ?? rows.reduce((a, b) => (rowRate(b) > rowRate(a) ? b : a), rows[0])?.block ?? null;
    if (typeof this.best === "object" && this.best !== null) this.best = this.best.block;
    this.el.dataset.best = String(this.best ?? "");
    if (reason === "error") this.addNote("error", `Error: ${frame.error?.message ?? "The sweep failed."}`);
    if (reason === "cancelled") this.addNote("cancelled", "Stopped: the chart shows the blocks that finished.");
    const busy = busyText(frame.busy);
    if (busy) this.addNote("busy", busy);
    const row = this.rows.get(this.best);
    this.setStatus(this.best != null && row
      ? `Fastest: ${this.best === "auto" ? row.chose ?? "auto" : `block ${this.best}`}${this.best === 1 ? " (drafter off)" : ""} at ${formatRate(rowRate(row))} tok/s`
      : "No block finished");
    this.dirty = true;
    this.renderActions();
  }

  /** "Use block N" for the fastest block, and the receipt (saved as Markdown, opened, or as JSON). */
  renderActions() {
    const buttons = [];
    const status = element("span", "race-receipt-status");
    status.setAttribute("role", "status");
    if (this.best != null) {
      const use = element("button", "button small primary",
        this.best === 1 ? "Turn the drafter off" : this.best === "auto" ? "Use auto" : `Use block ${this.best}`);
      use.type = "button";
      use.setAttribute("aria-label", this.best === 1 ? "Turn the drafter off" : `Use draft block size ${this.best}`);
      use.addEventListener("click", () => {
        if (this.onApply(this.best)) {
          use.disabled = true;
          status.textContent = "Applies from the next message.";
        } else {
          status.textContent = "Not connected; nothing was changed.";
        }
      });
      buttons.push(use);
    }
    if (this.result?.receipt) buttons.push(...this.receiptActions(status));
    if (!buttons.length) return;
    this.actionsEl.replaceChildren(...buttons, status);
    this.actionsEl.hidden = false;
  }

  receiptActions(status) {
    const base = this.result.receipt;
    const save = element("button", "button small", "Receipt");
    save.type = "button";
    save.setAttribute("aria-label", "Save sweep receipt");
    save.title = "Save the sweep's receipt: every block's numbers, the machine, and the command that measures it again";
    save.addEventListener("click", async () => {
      save.disabled = true;
      status.dataset.kind = "";
      try {
        await saveMarkdownReceipt(this.id, base, `specchat-sweep-${this.id}.md`);
        status.textContent = "Saved the receipt.";
        status.dataset.kind = "ok";
      } catch (error) {
        status.textContent = `Error: ${error.message}`;
        status.dataset.kind = "error";
      } finally {
        save.disabled = false;
      }
    });
    return [save, ...this.receiptLinks(base, "sweep receipt", `specchat-sweep-${this.id}`)];
  }

  flush() {
    if (this.dirty) {
      this.dirty = false;
      this.chartEl.replaceChildren(renderSweepChart([...this.rows.values()], this.blocks, this.best));
    }
    this.flushCard();
  }

  dispose() {}
}

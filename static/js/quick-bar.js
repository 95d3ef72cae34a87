// The quick bar by the message box: the drafter, the draft block size, the thinking budget and a cache
// reset, one click or one key each. It shows the live settings (every tab's changes included) and sends
// its changes through the settings pane, so they are saved and broadcast like any other edit. The block
// "auto" sits below the smallest; while a reply runs on it the bar shows the block it chose, "auto (4)".

const BUDGETS = [0, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536];
const NOTE_MS = 6000;
const AUTO = "auto";

/** "auto (4)", "auto (off)" or "auto" (nothing chosen yet): the block setting "auto" with auto's choice. */
export function autoLabel(chose) {
  if (chose == null) return AUTO;
  return `${AUTO} (${chose === 1 ? "off" : chose})`;
}

// Alt (Option on a Mac) with a key; Shift goes the other way. Matched on the physical key, so a layout's
// Alt-characters (Option+D is "∂") do not get in the way.
const KEYS = {
  KeyD: { plain: "drafter" },
  KeyB: { plain: "blockUp", shift: "blockDown" },
  KeyT: { plain: "budgetUp", shift: "budgetDown" },
  KeyR: { plain: "resetCache" },
};

export class QuickBar {
  /**
   * @param {{root: HTMLElement, apply: (values: object) => boolean, resetCache: () => void}} parts
   * `apply` sends a settings change; `resetCache` empties the prompt cache as the pane's button does.
   */
  constructor({ root, apply, resetCache }) {
    this.root = root;
    this.apply = apply;
    this.values = null;
    // The block size's limits, from the settings' schema; until it arrives the server judges each step up.
    this.block = { min: 2, max: Infinity };
    this.enabled = false;
    this.autoBlock = null; // the block "auto" ran at last (1: drafting off), from the replies' stats
    this.inFlight = 0; // changes sent from here whose `settings` answer has not come back
    this.noteTimer = 0;
    const $ = (name) => root.querySelector(`[data-quick="${name}"]`);
    this.buttons = {
      drafter: $("drafter"), blockDown: $("blockDown"), blockUp: $("blockUp"),
      budgetDown: $("budgetDown"), budgetUp: $("budgetUp"), resetCache: $("resetCache"),
    };
    this.blockEl = $("block");
    this.budgetEl = $("budget");
    this.statusEl = $("status");
    this.actions = {
      drafter: () => this.set({ speculative: !this.values.speculative }),
      blockUp: () => this.set({ draft_block_size: this.stepUp(this.values.draft_block_size) }),
      blockDown: () => this.set({ draft_block_size: this.stepDown(this.values.draft_block_size) }),
      budgetUp: () => this.set({ reasoning_budget: BUDGETS.find((b) => b > this.values.reasoning_budget) }),
      budgetDown: () => this.set({ reasoning_budget: BUDGETS.findLast((b) => b < this.values.reasoning_budget) }),
      resetCache: () => {
        this.note("Resetting the prompt cache…");
        resetCache();
      },
    };
    for (const [name, button] of Object.entries(this.buttons)) {
      button.addEventListener("click", () => this.run(name));
    }
    document.addEventListener("keydown", (event) => {
      if (!event.altKey || event.ctrlKey || event.metaKey || event.isComposing) return;
      const key = KEYS[event.code];
      const name = key && (event.shiftKey ? key.shift : key.plain);
      if (!name) return;
      event.preventDefault();
      this.run(name);
    });
  }

  /** Up from "auto" fixes the block it chose (the smallest when it chose none, or drafting off). */
  stepUp(block) {
    if (block === AUTO) return Math.max(this.autoBlock ?? this.block.min, this.block.min);
    return Math.min(this.block.max, block + 1);
  }

  /** Down from the smallest block is "auto". */
  stepDown(block) {
    return block === AUTO || block <= this.block.min ? AUTO : block - 1;
  }

  /** The block "auto" runs at now (a reply's `auto_block`; null when its block is fixed). */
  autoChose(block) {
    if (block == null || block === this.autoBlock) return;
    this.autoBlock = block;
    this.render();
  }

  run(name) {
    if (!this.enabled || !this.values || this.buttons[name].disabled) return;
    this.actions[name]();
  }

  /** Send `values` when they change something; shown at once, put right by the server's answer. */
  set(values) {
    const changes = Object.entries(values).filter(([key, value]) => value !== undefined && value !== this.values[key]);
    if (!changes.length) return;
    if (this.apply(Object.fromEntries(changes))) {
      this.inFlight += 1;
      this.show({ ...this.values, ...Object.fromEntries(changes) });
    }
  }

  /** The settings as the server holds them (a `hello`), or as refused changes left them. */
  update(values) {
    this.inFlight = 0;
    if (values) this.show(values);
  }

  /**
   * A `settings` frame. While later presses here are still unanswered, the bar already shows where they
   * lead, so an answer to an earlier one would only put it back for a moment; the last answer is shown.
   */
  settled(values) {
    this.inFlight = Math.max(0, this.inFlight - 1);
    if (this.inFlight === 0 && values) this.show(values);
  }

  setEnabled(enabled) {
    this.enabled = enabled;
    this.render();
  }

  /** The settings' JSON schema (`GET /api/settings/schema`): where the block size stops. */
  setSchema(schema) {
    const property = schema?.properties?.draft_block_size;
    const block = property?.anyOf?.find((branch) => branch.type === "integer") ?? property;
    // Below the smallest block is "auto", so the smallest is taken as 2 until the schema says.
    this.block = { min: block?.minimum ?? 2, max: block?.maximum ?? Infinity };
    this.render();
  }

  /** A short message for a few seconds, e.g. what a cache reset freed. */
  note(text) {
    clearTimeout(this.noteTimer);
    this.statusEl.textContent = text;
    this.noteTimer = setTimeout(() => (this.statusEl.textContent = ""), NOTE_MS);
  }

  show(values) {
    this.values = { ...values };
    this.render();
  }

  render() {
    const v = this.values;
    const ready = this.enabled && v !== null;
    for (const button of Object.values(this.buttons)) button.disabled = !ready;
    if (!v) return;
    const on = Boolean(v.speculative);
    this.buttons.drafter.setAttribute("aria-pressed", String(on));
    this.buttons.drafter.querySelector(".quick-state").textContent = on ? "on" : "off";
    const auto = v.draft_block_size === AUTO;
    this.blockEl.textContent = auto ? autoLabel(this.autoBlock) : String(v.draft_block_size);
    this.blockEl.closest(".quick-group").dataset.inactive = String(!on);
    this.budgetEl.textContent = v.reasoning_budget ? String(v.reasoning_budget) : "off";
    this.buttons.blockDown.disabled ||= auto;
    this.buttons.blockUp.disabled ||= !auto && v.draft_block_size >= this.block.max;
    this.buttons.budgetDown.disabled ||= v.reasoning_budget <= BUDGETS[0];
    this.buttons.budgetUp.disabled ||= v.reasoning_budget >= BUDGETS.at(-1);
  }
}

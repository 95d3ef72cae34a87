// The engine section of the settings pane: which engine runs, switched live with Apply.
// It lists the models the server can find (GET /api/models) to pick from; typing a path or name stays possible.

import { request } from "@app/api.js";
import { formatBytes } from "@app/format.js";

const LABELS = { mlx: "MLX (in this process)", mtplx: "MTPLX daemon", openai: "OpenAI-compatible server" };
// Which fields each engine reads; the rest are hidden so the form asks only what matters.
const FIELDS = {
  mlx: ["model", "drafter"],
  mtplx: ["model", "base_url", "api_key"],
  openai: ["model", "base_url", "api_key"],
};
const PLACEHOLDERS = {
  mlx: { model: "a folder or hub id, or pick one below", drafter: "bundled MTP head, or none" },
  mtplx: { model: "what the daemon serves", base_url: "http://127.0.0.1:8766" },
  openai: { model: "the server's first model", base_url: "http://127.0.0.1:8080/v1" },
};
const SOURCES = { bundled: "bundled", "models-dir": "models folder", "hf-cache": "Hugging Face cache" };
const SERVED_DEBOUNCE_MS = 500;

/** A listed model's head: its own, a drafter found for it (a folder, or a base model in the hub cache), or none. */
function headText(model) {
  if (model.mtp) return "MTP head";
  return model.drafter ? "drafter found" : "no MTP head";
}

export class EnginePicker {
  /**
   * @param {{form: HTMLFormElement, error: HTMLElement, list: HTMLElement, status: HTMLElement,
   *          send: (spec: object) => boolean}} parts
   * `list` holds the model buttons; `status` says what the list is (or why it is empty).
   */
  constructor({ form, error, list, status, send }) {
    this.form = form;
    this.errorEl = error;
    this.list = list;
    this.statusEl = status;
    this.send = send;
    this.select = form.elements.namedItem("name");
    this.model = form.elements.namedItem("model");
    this.baseUrl = form.elements.namedItem("base_url");
    this.spec = null;
    this.choices = [];
    this.shown = ""; // the spec and choices the form was last filled from
    this.found = { models: [], mtplx: false, served: null }; // the last /api/models answer
    this.asked = 0; // answers to older requests are dropped
    this.servedTimer = 0;
    this.select.addEventListener("change", () => {
      this.showFields();
      this.refresh();
    });
    this.model.addEventListener("input", () => this.showList());
    this.baseUrl.addEventListener("input", () => {
      clearTimeout(this.servedTimer);
      this.servedTimer = setTimeout(() => this.refresh(), SERVED_DEBOUNCE_MS);
    });
    this.list.addEventListener("click", (event) => {
      const button = event.target.closest("button[data-value]");
      if (!button) return;
      this.model.value = button.dataset.value;
      this.showList();
    });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.apply();
    });
  }

  /**
   * `spec` and `choices` as in `hello` and `engine` frames. Engine frames also report loading progress, so
   * the form is filled again only when the spec changed, and never over the field being typed in.
   */
  update(spec, choices) {
    if (!spec) return;
    const shown = JSON.stringify([spec, choices]);
    if (shown === this.shown) return;
    this.shown = shown;
    this.spec = spec;
    this.choices = choices ?? [spec.name];
    this.showChoices(spec.name);
    for (const name of ["model", "drafter", "base_url"]) {
      const input = this.form.elements.namedItem(name);
      if (input !== document.activeElement) input.value = spec[name] ?? "";
    }
    const key = this.form.elements.namedItem("api_key");
    if (key !== document.activeElement) key.value = "";
    key.placeholder = spec.api_key_set ? "set (leave empty to keep none)" : "none";
    this.form.querySelector("fieldset").disabled = this.choices.length < 2;
    this.showFields();
    this.refresh();
  }

  /** The engines to offer: MTPLX only where it can run here or a daemon answers (or it is the one running). */
  showChoices(selected) {
    const offered = this.choices.filter((name) => name !== "mtplx" || this.found.mtplx || this.spec?.name === "mtplx");
    if (!offered.includes(selected)) selected = this.spec?.name;
    this.select.replaceChildren(
      ...offered.map((name) => new Option(LABELS[name] ?? name, name, false, name === selected)),
    );
  }

  showFields() {
    const wanted = FIELDS[this.select.value] ?? [];
    for (const label of this.form.querySelectorAll("[data-field]")) {
      const field = label.dataset.field;
      label.hidden = !wanted.includes(field);
      if (field !== "api_key") {
        label.querySelector("input").placeholder = PLACEHOLDERS[this.select.value]?.[field] ?? "";
      }
    }
    this.showList();
  }

  /** Ask the server what it can find (and, for a server engine, what the typed address serves). */
  async refresh() {
    const ask = ++this.asked;
    const daemon = this.select.value !== "mlx" && this.baseUrl.value.trim();
    const path = daemon ? `/api/models?base_url=${encodeURIComponent(daemon)}` : "/api/models";
    if (daemon) this.statusEl.textContent = "Asking the server for its models…";
    let found;
    try {
      found = await request(path);
    } catch (error) {
      if (ask !== this.asked) return;
      this.found = { models: [], mtplx: this.found.mtplx, served: null };
      this.statusEl.textContent = `Models could not be listed: ${error.message} Type a path or name instead.`;
      this.list.replaceChildren();
      return;
    }
    if (ask !== this.asked) return;
    this.found = { models: found.models ?? [], mtplx: Boolean(found.mtplx), served: found.served ?? null };
    this.showChoices(this.select.value);
    this.showList();
  }

  /** Buttons for what the chosen engine can run: local checkpoints for MLX, a server's models otherwise. */
  showList() {
    const engine = this.select.value;
    let items = [];
    let status = "";
    if (engine === "mlx") {
      items = this.found.models.map((m) => ({
        value: m.path,
        name: m.name,
        meta: [formatBytes(m.size_bytes), headText(m), SOURCES[m.source] ?? m.source].join(" · "),
        title: m.path,
      }));
      status = items.length
        ? "Models found on this machine:"
        : "No models found in the Hugging Face cache or the models folder. Type a folder or hub id.";
    } else if (this.found.served) {
      const { models, error } = this.found.served;
      items = models.map((id) => ({ value: id, name: id, meta: "served", title: id }));
      status = error?.message ?? (items.length ? "Models this server serves:" : "This server lists no models.");
    } else {
      status = this.baseUrl.value.trim() ? "" : "Type the server's address to list its models.";
    }
    this.statusEl.textContent = status;
    const chosen = this.model.value.trim();
    this.list.replaceChildren(...items.map((item) => {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "model-choice";
      button.dataset.value = item.value;
      button.title = item.title;
      button.setAttribute("aria-pressed", String(item.value === chosen));
      const name = document.createElement("span");
      name.className = "model-name";
      name.textContent = item.name;
      const meta = document.createElement("span");
      meta.className = "model-meta";
      meta.textContent = item.meta;
      button.append(name, meta);
      return button;
    }));
    // A model without an MTP head has nothing to draft with unless a drafter is found for it or named.
    const picked = engine === "mlx" ? this.found.models.find((m) => m.path === chosen) : null;
    let placeholder = PLACEHOLDERS[engine]?.drafter ?? "";
    if (picked && !picked.mtp) {
      placeholder = picked.drafter ? `found: ${picked.drafter}` : "none (this model has no MTP head)";
    }
    this.form.elements.namedItem("drafter").placeholder = placeholder;
  }

  apply() {
    const spec = { name: this.select.value };
    for (const field of FIELDS[spec.name] ?? []) {
      const value = this.form.elements.namedItem(field).value.trim();
      if (value) spec[field] = value;
    }
    this.errorEl.hidden = true;
    this.send(spec);
  }

  rejected(message) {
    this.errorEl.textContent = message;
    this.errorEl.hidden = false;
  }
}

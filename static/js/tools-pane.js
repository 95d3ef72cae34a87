// The settings pane's Tools section: each tool server's state (starting, ready with its tools, failed and why),
// a switch per server and per tool, and whether a tool may run without asking. Servers are added only in the
// MCP servers file; while one is starting the list is fetched again until it is ready or failed.

import { request } from "@app/api.js";

const REFRESH_MS = 1000;

const path = (server, tool) =>
  `/api/tools/${encodeURIComponent(server)}${tool === undefined ? "" : `/${encodeURIComponent(tool)}`}`;

function stateText(server) {
  if (server.state === "starting") return "starting…";
  if (server.state === "failed") return `failed: ${server.error}`;
  const count = server.tools.length;
  return `ready · ${count} tool${count === 1 ? "" : "s"}`;
}

/** A labelled checkbox, drawn as a switch by the settings pane's field style. */
function switchField({ id, label, checked, data, hint }) {
  const field = document.createElement("div");
  field.className = "field field-bool";
  const input = document.createElement("input");
  input.type = "checkbox";
  input.id = id;
  input.checked = checked;
  input.setAttribute("role", "switch");
  Object.assign(input.dataset, data);
  const text = document.createElement("label");
  text.htmlFor = id;
  text.textContent = label;
  field.append(input, text);
  if (hint) {
    const small = document.createElement("small");
    small.className = "hint";
    small.id = `${id}-hint`;
    small.textContent = hint;
    small.title = hint; // shown whole on hover: the section clamps it to two lines
    input.setAttribute("aria-describedby", small.id);
    field.append(small);
  }
  return field;
}

export class ToolsPane {
  /** @param {{list: HTMLElement, error: HTMLElement}} parts */
  constructor({ list, error }) {
    this.list = list;
    this.errorEl = error;
    this.timer = 0;
    list.addEventListener("change", (event) => this.toggle(event.target));
  }

  async refresh() {
    clearTimeout(this.timer);
    let body;
    try {
      body = await request("/api/tools");
    } catch (error) {
      this.showError(`The tools could not be listed: ${error.message}`);
      return;
    }
    this.render(body);
    if (body.servers.some((server) => server.state === "starting")) {
      this.timer = setTimeout(() => this.refresh(), REFRESH_MS);
    }
  }

  render({ servers, config_error: configError }) {
    const focused = document.activeElement?.id;
    const nodes = servers.map((server, i) => this.serverNode(server, i));
    if (configError) {
      const problem = document.createElement("p");
      problem.className = "tools-config-error";
      problem.textContent = configError;
      nodes.unshift(problem);
    }
    this.list.replaceChildren(...nodes);
    if (focused) document.getElementById(focused)?.focus();
  }

  serverNode(server, i) {
    const node = document.createElement("div");
    node.className = "tools-server";
    node.dataset.server = server.name;
    node.dataset.state = server.state;
    const head = switchField({
      id: `tool-server-${i}`, label: server.name, checked: server.enabled,
      data: { server: server.name, key: "enabled" },
    });
    head.classList.add("tools-server-head");
    const state = document.createElement("small");
    state.className = "tools-server-state";
    state.textContent = stateText(server);
    head.append(state);
    node.append(head);
    if (!server.tools.length) return node;
    const list = document.createElement("ul");
    list.className = "tools-list";
    list.setAttribute("aria-label", `Tools of ${server.name}`);
    server.tools.forEach((tool, j) => {
      const item = document.createElement("li");
      item.className = "tools-item";
      item.dataset.tool = tool.name;
      const data = { server: server.name, tool: tool.name };
      item.append(
        switchField({ id: `tool-${i}-${j}`, label: tool.name, checked: tool.enabled,
                      data: { ...data, key: "enabled" }, hint: tool.description }),
        switchField({ id: `tool-${i}-${j}-always`, label: "Run without asking", checked: tool.always_allow,
                      data: { ...data, key: "always_allow" } }),
      );
      item.querySelector(`#tool-${i}-${j}-always`).closest(".field").classList.add("tools-always");
      list.append(item);
    });
    node.append(list);
    return node;
  }

  async toggle(input) {
    const { server, tool, key } = input.dataset;
    if (!server || !key) return;
    input.disabled = true;
    try {
      await request(path(server, tool), { method: "PATCH", body: { [key]: input.checked } });
      this.showError(null);
    } catch (error) {
      input.checked = !input.checked;
      this.showError(error.message);
    } finally {
      input.disabled = false;
    }
  }

  showError(message) {
    this.errorEl.hidden = message === null;
    this.errorEl.textContent = message ?? "";
  }
}

const list = document.getElementById("tools-servers");
if (list) new ToolsPane({ list, error: document.getElementById("tools-error") }).refresh();

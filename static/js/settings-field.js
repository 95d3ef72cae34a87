// One setting's field in the settings pane: its spec (the label, type and limits from the settings' JSON
// schema, which the server serves from engines/options.py; the group, unit, spinner step and hint from
// here), its input and range, and what is wrong with a value typed in it.

// How the known keys are laid out, in this order. Keys the server sends that are not listed here are still
// shown, under "Other".
const LAYOUT = {
  reasoning_budget: {
    group: "Reasoning", unit: "tokens", hint: "Most tokens the model may think for. 0 turns thinking off.",
  },
  temperature: { group: "Sampling", step: 0.05 },
  top_p: { group: "Sampling", step: 0.01 },
  max_tokens: { group: "Sampling", unit: "tokens" },
  speculative: {
    group: "Speculative decoding", hint: "The drafter proposes tokens and the model checks them in one pass.",
  },
  draft_block_size: {
    group: "Speculative decoding", unit: "tokens",
    hint: "Tokens per draft round, the verified anchor included: 2 drafts one token. " +
      "auto picks it as the reply goes, and turns drafting off where it does not pay.",
  },
  decode_loop: {
    group: "Speculative decoding",
    hint: "specchat's own compiled draft/verify loop, or mlx-vlm's, to compare them (MLX engine).",
  },
  prefix_cache: { group: "Prompt processing", hint: "Reuse the work done on a prompt's shared beginning." },
  prefix_cache_entries: { group: "Prompt processing" },
  prefill_step_size: {
    group: "Prompt processing", step: 256, unit: "tokens",
    hint: "Prompt tokens per prefill chunk. 0 sends the whole prompt at once.",
  },
  system_prompt: { group: "Conversation", hint: "Sent before the conversation." },
  tools: { group: "Tools", hint: "Offer the model the tools switched on in the Tools section below." },
  max_tool_steps: { group: "Tools", unit: "calls", hint: "Most tool calls in one reply." },
  tool_timeout_s: { group: "Tools", unit: "s", hint: "A call running longer is cancelled; the model is told." },
  tool_result_chars: {
    group: "Tools", step: 1000, unit: "characters", hint: "A longer tool result is cut, with a note saying so.",
  },
};

const KINDS = { integer: "int", number: "float", boolean: "bool", string: "text" };

export const number = new Intl.NumberFormat("en-US", { maximumFractionDigits: 4 });

/** The keys of `values` in the pane's order: the laid-out ones first. */
export function orderedKeys(values) {
  return [...Object.keys(LAYOUT).filter((key) => key in values),
    ...Object.keys(values).filter((key) => !(key in LAYOUT))];
}

function humanize(key) {
  const words = key.replaceAll("_", " ");
  return words[0].toUpperCase() + words.slice(1);
}

/** A number setting that also takes words (`draft_block_size`: 2 to 16, or "auto"): its number branch. */
function numberBranch(property) {
  return property?.anyOf?.find((branch) => branch.type in KINDS && branch.type !== "string") ?? null;
}

/** The words such a setting takes besides numbers, e.g. ["auto"]. */
function wordsOf(property) {
  return (property?.anyOf ?? []).filter((branch) => typeof branch.const === "string").map((branch) => branch.const);
}

function kindOf(property, value) {
  if (property?.enum) return "choice";
  const branch = numberBranch(property);
  if (branch) return KINDS[branch.type];
  if (property?.type in KINDS) return KINDS[property.type];
  if (typeof value === "boolean") return "bool";
  // JSON cannot tell 1.0 from 1, so a number the schema does not type accepts any; the server judges it.
  if (typeof value === "number") return "float";
  return "text";
}

/**
 * Setting `key`'s spec: {group, label, kind, min, above, max, maxLength, choices, unit, step, hint}, from its
 * schema `property` (null when the schema is not known: the value's type chooses the input, the server
 * judges it) and its layout here.
 */
export function specFor(key, value, property) {
  const layout = LAYOUT[key] ?? {};
  const bounds = numberBranch(property) ?? property;
  return {
    ...layout,
    group: layout.group ?? "Other",
    label: property?.title ?? humanize(key),
    kind: kindOf(property, value),
    min: bounds?.minimum,
    above: bounds?.exclusiveMinimum,
    max: bounds?.maximum,
    maxLength: property?.maxLength,
    choices: property?.enum,
    words: wordsOf(property),
  };
}

/** "2 to 16 tokens", "above 0, up to 1", "2 to 16 tokens, or auto": what a numeric field accepts, shown beside
 * its label. */
export function rangeText(spec) {
  const unit = spec.unit ? ` ${spec.unit}` : "";
  const words = spec.words?.length ? `, or ${spec.words.join(" or ")}` : "";
  if (spec.above !== undefined) return `above ${number.format(spec.above)}, up to ${number.format(spec.max)}${unit}`;
  if (spec.min !== undefined && spec.max !== undefined) {
    return `${number.format(spec.min)} to ${number.format(spec.max)}${unit}${words}`;
  }
  return "";
}

/** What is wrong with `value` for a field of `spec`, in the field's own words; null when nothing is. */
export function problemWith(spec, value) {
  const { label, kind } = spec;
  if (spec.words?.includes(value)) return null;
  const words = spec.words?.length ? `, or ${spec.words.join(" or ")}` : "";
  if (value === undefined) return `${label} must be a ${kind === "int" ? "whole " : ""}number${words}.`;
  if (kind === "int" || kind === "float") {
    const low = spec.above !== undefined ? value <= spec.above : spec.min !== undefined && value < spec.min;
    const high = spec.max !== undefined && value > spec.max;
    if (low || high) {
      const range = rangeText(spec);
      return spec.above !== undefined ? `${label} must be ${range.replace(", up to", " and at most")}.`
        : `${label} must be from ${range}.`;
    }
  }
  if (spec.maxLength !== undefined && value.length > spec.maxLength) {
    return `${label} must be at most ${number.format(spec.maxLength)} characters; it has ` +
      `${number.format(value.length)}.`;
  }
  return null;
}

/** The input's value as the setting's type; undefined when it is not a number where one is needed. */
export function readField(input) {
  if (!input) return undefined;
  switch (input.dataset.kind) {
    case "bool":
      return input.checked;
    case "int":
    case "float": {
      const text = input.value.trim();
      if (input.dataset.words?.split(" ").includes(text)) return text;
      const number = Number(text);
      if (text === "" || !Number.isFinite(number)) return undefined;
      if (input.dataset.kind === "int" && !Number.isInteger(number)) return undefined;
      return number;
    }
    default:
      return input.value;
  }
}

/** The field's row: label, range or counter, input (with its unit), error line and hint. */
export function buildField(key, spec) {
  const kind = spec.kind;
  const id = `setting-${key}`;
  const row = document.createElement("div");
  row.className = `field field-${kind}`;
  const label = document.createElement("label");
  label.htmlFor = id;
  label.textContent = spec.label;

  let input;
  let datalist = null; // the words a number field also takes, offered as it is typed in
  if (kind === "text" && key === "system_prompt") {
    input = document.createElement("textarea");
    input.rows = 4;
  } else if (kind === "choice") {
    input = document.createElement("select");
    for (const choice of spec.choices) input.append(new Option(choice, choice));
  } else {
    input = document.createElement("input");
    // A number that also takes words ("auto") is typed as text: a number input would drop the word.
    const words = spec.words?.length && (kind === "int" || kind === "float");
    input.type = kind === "bool" ? "checkbox" : kind === "text" || words ? "text" : "number";
    if (words) {
      input.dataset.words = spec.words.join(" ");
      datalist = document.createElement("datalist");
      datalist.id = `${id}-words`;
      for (const word of spec.words) datalist.append(new Option(word, word));
      input.setAttribute("list", datalist.id);
    }
  }
  input.id = id;
  input.name = key;
  input.dataset.kind = kind;
  if (kind === "int" || kind === "float") {
    if (!input.dataset.words) input.inputMode = kind === "int" ? "numeric" : "decimal";
    if (spec.min !== undefined) input.min = spec.min;
    if (spec.above !== undefined) input.dataset.above = spec.above;
    if (spec.max !== undefined) input.max = spec.max;
    // Spinner steps follow the spec, but typed values are checked against the range, not the step.
    input.step = spec.step ?? (kind === "int" ? 1 : "any");
  }
  // The counter, not the browser, stops an over-long text: a paste is kept whole and the error says so.
  if (spec.maxLength !== undefined) input.dataset.maxLength = spec.maxLength;

  const described = [];
  const head = document.createElement("div");
  head.className = "field-head";
  head.append(label);
  const limit = spec.maxLength !== undefined ? "counter" : rangeText(spec) ? "range" : null;
  if (limit) {
    const small = document.createElement("small");
    small.className = `field-limit field-${limit}`;
    small.id = `${id}-${limit}`;
    small.textContent = limit === "range" ? rangeText(spec) : "";
    head.append(small);
    described.push(small.id);
  }

  if (kind === "bool") {
    row.append(input, label);
  } else if (spec.unit) {
    const wrap = document.createElement("div");
    wrap.className = "with-unit";
    const unit = document.createElement("span");
    unit.className = "unit";
    unit.textContent = spec.unit;
    wrap.append(input, unit);
    row.append(head, wrap);
  } else {
    row.append(head, input);
  }
  const error = document.createElement("p");
  error.className = "field-error";
  error.id = `${id}-error`;
  error.setAttribute("role", "alert");
  error.hidden = true;
  row.append(error);
  if (datalist) row.append(datalist);
  described.push(error.id);
  if (spec.hint) {
    const hint = document.createElement("small");
    hint.className = "hint";
    hint.id = `${id}-hint`;
    hint.textContent = spec.hint;
    row.append(hint);
    described.push(hint.id);
  }
  input.setAttribute("aria-describedby", described.join(" "));
  return row;
}

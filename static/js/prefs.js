// This browser's own display preferences (not the server's settings), kept in localStorage.

const PREFIX = "specchat.";

/** The stored value of `name`, or `fallback` when there is none or storage is unavailable. */
export function loadPref(name, fallback) {
  try {
    const raw = localStorage.getItem(PREFIX + name);
    return raw === null ? fallback : JSON.parse(raw);
  } catch {
    return fallback;
  }
}

export function savePref(name, value) {
  try {
    localStorage.setItem(PREFIX + name, JSON.stringify(value));
  } catch {
    // Private windows and full storage refuse; the preference then lasts for this page only.
  }
}

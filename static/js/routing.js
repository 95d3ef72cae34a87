// The URL names the open conversation (`/?c=ID`), so a reload or a bookmark opens it again.

/** The conversation the address bar names, or null. */
export function idFromUrl() {
  return new URLSearchParams(location.search).get("c");
}

/** Name conversation `id` in the address bar (`push`: as a new history entry). */
export function showInUrl(id, push = false) {
  const url = id ? `/?c=${encodeURIComponent(id)}` : "/";
  if (location.pathname + location.search === url) return;
  window.history[push ? "pushState" : "replaceState"](null, "", url);
}

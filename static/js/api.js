// JSON requests to the REST routes; a failure is an Error carrying the server's message.

/** `fetch` a JSON route; resolves to the body (null for 204), rejects with the `error` shape's message. */
export async function request(path, { method = "GET", body, keepalive = false } = {}) {
  const init = { method, keepalive, headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = typeof body === "string" ? body : JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new Error("The server could not be reached.");
  }
  if (response.status === 204) return null;
  let data = null;
  try {
    data = await response.json();
  } catch {
    // not JSON: described by its status below
  }
  if (!response.ok) {
    const error = new Error(data?.error?.message ?? `The server answered ${response.status}.`);
    error.code = data?.error?.code;
    error.status = response.status;
    throw error;
  }
  return data;
}

export const conversationPath = (id) => `/api/conversations/${encodeURIComponent(id)}`;

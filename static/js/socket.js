// The websocket to the server, reconnecting with capped exponential backoff.

const FIRST_DELAY_MS = 500;
const MAX_DELAY_MS = 15000;

/**
 * ws:// or wss:// to the protocol endpoint on the page's own host; naming the tab's conversation
 * gets it back after a reconnect, with any reply still in flight.
 */
export function socketUrl(conversationId) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const query = conversationId ? `?conversation=${encodeURIComponent(conversationId)}` : "";
  return `${scheme}//${location.host}/ws${query}`;
}

export class Connection {
  /**
   * @param {string} url
   * @param {{onFrame: (frame: object) => void,
   *          onStatus: (status: {state: "connecting"|"open"|"closed", retryAt?: number}) => void,
   *          onMalformed: () => void}} handlers
   */
  constructor(url, { onFrame, onStatus, onMalformed }) {
    this.url = url;
    this.onFrame = onFrame;
    this.onStatus = onStatus;
    this.onMalformed = onMalformed;
    this.ws = null;
    this.failures = 0;
    this.retryTimer = 0;
    // A tab coming back from sleep or a network returning should not wait out a long backoff.
    addEventListener("online", () => this.retryNow());
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") this.retryNow();
    });
  }

  get open() {
    return this.ws !== null && this.ws.readyState === WebSocket.OPEN;
  }

  connect() {
    clearTimeout(this.retryTimer);
    this.retryTimer = 0;
    this.onStatus({ state: "connecting" });
    const ws = new WebSocket(typeof this.url === "function" ? this.url() : this.url);
    this.ws = ws;
    // A socket given up for another (a switch of conversation) may still deliver a frame: it is ignored.
    ws.addEventListener("message", (event) => {
      if (this.ws === ws) this.receive(event.data);
    });
    ws.addEventListener("close", () => {
      if (this.ws === ws) this.scheduleRetry();
    });
  }

  /** Close the socket and open a new one at once (the URL names another conversation). */
  reopen() {
    const old = this.ws;
    this.ws = null; // its close schedules no retry
    old?.close();
    this.connect();
  }

  /** Reconnect at once if a retry is pending; a live or connecting socket is left alone. */
  retryNow() {
    if (this.retryTimer) this.connect();
  }

  /** Send one frame; false (and nothing sent) when the socket is not open. */
  send(frame) {
    if (!this.open) return false;
    this.ws.send(JSON.stringify(frame));
    return true;
  }

  receive(text) {
    let frame;
    try {
      frame = JSON.parse(text);
    } catch {
      this.onMalformed();
      return;
    }
    if (frame === null || typeof frame !== "object" || typeof frame.type !== "string") {
      this.onMalformed();
      return;
    }
    // Backoff resets on hello, not on open: a server that accepts and then
    // drops the socket at once must not be hammered.
    if (frame.type === "hello") {
      this.failures = 0;
      this.onStatus({ state: "open" });
    }
    this.onFrame(frame);
  }

  scheduleRetry() {
    const ceiling = Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** this.failures);
    // Jitter keeps several tabs from reconnecting in lockstep after a server restart.
    const delay = ceiling / 2 + Math.random() * (ceiling / 2);
    this.failures += 1;
    this.retryTimer = setTimeout(() => this.connect(), delay);
    this.onStatus({ state: "closed", retryAt: Date.now() + delay });
  }
}

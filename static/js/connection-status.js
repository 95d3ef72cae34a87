// The socket's state in the header: connecting, connected, or disconnected with the seconds to the next try.

export class ConnectionStatus {
  /** @param {{el: HTMLElement, reconnect: HTMLButtonElement}} parts `reconnect` shows while disconnected */
  constructor({ el, reconnect }) {
    this.el = el;
    this.text = el.querySelector(".connection-text");
    this.reconnect = reconnect;
    this.countdown = 0;
  }

  /** `state` as the socket reports it; `retryAt` (ms since the epoch) when it is closed. */
  show({ state, retryAt }) {
    clearInterval(this.countdown);
    this.el.dataset.state = state;
    this.reconnect.hidden = state !== "closed";
    if (state === "connecting") {
      this.text.textContent = "Connecting…";
    } else if (state === "open") {
      this.text.textContent = "Connected";
    } else {
      const tick = () => {
        const seconds = Math.max(0, Math.ceil((retryAt - Date.now()) / 1000));
        this.text.textContent = `Disconnected · retrying in ${seconds} s`;
      };
      tick();
      this.countdown = setInterval(tick, 1000);
    }
  }
}

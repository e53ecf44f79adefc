// Live updates over /api/v1/ws (the session cookie authenticates it); reconnects with backoff.
export const events = new EventTarget();
let socket = null;
let delay = 500;

export function connect(indicator) {
  const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/api/v1/ws";
  socket = new WebSocket(url);
  socket.addEventListener("open", () => { delay = 500; indicator.textContent = "live"; indicator.className = "live on"; });
  socket.addEventListener("message", (msg) => {
    let data;
    try { data = JSON.parse(msg.data); } catch { return; }
    events.dispatchEvent(new CustomEvent(data.type, { detail: data }));
  });
  socket.addEventListener("close", () => {
    indicator.textContent = "offline"; indicator.className = "live off";
    setTimeout(() => connect(indicator), delay);
    delay = Math.min(delay * 2, 15000);
  });
}

export function askSnapshot() {
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "refresh" }));
}

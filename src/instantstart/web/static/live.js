// Live updates over /api/v1/ws (the session cookie authenticates it); reconnects with backoff.
export const events = new EventTarget();
const lastOps = new Map();  // the newest operation event per id (bounded)
events.addEventListener("operation", (e) => {
  const o = e.detail.operation;
  lastOps.delete(o.operationId); lastOps.set(o.operationId, o);
  if (lastOps.size > 200) lastOps.delete(lastOps.keys().next().value);
});
const TERMINAL = ["SUCCEEDED", "FAILED", "CANCELLED"];
// Further along: more stage attempts (a retry), then finished, then more stages finished.
const rank = (o) => o.stages.reduce((n, s) => n + (s.attempts ?? 0), 0) * 10000 +
  (TERMINAL.includes(o.status) ? 1000 : 0) + o.stages.filter((s) => TERMINAL.includes(s.status)).length;

// An operation read over HTTP can be older than an event that arrived while the request was in flight (a fast
// operation finishes before its GET returns): keep whichever view is further along.
export function fresher(op) {
  const seen = lastOps.get(op.operationId);
  return seen && rank(seen) > rank(op) ? seen : op;
}
let socket = null;
let delay = 500;

export function connect(indicator) {
  const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/api/v1/ws";
  socket = new WebSocket(url);
  socket.addEventListener("open", () => { indicator.textContent = "live"; indicator.className = "live on"; });
  socket.addEventListener("message", (msg) => {
    let data;
    try { data = JSON.parse(msg.data); } catch { return; }
    if (data.type === "hello") delay = 500;  // admitted (a refused socket opens, then closes 4429 at once)
    events.dispatchEvent(new CustomEvent(data.type, { detail: data }));
  });
  socket.addEventListener("close", (e) => {
    // 4429: this browser (or the server) holds as many live sockets as allowed; 4408: this tab read too slowly.
    indicator.textContent = e.code === 4429 ? "offline: too many live tabs" : "offline";
    indicator.className = "live off";
    setTimeout(() => connect(indicator), delay);
    delay = Math.min(delay * 2, 15000);
  });
}

export function askSnapshot() {
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "refresh" }));
}

// The only way the UI talks to the control plane: /api/v1 with the session cookie and the CSRF header.
const CSRF = document.querySelector('meta[name="csrf-token"]')?.content ?? "";

export class ApiError extends Error {
  constructor(status, error) {
    super(error?.message || `HTTP ${status}`);
    this.status = status;
    this.code = error?.code || `HTTP_${status}`;
    this.hint = error?.hint || "";
    this.details = error?.details || {};
  }
  get fields() { return Array.isArray(this.details.fields) ? this.details.fields : []; }
}

export function newKey() {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return "ui-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== "") q.set(k, v);
  const s = q.toString();
  return s ? "?" + s : "";
}

export async function api(method, path, { body, params, idempotencyKey } = {}) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") { headers["X-InstantStart-CSRF"] = CSRF; headers["Content-Type"] = "application/json"; }
  if (idempotencyKey) headers["Idempotency-Key"] = idempotencyKey;
  let res;
  try {
    res = await fetch("/api/v1" + path + query(params), {
      method, headers, credentials: "same-origin", body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    throw new ApiError(0, { code: "NETWORK", message: "The server did not answer: " + err.message, hint: "Check that instantstart serve is running, then Refresh." });
  }
  const data = await res.json().catch(() => null);
  if (res.status === 401 && data?.error?.message === "Missing or invalid API token.") {
    location.assign("/");  // the session expired: back to sign-in
  }
  if (!res.ok) throw new ApiError(res.status, data?.error);
  return data;
}

export const get = (path, params) => api("GET", path, { params });
export const post = (path, body, opts = {}) => api("POST", path, { body, ...opts });
